"""The progress of `ldp privatize -o DIR/` on the local engine (issue 27 item 1 follow-up).

The parts run on several threads and finish in any order; each batch any of them finishes is
reported through the same (on_start, on_rows) callbacks as the one-file path, one call at a time, so
the bar's count only grows and ends at the inputs' rows.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import unit_rows, write_list

from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._options import ReleaseOptions, Resources

D = 16  # key blocks of 512 rows
ROWS = (4100, 1500)


@pytest.fixture
def inputs(tmp_path: Path) -> list[Path]:
    raw = tmp_path / "raw"
    raw.mkdir()
    paths = [raw / "a.parquet", raw / "b.parquet"]
    for path, n, seed in zip(paths, ROWS, (1, 2)):
        write_list(path, unit_rows(n, D, seed=seed), row_group_size=700)
    return paths


def test_the_callbacks_count_every_row_once_and_only_grow(inputs: list[Path], tmp_path: Path) -> None:
    totals: list[int | None] = []
    done: list[int] = []
    callers: set[str] = set()
    inside = threading.Lock()  # taken without waiting: fails if two threads report at once

    def on_rows(rows: int) -> None:
        assert inside.acquire(blocking=False), "on_rows was called from two threads at once"
        try:
            callers.add(threading.current_thread().name)
            done.append((done[-1] if done else 0) + rows)
        finally:
            inside.release()

    result = write_dataset_release(inputs, tmp_path / "out", engine=None, epsilon=4.0, part_rows=512,
                               options=ReleaseOptions(seed=3, resources=Resources(threads=4)),
                               on_start=totals.append, on_rows=on_rows)
    assert totals == [sum(ROWS)]  # once, before any part, with every input's rows
    assert done[-1] == sum(ROWS) == result.n
    assert all(b > a for a, b in zip(done, done[1:]))
    assert len(result.parts) == 12 and len(callers) > 1  # 9 + 3 parts of 512 rows, reported from the pool's threads


@pytest.mark.slow
def test_the_cli_shows_the_bar_on_a_terminal_and_not_with_quiet(inputs: list[Path], tmp_path: Path) -> None:
    # A real run of ldp in a fresh interpreter, its stderr taken for a terminal (TTY_COMPATIBLE,
    # FORCE_COLOR); the bar waits for a job's first second, so the bar's clock (only it) runs 1 s a call.
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "TTY_COMPATIBLE": "1",
           "FORCE_COLOR": "1", "COLUMNS": "200", "LDP_LEDGER": str(tmp_path / "ledger.jsonl")}
    code = ("import itertools, sys, types; from ldpcli.cli import render; ticks = itertools.count(); "
            "render.time = types.SimpleNamespace(monotonic=lambda: float(next(ticks))); "
            "from ldpcli.cli.app import main; sys.argv = ['ldp', *sys.argv[1:]]; main()")

    def run(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        args = ["privatize", *map(str, inputs), "--eps", "4", "-o", f"{out}/", "--threads", "3", "--part-rows",
                "512", *extra]
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                              timeout=120)

    shown = run(tmp_path / "shown")
    assert shown.returncode == 0, shown.stderr
    assert (tmp_path / "shown" / MANIFEST_NAME).is_file()
    assert "privatizing" in shown.stderr and f"{sum(ROWS)}/{sum(ROWS)}" in shown.stderr
    for extra in ("-q", "--json -q"):
        hidden = run(tmp_path / f"hidden{len(extra)}", *extra.split())
        assert hidden.returncode == 0, hidden.stderr
        assert "privatizing" not in hidden.stderr and f"/{sum(ROWS)}" not in hidden.stderr
