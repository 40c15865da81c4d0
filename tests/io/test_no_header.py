"""``open_vectors(no_header=True)``: a CSV file without a header row (issue 36). Every line is data, the
columns are named f0, f1, … (pyarrow's names for unnamed CSV columns), and a first line that looks like a
header is refused, as a header of numbers is refused without it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import write_headerless

from ldpcli.errors import DataError, UsageError
from ldpcli.io import open_vectors


def test_every_line_is_data_and_the_columns_are_f0_f1(tmp_path: Path) -> None:
    source = tmp_path / "x.csv"
    x = write_headerless(source, 9, 3, seed=2, scale=0.5)
    with open_vectors(source, no_header=True, batch_rows=4) as reader:
        values = np.concatenate([batch.values for batch in reader])
    assert np.array_equal(values, x)  # the first row too
    assert reader.layout.columns == ("f0", "f1", "f2")


def test_keep_and_columns_take_the_generated_names(tmp_path: Path) -> None:
    source = tmp_path / "x.csv"
    rows = [f"{i},{0.1 * i:.3f},{-0.05 * i:.3f},{0.02 * i:.3f}" for i in range(1, 8)]
    source.write_text("\n".join(rows) + "\n")
    with open_vectors(source, no_header=True, keep=["f0"], columns=["f1:f3"]) as reader:
        batches = list(reader)
    assert reader.layout.columns == ("f1", "f2", "f3") and reader.layout.keep == ("f0",)
    assert batches[0].keep is not None and batches[0].keep.column("f0").to_pylist() == list(range(1, 8))


def test_a_header_read_with_no_header_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "h.csv"
    source.write_text("a,b,c\n0.1,0.2,0.3\n0.2,0.1,0.0\n")
    with pytest.raises(DataError, match=r"h\.csv: read with no_header, but the first line looks like a header"):
        open_vectors(source, no_header=True)


def test_a_header_cell_in_a_vector_column_is_refused(tmp_path: Path) -> None:
    """An id header over numeric ids: the first line has a number-like name, but the vector columns' are not."""
    source = tmp_path / "h.csv"
    source.write_text("1,x,y\n1,0.2,0.3\n2,0.1,0.0\n3,0.3,0.1\n")
    with pytest.raises(DataError, match="its cell in vector column 'f1' is not a number"):
        open_vectors(source, no_header=True, keep=["f0"], columns=["f1", "f2"])


def test_rows_are_counted_from_the_first_line(tmp_path: Path) -> None:
    source = tmp_path / "x.csv"
    source.write_text("0.1,0.2\n0.3,oops\n")
    with pytest.raises(DataError, match=r"row 2 \(counting from 1\), column 'f1': the value is not a number"):
        with open_vectors(source, no_header=True, columns=["f0", "f1"]) as reader:
            list(reader)
    source.write_text("0.1,0.2\n0.3\n")
    with pytest.raises(DataError, match=r"row 2 \(counting from 1\) has 1 field but the first line has 2"):
        with open_vectors(source, no_header=True) as reader:
            list(reader)


def test_the_numeric_header_refusal_suggests_no_header(tmp_path: Path) -> None:
    source = tmp_path / "x.csv"
    write_headerless(source, 9, 3, seed=2, scale=0.5)
    with pytest.raises(DataError, match="pass no_header to read every line as data"):
        open_vectors(source)


def test_no_header_is_refused_for_a_file_with_named_columns(tmp_path: Path) -> None:
    source = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": [0.1, 0.2]}), source)
    with pytest.raises(UsageError, match="no_header is for CSV files"):
        open_vectors(source, no_header=True)


def test_the_numeric_header_refusal_names_no_header_only_where_the_caller_offers_it(tmp_path: Path) -> None:
    """``ldp answer``, ``ldp audit``, ``ldp train`` and ``hull:FILE`` read CSV files with no
    ``--no-header``: their refusal says to add a header row, and names no flag they lack."""
    source = tmp_path / "x.csv"
    write_headerless(source, 9, 3, seed=2, scale=0.5)
    with pytest.raises(DataError, match="add a header row") as caught:
        open_vectors(source, offer_no_header=False)
    assert "no_header" not in caught.value.render(lambda name: "--" + name.replace("_", "-"))
    wide = tmp_path / "wide.csv"
    write_headerless(wide, 3, 5000, seed=2, scale=0.01)  # the wide CSV reader's own check
    with pytest.raises(DataError, match="add a header row") as caught:
        open_vectors(wide, offer_no_header=False)
    assert "no_header" not in str(caught.value)
