"""Column safety of ldpcli.io (issue 13, reader side): identifiers and labels never become coordinates
silently, --columns globs and ranges, free text refused in kept columns, CSV kept columns keep their
types, row/coordinate numbering in messages, and ``skip_invalid``."""

from __future__ import annotations

import datetime
import re
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from ldpcli.errors import DataError, UsageError
from ldpcli.io import AtomicVectorWriter, VectorLayout, open_vectors

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def message(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """The exception's message, checked to be a single line."""
    text = str(excinfo.value)
    assert "\n" not in text and text.strip() == text, text
    return text


def write_parquet(path: Path, columns: dict[str, Any], **options: Any) -> Path:
    pq.write_table(pa.table(columns), path, **options)
    return path


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def layout_of(path: Path, **options: Any) -> VectorLayout:
    with open_vectors(path, **options) as reader:
        return reader.layout


def option(text: str, name: str, nth: int = 0) -> list[str]:
    """The comma-separated value of the nth ``name VALUE`` suggested in a message (after "pass" or "or"), as a list."""
    values = re.findall(rf"(?:pass|or) {name} ('[^']*'|[^\s)]+)", text)
    return shlex.split(values[nth])[0].split(",")


# --------------------------------------------------------------------------- 1. identifiers and labels


def test_digits_csv_refuses_id_and_label_and_its_suggestions_work() -> None:
    source = EXAMPLES / "digits_unit.csv"
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source)
    assert message(excinfo) == (
        f"{source}: columns 'id', 'label' look like an identifier and a label, not coordinates; "
        "pass keep id,label to carry them through (or columns p00:p63 to choose the vector columns, "
        "or columns id:p63 to really privatize them)."
    )
    text = message(excinfo)
    with open_vectors(source, keep=option(text, "keep")) as reader:
        assert reader.layout.d == 64 and reader.layout.keep == ("id", "label")
        assert reader.layout.columns == tuple(f"p{i:02d}" for i in range(64))
    assert layout_of(source, columns=option(text, "columns", 0)).d == 64
    assert layout_of(source, columns=option(text, "columns", 1)).columns[:3] == ("id", "label", "p00")
    # a list column, or a layout, is not concerned
    assert layout_of(EXAMPLES / "digits_unit.parquet").columns == ("embedding",)
    layout = VectorLayout("columns", ("id", "p00"), 2)
    assert layout_of(source, layout=layout) == layout


def test_keeping_only_the_id_still_refuses_the_label() -> None:
    source = EXAMPLES / "digits_unit.csv"
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source, keep=["id"])
    text = message(excinfo)
    assert "column 'label' looks like a label, not a coordinate" in text and "'id'" not in text
    assert option(text, "keep") == ["id", "label"]
    assert option(text, "columns", 1) == ["label:p63"]


def test_parquet_numeric_columns_with_a_user_id(tmp_path: Path) -> None:
    x = np.random.default_rng(0).standard_normal((5, 4))
    source = write_parquet(
        tmp_path / "users.parquet", {"user_id": np.arange(5), **{f"f{j}": x[:, j] for j in range(4)}}
    )
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source)
    text = message(excinfo)
    assert text.startswith(f"{source}: column 'user_id' looks like an identifier, not a coordinate;")
    assert "keep user_id" in text and "columns f0:f3" in text
    assert layout_of(source, keep=["user_id"]).columns == ("f0", "f1", "f2", "f3")
    assert layout_of(source, columns=["user_id", "f0"]).d == 2  # named columns: the user chose


@pytest.mark.parametrize(
    "name", ["id", "ID", "Id", "user_id", "USER_ID", "user-id", "userId", "rowID", "idx", "index", "Index",
             "label", "Labels", "target", "class", "CLASS", "y"],
)
def test_identifier_and_label_names(tmp_path: Path, name: str) -> None:
    source = write_parquet(tmp_path / "x.parquet", {"a": [0.1, 0.2], name: [0.5, 0.25], "b": [0.3, 0.4]})
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source)
    assert f"column {name!r} looks like" in message(excinfo)


@pytest.mark.parametrize(
    "names", [["x", "y", "label"], ["paid", "grid", "valid", "id"], ["width", "idea", "video", "target"],
              ["ident", "z", "Class"]],
)
def test_names_that_are_coordinates(tmp_path: Path, names: list[str]) -> None:
    """Only the last name of each case is flagged (y is a coordinate next to an x)."""
    source = write_parquet(tmp_path / "x.parquet", {name: [0.1, 0.2] for name in names})
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source)
    assert f"column {names[-1]!r} looks like" in message(excinfo)
    assert layout_of(source, keep=names[-1:]).columns == tuple(names[:-1])


def test_an_integer_column_before_floating_point_ones(tmp_path: Path) -> None:
    source = write_text(tmp_path / "n.csv", "n,a,b,c\n1,0.5,0.25,0.125\n2,0.5,0.25,0.125\n")
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source)
    text = message(excinfo)
    assert "column 'n' looks like an integer id or label" in text
    assert "keep n " in text and "columns a:c " in text and "columns n:c " in text
    # integers after the first floating-point column, or a majority of integers: coordinates
    assert layout_of(write_text(tmp_path / "m.csv", "a,n,b\n0.5,1,0.5\n")).columns == ("a", "n", "b")
    assert layout_of(write_text(tmp_path / "k.csv", "n,m,a\n1,2,0.5\n")).columns == ("n", "m", "a")
    assert layout_of(write_text(tmp_path / "i.csv", "n,m\n1,2\n")).columns == ("n", "m")


def test_integer_text_in_some_pixel_columns_is_not_an_identifier(tmp_path: Path) -> None:
    """CSV type inference reads a column of 0 cells as int64: only id and label are flagged."""
    lines = ["id,label,p00,p01,p02,p03"] + [f"{i},{i % 3},0,0,0.{i + 1},0.5" for i in range(6)]
    source = write_text(tmp_path / "pixels.csv", "\n".join(lines) + "\n")
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source)
    text = message(excinfo)
    assert "columns 'id', 'label' look like" in text and "'p00'" not in text
    assert layout_of(source, keep=["id", "label"]).columns == ("p00", "p01", "p02", "p03")


# --------------------------------------------------------------------------- 2. --columns globs and ranges


@pytest.fixture(params=["parquet", "csv"])
def wide(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    table = pa.table({"id": [1, 2], "a:b": [9.0, 8.0], **{f"p{j:02d}": [float(j), -float(j)] for j in range(12)}})
    path = tmp_path / f"wide.{request.param}"
    if request.param == "parquet":
        pq.write_table(table, path)
    else:
        pacsv.write_csv(table, path)
    return path


def test_columns_ranges_and_globs(wide: Path) -> None:
    assert layout_of(wide, columns=["p02:p05"]).columns == ("p02", "p03", "p04", "p05")
    assert layout_of(wide, columns=["p1?"]).columns == ("p10", "p11")
    assert layout_of(wide, columns=["p1*", "p0[13]", "p00"]).columns == ("p10", "p11", "p01", "p03", "p00")
    assert layout_of(wide, columns=["a:b"]).columns == ("a:b",)  # an exact name wins over a range
    assert layout_of(wide, columns=["p00:p00"]).columns == ("p00",)
    with open_vectors(wide, columns=["p00:p11"], keep=["id"]) as reader:
        values = np.concatenate([batch.values for batch in reader])
    assert np.array_equal(values, [np.arange(12.0), -np.arange(12.0)])


@pytest.mark.parametrize(
    ("columns", "fragments"),
    [
        (["p05:p02"], ["range 'p05:p02' is backwards", "write p02:p05"]),
        (["p00:q9"], ["range 'p00:q9'", "no column named 'q9'"]),
        (["q*"], ["pattern 'q*' matches no column"]),
        (["p0*", "p01"], ["column 'p01' twice", "'p0*'", "'p01'"]),
        (["p00:p03", "p02:p04"], ["column 'p02' twice"]),
    ],
)
def test_columns_pattern_errors(wide: Path, columns: list[str], fragments: list[str]) -> None:
    with pytest.raises(UsageError) as excinfo:
        open_vectors(wide, columns=columns)
    text = message(excinfo)
    assert text.startswith(f"{wide}: ")
    for fragment in fragments:
        assert fragment in text


# --------------------------------------------------------------------------- 3. free text in kept columns


@pytest.mark.parametrize(
    "name", ["email", "E-Mail", "mail", "user_name", "FirstName", "last_name", "full-name", "home_address",
             "phone", "Comments", "description", "notes", "message", "body", "content", "review", "summary",
             "url", "ip", "client_ip", "text"],
)
def test_free_text_names_are_refused_when_opening(tmp_path: Path, name: str) -> None:
    source = write_parquet(tmp_path / "t.parquet", {name: ["a", "b"], "v": [[0.1], [0.2]]})
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source, keep=[name])
    text = message(excinfo)
    assert text.startswith(f"{source}: keep column {name!r} holds text")
    assert "pass keep_unsafe=True to release it anyway, unprivatized" in text
    assert layout_of(source, keep=[name], keep_unsafe=True).keep == (name,)


def test_only_text_columns_with_a_free_text_name_are_refused(tmp_path: Path) -> None:
    others = ["city", "split", "group", "ipsum", "renamed", "texture", "notes"]  # notes: integers
    columns = {name: ["train", "New York"] for name in others[:-1]}
    source = write_parquet(tmp_path / "t.parquet", {**columns, "notes": [3, 4], "summary": ["a", "b"], "v": [[0.1], [0.2]]})
    with pytest.raises(UsageError) as excinfo:
        open_vectors(source, keep=[*others, "summary"])
    assert "keep column 'summary' holds text" in message(excinfo)
    assert layout_of(source, keep=others).keep == tuple(others)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("jane.doe@example.org", "looks like an e-mail address"),
        ("call me maybe tomorrow", "has 4 or more words"),
        ("x" * 65, "is longer than 64 characters"),
    ],
)
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_free_text_values_are_refused_per_batch(tmp_path: Path, fmt: str, value: str, reason: str) -> None:
    values = ["train", "New York", "cat", "", "Saint-Jean-de-Luz", "a b c"] * 2 + [value, "dog"]
    table = pa.table({"tag": values, "x": np.linspace(0.0, 1.0, len(values)), "y": np.ones(len(values))})
    source = tmp_path / f"t.{fmt}"
    pq.write_table(table, source) if fmt == "parquet" else pacsv.write_csv(table, source)
    with open_vectors(source, keep=["tag"], batch_rows=5) as reader:
        seen = []
        with pytest.raises(UsageError) as excinfo:
            for batch in reader:
                seen.append(batch.first_row)
    assert seen == [0, 5]  # refused in the batch that holds the value, not before
    text = message(excinfo)
    assert text == (
        f"{source}: row 13 (counting from 1), column 'tag': the kept value {reason}, so the column looks like "
        "free text, which keep would copy unprivatized; leave it out of keep, or pass keep_unsafe=True to "
        "release it anyway, unprivatized."
    )
    assert value not in text
    with open_vectors(source, keep=["tag"], batch_rows=5, keep_unsafe=True) as reader:
        kept = pa.concat_tables([batch.keep for batch in reader if batch.keep is not None])
    assert kept.column("tag").to_pylist() == values


def test_dictionary_encoded_text_is_checked(tmp_path: Path) -> None:
    tags = pa.array(["cat", "dog", "a@b.io"]).dictionary_encode()
    source = write_parquet(tmp_path / "d.parquet", {"tag": tags, "v": [[0.1], [0.2], [0.3]]})
    with pytest.raises(UsageError) as excinfo, open_vectors(source, keep=["tag"]) as reader:
        list(reader)
    assert "row 3 (counting from 1), column 'tag'" in message(excinfo)
    # a layout re-reads a privatized file, whose kept columns are already released: not checked
    with open_vectors(source, layout=VectorLayout("list", ("v",), 1, ("tag",))) as reader:
        assert [batch.keep.num_rows for batch in reader if batch.keep is not None] == [3]


# --------------------------------------------------------------------------- 4. CSV keep types


def test_csv_keep_columns_keep_their_inferred_types(tmp_path: Path) -> None:
    source = write_text(
        tmp_path / "k.csv",
        "id,zip,score,ok,day,at,empty,tag,x\n"
        "1,007,0.5,true,2024-01-02,2024-01-02 10:00:00,,cat,0.1\n"
        "2,123,1,false,2024-01-03,2024-01-03 11:30:00,,dog,0.2\n"
        ",040,NA,,,,,,0.3\n",
    )
    keep = ["id", "zip", "score", "ok", "day", "at", "empty", "tag"]
    with open_vectors(source, keep=keep) as reader:
        assert reader.keep_schema == pa.schema([
            ("id", pa.int64()), ("zip", pa.string()), ("score", pa.float64()), ("ok", pa.bool_()),
            ("day", pa.date32()), ("at", pa.timestamp("s")), ("empty", pa.string()), ("tag", pa.string()),
        ])
        (batch,) = list(reader)
    assert batch.keep is not None and batch.keep.schema == reader.keep_schema
    assert batch.keep.column("id").to_pylist() == [1, 2, None]  # a missing cell is null
    assert batch.keep.column("zip").to_pylist() == ["007", "123", "040"]  # leading zeros kept
    assert batch.keep.column("day").to_pylist()[0] == datetime.date(2024, 1, 2)
    assert batch.keep.column("tag").to_pylist() == ["cat", "dog", ""]  # text stays as written

    target = tmp_path / "k.parquet"
    with open_vectors(source, keep=["id", "score"]) as reader, AtomicVectorWriter(
        target, reader.layout, keep_schema=reader.keep_schema
    ) as writer:
        for batch in reader:
            writer.write(batch.values, batch.keep)
        writer.commit()
    assert pq.read_schema(target).field("id").type == pa.int64()


def test_csv_keep_value_of_another_type_later_in_the_file(tmp_path: Path) -> None:
    n = 200_000  # several blocks: the type comes from the first one
    lines = ["id,x"] + [f"{i},0.5" for i in range(n)]
    lines[150_001] = "secret-9,0.5"
    source = write_text(tmp_path / "late.csv", "\n".join(lines) + "\n")
    with open_vectors(source, keep=["id"], batch_rows=50_000) as reader:
        assert reader.keep_schema == pa.schema([("id", pa.int64())])
        with pytest.raises(DataError) as excinfo:
            list(reader)
    text = message(excinfo)
    assert text.startswith(f"{source}: row 150001 (counting from 1), column 'id': the value is not a valid int64")
    assert "Parquet" in text and "secret" not in text


# --------------------------------------------------------------------------- 5. numbering in messages


def test_messages_say_how_rows_and_coordinates_are_counted(tmp_path: Path) -> None:
    vectors = [[0.0] * 8, [0.0] * 8, [0.0] * 5 + [float("nan")] + [0.0] * 2]
    source = write_parquet(tmp_path / "v.parquet", {"vec": vectors})
    with pytest.raises(DataError) as excinfo, open_vectors(source) as reader:
        list(reader)
    assert "row 3 (counting from 1), column 'vec' (coordinate 5, counting from 0): value is NaN" in message(excinfo)
    source = write_text(tmp_path / "v.csv", "a,b\n1,2\n3,\n")
    with pytest.raises(DataError) as excinfo, open_vectors(source) as reader:
        list(reader)
    assert "row 2 (counting from 1), column 'b': value is missing" in message(excinfo)
    source = write_text(tmp_path / "w.csv", "a,b\n1,2\n3,4,5\n")
    with pytest.raises(DataError) as excinfo, open_vectors(source) as reader:
        list(reader)
    assert "row 2 (counting from 1) has 3 fields" in message(excinfo)


# --------------------------------------------------------------------------- 6. skip_invalid


def read_skipping(path: Path, **options: Any) -> tuple[list[Any], Any]:
    with open_vectors(path, skip_invalid=True, **options) as reader:
        batches = list(reader)
    return batches, reader


def check_batches(batches: list[Any], rows: int, invalid: list[int], expected: np.ndarray) -> None:
    """Every row is in some batch in order; the invalid (0-based) rows are marked and zero."""
    assert [b.first_row for b in batches] == list(np.cumsum([0] + [len(b.values) for b in batches[:-1]]))
    values = np.concatenate([b.values for b in batches])
    valid = np.concatenate([np.ones(len(b.values), bool) if b.valid is None else b.valid for b in batches])
    assert values.shape[0] == rows
    assert np.flatnonzero(~valid).tolist() == invalid
    assert not values[invalid].any()
    assert np.array_equal(values[valid], expected[valid])
    for batch in batches:
        assert batch.valid is None or (batch.valid.dtype == bool and not batch.valid.all())
        if batch.keep is not None:
            assert batch.keep.num_rows == len(batch.values)


@pytest.mark.parametrize("writable", [True, False])
def test_skip_invalid_parquet_list(tmp_path: Path, writable: bool) -> None:
    good = [[float(i), float(i) + 0.5, 1.0] for i in range(12)]
    vectors: list[Any] = list(good)
    vectors[2] = [1.0, float("nan"), 0.0]
    vectors[5] = None
    vectors[6] = [1.0, 2.0]  # ragged
    vectors[9] = [1.0, None, 3.0]
    vectors[10] = [float("inf"), 0.0, 0.0]
    source = write_parquet(tmp_path / "s.parquet", {"id": list(range(12)), "v": vectors}, row_group_size=5)
    batches, reader = read_skipping(source, keep=["id"], batch_rows=4, granule=lambda d: 2, writable=writable)
    assert [(b.first_row, len(b.values)) for b in batches] == [(0, 4), (4, 4), (8, 4)]
    check_batches(batches, 12, [2, 5, 6, 9, 10], np.array(good))
    assert reader.skipped == 5 and reader.skipped_rows == [3, 6, 7, 10, 11]
    keep = pa.concat_tables([b.keep for b in batches if b.keep is not None])
    assert keep.column("id").to_pylist() == list(range(12))
    assert np.array_equal(pq.read_table(source).column("v").to_pylist()[2][:1], [1.0])  # the file untouched


def test_skip_invalid_uses_no_mask_when_every_row_is_valid(tmp_path: Path) -> None:
    x = np.arange(12.0).reshape(4, 3)
    source = write_parquet(tmp_path / "ok.parquet", {"v": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 3)})
    batches, reader = read_skipping(source, writable=False)
    assert [b.valid for b in batches] == [None] and reader.skipped == 0 and reader.skipped_rows == []
    assert np.array_equal(batches[0].values, x)


def test_skip_invalid_copies_only_the_read_only_batches_with_invalid_rows(tmp_path: Path) -> None:
    x = np.arange(24.0).reshape(8, 3)
    x[5, 1] = np.nan
    flat = pa.array(x.ravel())
    source = write_parquet(tmp_path / "ro.parquet", {"v": pa.FixedSizeListArray.from_arrays(flat, 3)})
    batches, _ = read_skipping(source, batch_rows=4, writable=False)
    assert batches[0].valid is None
    assert batches[1].valid is not None and batches[1].values.flags.writeable
    assert batches[1].values[1].tolist() == [0.0, 0.0, 0.0]


def test_skip_invalid_variable_length_list_takes_d_from_the_first_vector(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "first.parquet", {"v": [None, [], [1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0]]})
    batches, reader = read_skipping(source)
    assert reader.layout.d == 2
    check_batches(batches, 5, [0, 1, 3], np.array([[0, 0], [0, 0], [1.0, 2.0], [0, 0], [6.0, 7.0]]))


def test_skip_invalid_parquet_columns(tmp_path: Path) -> None:
    a = [0.1, None, 0.3, 0.4, float("nan")]
    b = [1.0, 2.0, float("-inf"), 4.0, 5.0]
    source = write_parquet(tmp_path / "c.parquet", {"a": a, "b": b})
    batches, reader = read_skipping(source, batch_rows=2)
    check_batches(batches, 5, [1, 2, 4], np.array([[0.1, 1.0], [0, 0], [0, 0], [0.4, 4.0], [0, 0]]))
    assert reader.skipped_rows == [2, 3, 5]


def test_skip_invalid_csv(tmp_path: Path) -> None:
    source = write_text(
        tmp_path / "s.csv",
        "id,a,b\n"
        "u0,0.5,1\n"
        "u1,nan,1\n"
        "u2,,1\n"
        "u3, 0.25 ,NA\n"
        "u4,abc,1\n"
        "u5,1e400,2\n"
        "u6,-0.5,0x1\n"
        "u7,2,3\n",
    )
    batches, reader = read_skipping(source, columns=["a", "b"], keep=["id"], batch_rows=4, granule=lambda d: 2)
    assert [(b.first_row, len(b.values)) for b in batches] == [(0, 4), (4, 4)]
    expected = np.array([[0.5, 1.0], [0, 0], [0, 0], [0, 0], [0, 0], [0, 0], [0, 0], [2.0, 3.0]])
    check_batches(batches, 8, [1, 2, 3, 4, 5, 6], expected)
    assert reader.skipped == 6 and reader.skipped_rows == [2, 3, 4, 5, 6, 7]
    keep = pa.concat_tables([b.keep for b in batches if b.keep is not None])
    assert keep.column("id").to_pylist() == [f"u{i}" for i in range(8)]
    # without skip_invalid, the same file is an error (text fails the whole block, so it comes first)
    with pytest.raises(DataError) as excinfo, open_vectors(source, columns=["a", "b"], keep=["id"]) as plain:
        list(plain)
    assert "row 5 (counting from 1), column 'a': the value is not a number" in message(excinfo)
    assert "abc" not in message(excinfo)  # a cell's value is never shown


def test_skip_invalid_csv_spaces_and_numbers_parse_as_without_it(tmp_path: Path) -> None:
    source = write_text(tmp_path / "n.csv", "a,b\n 0.1 ,+2\n.5,1e-3\n-Infinity,1\n3.,-4\n")
    batches, reader = read_skipping(source)
    values = np.concatenate([b.values for b in batches])
    assert values.tolist() == [[0.1, 2.0], [0.5, 1e-3], [0.0, 0.0], [3.0, -4.0]]
    assert reader.skipped_rows == [3]


def test_skip_invalid_keeps_the_first_20_row_numbers(tmp_path: Path) -> None:
    a = np.ones(100)
    a[::3] = np.nan
    source = write_parquet(tmp_path / "many.parquet", {"a": a, "b": np.ones(100)})
    _, reader = read_skipping(source, batch_rows=7)
    assert reader.skipped == 34 and reader.skipped_rows == [3 * i + 1 for i in range(20)]


def test_skip_invalid_still_refuses_a_damaged_csv_line(tmp_path: Path) -> None:
    source = write_text(tmp_path / "r.csv", "a,b\n1,2\n3\n")
    with pytest.raises(DataError) as excinfo:
        read_skipping(source)
    assert "1 field but" in message(excinfo)


# --------------------------------------------------------------------------- in-memory tables


def test_open_table_follows_the_file_rules() -> None:
    from ldpcli.io import open_table

    table = pq.read_table(EXAMPLES / "digits_unit.parquet")
    values, layout, precision = open_table(table, label="x", keep=["id", "label"])
    assert values.shape == (table.num_rows, 64) and values.flags.writeable
    assert layout == VectorLayout("list", ("embedding",), 64, ("id", "label"))
    assert np.array_equal(values[3], table.column("embedding")[3].as_py()) and precision == 2.0**-53
    columns = pa.table({"user_id": [1, 2], "a": [0.5, 0.25], "b": [1.0, 2.0], "email": ["a@b.io", "c"]})
    with pytest.raises(UsageError) as excinfo:
        open_table(columns, label="x")
    assert message(excinfo).startswith("x: column 'user_id' looks like an identifier")
    with pytest.raises(UsageError) as excinfo:
        open_table(columns, label="x", columns=["a:b"], keep=["email"])
    assert "keep column 'email' holds text" in message(excinfo)
    values, layout, _ = open_table(columns, label="x", columns=["a:b"], keep=["user_id"])
    assert layout.columns == ("a", "b") and values.tolist() == [[0.5, 1.0], [0.25, 2.0]]
    with pytest.raises(DataError) as excinfo:
        open_table(pa.table({"v": [[0.5], [float("nan")]]}), label="x")
    assert message(excinfo).startswith("x: row 2 (counting from 1), column 'v' (coordinate 0, counting from 0)")
