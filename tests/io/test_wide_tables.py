"""Wide tables, one column per coordinate, privatized end to end (issue 24, item 12).

Choosing, checking and writing d columns must take time linear in d. A step that looks a column up
by a linear search once per column (``names.count(name)``, ``schema.names.index(name)``) takes
minutes at the 30,000 columns here and about a second when linear, so these tests, which assert
no time, would hang the suite on such a regression. Each path that handles the column list is
taken: automatic choice (CSV and Parquet), a ``--columns`` range, a re-read through the sidecar's
layout, and ``estimate-mean``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.io import open_vectors
from ldpcli.io._feature_eps import parse_feature_levels
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions
from ldpcli.release._sidecar import load_sidecar, sidecar_path

D = 30_000
N = 4


def wide_file(path: Path, names: list[str]) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal((N, len(names))) / np.sqrt(len(names))
    table = pa.Table.from_arrays([pa.array(column) for column in x.T], names=names)
    if path.suffix == ".csv":
        pacsv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    return x


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_thirty_thousand_columns_end_to_end(tmp_path: Path, suffix: str) -> None:
    names = [f"c{j}" for j in range(D)]
    source = tmp_path / f"wide{suffix}"
    wide_file(source, names)
    output = tmp_path / f"out{suffix}"
    result = write_file_release(source, output, epsilon=1.0, options=ReleaseOptions(seed=0, fail_on_clip=1.0))
    assert (result.n, result.d) == (N, D) and result.layout.columns == tuple(names)
    layout = load_sidecar(sidecar_path(output)).layout
    assert layout.columns == tuple(names)
    with open_vectors(output, layout=layout) as reader:
        values = np.concatenate([batch.values for batch in reader])
    assert values.shape == (N, D) and np.isfinite(values).all()
    assert estimate_file_mean(output).mean.shape == (D,)


@pytest.mark.slow
def test_a_range_of_thirty_thousand_columns_with_a_kept_column(tmp_path: Path) -> None:
    names = ["id", *(f"c{j}" for j in range(D))]
    source = tmp_path / "wide.parquet"
    wide_file(source, names)
    output = tmp_path / "out.parquet"
    chosen = Columns(columns=[f"c0:c{D - 1}"], keep=["id"])
    result = write_file_release(source, output, epsilon=1.0, options=ReleaseOptions(columns=chosen, seed=0, fail_on_clip=1.0))
    assert result.d == D and result.layout.keep == ("id",)
    assert pq.read_schema(output).names == names


def test_lines_longer_than_the_sample_and_a_default_block(tmp_path: Path) -> None:
    """A header longer than the 1 MiB sample and rows of 34 MB, more than two 16 MiB blocks (a table
    of 10⁶ columns has rows of about 22 MB): the block is sized from the first two whole lines."""
    names = [f"{j:04d}" + "n" * 1_100 for j in range(1_000)]  # a 1.1 MB header
    cell = "0." + "0" * 34_000 + "1"  # 34 KB of digits: rows of 34 MB, two default blocks
    source = tmp_path / "long.csv"
    source.write_text(",".join(names) + "\n" + "\n".join(",".join([cell] * len(names)) for _ in range(2)) + "\n")
    with open_vectors(source) as reader:
        values = np.concatenate([batch.values for batch in reader])
    assert values.shape == (2, len(names)) and np.all(values == 0)


def test_a_level_for_each_of_a_hundred_thousand_named_columns(tmp_path: Path) -> None:
    """--feature-eps naming every column by name: each name is looked up in a table built once
    (under a second; minutes with a search of the names per item)."""
    d = 100_000
    names = [f"c{j}" for j in range(d)]
    spec = tmp_path / "levels.csv"
    spec.write_text("feature,eps\n" + "".join(f"{name},{0.5 if j % 2 else 1}\n" for j, name in enumerate(names)))
    levels = parse_feature_levels(str(spec), d=d, epsilon=1.0, names=names).levels
    assert levels.shape == (d,) and levels[1] == 0.5 and levels[2] == 1.0
