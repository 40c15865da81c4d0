"""A signal while `ldp privatize` writes ends the run cleanly, with real processes (issue 36).

The runs used to crash (SIGSEGV, SIGABRT, "Fatal Python error: Aborted") or hang when the signal
landed while the main thread waited for the writer thread: the interrupt cut the wait short, the
output's encoder was closed under the writer's feet, and the interpreter exited with the writer
still inside pyarrow. Each run here gets SIGINT or SIGTERM at a seeded delay after its output's
temporary file appears, with many threads, a small memory budget and a slow codec (the writer is
the bottleneck, so the reader is done early and waits for it). A run must end (a hang is the
subprocess timeout, a failure) with exit 128 + signal, or 0 if it finished first, one line and no
traceback, and leave nothing but its input (or its complete release).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import LDP, unit_rows, write_list

pytestmark = pytest.mark.slow

#: (seed of the delay, signal) of each run.
RUNS = [(seed, sig) for seed in range(3) for sig in (signal.SIGINT, signal.SIGTERM)]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("input") / "in.parquet"
    write_list(path, unit_rows(60_000, 64, seed=2), row_group_size=5000)
    return path


@pytest.mark.parametrize("layout", ["file", "directory"])
@pytest.mark.parametrize(("seed", "signum"), RUNS, ids=[f"{seed}-{sig.name}" for seed, sig in RUNS])
def test_a_signal_while_writing_ends_the_run_without_a_crash_or_a_temporary(
    tmp_path: Path, source: Path, seed: int, signum: signal.Signals, layout: str
) -> None:
    out = tmp_path / ("release" if layout == "directory" else "out.parquet")
    delay = random.Random(seed).uniform(0.0, 0.6)
    proc = subprocess.Popen(
        [LDP, "privatize", str(source), "--eps", "2", "-o", f"{out}/" if layout == "directory" else str(out),
         "--threads", "16", "--memory", "4MB", "--compression", "brotli", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "LDP_LEDGER": str(tmp_path / "owner" / "ledger.json")},
    )
    deadline = time.monotonic() + 120
    while not any(p.name.startswith(f".{out.name}.") for p in tmp_path.iterdir()):  # it is writing
        if proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)  # a hang fails here
    assert proc.returncode in (0, 128 + signum), (proc.returncode, stderr)
    assert "Traceback" not in stderr and "Fatal Python error" not in stderr, stderr
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "owner")
    if proc.returncode == 0:
        assert left == (["release"] if layout == "directory" else ["out.parquet", "out.parquet.ldp.json"]), left
    else:
        assert stderr.strip().splitlines() == ["ldp: interrupted; no output was left behind"], stderr
        assert left == [], left
