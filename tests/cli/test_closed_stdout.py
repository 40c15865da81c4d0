"""A reader that closes stdout early (``ldp … | head``) ends ldp quietly: exit 141 (128 + SIGPIPE),
nothing on stderr (no traceback, no "Exception ignored", no "bad data" exit 1), for every command
alike (issue 36). Real processes and real pipes: either the read end is closed before ldp writes
(the first write fails, whatever its size), or a few bytes are read from an output larger than the
pipe's buffer and the read end is closed then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from helpers import ledger_document, unit_rows, write_list

from ldpcli.cli.pipes import EXIT_CLOSED_STDOUT


def _into_a_closed_pipe(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``ldp ARGS`` writing into a pipe whose reader is already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "ldpcli", *map(str, args)], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False, cwd=cwd)
    finally:
        os.close(write)


@pytest.fixture
def released(tmp_path: Path) -> Path:
    data = write_list(tmp_path / "in.parquet", unit_rows(200, 8))
    done = subprocess.run([sys.executable, "-m", "ldpcli", "privatize", str(data), "--eps", "2", "-o",
                           str(tmp_path / "out.parquet"), "-q"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return tmp_path / "out.parquet"


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("estimate-mean", "out.parquet"),
    ("estimate-mean", "out.parquet", "--json"),
    ("params", "--d", 8, "--eps", 2, "--json"),
    ("params", "--d", 8, "--eps", 2),
    ("privatize", "--help"),
    ("--help",),
    ("--version",),
])
def test_a_closed_stdout_ends_every_command_quietly_with_141(released: Path, args: tuple) -> None:
    result = _into_a_closed_pipe(*args, cwd=released.parent)
    assert (result.returncode, result.stderr) == (EXIT_CLOSED_STDOUT, "")


def test_an_error_is_still_an_error_when_stdout_is_closed(tmp_path: Path) -> None:
    result = _into_a_closed_pipe("estimate-mean", "missing.parquet", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("ldp: error: ")


@pytest.mark.slow
def test_a_release_on_stdout_cut_off_by_its_reader_says_so_and_stays_in_the_ledger(tmp_path: Path) -> None:
    """``ldp privatize big.csv -o - | head -c 100``: the release is committed (ledger, sidecar) before its bytes
    are copied to stdout, so the rows that went out are released and stay counted; ldp warns that the reader
    got only part of them, exits 141 and leaves no temporary behind."""
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((50_000, 8)) / 4
    pacsv.write_csv(pa.table({f"c{j}": rows[:, j] for j in range(8)}), tmp_path / "big.csv")  # ~7 MB of CSV out
    spool = tmp_path / "tmp"
    spool.mkdir()
    ledger = tmp_path / "ledger.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "ldpcli", "privatize", str(tmp_path / "big.csv"), "--eps", "2", "-o", "-", "--sidecar",
         str(tmp_path / "big.side.json"), "--ledger", str(ledger)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(spool)})
    assert process.stdout is not None and process.stderr is not None
    head = process.stdout.read(100)
    process.stdout.close()
    errors = process.stderr.read().decode()
    assert process.wait(timeout=120) == EXIT_CLOSED_STDOUT
    assert head.startswith(b'"c0","c1"')
    assert errors.count("\n") == 1 and errors.startswith("ldp: warning: stdout was closed before the whole release")
    assert "Traceback" not in errors and "Exception ignored" not in errors
    entries = ledger_document(ledger)["entries"]
    assert len(entries) == 1 and entries[0]["output"].startswith("<stdout>")
    assert (tmp_path / "big.side.json").exists() and os.listdir(spool) == []
