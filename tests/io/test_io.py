"""Tests for ldpcli.io: streaming reads, layout resolution, error messages and atomic writes."""

from __future__ import annotations

import decimal
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from ldpcli.errors import DataError, UsageError
from ldpcli.io import (
    FORMATS,
    AtomicVectorWriter,
    VectorLayout,
    atomic_write_bytes,
    atomic_write_text,
    default_batch_rows,
    file_format,
    open_vectors,
    table_bytes,
)
from ldpcli.io._faults import NAMED_TEMPORARIES_ENV

# --------------------------------------------------------------------------- helpers


def read_all(path: Path, **options: Any) -> tuple[np.ndarray, pa.Table | None, list[tuple[int, int]]]:
    """All values, the concatenated keep table, and (first_row, rows) of every batch."""
    parts, keeps, shapes = [], [], []
    with open_vectors(path, **options) as reader:
        for batch in reader:
            assert batch.values.dtype == np.float64
            assert batch.values.flags.c_contiguous and batch.values.flags.writeable
            assert batch.values.shape[1] == reader.layout.d
            if batch.keep is not None:
                assert batch.keep.num_rows == batch.values.shape[0]
                keeps.append(batch.keep)
            parts.append(batch.values)
            shapes.append((batch.first_row, batch.values.shape[0]))
    keep = pa.concat_tables(keeps) if keeps else None
    return np.concatenate(parts), keep, shapes


def message(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """The exception's message, checked to be a single line."""
    text = str(excinfo.value)
    assert "\n" not in text and text.strip() == text, text
    return text


def awkward_floats(n: int, seed: int = 0) -> np.ndarray:
    """Floats across the whole double range, plus values that are hard to print exactly."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)
    special = np.array([5e-324, -0.0, 0.1, 1 / 3, 2.0**53 + 2, 1.7976931348623157e308, np.nextafter(1.0, 2.0)])
    x[: min(n, special.size)] = special[: min(n, special.size)]
    return x


def bits(values: np.ndarray) -> np.ndarray:
    """The raw bit patterns, so that -0.0 and 0.0 differ."""
    return np.ascontiguousarray(values).view(np.uint64)


def write_csv_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# --------------------------------------------------------------------------- small pieces


def test_file_format() -> None:
    assert FORMATS == ("parquet", "csv", "arrow", "npy")
    assert file_format("a.parquet") == "parquet"
    assert file_format(Path("b.PQ")) == "parquet"
    assert file_format("dir/c.CSV") == "csv"
    with pytest.raises(UsageError) as excinfo:
        file_format("data.txt")
    text = message(excinfo)
    assert "data.txt" in text and ".parquet" in text and ".csv" in text
    with pytest.raises(UsageError):
        file_format("noext")


def test_default_batch_rows() -> None:
    assert default_batch_rows(1) == 1_000_000
    assert default_batch_rows(1000) == 64 * 2**20 // (8 * 1000 * 4)
    assert default_batch_rows(10**9) == 1
    assert default_batch_rows(10, memory_bytes=320 * 7) == 7
    with pytest.raises(ValueError):
        default_batch_rows(0)


def test_layout_dict_round_trip() -> None:
    for layout in (
        VectorLayout("list", ("emb",), 5, ("id", "label")),
        VectorLayout("columns", ("x0", "x1", "x2"), 3),
    ):
        data = json.loads(json.dumps(layout.to_dict()))
        assert VectorLayout.from_dict(data) == layout
    assert VectorLayout("columns", ("a",), 1).to_dict() == {"kind": "columns", "columns": ["a"], "d": 1, "keep": []}


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"kind": "rows", "columns": ["a"], "d": 1, "keep": []},
        {"kind": "list", "columns": "a", "d": 1},
        {"kind": "list", "columns": ["a", "b"], "d": 2},
        {"kind": "columns", "columns": ["a", "b"], "d": 3},
        {"kind": "columns", "columns": ["a"], "d": 0},
        {"kind": "columns", "columns": ["a"], "d": "1"},
        {"kind": "columns", "columns": ["a"], "d": True},
        {"kind": "columns", "columns": ["a", "a"], "d": 2},
        {"kind": "columns", "columns": [], "d": 0},
        {"kind": "columns", "columns": ["a"], "d": 1, "keep": ["a"]},
        {"kind": "columns", "columns": ["a"], "d": 1, "keep": [3]},
    ],
)
def test_layout_from_dict_malformed(data: Any) -> None:
    with pytest.raises(DataError) as excinfo:
        VectorLayout.from_dict(data, source="out.parquet.ldp.json")
    text = message(excinfo)
    assert text.startswith("out.parquet.ldp.json: malformed vector layout")


def test_layout_constructor_rejects_inconsistent_fields() -> None:
    with pytest.raises(ValueError):
        VectorLayout("columns", ("a", "b"), 3)


def test_table_bytes_round_trip() -> None:
    columns = {"coordinate": np.arange(3), "mean": np.array([0.1, -2.5, 1e-300])}
    for fmt in FORMATS:
        data = table_bytes(columns, fmt)
        buffer = pa.BufferReader(data)
        readers = {"parquet": pq.read_table, "csv": pacsv.read_csv, "arrow": lambda b: pa.ipc.open_stream(b).read_all(),
                   "npy": lambda b: pa.table({"coordinate": [0, 1, 2], "mean": np.load(b)[:, 1].tolist()})}
        table = readers[fmt](buffer)
        assert table.column("mean").to_pylist() == [0.1, -2.5, 1e-300]
        assert table.column("coordinate").to_pylist() == [0, 1, 2]


# --------------------------------------------------------------------------- Parquet round trips


@pytest.mark.parametrize("kind", ["list", "large_list", "fixed"])
def test_parquet_list_round_trip_with_keep(tmp_path: Path, kind: str) -> None:
    d, n = 4, 25
    x = awkward_floats(n * d).reshape(n, d)
    if kind == "fixed":
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), d)
    else:
        vectors = pa.array(list(x), type=pa.list_(pa.float64()) if kind == "list" else pa.large_list(pa.float64()))
    ids = [f"{i:03d}" for i in range(n)]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ids, "num": np.arange(n), "emb": vectors}), source, row_group_size=7)

    with open_vectors(source, keep=["id", "num"], batch_rows=6) as reader:
        assert reader.format == "parquet" and reader.num_rows == n and reader.path == source
        assert reader.layout == VectorLayout("list", ("emb",), d, ("id", "num"))
        assert reader.keep_schema == pa.schema([("id", pa.string()), ("num", pa.int64())])
        target = tmp_path / "out.parquet"
        with AtomicVectorWriter(target, reader.layout, keep_schema=reader.keep_schema) as writer:
            for batch in reader:
                assert batch.values.shape[0] <= 6
                writer.write(batch.values, batch.keep)
            writer.commit()
        assert writer.rows_written == n

    written = pq.read_table(target)
    assert written.column_names == ["id", "num", "emb"]
    assert written.schema.field("emb").type == pa.list_(pa.float64(), d)
    assert written.column("id").to_pylist() == ids

    values, keep, _ = read_all(target, layout=reader.layout)
    assert np.array_equal(bits(values), bits(x))
    assert keep is not None and keep.column("id").to_pylist() == ids
    assert keep.column("num").to_pylist() == list(range(n))


def test_parquet_integer_and_decimal_lists_become_float64(tmp_path: Path) -> None:
    source = tmp_path / "ints.parquet"
    pq.write_table(pa.table({"v": pa.array([[1, 2, 3], [4, 5, -6]], type=pa.list_(pa.int32()))}), source)
    values, keep, _ = read_all(source)
    assert keep is None
    assert np.array_equal(values, [[1.0, 2.0, 3.0], [4.0, 5.0, -6.0]])

    source = tmp_path / "dec.parquet"
    dec = pa.array([[decimal.Decimal("1.25"), decimal.Decimal("-2.5")]], type=pa.list_(pa.decimal128(5, 2)))
    pq.write_table(pa.table({"v": dec}), source)
    assert np.array_equal(read_all(source)[0], [[1.25, -2.5]])


def test_parquet_columns_round_trip_with_string_and_int_ids(tmp_path: Path) -> None:
    n = 11
    x = awkward_floats(n * 3, seed=1).reshape(n, 3)
    table = pa.table(
        {
            "sid": [f"id-{i}" for i in range(n)],
            "x0": x[:, 0],
            "flag": [i % 2 == 0 for i in range(n)],
            "x1": x[:, 1],
            "nid": pa.array(range(n), type=pa.int32()),
            "x2": x[:, 2],
            "k": pa.array(range(n), type=pa.int8()),
        }
    )
    source = tmp_path / "cols.parquet"
    pq.write_table(table, source)
    with open_vectors(source, keep=["sid", "nid"], columns=["x0", "x1", "x2"], batch_rows=4) as reader:
        layout = reader.layout
        target = tmp_path / "cols_out.parquet"
        with AtomicVectorWriter(target, layout, keep_schema=reader.keep_schema) as writer:
            for batch in reader:
                writer.write(batch.values, batch.keep)
            writer.commit()
    assert layout == VectorLayout("columns", ("x0", "x1", "x2"), 3, ("sid", "nid"))
    written = pq.read_table(target)
    assert written.column_names == ["sid", "nid", "x0", "x1", "x2"]
    assert written.schema.field("nid").type == pa.int32()
    values, keep, _ = read_all(target, layout=layout)
    assert np.array_equal(bits(values), bits(x))
    assert keep is not None and keep.column("sid").to_pylist() == table.column("sid").to_pylist()

    # Auto-detection: every numeric non-keep column in file order (booleans and strings are not numbers).
    values, _, _ = read_all(source, keep=["sid", "nid"])
    assert np.array_equal(values, np.column_stack([x, np.arange(n)]))


def test_batches_split_by_batch_rows(tmp_path: Path) -> None:
    x = np.arange(30.0).reshape(10, 3)
    parquet, csv = tmp_path / "ten.parquet", tmp_path / "ten.csv"
    pq.write_table(pa.table({"i": np.arange(10), "v": pa.array(list(x))}), parquet)
    pacsv.write_csv(pa.table({"i": np.arange(10), "a": x[:, 0], "b": x[:, 1], "c": x[:, 2]}), csv)
    for path in (parquet, csv):
        values, keep, shapes = read_all(path, keep=["i"], batch_rows=3)
        assert shapes == [(0, 3), (3, 3), (6, 3), (9, 1)]
        assert np.array_equal(values, x)
        assert keep is not None and [int(v) for v in keep.column("i").to_pylist()] == list(range(10))


def test_default_batch_rows_is_used(tmp_path: Path) -> None:
    source = tmp_path / "v.parquet"
    pq.write_table(pa.table({"v": pa.array([[1.0] * 7] * 3)}), source)
    with open_vectors(source) as reader:
        assert reader.batch_rows == default_batch_rows(7)


def test_values_are_fresh_arrays(tmp_path: Path) -> None:
    source = tmp_path / "v.parquet"
    pq.write_table(pa.table({"v": pa.array([[1.0, 2.0], [3.0, 4.0]])}), source)
    with open_vectors(source) as reader:
        (batch,) = list(reader)
    batch.values[:] = 0.0  # writable, and no arrow buffer behind it
    assert np.array_equal(read_all(source)[0], [[1.0, 2.0], [3.0, 4.0]])


def test_reader_iterates_once_and_closes(tmp_path: Path) -> None:
    source = tmp_path / "v.parquet"
    pq.write_table(pa.table({"v": pa.array([[1.0]] * 5)}), source)
    reader = open_vectors(source, batch_rows=2)
    for _ in reader:
        break
    reader.close()
    reader.close()
    with pytest.raises(RuntimeError):
        iter(reader)


# --------------------------------------------------------------------------- CSV


def test_csv_round_trip_with_keep(tmp_path: Path) -> None:
    n = 40
    x = awkward_floats(n * 2, seed=2).reshape(n, 2)
    source = write_csv_text(
        tmp_path / "in.csv",
        "id,x,label,y\n" + "".join(f"{i:03d},{float(x[i, 0])!r},lab{i},{float(x[i, 1])!r}\n" for i in range(n)),
    )
    with open_vectors(source, keep=["id", "label"], batch_rows=16) as reader:
        assert reader.format == "csv" and reader.num_rows is None
        assert reader.layout == VectorLayout("columns", ("x", "y"), 2, ("id", "label"))
        assert reader.keep_schema == pa.schema([("id", pa.string()), ("label", pa.string())])
        target = tmp_path / "out.csv"
        with AtomicVectorWriter(target, reader.layout, keep_schema=reader.keep_schema) as writer:
            for batch in reader:
                writer.write(batch.values, batch.keep)
            writer.commit()
    values, keep, _ = read_all(target, layout=reader.layout)
    assert np.array_equal(bits(values), bits(x))
    assert keep is not None
    assert keep.column("id").to_pylist() == [f"{i:03d}" for i in range(n)]  # "007" stays "007"
    assert pacsv.read_csv(target).column_names == ["id", "label", "x", "y"]


def test_csv_writer_floats_round_trip_exactly(tmp_path: Path) -> None:
    x = awkward_floats(3000, seed=3).reshape(1000, 3)
    layout = VectorLayout("columns", ("a", "b", "c"), 3)
    target = tmp_path / "exact.csv"
    with AtomicVectorWriter(target, layout) as writer:
        writer.write(x[:500])
        writer.write(x[500:])
        writer.commit()
    values, _, _ = read_all(target)
    assert np.array_equal(bits(values), bits(x))


def test_csv_auto_detects_numeric_columns(tmp_path: Path) -> None:
    source = write_csv_text(tmp_path / "a.csv", "name,x,flag,y\nann,1,true,2.5\nbob,3,false,4\n")
    with open_vectors(source) as reader:
        assert reader.layout == VectorLayout("columns", ("x", "y"), 2)
        assert np.array_equal(next(iter(reader)).values, [[1.0, 2.5], [3.0, 4.0]])


def test_large_csv_batches_never_exceed_batch_rows(tmp_path: Path) -> None:
    n = 200_000
    rng = np.random.default_rng(4)
    x = rng.standard_normal((n, 3))
    source = tmp_path / "big.csv"
    pacsv.write_csv(pa.table({"id": np.arange(n), "a": x[:, 0], "b": x[:, 1], "c": x[:, 2]}), source)
    values, keep, shapes = read_all(source, keep=["id"], batch_rows=7_000)
    assert max(rows for _, rows in shapes) <= 7_000
    assert [first for first, _ in shapes] == list(np.cumsum([0] + [rows for _, rows in shapes[:-1]]))
    assert np.array_equal(values, x)
    assert keep is not None and keep.num_rows == n


# --------------------------------------------------------------------------- layout resolution


def test_single_list_column_wins_over_numeric_columns(tmp_path: Path) -> None:
    source = tmp_path / "mixed.parquet"
    pq.write_table(pa.table({"id": [1, 2], "tags": [["a"], ["b"]], "v": [[1.0, 2.0], [3.0, 4.0]]}), source)
    with open_vectors(source) as reader:
        assert reader.layout == VectorLayout("list", ("v",), 2)


def test_unnamed_and_pandas_index_columns_are_not_picked_automatically(tmp_path: Path) -> None:
    source = write_csv_text(tmp_path / "pandas.csv", ",x,y\n0,1.5,2\n1,3,4\n")
    with open_vectors(source) as reader:
        assert reader.layout == VectorLayout("columns", ("x", "y"), 2)
    source = tmp_path / "pandas.parquet"
    pq.write_table(pa.table({"x": [1.0], "__index_level_0__": [7]}), source)
    with open_vectors(source) as reader:
        assert reader.layout == VectorLayout("columns", ("x",), 1)


def test_duplicate_column_names(tmp_path: Path) -> None:
    source = write_csv_text(tmp_path / "dup.csv", "x,x,y\n1,2,3\n")
    with pytest.raises(DataError) as excinfo:
        open_vectors(source)
    assert "two columns named 'x'" in message(excinfo)
    with open_vectors(source, columns=["y"]) as reader:
        assert np.array_equal(next(iter(reader)).values, [[3.0]])


def test_several_list_columns_need_column(tmp_path: Path) -> None:
    source = tmp_path / "two.parquet"
    pq.write_table(pa.table({"u": [[1.0], [2.0]], "v": [[1.0, 2.0], [3.0, 4.0]]}), source)
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source)
    text = message(excinfo)
    assert "two.parquet" in text and "choose one with column." in text and "'u'" in text and "'v'" in text
    with open_vectors(source, column="v") as reader:
        assert reader.layout == VectorLayout("list", ("v",), 2)
    with open_vectors(source, keep=["u"]) as reader:  # a kept list column is not a candidate
        assert reader.layout == VectorLayout("list", ("v",), 2, ("u",))


def test_no_numeric_vector_column(tmp_path: Path) -> None:
    source = tmp_path / "text.parquet"
    pq.write_table(pa.table({"name": ["a"], "ok": [True], "tags": [["x"]]}), source)
    with pytest.raises(DataError) as excinfo:
        open_vectors(source)
    assert "text.parquet" in message(excinfo) and "no numeric vector column" in message(excinfo)
    source = write_csv_text(tmp_path / "text.csv", "id,name\n1,a\n")
    with pytest.raises(DataError) as excinfo:
        open_vectors(source, keep=["id"])
    assert "no numeric vector column" in message(excinfo)


@pytest.fixture
def sample_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "sample.parquet"
    pq.write_table(
        pa.table({"id": ["a", "b"], "x": [1.0, 2.0], "y": [3, 4], "s": ["p", "q"], "v": [[1.0], [2.0]]}),
        path,
    )
    return path


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"column": "v", "columns": ["x"]}, "not both"),
        ({"column": "nope"}, "no column named 'nope'"),
        ({"columns": ["x", "nope"]}, "available columns"),
        ({"keep": ["nope"]}, "no column named 'nope' to keep"),
        ({"columns": ["x", "y"], "keep": ["x"]}, "both a vector column and a keep column"),
        ({"column": "v", "keep": ["v"]}, "both a vector column and a keep column"),
        ({"columns": ["x", "x"]}, "listed twice"),
        ({"columns": []}, "at least one column"),
        ({"columns": ["x", ""]}, "empty column name"),
        ({"batch_rows": 0}, "at least 1 row"),
        ({"column": "v", "layout": VectorLayout("list", ("v",), 1)}, "layout"),
    ],
)
def test_usage_errors(sample_parquet: Path, options: dict[str, Any], expected: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        open_vectors(sample_parquet, **options)
    text = message(excinfo)
    assert str(sample_parquet) in text and expected in text


def test_missing_file_directory_and_extension(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as excinfo:
        open_vectors(tmp_path / "nope.parquet")
    assert "nope.parquet" in message(excinfo) and "no such file" in message(excinfo)
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(UsageError) as excinfo:
        open_vectors(tmp_path / "dir.csv")
    assert "directory" in message(excinfo)
    with pytest.raises(UsageError):
        open_vectors(tmp_path / "data.json")


def test_type_errors_in_named_columns(sample_parquet: Path) -> None:
    with pytest.raises(DataError) as excinfo:
        open_vectors(sample_parquet, column="x")
    text = message(excinfo)
    assert "sample.parquet" in text and "'x'" in text and "not lists of numbers" in text
    with pytest.raises(DataError) as excinfo:
        open_vectors(sample_parquet, columns=["x", "s"])
    text = message(excinfo)
    assert "'s'" in text and "numeric" in text


def test_column_option_on_csv(tmp_path: Path) -> None:
    source = write_csv_text(tmp_path / "a.csv", "x,y\n1,2\n")
    with pytest.raises(DataError) as excinfo:
        open_vectors(source, column="x")
    assert "a.csv" in message(excinfo) and "use columns for one numeric column" in message(excinfo)


def test_layout_must_match(tmp_path: Path) -> None:
    fixed = tmp_path / "fixed.parquet"
    pq.write_table(pa.table({"v": pa.FixedSizeListArray.from_arrays(pa.array([1.0, 2.0, 3.0, 4.0]), 2)}), fixed)
    with pytest.raises(DataError) as excinfo:
        open_vectors(fixed, layout=VectorLayout("list", ("v",), 3))
    assert "fixed.parquet" in message(excinfo) and "d=3" in message(excinfo)
    with pytest.raises(DataError) as excinfo:
        open_vectors(fixed, layout=VectorLayout("list", ("w",), 2))
    assert "'w'" in message(excinfo) and "missing" in message(excinfo)
    with pytest.raises(DataError):
        open_vectors(fixed, layout=VectorLayout("list", ("v",), 2, ("id",)))

    variable = tmp_path / "var.parquet"
    pq.write_table(pa.table({"v": [[1.0, 2.0], [3.0, 4.0, 5.0]]}), variable)
    with pytest.raises(DataError) as excinfo:
        read_all(variable, layout=VectorLayout("list", ("v",), 2))
    assert "row 2" in message(excinfo) and "3 coordinates, expected 2" in message(excinfo)

    csv = write_csv_text(tmp_path / "a.csv", "v,w\n1,2\n")
    with pytest.raises(DataError):
        open_vectors(csv, layout=VectorLayout("list", ("v",), 2))
    values, _, _ = read_all(csv, layout=VectorLayout("columns", ("w", "v"), 2))
    assert np.array_equal(values, [[2.0, 1.0]])


# --------------------------------------------------------------------------- data errors


def write_parquet(path: Path, columns: dict[str, Any], **options: Any) -> Path:
    pq.write_table(pa.table(columns), path, **options)
    return path


@pytest.mark.parametrize(
    ("vectors", "row", "fragments"),
    [
        ([[1.0, 2.0], None, [3.0, 4.0]], 2, ["column 'v'", "missing"]),
        ([[1.0, 2.0], [3.0, None], [3.0, 4.0]], 2, ["column 'v'", "coordinate 1", "missing"]),
        ([[1.0, 2.0], [3.0, 4.0], [5.0]], 3, ["column 'v'", "1 coordinate, expected 2"]),
        ([[1.0, 2.0], [3.0, 4.0], [5.0, float("nan")]], 3, ["column 'v'", "coordinate 1", "NaN"]),
        ([[1.0, 2.0], [float("-inf"), 4.0]], 2, ["column 'v'", "coordinate 0", "-inf"]),
        ([[1.0, 2.0, 3.0]], 1, []),  # fine: d comes from the first row
    ],
)
def test_list_column_data_errors(tmp_path: Path, vectors: list[Any], row: int, fragments: list[str]) -> None:
    source = write_parquet(tmp_path / "bad.parquet", {"id": list(range(len(vectors))), "v": vectors})
    if not fragments:
        read_all(source, keep=["id"])
        return
    with pytest.raises(DataError) as excinfo:
        read_all(source, keep=["id"], batch_rows=1)
    text = message(excinfo)
    assert text.startswith(f"{source}: row {row} (counting from 1),")
    for fragment in fragments:
        assert fragment in text


def test_first_row_problems_are_found_when_measuring_d(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "first.parquet", {"v": [None, [1.0]]})
    with pytest.raises(DataError) as excinfo:
        open_vectors(source)
    assert "row 1 (counting from 1), column 'v'" in message(excinfo)
    source = write_parquet(tmp_path / "empty_vec.parquet", {"v": [[], [1.0]]})
    with pytest.raises(DataError) as excinfo:
        open_vectors(source)
    assert "row 1 (counting from 1), column 'v'" in message(excinfo) and "empty" in message(excinfo)


def test_column_data_errors_name_first_bad_row_across_batches(tmp_path: Path) -> None:
    x = np.arange(20.0).reshape(10, 2)
    x[7, 1] = np.inf
    x[8, 0] = np.nan
    source = write_parquet(tmp_path / "inf.parquet", {"a": x[:, 0], "b": x[:, 1]})
    with pytest.raises(DataError) as excinfo:
        read_all(source, batch_rows=3)
    assert message(excinfo) == (
        f"{source}: row 8 (counting from 1), column 'b': value is inf; "
        "remove or impute non-finite values before privatizing."
    )
    nulls = write_parquet(tmp_path / "null.parquet", {"a": [1, 2, 3, None], "b": [1.0, 2.0, None, 4.0]})
    with pytest.raises(DataError) as excinfo:
        read_all(nulls)
    text = message(excinfo)
    assert text.startswith(f"{nulls}: row 3 (counting from 1), column 'b': value is missing")


@pytest.mark.parametrize(
    ("text", "row", "fragments"),
    [
        ("x,y\n1,2\n3,\n", 2, ["column 'y'", "missing"]),
        ("x,y\n1,2\n3,4\nNA,4\n", 3, ["column 'x'", "missing"]),
        ("x,y\n1,2\nnan,4\n", 2, ["column 'x'", "NaN"]),
        ("x,y\n1,2\n3,4\n5,inf\n", 3, ["column 'y'", "inf"]),
        ("x,y\n1,2\n3,abc\n", 2, ["column 'y'", "the value is not a number", "numeric"]),
        ("x,y\n1,2\n3\n", 2, ["not a valid CSV file", "1 field but", "header has 2"]),
    ],
)
def test_csv_data_errors(tmp_path: Path, text: str, row: int, fragments: list[str]) -> None:
    source = write_csv_text(tmp_path / "bad.csv", text)
    with pytest.raises(DataError) as excinfo:
        read_all(source, columns=["x", "y"])
    error = message(excinfo)
    assert error.startswith(f"{source}: ") and f"row {row}" in error
    for fragment in fragments:
        assert fragment in error


def test_csv_text_value_found_far_into_a_large_file(tmp_path: Path) -> None:
    n = 150_000
    lines = ["id,x,y"] + [f"{i},{i}.5,1" for i in range(n)]
    lines[123_457] = "123456,oops,1"
    source = write_csv_text(tmp_path / "late.csv", "\n".join(lines) + "\n")
    with pytest.raises(DataError) as excinfo:
        read_all(source, keep=["id"], batch_rows=10_000)
    text = message(excinfo)
    assert text.startswith(f"{source}: row 123457 (counting from 1), column 'x': the value is not a number")
    assert "oops" not in text  # a cell's value is never shown


def test_no_rows(tmp_path: Path) -> None:
    empty_parquet = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"v": pa.array([], type=pa.list_(pa.float64()))}), empty_parquet)
    header_only = write_csv_text(tmp_path / "header.csv", "x,y\n")
    empty_csv = write_csv_text(tmp_path / "blank.csv", "")
    for path in (empty_parquet, header_only, empty_csv):
        with pytest.raises(DataError) as excinfo:
            open_vectors(path)
        assert message(excinfo) == f"{path}: has no rows; the file needs at least one data row."


def test_corrupt_and_truncated_parquet(tmp_path: Path) -> None:
    good = tmp_path / "good.parquet"
    n = 5000
    pq.write_table(pa.table({"v": pa.array(list(np.ones((n, 4))))}), good, row_group_size=1000, compression="none")
    data = good.read_bytes()

    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(data[: len(data) // 2])
    not_parquet = tmp_path / "text.parquet"
    not_parquet.write_text("id,x\n1,2\n")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(data[:4] + b"\xff" * 64 + data[68:])  # damages the first page header
    for path in (truncated, not_parquet, corrupt):
        with pytest.raises(DataError) as excinfo:
            read_all(path)
        text = message(excinfo)
        assert text.startswith(f"{path}: not a valid Parquet file")


def test_csv_line_too_long_for_a_block(tmp_path: Path) -> None:
    source = tmp_path / "long.csv"
    with source.open("w") as file:
        file.write("x,y\n" + "1,2\n" * 300_000 + "3," + "4" * (20 << 20) + "\n")
    with pytest.raises(DataError) as excinfo:
        read_all(source)
    assert message(excinfo).startswith(f"{source}: not a valid CSV file: a line is longer than")


def test_csv_header_that_is_not_utf8(tmp_path: Path) -> None:
    source = tmp_path / "latin1_header.csv"
    source.write_bytes(b"caf\xe9,y\n1,2\n")
    with pytest.raises(DataError) as excinfo:
        open_vectors(source)
    assert message(excinfo).startswith(f"{source}: the header row is not valid UTF-8")


def test_csv_keep_column_that_is_not_utf8(tmp_path: Path) -> None:
    source = tmp_path / "latin1.csv"
    source.write_bytes(b"id,x\nok,1\n\xe9t\xe9,2\n")
    with pytest.raises(DataError) as excinfo:
        read_all(source, keep=["id"])
    text = message(excinfo)
    assert text.startswith(f"{source}: row 2 (counting from 1), column 'id': ") and "UTF-8" in text


# --------------------------------------------------------------------------- writing


@pytest.mark.usefixtures("named_temporaries")  # it looks at the temporary's name (issue 36: none on Linux)
def test_writer_removes_temp_file_on_exception(tmp_path: Path) -> None:
    before = listing(tmp_path)
    layout = VectorLayout("list", ("v",), 2)
    with pytest.raises(ZeroDivisionError), AtomicVectorWriter(tmp_path / "out.parquet", layout) as writer:
        writer.write(np.ones((3, 2)))
        assert len(listing(tmp_path)) == len(before) + 1  # the hidden temporary file
        assert any(name.startswith(".out.parquet.") and name.endswith(".tmp") for name in listing(tmp_path))
        1 / 0
    assert listing(tmp_path) == before


@pytest.mark.parametrize("suffix", ["parquet", "csv", "npy", "arrows"])
def test_an_output_has_no_name_while_it_is_written_and_is_published_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """Issue 36: on Linux an output's temporary has no name while it is written (a kill -9 leaves
    nothing), yet each format's writer publishes the same bytes with the same permissions as through
    a named temporary: 0666 less the umask for a new file, the replaced file's mode for an overwrite."""
    layout = VectorLayout("columns", ("a", "b", "c"), 3)
    rows = np.random.default_rng(7).standard_normal((600, 3))
    seen: dict[str, tuple[list[str], bytes, int, bytes, int]] = {}
    mask = os.umask(0o027)
    try:
        for way in ("anonymous", "named"):
            if way == "named":
                monkeypatch.setenv(NAMED_TEMPORARIES_ENV, "1")
            folder = tmp_path / way
            folder.mkdir()
            target = folder / f"out.{suffix}"
            with AtomicVectorWriter(target, layout) as writer:
                writer.write(rows[:300])
                writer.write(rows[300:])
                during = listing(folder)
                writer.commit()
            first, first_mode = target.read_bytes(), stat.S_IMODE(os.stat(target).st_mode)
            os.chmod(target, 0o604)  # replaced next: the new file takes this mode
            with AtomicVectorWriter(target, layout, overwrite=True) as writer:
                writer.write(rows[::-1].copy())
                writer.commit()
            seen[way] = (during, first, first_mode, target.read_bytes(), stat.S_IMODE(os.stat(target).st_mode))
            assert listing(folder) == [target.name]
    finally:
        os.umask(mask)
    assert seen["anonymous"][0] == []  # nothing beside the target while it is written
    assert len(seen["named"][0]) == 1 and seen["named"][0][0].startswith(f".out.{suffix}.ldp-")
    assert seen["anonymous"][1:] == seen["named"][1:]
    assert (seen["anonymous"][2], seen["anonymous"][4]) == (0o640, 0o604)


def test_writer_removes_temp_file_on_keyboard_interrupt_and_without_commit(tmp_path: Path) -> None:
    layout = VectorLayout("columns", ("a",), 1)
    with pytest.raises(KeyboardInterrupt), AtomicVectorWriter(tmp_path / "out.csv", layout) as writer:
        writer.write(np.ones((3, 1)))
        raise KeyboardInterrupt
    with AtomicVectorWriter(tmp_path / "out.csv", layout) as writer:
        writer.write(np.ones((3, 1)))
    assert listing(tmp_path) == []


def test_writer_refuses_existing_file_and_overwrites_on_request(tmp_path: Path) -> None:
    target = tmp_path / "out.parquet"
    target.write_bytes(b"old")
    layout = VectorLayout("columns", ("a", "b"), 2)
    with pytest.raises(UsageError) as excinfo:
        AtomicVectorWriter(target, layout)
    assert message(excinfo) == f"{target}: already exists; pass overwrite=True to replace it."
    assert target.read_bytes() == b"old"

    with pytest.raises(RuntimeError), AtomicVectorWriter(target, layout, overwrite=True) as writer:
        writer.write(np.zeros((2, 2)))
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old" and listing(tmp_path) == ["out.parquet"]

    with AtomicVectorWriter(target, layout, overwrite=True) as writer:
        writer.write(np.full((2, 2), 0.5))
        writer.commit()
    assert np.array_equal(read_all(target)[0], np.full((2, 2), 0.5))
    assert listing(tmp_path) == ["out.parquet"]


def test_writer_path_and_format_errors(tmp_path: Path) -> None:
    columns = VectorLayout("columns", ("a",), 1)
    with pytest.raises(UsageError) as excinfo:
        AtomicVectorWriter(tmp_path / "missing" / "out.parquet", columns)
    assert "missing" in message(excinfo) and "directory" in message(excinfo)
    with pytest.raises(UsageError) as excinfo:
        AtomicVectorWriter(tmp_path / "out.csv", VectorLayout("list", ("v",), 3))
    assert "CSV holds one column per coordinate; write Parquet or use columns" in message(excinfo)
    with pytest.raises(UsageError):
        AtomicVectorWriter(tmp_path / "out.txt", columns)
    with pytest.raises(UsageError):
        AtomicVectorWriter(tmp_path / "out.bin", columns, format="feather")
    (tmp_path / "sub.parquet").mkdir()
    with pytest.raises(UsageError):
        AtomicVectorWriter(tmp_path / "sub.parquet", columns, overwrite=True)
    with AtomicVectorWriter(tmp_path / "out.bin", columns, format="csv") as writer:
        writer.write(np.array([[1.5]]))
        writer.commit()
    assert (tmp_path / "out.bin").read_text().splitlines() == ['"a"', "1.5"]


def test_writer_checks_batches(tmp_path: Path) -> None:
    layout = VectorLayout("columns", ("a", "b"), 2, ("id",))
    with AtomicVectorWriter(tmp_path / "out.parquet", layout) as writer:
        keep = pa.table({"id": [1, 2]})
        for values, bad_keep in [
            (np.ones((2, 3)), keep),
            (np.ones((2, 2), dtype=np.float32), keep),
            (np.ones(2), keep),
            (np.ones((2, 2)), None),
            (np.ones((2, 2)), pa.table({"id": [1]})),
            (np.ones((2, 2)), pa.table({"other": [1, 2]})),
        ]:
            with pytest.raises(ValueError):
                writer.write(values, bad_keep)
        writer.write(np.ones((2, 2)), keep)
        writer.write(np.zeros((1, 2)), pa.table({"id": pa.array([3], type=pa.int8()), "extra": ["x"]}))
        writer.commit()
        with pytest.raises(RuntimeError):
            writer.write(np.ones((1, 2)), keep)
    written = pq.read_table(tmp_path / "out.parquet")
    assert written.column_names == ["id", "a", "b"] and written.column("id").to_pylist() == [1, 2, 3]
    assert writer.rows_written == 3


def test_writer_without_batches_writes_an_empty_file(tmp_path: Path) -> None:
    layout = VectorLayout("list", ("v",), 3, ("id",))
    with AtomicVectorWriter(tmp_path / "empty.parquet", layout) as writer:
        writer.commit()
    table = pq.read_table(tmp_path / "empty.parquet")
    assert table.num_rows == 0 and table.column_names == ["id", "v"]


def test_written_file_gets_default_permissions(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    os.umask(mask)
    target = tmp_path / "out.parquet"
    with AtomicVectorWriter(target, VectorLayout("columns", ("a",), 1)) as writer:
        writer.write(np.ones((1, 1)))
        writer.commit()
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask


def test_atomic_write_text_and_bytes(tmp_path: Path) -> None:
    target = tmp_path / "side.json"
    atomic_write_text(target, '{"a": 1}\n')
    assert target.read_text() == '{"a": 1}\n'
    with pytest.raises(UsageError) as excinfo:
        atomic_write_text(target, "{}")
    assert "overwrite=True" in message(excinfo)
    atomic_write_text(target, "{}", overwrite=True)
    assert target.read_text() == "{}"
    atomic_write_bytes(tmp_path / "m.npy", b"\x00\x01")
    assert (tmp_path / "m.npy").read_bytes() == b"\x00\x01"
    with pytest.raises(TypeError):
        atomic_write_bytes(tmp_path / "bad.bin", "not bytes")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        atomic_write_text(tmp_path / "no" / "side.json", "{}")
    assert listing(tmp_path) == ["m.npy", "side.json"]

