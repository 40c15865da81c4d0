"""Wide CSV files read by the wide reader (ldpcli/io/_csv_wide.py, issue 36): the same values, batches and
one-line messages as pyarrow's CSV reader, in memory that grows with the rows of a batch, not the width.

The threshold is lowered to 4 columns (``CSV_WIDE_COLUMNS``) so that small files take the wide path, and
each file is read both ways: whatever the width, a file reads and fails the same.
"""

from __future__ import annotations

import gzip
import resource
import sys
from pathlib import Path

import numpy as np
import pytest

from ldpcli.errors import DataError
from ldpcli.io import open_vectors
from tests.helpers import ldp_process

D, N = 6, 13


def _rows() -> np.ndarray:
    return np.random.default_rng(5).uniform(-0.4, 0.4, (N, D))


def _lines(x: np.ndarray, header: bool = True) -> list[str]:
    body = [",".join(f"{v:.17g}" for v in row) for row in x]
    return ([",".join(f"x{j}" for j in range(x.shape[1]))] if header else []) + body


def _read(path: Path, wide: bool, monkeypatch: pytest.MonkeyPatch, **options: object) -> tuple[np.ndarray, object]:
    """Every row of the file, and the reader (closed), with the wide reader or pyarrow's."""
    import ldpcli.io._csv_wide as csv_wide

    monkeypatch.setattr(csv_wide, "CSV_WIDE_COLUMNS", 4 if wide else 10**9)
    with open_vectors(path, **options) as reader:  # type: ignore[arg-type]
        assert (type(reader).__name__ == "_WideReader") == wide  # before the first batch, which may fail
        batches = list(reader)
    return np.concatenate([batch.values for batch in batches]), reader


@pytest.mark.parametrize(("options", "wide"), [
    ({}, True), ({"batch_rows": 4}, True), ({"columns": ["x1:x3"]}, True), ({"no_header": True}, True),
    ({"no_header": True}, False),  # the other options through pyarrow's reader are tested elsewhere
])
def test_the_wide_reader_reads_what_pyarrow_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wide: bool,
                                                  options: dict[str, object]) -> None:
    x = _rows()
    source = tmp_path / "w.csv"
    source.write_text("\n".join(_lines(x, header="no_header" not in options)) + "\n")
    values, reader = _read(source, wide, monkeypatch, **options)
    expected = x[:, 1:4] if "columns" in options else x
    assert np.array_equal(values, expected)
    names = ("x1", "x2", "x3") if "columns" in options else tuple(
        f"{'f' if 'no_header' in options else 'x'}{j}" for j in range(D))
    assert reader.layout.columns == names and reader.layout.kind == "columns"  # type: ignore[attr-defined]


def test_a_compressed_wide_csv_with_blank_lines_and_a_text_column_left_out(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Blank lines are dropped, a column of text is left out automatically (and named as dropped), as pyarrow does."""
    x = _rows()
    lines = _lines(x)
    lines = [f"name,{lines[0]}"] + [f"p{i},{line}" for i, line in enumerate(lines[1:])]
    lines.insert(3, "")
    source = tmp_path / "w.csv.gz"
    source.write_bytes(gzip.compress(("\r\n".join(lines) + "\r\n").encode()))
    for wide in (False, True):
        values, reader = _read(source, wide, monkeypatch)
        assert np.array_equal(values, x) and reader.dropped_columns == ("name",)  # type: ignore[attr-defined]


def _broken(x: np.ndarray, row: int, cell: str | None) -> list[str]:
    """The lines of x with data row ``row`` (1-based) changed: its x3 set to ``cell``, or cut to two fields."""
    lines = _lines(x)
    cells = lines[row].split(",")
    if cell is None:
        lines[row] = ",".join(cells[:2])
    else:
        cells[3] = cell
        lines[row] = ",".join(cells)
    return lines


@pytest.mark.parametrize(("cell", "fragment"), [
    (None, "row 5 (counting from 1) has 2 fields but the header has 6"),
    ("abc", "row 5 (counting from 1), column 'x3': the value is not a number"),
    ("", "row 5 (counting from 1), column 'x3': value is missing"),
    ("NA", "row 5 (counting from 1), column 'x3': value is missing"),
    ("nan", "row 5 (counting from 1), column 'x3': value is NaN"),
    ("-inf", "row 5 (counting from 1), column 'x3': value is -inf"),
])
def test_the_wide_reader_fails_as_pyarrow_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cell: str | None,
                                               fragment: str) -> None:
    source = tmp_path / "bad.csv"
    source.write_text("\n".join(_broken(_rows(), 5, cell)) + "\n")
    messages = []
    for wide in (False, True):
        with pytest.raises(DataError) as caught:
            _read(source, wide, monkeypatch, batch_rows=3)
        messages.append(str(caught.value))
    assert messages[0] == messages[1], messages
    assert messages[1].startswith(f"{source}: ") and fragment in messages[1] and "\n" not in messages[1]


def test_skip_invalid_skips_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _broken(_rows(), 5, "abc")
    lines[8] = lines[8].replace(lines[8].split(",")[1], "", 1)
    lines[10] = lines[10].replace(lines[10].split(",")[0], "inf", 1)
    source = tmp_path / "skip.csv"
    source.write_text("\n".join(lines) + "\n")
    for wide in (False, True):
        _, reader = _read(source, wide, monkeypatch, skip_invalid=True, batch_rows=4)
        assert reader.skipped_rows == [5, 8, 10], (wide, reader.skipped_rows)  # type: ignore[attr-defined]


def test_a_wide_csv_with_keep_above_the_pyarrow_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ldpcli.io._csv_wide as csv_wide

    monkeypatch.setattr(csv_wide, "CSV_MAX_COLUMNS", 5)
    source = tmp_path / "w.csv"
    source.write_text("\n".join(_lines(_rows())) + "\n")
    with pytest.raises(DataError, match="has more than 5 columns"):
        _read(source, True, monkeypatch, keep=["x0"])


@pytest.mark.slow
def test_two_hundred_thousand_columns_privatized_in_bounded_memory(tmp_path: Path) -> None:
    """Refused before (more than 100000 columns); pyarrow's reader took ~6 KB per column and row block."""
    d = 200_000
    x = np.random.default_rng(0).standard_normal((3, d)) / np.sqrt(d)
    source = tmp_path / "wide.csv"
    with source.open("w") as out:
        out.write(",".join(f"c{j}" for j in range(d)) + "\n")
        np.savetxt(out, x, delimiter=",", fmt="%.17g")
    run = ldp_process("privatize", source, "--eps", "1", "-o", tmp_path / "out.csv", "--seed", "0", "-q", timeout=600)
    assert run.returncode == 0, run.stderr
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    assert peak < 2 * 2**30, peak
    mean = ldp_process("estimate-mean", tmp_path / "out.csv", "--json", timeout=600)
    assert mean.returncode == 0, mean.stderr


def test_a_bad_cell_in_the_first_row_is_reported_not_taken_for_a_text_column(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Both paths type columns from their first lines: one bad cell among numbers is a coordinate's bad cell."""
    source = tmp_path / "bad.csv"
    source.write_text("\n".join(_broken(_rows(), 1, "abc")) + "\n")
    messages = []
    for wide in (False, True):
        with pytest.raises(DataError) as caught:
            _read(source, wide, monkeypatch)
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and "row 1 (counting from 1), column 'x3': the value is not a number" in messages[1]
