"""A bad cell in a CSV vector column (issue 24, items 7 and 10).

Whether a column is a coordinate must not depend on where its first bad cell falls: pyarrow types
a column as text when a cell of the first block (about the first 1 MiB) is not a number or not
UTF-8, and as a number when the cell comes later. Both ways the column is a vector column, and the
cell is one error naming its row and column (or, with ``skip_invalid``, a skipped row). A column
of identifiers or names, mostly not numbers, is still left out.

No message shows a cell's value (it may be an e-mail address): it names the row and column and
what is wrong.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import LDP, ldp

from ldpcli.analysis._answer import encode_queries, read_workload
from ldpcli.errors import DataError
from ldpcli.io import open_vectors
from ldpcli.learn._train import TrainingOptions, train
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions

ROWS = 50_000  # 40,000 is far beyond the first block of the CSV reader


def vectors_csv(path: Path, row: int, cell: bytes, column: int = 2) -> Path:
    """A CSV of ROWS rows and 4 numeric columns a, b, c, e whose ``column`` holds ``cell`` at data
    ``row`` (counting from 1)."""
    x = np.random.default_rng(row).standard_normal((ROWS, 4)) * 0.2
    lines = [b"a,b,c,e"]
    for i, values in enumerate(x.tolist()):
        cells = [repr(v).encode() for v in values]
        if i + 1 == row:
            cells[column] = cell
        lines.append(b",".join(cells))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


BAD_CELLS = {"text": (b"hello", "not a number"), "not UTF-8": (b"0.\xff5", "not valid UTF-8")}


@pytest.mark.parametrize("row", [3, 300, 40_000])
@pytest.mark.parametrize("kind", list(BAD_CELLS))
def test_a_bad_cell_keeps_its_column_and_is_reported_by_row(tmp_path: Path, kind: str, row: int) -> None:
    cell, problem = BAD_CELLS[kind]
    path = vectors_csv(tmp_path / "x.csv", row, cell)
    with pytest.raises(DataError) as excinfo, open_vectors(path) as reader:  # at open or while reading
        list(reader)
    message = str(excinfo.value)
    assert message.startswith(f"{path}: row {row} (counting from 1), column 'c': the value is {problem}")
    with open_vectors(path, skip_invalid=True) as reader:
        assert reader.layout.columns == ("a", "b", "c", "e") and reader.layout.d == 4
        n = sum(len(batch.values) for batch in reader)
        assert reader.skipped_rows == [row] and n == ROWS


@pytest.mark.slow
@pytest.mark.parametrize("row", [3, 300, 40_000])
def test_the_cli_refuses_the_file_in_one_line_and_writes_nothing(tmp_path: Path, row: int) -> None:
    path = vectors_csv(tmp_path / "x.csv", row, b"hello")
    run = subprocess.run([LDP, "privatize", str(path), "--eps", "1"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr == (f"ldp: error: {path}: row {row} (counting from 1), column 'c': the value is not a number; "
                          "vector columns must be numeric, so fix the value or leave the column out (--columns, --keep).\n")
    assert sorted(os.listdir(tmp_path)) == ["x.csv"]


def test_skip_invalid_privatizes_the_other_rows_with_the_whole_column(tmp_path: Path) -> None:
    path = vectors_csv(tmp_path / "x.csv", 300, b"\xff")
    result = write_file_release(path, tmp_path / "out.csv", epsilon=1.0, options=ReleaseOptions(skip_invalid=True, seed=0))
    assert (result.n, result.d, result.n_skipped) == (ROWS - 1, 4, 1)
    assert (tmp_path / "out.csv").read_text().splitlines()[0] == '"a","b","c","e"'


def test_a_column_of_text_is_still_left_out(tmp_path: Path) -> None:
    """Identifiers and names (mostly not numbers, a few that are) are not coordinates. A column of
    half numbers is one, unless it is kept (then it stays text)."""
    path = tmp_path / "x.csv"
    rows = [f"u{i},{'42' if i % 5 == 0 else 'ann'},{'7' if i % 2 else 'x'},0.{i},0.{i + 1}" for i in range(1, 40)]
    path.write_text("user,name,code,a,b\n" + "\n".join(rows) + "\n")
    with open_vectors(path, keep=["code"]) as reader:
        assert reader.layout.columns == ("a", "b") and reader.keep_schema is not None
        assert str(reader.keep_schema.field("code").type) == "string"
        assert len(np.concatenate([batch.values for batch in reader])) == 39
    with pytest.raises(DataError, match="row 2 .*column 'code': the value is not a number"), open_vectors(path) as reader:
        list(reader)


# --------------------------------------------------------------------------- no raw values in messages

SECRET = "alice@example.com"


@pytest.mark.slow
@pytest.mark.parametrize("columns", [(), ("--columns", "a,b,c,e")])
@pytest.mark.parametrize("row", [3, 40_000])
def test_a_message_names_row_and_column_never_the_value(tmp_path: Path, row: int, columns: tuple[str, ...]) -> None:
    path = vectors_csv(tmp_path / "x.csv", row, SECRET.encode(), column=1)
    run = subprocess.run([LDP, "privatize", str(path), "--eps", "1", *columns], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 1 and run.stderr.count("\n") == 1
    assert f"row {row} (counting from 1), column 'b': the value is not a number" in run.stderr
    assert "alice" not in run.stderr and "example" not in run.stderr


def test_a_ragged_row_is_reported_without_its_text(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text(f"a,b\n0.1,0.2\n{SECRET},0.3,0.4\n")
    res = ldp("privatize", path, "--eps", 1)
    assert res.exit_code == 1 and "row 2" in res.stderr and "alice" not in res.stderr


def test_a_class_label_outside_the_classes_is_not_shown(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text(f"a,b,label\n0.1,0.2,x\n0.3,0.1,{SECRET}\n")
    with pytest.raises(DataError) as excinfo:
        train(path, label="label", epsilon=1.0, training=TrainingOptions(classes=["x", "y"]))
    assert "row 2 (counting from 1), column 'label'" in str(excinfo.value) and "alice" not in str(excinfo.value)


def test_a_key_outside_the_workload_is_not_shown(tmp_path: Path) -> None:
    workload = tmp_path / "workload.csv"
    workload.write_text("item,q0,q1\nann,1,0\nbob,0,1\n")
    data = tmp_path / "people.csv"
    data.write_text(f"person,item\n0,ann\n1,{SECRET}\n")
    with pytest.raises(DataError) as excinfo:
        encode_queries(data, read_workload(workload, key="item"), "item", tmp_path / "out.parquet")
    assert "row 2 (counting from 1), column 'item'" in str(excinfo.value) and "alice" not in str(excinfo.value)
