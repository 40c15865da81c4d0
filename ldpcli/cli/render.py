"""What the commands print: results on stdout, messages and progress bars on stderr.

Every command ends the same way, through :func:`render`: one JSON document on stdout with
``--json``, else its rich tables, then a ``wrote FILE`` line for what it saved. Warnings and notes
go to stderr (:func:`warn`, :func:`note`); numbers are shown by :func:`fmt`. Tables never cut a
number or a path, however narrow the terminal or the pipe (:func:`keep_whole`).
"""

from __future__ import annotations

import decimal
import json
import math
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ldpcli.cli.flags import text_in_flags

#: Wide enough to measure a cell on one line (the width of its longest line).
_UNBOUNDED = 1 << 20


def keep_whole(table: Table, console: Console) -> None:
    """Make ``table`` show every number and path whole, at any width.

    Rich fits a table to the console (80 columns in a pipe) by cutting a cell's long words with "…"
    and, when that is not enough, by narrowing columns down to nothing. Here a right-justified
    column (the numbers) is at least as wide as its widest cell, so a number (and a cell such as
    "1.24 ≤ 4.65") stays on one line; any other column is at least as wide as its longest word (a
    path, a name) and wraps between words. Headers wrap between words too. A table that cannot fit
    so is laid out wider than the console, which soft-wraps its lines: nothing is cut or cropped.
    """
    unbounded = console.options.update_width(_UNBOUNDED)

    def width(cell: Any, whole: bool) -> int:
        measured = Measurement.get(console, unbounded, cell)
        return measured.maximum if whole else measured.minimum

    for column in table.columns:
        whole = column.justify == "right"
        header = [width(column.header, False)] if table.show_header else []
        column.min_width = max([*header, *(width(cell, whole) for cell in column.cells)] or [1])
    needed = Measurement.get(console, unbounded, table).minimum
    if table.width is None and needed > console.width:
        table.width = needed


class _Console(Console):
    """A rich console whose tables keep their numbers and paths whole (:func:`keep_whole`)."""

    def print(self, *objects: Any, **options: Any) -> None:
        """``Console.print``, with every table made to keep its cells whole first."""
        for item in objects:
            if isinstance(item, Table):
                keep_whole(item, self)
        super().print(*objects, **options)

    def on_broken_pipe(self) -> None:
        """A closed stdout ends the run quietly with exit 141 (:mod:`ldpcli.cli.pipes`), not rich's exit 1."""
        if not self.stderr:
            from ldpcli.cli.pipes import end_quietly

            end_quietly()
        super().on_broken_pipe()


# emoji=False: a message quoting a range such as 'A:B:K' must not turn ':b:' into an emoji.
out = _Console(highlight=False, soft_wrap=True, emoji=False)
err = _Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


class Encoded:
    """A result that encodes itself as JSON, when --json asks (``ldp sweep``'s table, by
    :func:`ldpcli.planning._sweep.to_json`)."""

    def __init__(self, encode: Callable[[], str]) -> None:
        self.encode = encode


def render(
    data: Any, as_json: bool, show: Callable[[], None] | None = None, *, wrote: str | None = None,
    default: Callable[[Any], Any] | None = None,
) -> None:
    """The end of a command: ``data`` as one JSON document on stdout with ``--json`` (no NaN; ``default``
    encodes what json cannot), else ``show()`` (its tables) and then ``wrote WROTE`` when given.

    ``data`` None prints no document: the 'wrote' line of one of several outputs, whose JSON
    summaries the command renders together after them (``ldp privatize``).
    """
    if as_json:
        if data is None:
            return
        text = data.encode() if isinstance(data, Encoded) else json.dumps(data, allow_nan=False, default=default)
        out.print(text, markup=False)
        return
    if show is not None:
        show()
    if wrote is not None:
        out.print(f"wrote {wrote}", markup=False)


def warn(text: str | None) -> None:
    """A warning on stderr; never hidden by --quiet (which is for progress and notes)."""
    if text:
        err.print(f"ldp: warning: {text_in_flags(text)}", markup=False)


def note(text: str, quiet: bool) -> None:
    """A note on stderr, hidden by --quiet."""
    if not quiet:
        err.print(f"ldp: note: {text}", markup=False)


def fmt(value: float | None) -> str:
    """A number in six significant digits, in scientific notation outside [1e-4, 1e7); — for none."""
    if value is None:
        return "—"
    if value == 0.0 or (1e-4 <= abs(value) < 1e7):
        return f"{value:.6g}"
    return f"{value:.4e}"


def fmt_bound(value: float | None, *, up: bool = True, digits: int = 6) -> str:
    """A bound shown as :func:`fmt` shows a number, but rounded *away from what it bounds*: an upper bound
    rounded up, a lower bound (``up=False``) rounded down, so that the printed digits are still a bound."""
    if value is None:
        return "—"
    rounding = decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR
    shown = decimal.Context(prec=digits, rounding=rounding).create_decimal(value)
    if value == 0.0 or (1e-4 <= abs(value) < 1e7):
        return f"{shown:g}"
    mantissa, exponent = f"{decimal.Context(prec=5, rounding=rounding).create_decimal(value):.4e}".split("e")
    return f"{mantissa}e{int(exponent):+03d}"  # as fmt writes it: 3.0967e-07


def fmt_probability(value: float, logit: float) -> str:
    """p with its distance to 1 when it rounds to 1 in six digits."""
    if value > 0.999999:
        return f"1 − {math.exp(-logit) / (1 + math.exp(-logit)):.3e}"
    return fmt(value)


def fmt_logp(log_p: float | None) -> str:
    """A probability given by its natural log: plain when ≥ 1e-4, else as a power of ten."""
    if log_p is None:
        return "0"
    if log_p >= 0.0:
        return "1"
    if log_p >= math.log(1e-4):
        return f"{math.exp(log_p):.4g}"
    return f"10^{log_p / math.log(10.0):.1f}"


def summary_table(title: str) -> Table:
    """A headerless three-column table (quantity, value, meaning): the summary of a result."""
    summary = Table(title=title, show_header=False, title_justify="left")
    summary.add_column("quantity", style="bold")
    summary.add_column("value", justify="right")
    summary.add_column("meaning")
    return summary


def signature_row(summary: Table, signature: dict[str, Any] | None) -> None:
    """The 'signature' row of a result read from files: unsigned, or by whom they are signed."""
    if signature is None:
        return
    if signature["trusted_key"] is not None:
        meaning = "every file checked against the trusted key (--trust)"
    elif signature["signed"]:
        meaning = "valid signatures; --trust KEY also requires that KEY is the data owner's"
    else:
        meaning = "not authenticated: nothing shows who wrote the files or their sidecars (ldp verify)"
    summary.add_row("signature", signature["label"], meaning)


@contextmanager
def progress(label: str, quiet: bool) -> Iterator[tuple[Callable[[int | None], None], Callable[[int], None]]]:
    """(on_start, on_rows) callbacks driving a rich progress bar on stderr.

    The bar appears only when stderr is a terminal, ``--quiet`` is off and the job has already
    run for a second, so short runs and pipelines stay silent.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    class RowsPerSecond(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed:,.0f} rows/s" if task.speed else "")

    state: dict[str, Any] = {"total": None, "done": 0, "task": None, "t0": time.monotonic()}
    bar = Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("rows"), RowsPerSecond(),
        TimeRemainingColumn(), console=err, transient=True,
    )
    enabled = not quiet and err.is_terminal

    def on_start(total: int | None) -> None:
        """The rows of the next input (several inputs: the bar's total grows by each one's rows)."""
        state["total"] = None if total is None else state["done"] + total
        if state["task"] is not None:
            bar.update(state["task"], total=state["total"])

    def on_rows(rows: int) -> None:
        state["done"] += rows
        if not enabled:
            return
        if state["task"] is None:
            if time.monotonic() - state["t0"] < 1.0:
                return
            bar.start()
            state["task"] = bar.add_task(label, total=state["total"])
        bar.update(state["task"], completed=state["done"])

    try:
        yield on_start, on_rows
    finally:
        if state["task"] is not None:
            bar.stop()


@contextmanager
def status(quiet: bool) -> Iterator[Callable[[str], None]]:
    """A callback that shows its latest line as a transient rich status (a spinner) on stderr.

    Nothing is shown with ``--quiet`` or when stderr is not a terminal; the line is gone when the
    block ends. For a stage with no row count to show (``ldp train``'s non-private reference).
    """
    from rich.text import Text

    enabled = not quiet and err.is_terminal
    shown: list[Any] = []

    def on_text(text: str) -> None:
        if not enabled:
            return
        if not shown:
            shown.append(err.status(Text(text)))
            shown[0].start()
        shown[0].update(Text(text))

    try:
        yield on_text
    finally:
        if shown:
            shown[0].stop()
