"""Inputs that are not what their name says, through real ``python -m ldpcli`` processes: a CSV without
a header row, binary or compressed bytes named .csv, text named .parquet, /dev/zero named .csv, and
a line longer than pyarrow's int32 block size. Each is one ``ldp: error:`` line, exit 1, nothing
written, and no value of the file appears anywhere."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _privatize(tmp_path: Path, source: Path, *, prelude: str = "", keep: str | None = None
               ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LDP_LEDGER": str(tmp_path / "ledger.json")}
    code = f"{prelude}from ldpcli.cli.app import main; import sys; sys.argv = ['ldp', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, "privatize", str(source), "--eps", "1",
                           "-o", str(tmp_path / "out.parquet"), *(("--keep", keep) if keep else ())],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


def _one_line_error(run: subprocess.CompletedProcess[str], label: Path, fragment: str) -> None:
    assert run.returncode == 1, (run.returncode, run.stderr)
    assert run.stderr.startswith(f"ldp: error: {label}: ") and run.stderr.count("\n") == 1, run.stderr
    assert fragment in run.stderr, run.stderr
    assert not (label.parent / "out.parquet").exists() and not (label.parent / "ledger.json").exists()


def test_a_csv_without_header_is_refused_without_showing_its_first_row(tmp_path: Path) -> None:
    """The first row became the column names (n = 199 of 200) and its values were published."""
    rows = np.random.default_rng(3).uniform(-0.5, 0.5, (200, 3))
    source = tmp_path / "nohdr.csv"
    np.savetxt(source, rows, delimiter=",", fmt="%.17g")
    run = _privatize(tmp_path, source)
    _one_line_error(run, source, "the first line holds only numbers")
    assert "add a header row" in run.stderr
    assert f"{rows[0, 0]:.6g}"[:6] not in run.stderr


@pytest.mark.parametrize("header", ["1,2.5,-3e-4", "nan,inf,1E+5", " 7 , -.5 , +0 "])
def test_every_numeric_header_is_refused(tmp_path: Path, header: str) -> None:
    source = tmp_path / "x.csv"
    source.write_text(header + "\n0.1,0.2,0.3\n0.0,0.1,0.2\n")
    _one_line_error(_privatize(tmp_path, source), source, "not a header of column names")


@pytest.mark.slow
def test_a_header_with_one_name_is_still_a_header(tmp_path: Path) -> None:
    source = tmp_path / "x.csv"
    source.write_text("1,2,b\n0.1,0.2,0.3\n0.0,0.1,0.2\n")
    run = _privatize(tmp_path, source)
    assert run.returncode == 0, run.stderr


def _parquet_bytes(tmp_path: Path) -> bytes:
    pq.write_table(pa.table({"a": [0.1, 0.2], "b": [0.3, 0.1]}), tmp_path / "t.parquet")
    return (tmp_path / "t.parquet").read_bytes()


def _zip_bytes(tmp_path: Path) -> bytes:
    with zipfile.ZipFile(tmp_path / "t.zip", "w") as archive:
        archive.writestr("t.csv", "a,b\n0.1,0.2\n")
    return (tmp_path / "t.zip").read_bytes()


TEXT = b"a,b\n0.1,0.2\n0.2,0.1\n"


@pytest.mark.slow
@pytest.mark.parametrize("make, fragment", [
    (_parquet_bytes, "looks like a Parquet file, not UTF-8 CSV text; rename it to .parquet"),
    (lambda _: gzip.compress(TEXT), "looks like a gzip-compressed file, not UTF-8 CSV text; decompress it"),
    (lambda _: b"\x28\xb5\x2f\xfd" + bytes(20), "looks like a zstd-compressed file"),
    (lambda _: bz2.compress(TEXT), "looks like a bzip2-compressed file"),
    (lambda _: lzma.compress(TEXT), "looks like an xz-compressed file"),
    (_zip_bytes, "looks like a zip archive"),
    (lambda _: b"ARROW1\x00\x00" + bytes(64), "looks like an Arrow IPC file"),
    (lambda _: b"a,b\n0.1,\x00\x00\x01\n", "looks like a binary file (it holds NUL bytes)"),
])
def test_binary_bytes_named_csv_say_what_they_are(tmp_path: Path, make: object, fragment: str) -> None:
    """These were reported as CSV field-count or UTF-8 errors."""
    source = tmp_path / "data.csv"
    source.write_bytes(make(tmp_path))  # type: ignore[operator]
    _one_line_error(_privatize(tmp_path, source), source, fragment)


@pytest.mark.parametrize("content, fragment", [
    (TEXT, "not a valid Parquet file: it looks like text, such as CSV; rename a CSV file to .csv"),
    (gzip.compress(TEXT, mtime=0), "not a valid Parquet file: it looks like a gzip-compressed file"),
])
def test_other_bytes_named_parquet_say_what_they_are(tmp_path: Path, content: bytes, fragment: str) -> None:
    source = tmp_path / "data.parquet"
    source.write_bytes(content)
    _one_line_error(_privatize(tmp_path, source), source, fragment)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_dev_zero_named_csv_is_a_binary_file(tmp_path: Path) -> None:
    """It read 256 MiB of zeros and ended in a pyarrow traceback (int32 block size)."""
    source = tmp_path / "x.csv"
    source.symlink_to("/dev/zero")
    _one_line_error(_privatize(tmp_path, source), source, "looks like a binary file (it holds NUL bytes)")


def test_a_line_longer_than_the_largest_block_is_one_line(tmp_path: Path) -> None:
    """pyarrow's block size is an int32: 16 × a 140 MB line overflowed it into a 69-line traceback.
    The cap (2³¹ − 1 bytes) is lowered to 64 KiB here so that a 300 KB line crosses it."""
    source = tmp_path / "long.csv"
    source.write_text("a,b\n0.1,0." + "1" * 300_000 + "\n0.2,0.1\n")
    run = _privatize(tmp_path, source, prelude="import ldpcli.io._csv as c; c._CSV_MAX_BLOCK = 1 << 16; ")
    _one_line_error(run, source, "a line is longer than 65536 bytes")


def test_a_csv_with_keep_wider_than_the_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """3 rows of 10⁶ columns peaked above 6 GB in pyarrow's CSV reader, which still reads a file with kept
    columns (issue 36: without them, a wide file is read by the wide reader, tests/io/test_wide_csv.py)."""
    source = tmp_path / "wide.csv"
    width = 100_001
    source.write_text(",".join(f"c{j}" for j in range(width)) + "\n" + ",".join(["0"] * width) + "\n")
    _one_line_error(_privatize(tmp_path, source, keep="c0"), source, "has more than 100000 columns")
