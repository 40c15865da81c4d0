"""Draw the release path (docs/figures/release-path.svg) from the steps named below; ``--check`` fails when stale.

The figure on docs/architecture.md and docs/commit-protocol.md: the steps of one file release
(``ldpcli.privatize_file`` → ``release._file.write_file_release``), each with the function that does it and its
module, and the ledger's part in each. The SVG is written by hand here (plain text, no plotting library), so it is
the same bytes on every machine and reads without JavaScript. tests/docs/test_figures.py checks that the
checked-in file is what this script writes now and that every function the figure names is defined in the module
it names: renaming a step fails the test until the figure is redrawn::

    python tools/release_path.py          # rewrites docs/figures/release-path.svg
    python tools/release_path.py --check  # exit 1 if the checked-in figure is stale
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
FIGURE = ROOT / "docs" / "figures" / "release-path.svg"


class Step(NamedTuple):
    """One box: the step, the function that does it (``Class.method`` or a function), its module, what it does."""

    title: str
    function: str
    module: str
    note: tuple[str, ...]


class LedgerCall(NamedTuple):
    """One arrow between a step and the ledger (``Ledger.method`` in ``release._ledger``)."""

    step: int
    method: str
    note: str
    up: bool  # True: the ledger gives to the step; False: the step writes to the ledger
    dashed: bool = False


STEPS = (
    Step("plan", "plan_file_release", "release._file", ("paths, outputs, owner's key,", "seed; ε checked")),
    Step("open", "open_vectors", "io._vectors", ("the format's reader:", "a VectorReader")),
    Step("calibrate", "calibrate", "release._steps", ("spec → mechanism;", "release_cost once")),
    Step("privatize batches", "run_batches", "release._batches", ("keyed generators; rows", "to an unnamed temp")),
    Step("reserve", "Commit.reserve", "release._commit", ("ledger lock, budget", "checked per row")),
    Step("sidecar", "build_sidecar", "release._sidecar", ("the reservation's tag", "and time; signed")),
    Step("publish, confirm", "Commit.publish", "release._commit", ("journal, renames,", "confirm: commit point")),
)
#: The steps inside the commit protocol (release._commit.Commit), drawn in one frame.
COMMIT = (4, 6)
LEDGER_CALLS = (
    LedgerCall(3, "Ledger.row_digest", "key: row hashes", up=True),
    LedgerCall(4, "Ledger.reserve_all", "entry 'reserved'", up=False),
    LedgerCall(6, "Ledger.confirm_all", "entry 'confirmed'", up=False),
    LedgerCall(6, "Ledger.cancel_all", "if publishing fails", up=False, dashed=True),
)
LEDGER_MODULE = "release._ledger"

BOX_W, BOX_H, GAP, MARGIN = 156, 96, 18, 20
TOP, LEDGER_Y, LEDGER_H = 64, 268, 58
WIDTH = 2 * MARGIN + len(STEPS) * BOX_W + (len(STEPS) - 1) * GAP + 40  # room for the last arrow's label
HEIGHT = LEDGER_Y + LEDGER_H + MARGIN
SANS = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""
MONO = "font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\""


def _x(index: int) -> int:
    return MARGIN + index * (BOX_W + GAP)


def _text(x: float, y: float, text: str, *, size: int, mono: bool = False, weight: str = "normal",
          fill: str = "#1a1a1a", anchor: str = "middle") -> str:
    return (f'<text x="{x:g}" y="{y:g}" {MONO if mono else SANS} font-size="{size}" font-weight="{weight}" '
            f'fill="{fill}" text-anchor="{anchor}">{escape(text)}</text>')


def _step(index: int, step: Step) -> list[str]:
    x, centre = _x(index), _x(index) + BOX_W / 2
    fill = "#e8eaf6" if COMMIT[0] <= index <= COMMIT[1] else "#f5f5f5"
    lines = [f'<rect x="{x}" y="{TOP}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{fill}" stroke="#3f51b5"/>',
             _text(centre, TOP + 20, f"{index + 1}. {step.title}", size=13, weight="bold"),
             _text(centre, TOP + 38, step.function, size=11, mono=True, fill="#283593"),
             _text(centre, TOP + 53, step.module, size=10, mono=True, fill="#555555")]
    lines += [_text(centre, TOP + 71 + 13 * k, note, size=10) for k, note in enumerate(step.note)]
    return lines


def _arrow(x1: float, y1: float, x2: float, y2: float, *, dashed: bool = False) -> str:
    dash = ' stroke-dasharray="5 3"' if dashed else ""
    return (f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="#3f51b5" stroke-width="1.5"{dash} '
            f'marker-end="url(#head)"/>')


def _ledger_calls() -> list[str]:
    lines = []
    per_step: dict[int, list[LedgerCall]] = {}
    for call in LEDGER_CALLS:
        per_step.setdefault(call.step, []).append(call)
    for step, calls in per_step.items():
        for k, call in enumerate(calls):
            x = _x(step) + BOX_W / 2 + (k - (len(calls) - 1) / 2) * 90
            top, bottom = TOP + BOX_H, LEDGER_Y
            lines.append(_arrow(x, bottom, x, top + 2, dashed=call.dashed) if call.up
                         else _arrow(x, top, x, bottom - 2, dashed=call.dashed))
            label_y = top + 26
            # a label right of its arrow; of two arrows the first one's left of it
            label_x, anchor = (x - 5, "end") if len(calls) > 1 and k == 0 else (x + 5, "start")
            lines.append(_text(label_x, label_y, call.method.split(".")[1], size=10, mono=True, fill="#283593",
                               anchor=anchor))
            lines.append(_text(label_x, label_y + 12, call.note, size=9, fill="#555555", anchor=anchor))
    return lines


def svg() -> str:
    """The figure, as the SVG text this script writes."""
    first, last = _x(COMMIT[0]) - 8, _x(COMMIT[1]) + BOX_W + 8
    lines = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="title">',
             '<title id="title">The release path of ldpcli.privatize_file: plan, open, calibrate, privatize batches, '
             'reserve, sidecar, publish and confirm, with the ledger</title>',
             '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#3f51b5"/></marker></defs>',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
             _text(MARGIN, 24, "ldpcli.privatize_file → release._file.write_file_release: one call per step, "
                   "top to bottom (ldp privatize calls the same)", size=13, weight="bold", anchor="start"),
             f'<rect x="{first}" y="{TOP - 26}" width="{last - first}" height="{BOX_H + 34}" rx="8" fill="none" '
             'stroke="#7986cb" stroke-dasharray="6 4"/>',
             _text(first + 8, TOP - 10, "Commit (release._commit): driven by the release, no callback", size=11,
                   fill="#3f51b5", anchor="start")]
    for index, step in enumerate(STEPS):
        lines += _step(index, step)
        if index:
            lines.append(_arrow(_x(index) - GAP, TOP + BOX_H / 2, _x(index) - 1, TOP + BOX_H / 2))
    lines.append(f'<rect x="{_x(3)}" y="{LEDGER_Y}" width="{_x(len(STEPS) - 1) + BOX_W - _x(3)}" '
                 f'height="{LEDGER_H}" rx="6" fill="#fff8e1" stroke="#f57f17"/>')
    lines.append(_text(_x(3) + 12, LEDGER_Y + 22, f"the ledger: Ledger ({LEDGER_MODULE})", size=13,
                       weight="bold", anchor="start"))
    lines.append(_text(_x(3) + 12, LEDGER_Y + 42, "under its lock (flock): the budget checked per row at the "
                       "reservation; a failure before the commit point cancels the reservation", size=10,
                       anchor="start"))
    lines += _ledger_calls()
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def named_functions() -> list[tuple[str, str]]:
    """Every (module, function) the figure names, for the test that each is defined there."""
    return [(step.module, step.function) for step in STEPS] + [(LEDGER_MODULE, c.method) for c in LEDGER_CALLS]


def main(argv: list[str]) -> int:
    text = svg()
    if "--check" in argv:
        if not FIGURE.exists() or FIGURE.read_text(encoding="utf-8") != text:
            print(f"{FIGURE.relative_to(ROOT)} is stale: run `python tools/release_path.py`", file=sys.stderr)
            return 1
        return 0
    FIGURE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
