"""Streaming input and atomic output of vector datasets stored as Parquet or CSV.

A dataset holds one vector per row, either as a single list column (``list<number>`` or a
fixed-size list) or as one numeric column per coordinate, plus optional pass-through ("keep")
columns such as an id.

Reading (:func:`open_vectors`) never loads a whole file: Parquet is read with
``ParquetFile.iter_batches`` and CSV with pyarrow's streaming CSV reader, and every batch is
checked (missing values, NaN/inf, ragged lists, text in a numeric column) with vectorized code
before it is handed out as a :class:`VectorBatch` of float64 values.

Writing (:class:`AtomicVectorWriter`, :func:`atomic_write_text`, :func:`atomic_write_bytes`)
goes to a temporary file in the target directory that is renamed onto the target only on
commit, so an interrupted run never leaves a partial file behind.

Every problem is reported as a one-line :class:`~ldpcli.errors.UsageError` (bad options or
paths) or :class:`~ldpcli.errors.DataError` (unusable file contents) naming the file, and where
it applies the 1-based data row (header excluded) and the column.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ldpcli.errors import DataError, UsageError

FORMATS: tuple[str, ...] = ("parquet", "csv")

_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
_MAX_BATCH_ROWS = 1_000_000
# A mechanism holds about this many float64 copies of a batch at once.
_WORKING_COPIES = 4
# pyarrow's streaming CSV reader reads up to 32 blocks ahead on a background thread, so its memory
# grows with the block size, not with batch_rows: blocks stay at 1 MiB unless lines are long, when a
# block holds at least _CSV_BLOCK_LINES of the longest line seen in the first _CSV_SAMPLE bytes.
_CSV_BLOCK = 1 << 20
_CSV_BLOCK_LINES = 16
_CSV_SAMPLE = 1 << 20
# Cells read as missing in a CSV vector column. "nan"/"inf" are not here: they parse as floats
# and are then reported as non-finite values rather than as missing ones.
_CSV_NULLS = ["", "NA", "N/A", "n/a", "NULL", "null", "#N/A"]
_CSV_CONVERSION = re.compile(r"In CSV column #(\d+): (?:Row #(\d+): )?CSV conversion error to (\w+): (.*)")
_CSV_INVALID_VALUE = re.compile(r"invalid value '(.*)'")
_CSV_FIELD_COUNT = re.compile(r"CSV parse error: (?:Row #(\d+): )?Expected (\d+) columns, got (\d+)")

# Columns pandas adds for a DataFrame index; like unnamed columns, never picked automatically.
_PANDAS_INDEX = re.compile(r"__index_level_\d+__")

# What pyarrow raises for damaged input or failed output (names in a damaged file can also fail to
# decode as UTF-8).
_ArrowFailure = (pa.ArrowException, OSError, UnicodeDecodeError)


def file_format(path: str | os.PathLike[str]) -> str:
    """Return ``"parquet"`` for ``.parquet``/``.pq`` and ``"csv"`` for ``.csv`` (any case).

    Raises :class:`UsageError` for any other extension.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in _EXTENSIONS:
        shown = repr(suffix) if suffix else "no extension"
        raise UsageError(
            f"{os.fspath(path)}: unsupported file type ({shown}); "
            "use a .parquet, .pq or .csv file."
        )
    return _EXTENSIONS[suffix]


DEFAULT_BATCH_MEMORY = 64 * 2**20
#: Bytes read from a Parquet file at a time (the reader streams column chunks through this buffer).
_PARQUET_READ_BUFFER = 8 * 2**20


def default_batch_rows(d: int, memory_bytes: int = DEFAULT_BATCH_MEMORY) -> int:
    """Rows per batch so that a batch's working copies fit in ``memory_bytes``.

    A batch of ``rows`` vectors of dimension ``d`` takes ``8 * d`` bytes per row as float64,
    and a mechanism holds about four such copies at once. The result is at least 1 and at
    most 1,000,000.
    """
    if d < 1:
        raise ValueError(f"d must be at least 1, got {d}")
    return min(_MAX_BATCH_ROWS, max(1, memory_bytes // (8 * d * _WORKING_COPIES)))


@dataclass(frozen=True)
class VectorLayout:
    """Where the vectors live in a file.

    ``kind="list"``: one list column, ``columns == (name,)``, every list of length ``d``.
    ``kind="columns"``: one numeric column per coordinate, ``len(columns) == d``, in order.
    ``keep``: pass-through columns (an id, a label) copied unchanged to the output.
    """

    kind: Literal["list", "columns"]
    columns: tuple[str, ...]
    d: int
    keep: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Reject inconsistent layouts (a programming error; files go through ``from_dict``)."""
        problem = _layout_problem(self.kind, self.columns, self.d, self.keep)
        if problem is not None:
            raise ValueError(f"invalid VectorLayout: {problem}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict: ``{"kind", "columns", "d", "keep"}``."""
        return {"kind": self.kind, "columns": list(self.columns), "d": self.d, "keep": list(self.keep)}

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, source: str | os.PathLike[str] | None = None
    ) -> VectorLayout:
        """Inverse of :meth:`to_dict`; :class:`DataError` (naming ``source``) if ``data`` is malformed."""
        prefix = f"{os.fspath(source)}: " if source is not None else ""
        if not isinstance(data, Mapping):
            problem: str | None = f"expected an object, got {type(data).__name__}"
        else:
            columns, keep = data.get("columns"), data.get("keep", [])
            if not isinstance(columns, list) or not isinstance(keep, list):
                problem = "'columns' and 'keep' must be lists of column names"
            else:
                problem = _layout_problem(data.get("kind"), tuple(columns), data.get("d"), tuple(keep))
        if problem is not None:
            raise DataError(
                f"{prefix}malformed vector layout ({problem}); "
                "the file may be damaged, so re-run the privatization to recreate it."
            )
        return cls(data["kind"], tuple(data["columns"]), data["d"], tuple(data.get("keep", [])))


def _layout_problem(kind: Any, columns: tuple[Any, ...], d: Any, keep: tuple[Any, ...]) -> str | None:
    """What is wrong with these layout fields, or ``None`` if they are consistent."""
    if kind not in ("list", "columns"):
        return f"kind must be 'list' or 'columns', got {kind!r}"
    for field, names in (("columns", columns), ("keep", keep)):
        if not isinstance(names, tuple) or not all(isinstance(n, str) and n for n in names):
            return f"'{field}' must hold non-empty column names"
        if len(set(names)) != len(names):
            return f"'{field}' names a column twice"
    if not columns:
        return "'columns' must name at least one column"
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        return f"d must be a positive integer, got {d!r}"
    if kind == "list" and len(columns) != 1:
        return f"a list layout has exactly one column, got {len(columns)}"
    if kind == "columns" and len(columns) != d:
        return f"a columns layout has d columns, got {len(columns)} columns for d={d}"
    both = [name for name in keep if name in columns]
    if both:
        return f"column {both[0]!r} is both a vector column and a keep column"
    return None


@dataclass
class VectorBatch:
    """One batch of vectors read from a file.

    ``values``: shape ``(rows, d)``, float64, C-contiguous, finite; a fresh writable array unless
    the reader was opened with ``writable=False`` (then possibly a read-only view).
    ``keep``: the keep columns for exactly these rows, or ``None`` when the layout keeps none.
    ``first_row``: 0-based index in the file of this batch's first row.
    """

    values: np.ndarray
    keep: pa.Table | None
    first_row: int


class VectorReader:
    """Batches of vectors from one file; a context manager, iterated once.

    Made by :func:`open_vectors`. ``num_rows`` is known up front for Parquet and ``None`` for
    CSV; ``batch_rows`` is the most rows any batch holds; ``keep_schema`` is the schema of the
    batches' ``keep`` tables (``None`` without keep columns), e.g. for
    :class:`AtomicVectorWriter`.
    """

    path: Path
    format: str
    layout: VectorLayout
    num_rows: int | None
    batch_rows: int
    keep_schema: pa.Schema | None

    def __init__(
        self,
        *,
        path: Path,
        label: str,
        format: str,
        layout: VectorLayout,
        num_rows: int | None,
        batch_rows: int,
        keep_schema: pa.Schema | None,
        batches: Generator[pa.RecordBatch, None, None],
        release: Callable[[], None],
    ) -> None:
        """Wrap a stream of raw record batches (already translating pyarrow errors)."""
        self.path = path
        self.format = format
        self.layout = layout
        self.num_rows = num_rows
        self.batch_rows = batch_rows
        self.keep_schema = keep_schema
        self._label = label
        self._batches = batches
        self._release = release
        self._started = False
        self._closed = False
        #: Batches are fresh writable arrays; False allows read-only zero-copy views (see open_vectors).
        self.writable = True

    def __enter__(self) -> VectorReader:
        """Return the reader itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the file."""
        self.close()

    def __iter__(self) -> Iterator[VectorBatch]:
        """Yield checked batches of at most ``batch_rows`` rows, in file order; closes at the end."""
        if self._started or self._closed:
            raise RuntimeError(f"{self._label}: a VectorReader can be iterated only once, and not after close")
        self._started = True
        return self._read()

    def close(self) -> None:
        """Release the file; safe to call more than once."""
        if not self._closed:
            self._closed = True
            self._batches.close()
            self._release()

    def _read(self) -> Iterator[VectorBatch]:
        """Cut the raw batches to ``batch_rows`` rows and convert them."""
        first_row = 0
        try:
            for record in self._batches:
                for start in range(0, record.num_rows, self.batch_rows):
                    piece = record.slice(start, self.batch_rows)
                    yield self._convert(piece, first_row)
                    first_row += piece.num_rows
        finally:
            self.close()

    def _convert(self, record: pa.RecordBatch, first_row: int) -> VectorBatch:
        """Check one record batch and turn it into a :class:`VectorBatch`."""
        layout = self.layout
        if layout.kind == "list":
            name = layout.columns[0]
            values = _list_values(record.column(name), name, layout.d, first_row, self._label, self.writable)
        else:
            values = _column_values(record, layout.columns, first_row, self._label)
        keep = pa.Table.from_batches([record.select(list(layout.keep))]) if layout.keep else None
        return VectorBatch(values=values, keep=keep, first_row=first_row)


def open_vectors(
    path: str | os.PathLike[str],
    *,
    column: str | None = None,
    columns: Sequence[str] | None = None,
    keep: Sequence[str] = (),
    layout: VectorLayout | None = None,
    batch_rows: int | None = None,
    memory_bytes: int = DEFAULT_BATCH_MEMORY,
    writable: bool = True,
) -> VectorReader:
    """Open a Parquet or CSV file of vectors for batch-by-batch reading.

    Which columns hold the vectors: ``layout`` (exactly those columns, e.g. when re-reading a
    privatized file), else the list column ``column``, else the numeric ``columns`` in that
    order, else the file's only list column of numbers, else all its numeric columns except
    ``keep`` (unnamed columns and pandas ``__index_level_N__`` columns are never picked
    automatically). ``batch_rows`` defaults to :func:`default_batch_rows` for the file's ``d``
    and ``memory_bytes`` (the budget of one batch's working copies). ``writable=False`` lets
    read-only consumers (estimators) receive zero-copy views of list columns instead of copies.
    """
    label = os.fspath(path)
    fmt = file_format(path)
    column_names = _name_option(columns, "--columns", label)
    keep_names = _name_option(keep, "--keep", label) or ()
    if column is not None and column_names is not None:
        raise UsageError(
            f"{label}: give either --column (one list column) or --columns "
            "(one column per coordinate), not both."
        )
    if column_names == ():
        raise UsageError(f"{label}: --columns needs at least one column name.")
    if layout is not None and (column is not None or column_names is not None or keep_names):
        raise UsageError(
            f"{label}: the vector layout already fixes the columns; "
            "do not combine it with --column, --columns or --keep."
        )
    if batch_rows is not None and batch_rows < 1:
        raise UsageError(f"{label}: the batch size must be at least 1 row, got {batch_rows}.")
    target = Path(path)
    choice = _Choice(column=column, columns=column_names, keep=keep_names, layout=layout)
    if fmt == "parquet":
        reader = _open_parquet(target, label, choice, batch_rows, memory_bytes)
    else:
        reader = _open_csv(target, label, choice, batch_rows, memory_bytes)
    reader.writable = writable
    return reader


def _name_option(names: Sequence[str] | None, option: str, label: str) -> tuple[str, ...] | None:
    """A column-name option as a tuple, refusing a bare string and repeated names."""
    if names is None:
        return None
    if isinstance(names, str):
        raise TypeError(f"{option} must be a sequence of column names, not a string")
    result = tuple(names)
    if "" in result:
        raise UsageError(f"{label}: {option} contains an empty column name; name real columns.")
    repeated = [name for i, name in enumerate(result) if name in result[:i]]
    if repeated:
        raise UsageError(f"{label}: column {repeated[0]!r} is listed twice in {option}; list it once.")
    return result


@dataclass(frozen=True)
class _Choice:
    """The caller's column options, validated for consistency but not yet against a file."""

    column: str | None
    columns: tuple[str, ...] | None
    keep: tuple[str, ...]
    layout: VectorLayout | None


def _is_number(dtype: pa.DataType) -> bool:
    """Integer, floating-point or decimal (booleans are not numbers here)."""
    return pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)


def _is_number_list(dtype: pa.DataType) -> bool:
    """A list, large list or fixed-size list of numbers."""
    is_list = pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype)
    return is_list and _is_number(dtype.value_type)


def _name_list(names: Sequence[str]) -> str:
    """Column names for a message, shortened when there are many."""
    shown = ", ".join(repr(name) for name in names[:10])
    return shown + (f", ... ({len(names) - 10} more)" if len(names) > 10 else "")


def _resolve(
    schema: pa.Schema, label: str, choice: _Choice, *, check_types: bool
) -> tuple[Literal["list", "columns"], tuple[str, ...], tuple[str, ...], int | None]:
    """Pick the vector and keep columns from ``schema``: ``(kind, columns, keep, d)``.

    ``d`` is ``None`` for a variable-length list column (it is measured on the data).
    ``check_types=False`` trusts explicitly named columns to be numeric (CSV: a bad value is
    reported with its row when the file is converted).
    """
    names = schema.names
    if choice.layout is not None:
        return _match_layout(schema, label, choice.layout, check_types)
    for name in choice.keep:
        if name not in names:
            raise UsageError(
                f"{label}: no column named {name!r} to keep; available columns: {_name_list(names)}."
            )
    kind: Literal["list", "columns"]
    if choice.column is not None:
        kind, vector = "list", (choice.column,)
        dtype = _field_type(schema, choice.column, "--column", label)
        if not _is_number_list(dtype):
            raise DataError(
                f"{label}: column {choice.column!r} holds {dtype}, not lists of numbers; "
                "--column takes a list column, use --columns for one numeric column per coordinate."
            )
    elif choice.columns is not None:
        kind, vector = "columns", choice.columns
        for name in vector:
            dtype = _field_type(schema, name, "--columns", label)
            if check_types and not _is_number(dtype):
                raise DataError(
                    f"{label}: column {name!r} holds {dtype}, not numbers; vector columns must be "
                    "numeric, so leave it out of --columns or convert it."
                )
    else:
        candidates = [f for f in schema if f.name not in choice.keep and _automatic(f.name)]
        lists = [f.name for f in candidates if _is_number_list(f.type)]
        numeric = [f.name for f in candidates if _is_number(f.type)]
        if len(lists) > 1:
            raise UsageError(
                f"{label}: several list columns could hold the vectors ({_name_list(lists)}); "
                "choose one with --column."
            )
        if lists:
            kind, vector = "list", (lists[0],)
        elif numeric:
            kind, vector = "columns", tuple(numeric)
        else:
            raise DataError(
                f"{label}: no numeric vector column (columns: {_name_list(names)}); the file needs "
                "a list column of numbers or numeric columns, one per coordinate."
            )
    for name in choice.keep:
        if name in vector:
            raise UsageError(
                f"{label}: column {name!r} cannot be both a vector column and a --keep column; "
                "keep a different column."
            )
    for name in (*vector, *choice.keep):
        if names.count(name) > 1:
            raise DataError(f"{label}: the file has two columns named {name!r}; give every column its own name.")
    d = len(vector) if kind == "columns" else _fixed_size(schema.field(vector[0]).type)
    return kind, vector, choice.keep, d


def _automatic(name: str) -> bool:
    """Whether auto-detection may use this column (not unnamed, not a pandas index)."""
    return bool(name) and _PANDAS_INDEX.fullmatch(name) is None


def _field_type(schema: pa.Schema, name: str, option: str, label: str) -> pa.DataType:
    """The type of column ``name``; :class:`UsageError` listing the columns if there is none."""
    if name not in schema.names:
        raise UsageError(
            f"{label}: no column named {name!r} (from {option}); "
            f"available columns: {_name_list(schema.names)}."
        )
    return schema.field(schema.names.index(name)).type


def _fixed_size(dtype: pa.DataType) -> int | None:
    """The list size of a fixed-size list type, ``None`` for a variable-length list."""
    return dtype.list_size if pa.types.is_fixed_size_list(dtype) else None


def _match_layout(
    schema: pa.Schema, label: str, layout: VectorLayout, check_types: bool
) -> tuple[Literal["list", "columns"], tuple[str, ...], tuple[str, ...], int | None]:
    """Check that a file has the columns a given layout names; :class:`DataError` if not."""
    mismatch = "the file does not match its vector layout; use the file written with it, unchanged."
    for name in (*layout.columns, *layout.keep):
        if name not in schema.names:
            raise DataError(f"{label}: column {name!r} is missing; {mismatch}")
    for name in layout.columns:
        dtype = schema.field(schema.names.index(name)).type
        if layout.kind == "list" and not _is_number_list(dtype):
            raise DataError(f"{label}: column {name!r} holds {dtype}, not lists of numbers; {mismatch}")
        if layout.kind == "columns" and check_types and not _is_number(dtype):
            raise DataError(f"{label}: column {name!r} holds {dtype}, not numbers; {mismatch}")
        size = _fixed_size(dtype) if layout.kind == "list" else None
        if size is not None and size != layout.d:
            raise DataError(
                f"{label}: column {name!r} holds vectors of {size} coordinates, "
                f"not d={layout.d}; {mismatch}"
            )
    return layout.kind, layout.columns, layout.keep, layout.d


def _open_input(path: Path, label: str, sample_bytes: int = 0) -> bytes:
    """Check that ``path`` is a readable file; return its first ``sample_bytes`` bytes."""
    if not path.exists():
        raise UsageError(f"{label}: no such file; check the path.")
    if path.is_dir():
        raise UsageError(f"{label}: is a directory, not a file; give a single .parquet or .csv file.")
    try:
        with path.open("rb") as file:
            return file.read(sample_bytes)
    except OSError as exc:
        raise DataError(f"{label}: cannot read the file ({_reason(exc)}); check its permissions.") from exc


def _reason(exc: BaseException) -> str:
    """The first line of an exception's message, shortened, for use inside a one-line message."""
    lines = str(exc).strip().splitlines()
    return _clip(lines[0].strip() if lines else type(exc).__name__, 200)


def _clip(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _no_rows(label: str) -> DataError:
    """The error for a file without data rows."""
    return DataError(f"{label}: has no rows; the file needs at least one data row.")


def _not_parquet(label: str, exc: BaseException) -> DataError:
    """The error for a file pyarrow cannot read as Parquet."""
    return DataError(
        f"{label}: not a valid Parquet file ({_reason(exc)}); "
        "check that the file is complete and really is Parquet."
    )


def _open_parquet(
    path: Path, label: str, choice: _Choice, batch_rows: int | None, memory_bytes: int
) -> VectorReader:
    """Open a Parquet file: read its schema and row count, resolve the layout."""
    _open_input(path, label)
    try:
        # pre_buffer would read every row group ahead (the whole file in memory); stream instead.
        parquet = pq.ParquetFile(path, pre_buffer=False, buffer_size=_PARQUET_READ_BUFFER)
        schema, num_rows = parquet.schema_arrow, parquet.metadata.num_rows
    except _ArrowFailure as exc:
        raise _not_parquet(label, exc) from exc
    try:
        if num_rows == 0:
            raise _no_rows(label)
        kind, vector, keep, d = _resolve(schema, label, choice, check_types=True)
        if d is None or d == 0:  # variable-length lists (or a fixed size of 0): look at row 1
            d = _first_list_length(parquet, vector[0], label)
        layout = VectorLayout(kind, vector, d, keep)
        rows = batch_rows or default_batch_rows(d, memory_bytes)
        keep_schema = pa.schema([schema.field(schema.names.index(name)) for name in keep]) if keep else None
        batches = _parquet_batches(parquet, [*keep, *vector], rows, label)
    except BaseException:
        parquet.close()
        raise
    return VectorReader(
        path=path,
        label=label,
        format="parquet",
        layout=layout,
        num_rows=num_rows,
        batch_rows=rows,
        keep_schema=keep_schema,
        batches=batches,
        release=parquet.close,
    )


def _first_list_length(parquet: pq.ParquetFile, name: str, label: str) -> int:
    """The length of the first row's list in column ``name`` (which must be a usable vector)."""
    try:
        with contextlib.closing(parquet.iter_batches(batch_size=1, columns=[name])) as batches:
            first = next(batches).column(0).slice(0, 1)
    except _ArrowFailure as exc:
        raise _not_parquet(label, exc) from exc
    if first.null_count:
        raise _missing_vector(label, 1, name)
    length = pc.list_value_length(first)[0].as_py()
    if length == 0:
        raise DataError(
            f"{label}: row 1, column {name!r}: vector is empty; vectors need at least one coordinate."
        )
    return int(length)


def _parquet_batches(
    parquet: pq.ParquetFile, columns: list[str], batch_rows: int, label: str
) -> Generator[pa.RecordBatch, None, None]:
    """Record batches of ``columns``, with read failures turned into :class:`DataError`."""
    with contextlib.closing(parquet.iter_batches(batch_size=batch_rows, columns=columns)) as batches:
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except _ArrowFailure as exc:
                raise _not_parquet(label, exc) from exc
            yield batch


def _open_csv(
    path: Path, label: str, choice: _Choice, batch_rows: int | None, memory_bytes: int
) -> VectorReader:
    """Open a CSV file: infer column types from its first block, resolve the layout, and
    re-open it converting vector columns to float64 and keep columns to strings.

    Batches are pyarrow's blocks cut to at most ``batch_rows`` rows, so they may be smaller.
    """
    block = max(_CSV_BLOCK, _CSV_BLOCK_LINES * _longest_line(_open_input(path, label, _CSV_SAMPLE)))
    schema = _CsvStream(path, label, block, pacsv.ConvertOptions(null_values=_CSV_NULLS)).peek()
    kind, vector, keep, _ = _resolve(schema, label, choice, check_types=False)
    layout = VectorLayout(kind, vector, len(vector), keep)
    rows = batch_rows or default_batch_rows(layout.d, memory_bytes)
    convert = pacsv.ConvertOptions(
        column_types={**{name: pa.float64() for name in vector}, **{name: pa.string() for name in keep}},
        include_columns=[*keep, *vector],
        null_values=_CSV_NULLS,
        strings_can_be_null=False,
    )
    stream = _CsvStream(path, label, block, convert, header=schema.names)
    reader = stream.open()
    return VectorReader(
        path=path,
        label=label,
        format="csv",
        layout=layout,
        num_rows=None,
        batch_rows=rows,
        keep_schema=pa.schema([pa.field(name, pa.string()) for name in keep]) if keep else None,
        batches=stream.batches(reader),
        release=reader.close,
    )


def _longest_line(sample: bytes) -> int:
    """The longest line, in bytes with its newline, of a sample from the start of a text file."""
    ends = np.flatnonzero(np.frombuffer(sample, dtype=np.uint8) == ord("\n"))
    if ends.size == 0:
        return len(sample) + 1
    return int(np.diff(ends, prepend=-1).max())


class _CsvStream:
    """One way of reading a CSV file with pyarrow's streaming reader, and its error messages."""

    def __init__(
        self,
        path: Path,
        label: str,
        block_size: int,
        convert: pacsv.ConvertOptions,
        header: Sequence[str] = (),
    ) -> None:
        """``header``: the file's column names, to name a column from pyarrow's column index."""
        self._path = path
        self._label = label
        self._block_size = block_size
        self._convert = convert
        self._header = header

    def open(self) -> pacsv.CSVStreamingReader:
        """Open the reader (pyarrow reads and converts the first block here)."""
        try:
            return self._reader(use_threads=True)
        except _ArrowFailure as exc:
            raise self._failure(exc) from exc

    def peek(self) -> pa.Schema:
        """The schema pyarrow infers from the header and first block.

        :class:`DataError` if the file has no rows or its header is not UTF-8.
        """
        reader = self.open()
        with contextlib.closing(reader), contextlib.closing(self.batches(reader)) as batches:
            schema = reader.schema
            try:
                schema.names  # noqa: B018 - pyarrow decodes the header's names here
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"{self._label}: the header row is not valid UTF-8 text ({_reason(exc)}); "
                    "save the file as UTF-8."
                ) from exc
            if any(batch.num_rows for batch in batches):
                return schema
        raise _no_rows(self._label)

    def batches(self, reader: pacsv.CSVStreamingReader) -> Generator[pa.RecordBatch, None, None]:
        """The reader's record batches, with read failures turned into :class:`DataError`."""
        with contextlib.closing(reader):
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except _ArrowFailure as exc:
                    raise self._failure(exc) from exc
                yield batch

    def _reader(self, *, use_threads: bool) -> pacsv.CSVStreamingReader:
        """A fresh pyarrow streaming reader over the whole file."""
        return pacsv.open_csv(
            self._path,
            read_options=pacsv.ReadOptions(block_size=self._block_size, use_threads=use_threads),
            convert_options=self._convert,
        )

    def _failure(self, exc: BaseException) -> DataError:
        """Explain a pyarrow CSV failure in one line, with its row when it can be found."""
        message = str(exc)
        if isinstance(exc, pa.ArrowException) and "Row #" not in message:
            # pyarrow only knows the failing row when it reads on one thread: read again that way.
            try:
                with contextlib.closing(self._reader(use_threads=False)) as reader:
                    for _ in reader:
                        pass
            except _ArrowFailure as again:
                message = str(again)
        return _csv_error(self._label, message, self._header, self._block_size)


def _csv_error(label: str, message: str, header: Sequence[str], block_size: int) -> DataError:
    """Turn a pyarrow CSV error message into a one-line :class:`DataError`.

    pyarrow's "Row #N" counts the header as row 1, so the data row is N - 1.
    """
    lines = message.strip().splitlines()
    first = lines[0].strip() if lines else message
    conversion = _CSV_CONVERSION.search(first)
    if conversion is not None:
        index, row, target, detail = int(conversion[1]), conversion[2], conversion[3], conversion[4]
        name = header[index] if index < len(header) else f"#{index + 1}"
        where = f"{label}: row {int(row) - 1}, column {name!r}" if row else f"{label}: column {name!r}"
        value = _CSV_INVALID_VALUE.fullmatch(detail)
        if target == "string":  # only keep columns are read as text
            return DataError(f"{where}: {_clip(detail, 80)}; save the file as UTF-8 text.")
        shown = f"value {_clip(value[1])!r}" if value is not None else "a value"
        return DataError(
            f"{where}: {shown} is not a number; vector columns must be numeric, "
            "so fix the value or leave the column out (--columns, --keep)."
        )
    field_count = _CSV_FIELD_COUNT.search(first)
    if field_count is not None:
        row, expected, got = field_count[1], field_count[2], field_count[3]
        where = f"row {int(row) - 1} " if row else "a row "
        return DataError(
            f"{label}: not a valid CSV file: {where}has {got} fields but the header has {expected}; "
            "every row needs one value per header column."
        )
    if first == "Empty CSV file" or first.startswith("CSV parse error: Empty CSV file or block"):
        return _no_rows(label)  # the second: only blank lines, or a header without a line break
    if first.startswith("straddling object"):  # one line does not fit in a block
        return DataError(
            f"{label}: not a valid CSV file: a line is longer than {block_size} bytes, far longer than "
            "the lines at the start of the file; check the file for missing line breaks."
        )
    return DataError(
        f"{label}: not a valid CSV file ({_clip(first, 200)}); "
        "check that it is a complete comma-separated text file with a header row."
    )


def _first_true(mask: pa.Array) -> int:
    """Index of the first true value of a boolean array that has one."""
    return int(np.argmax(mask.to_numpy(zero_copy_only=False)))


def _missing_vector(label: str, row: int, name: str) -> DataError:
    """The error for a null list in a list column."""
    return DataError(
        f"{label}: row {row}, column {name!r}: vector is missing (null); "
        "remove rows without a vector before privatizing."
    )


def _float64(array: pa.Array, writable: bool = True) -> np.ndarray:
    """The float64 values of a numeric array without nulls: a fresh writable copy, or (for
    read-only consumers) a zero-copy view where the array already holds float64."""
    if pa.types.is_decimal(array.type):
        array = array.cast(pa.float64())
    values = array.to_numpy(zero_copy_only=False)
    return np.array(values, dtype=np.float64) if writable else np.asarray(values, dtype=np.float64)


def _list_values(
    array: pa.Array, name: str, d: int, first_row: int, label: str, writable: bool = True
) -> np.ndarray:
    """The ``(rows, d)`` float64 values of a list column, checked for nulls, length and finiteness."""
    if array.null_count:
        raise _missing_vector(label, first_row + _first_true(array.is_null()) + 1, name)
    if _fixed_size(array.type) != d:
        lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False)
        wrong = np.flatnonzero(lengths != d)
        if wrong.size:
            i = int(wrong[0])
            raise DataError(
                f"{label}: row {first_row + i + 1}, column {name!r}: vector has {lengths[i]} "
                f"coordinates, expected {d}; every vector must have the same length."
            )
    flat = array.flatten()
    where = f"column {name!r} (coordinate {{}}, counting from 0)"
    if flat.null_count:
        row, coordinate = divmod(_first_true(flat.is_null()), d)
        raise DataError(
            f"{label}: row {first_row + row + 1}, {where.format(coordinate)}: value is missing; "
            "remove or impute missing values before privatizing."
        )
    values = _float64(flat, writable).reshape(len(array), d)
    _check_finite(values, first_row, label, where.format)
    return values


def _column_values(record: pa.RecordBatch, names: tuple[str, ...], first_row: int, label: str) -> np.ndarray:
    """The ``(rows, d)`` float64 values of one numeric column per coordinate, checked."""
    arrays = [record.column(name) for name in names]
    nulls = [(_first_true(array.is_null()), j) for j, array in enumerate(arrays) if array.null_count]
    if nulls:
        row, j = min(nulls)
        raise DataError(
            f"{label}: row {first_row + row + 1}, column {names[j]!r}: value is missing; "
            "remove or impute missing values before privatizing."
        )
    values = np.empty((record.num_rows, len(names)), dtype=np.float64)
    for j, array in enumerate(arrays):
        if pa.types.is_decimal(array.type):
            array = array.cast(pa.float64())
        values[:, j] = array.to_numpy(zero_copy_only=False)
    _check_finite(values, first_row, label, lambda j: f"column {names[j]!r}")
    return values


def _check_finite(values: np.ndarray, first_row: int, label: str, where: Callable[[int], str]) -> None:
    """:class:`DataError` naming the first NaN/±inf in row-major order; ``where(j)`` names coordinate j."""
    finite = np.isfinite(values)
    if finite.all():
        return
    row, j = divmod(int(np.argmin(finite, axis=None)), values.shape[1])
    value = values[row, j]
    shown = "NaN" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    raise DataError(
        f"{label}: row {first_row + row + 1}, {where(j)}: value is {shown}; "
        "remove or impute non-finite values before privatizing."
    )


class _HashingSink:
    """A write-only binary sink that feeds every byte it passes on to a SHA-256.

    The sidecar records the hash of the data file it describes, computed while the file is
    written rather than by reading it back. The owner closes the underlying file.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._position = 0
        self.digest = hashlib.sha256()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        self.digest.update(view)
        self._position += view.nbytes
        self._raw.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        """Nothing: the writer that owns the underlying file syncs and closes it."""

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def file_sha256(path: str | os.PathLike[str], chunk_bytes: int = 8 * 2**20) -> str:
    """The SHA-256 (hex) of a file's bytes, read in chunks (hashlib releases the GIL)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(chunk_bytes):
                digest.update(chunk)
    except OSError as exc:
        raise DataError(f"{os.fspath(path)}: cannot read the file ({_reason(exc)}); check the path and permissions.") from exc
    return digest.hexdigest()


class AtomicVectorWriter:
    """Write vectors batch by batch to a temporary file, renamed onto ``path`` by :meth:`commit`.

    A context manager: leaving the ``with`` block without :meth:`commit` (an exception, Ctrl-C,
    or simply no commit) removes the temporary file, so ``path`` is never left half-written.
    Output columns: the keep columns (in layout order), then the vector column(s) as float64:
    one ``FixedSizeList<float64>[d]`` column for a list layout (Parquet only), else one column
    per coordinate.
    """

    path: Path
    format: str
    layout: VectorLayout
    rows_written: int

    def __init__(
        self,
        path: str | os.PathLike[str],
        layout: VectorLayout,
        *,
        format: str | None = None,
        keep_schema: pa.Schema | None = None,
        overwrite: bool = False,
    ) -> None:
        """Check the target and create the temporary file next to it.

        ``format`` defaults to :func:`file_format` of ``path``. ``keep_schema`` fixes the keep
        columns' types; without it they come from the first written batch.
        """
        label = os.fspath(path)
        if format is None:
            format = file_format(path)
        elif format not in FORMATS:
            raise UsageError(f"{label}: unknown format {format!r}; choose one of: {', '.join(FORMATS)}.")
        if format == "csv" and layout.kind == "list":
            raise UsageError(f"{label}: CSV holds one column per coordinate; write Parquet or use --columns.")
        if keep_schema is not None and keep_schema.names != list(layout.keep):
            raise ValueError(
                f"keep_schema has columns {keep_schema.names}, the layout keeps {list(layout.keep)}"
            )
        if format == "csv" and keep_schema is not None:
            for field in keep_schema:
                if pa.types.is_nested(field.type):
                    raise UsageError(
                        f"{label}: --keep column {field.name!r} holds {field.type}, which a CSV file cannot hold; "
                        "write Parquet or leave it out of --keep."
                    )
        self.path = Path(path)
        self.format = format
        self.layout = layout
        self.rows_written = 0
        self._label = label
        self._overwrite = overwrite
        self._keep_schema = keep_schema
        self._writer: pq.ParquetWriter | pacsv.CSVWriter | None = None
        self._state = "open"
        _check_output(self.path, label, overwrite)
        descriptor, self._temp = _create_temp(self.path, label)
        self._file: BinaryIO = os.fdopen(descriptor, "wb")
        self._sink = _HashingSink(self._file)
        #: True once ``path`` holds this writer's file (set atomically with the rename).
        self.published = False

    def __enter__(self) -> AtomicVectorWriter:
        """Return the writer itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Remove the temporary file unless :meth:`commit` succeeded."""
        if self._state == "open":
            self._discard()

    def write(self, values: np.ndarray, keep: pa.Table | None = None) -> None:
        """Append one batch: ``values`` of shape ``(rows, d)`` and float64, ``keep`` with ``rows`` rows."""
        self._check_open()
        d = self.layout.d
        if not isinstance(values, np.ndarray):
            raise ValueError(f"values must be a numpy array, got {type(values).__name__}")
        if values.dtype != np.float64 or values.ndim != 2 or values.shape[1] != d:
            raise ValueError(
                f"values must be a float64 array of shape (rows, {d}), got {values.dtype} {values.shape}"
            )
        keep_table = self._keep_table(keep, values.shape[0])
        arrays: list[pa.Array | pa.ChunkedArray] = list(keep_table.columns) if keep_table is not None else []
        if self.layout.kind == "list":
            flat = pa.array(np.ascontiguousarray(values).reshape(-1))
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, d))
        else:
            arrays.extend(pa.array(column) for column in np.ascontiguousarray(values.T))
        table = pa.Table.from_arrays(arrays, schema=self._schema())
        try:
            if self._writer is None:
                self._writer = self._open_writer(table.schema)
            if table.num_rows:
                self._writer.write_table(table)
        except _ArrowFailure as exc:
            raise _write_failed(self._label, exc) from exc
        self.rows_written += table.num_rows

    def commit(self) -> None:
        """Finish the file, flush it to disk and rename it onto ``path``."""
        self._check_open()
        try:
            writer = self._writer if self._writer is not None else self._open_writer(self._schema())
            self._writer = None
            writer.close()
            _sync(self._file)
            self._file.close()
            _publish(self._temp, self.path, self._label, self._overwrite, self._mark_published)
        except BaseException as exc:
            self._discard()
            if isinstance(exc, _ArrowFailure):
                raise _write_failed(self._label, exc) from exc
            raise
        self._state = "committed"

    def _mark_published(self) -> None:
        self.published = True

    @property
    def sha256(self) -> str:
        """The SHA-256 (hex) of the bytes written; final once :meth:`commit` has run."""
        if self._state != "committed":
            raise RuntimeError(f"{self._label}: the hash is known only after commit")
        return self._sink.digest.hexdigest()

    def _check_open(self) -> None:
        """Refuse to use a writer after commit or discard."""
        if self._state != "open":
            raise RuntimeError(f"{self._label}: the writer is already {self._state}")

    def _keep_table(self, keep: pa.Table | None, rows: int) -> pa.Table | None:
        """The keep columns in layout order and with the established types."""
        names = list(self.layout.keep)
        if not names:
            if keep is not None:
                raise ValueError("the layout has no keep columns; pass keep=None")
            return None
        if keep is None or keep.num_rows != rows:
            got = "none" if keep is None else f"{keep.num_rows} rows"
            raise ValueError(f"keep must be a table with {rows} rows and columns {names}, got {got}")
        try:
            keep = keep.select(names)
            if self._keep_schema is None:
                self._keep_schema = keep.schema
            elif not keep.schema.equals(self._keep_schema):
                keep = keep.cast(self._keep_schema)
        except (KeyError, pa.ArrowException) as exc:
            expected = self._keep_schema or names
            raise ValueError(f"keep columns do not match {expected}: {_reason(exc)}") from exc
        return keep

    def _schema(self) -> pa.Schema:
        """The output schema: keep columns (strings until their types are known), then vectors."""
        if self._keep_schema is not None:
            fields = list(self._keep_schema)
        else:
            fields = [pa.field(name, pa.string()) for name in self.layout.keep]
        if self.layout.kind == "list":
            fields.append(pa.field(self.layout.columns[0], pa.list_(pa.float64(), self.layout.d)))
        else:
            fields.extend(pa.field(name, pa.float64()) for name in self.layout.columns)
        return pa.schema(fields)

    def _open_writer(self, schema: pa.Schema) -> pq.ParquetWriter | pacsv.CSVWriter:
        """The pyarrow writer for this format, writing into the temporary file."""
        if self.format == "parquet":
            # Privatized floats are random: dictionary encoding only costs time there (it nearly
            # halves the write). The kept columns (ids, labels) keep it.
            return pq.ParquetWriter(self._sink, schema, use_dictionary=list(self.layout.keep) or False)
        return pacsv.CSVWriter(self._sink, schema)

    def _discard(self) -> None:
        """Abandon the output: close everything and remove the temporary file."""
        self._state = "discarded"
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
            self._writer = None
        with contextlib.suppress(OSError):
            self._file.close()
        _remove(self._temp)


def table_bytes(columns: Mapping[str, Any], format: str) -> bytes:
    """A small in-memory table (column name to 1-D array) as the bytes of a whole Parquet or CSV
    file, for :func:`atomic_write_bytes`."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    table = pa.table(dict(columns))
    sink = pa.BufferOutputStream()
    if format == "parquet":
        pq.write_table(table, sink)
    else:
        pacsv.write_csv(table, sink)
    return sink.getvalue().to_pybytes()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, overwrite: bool = False) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    label = os.fspath(path)
    target = Path(path)
    _check_output(target, label, overwrite)
    descriptor, temp = _create_temp(target, label)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            _sync(file)
        _publish(temp, target, label, overwrite)
    except BaseException as exc:
        _remove(temp)
        if isinstance(exc, OSError):
            raise _write_failed(label, exc) from exc
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, *, overwrite: bool = False) -> None:
    """Write ``text`` as UTF-8 to ``path`` like :func:`atomic_write_bytes` (used for sidecar JSON)."""
    atomic_write_bytes(path, text.encode("utf-8"), overwrite=overwrite)


def _check_output(target: Path, label: str, overwrite: bool) -> None:
    """:class:`UsageError` unless ``target`` can be created (or, with ``overwrite``, replaced)."""
    if not target.parent.is_dir():
        raise UsageError(
            f"{label}: {str(target.parent)!r} is not an existing directory; "
            "create it first or choose another output path."
        )
    if target.is_dir():
        raise UsageError(f"{label}: is a directory; give a file name for the output.")
    if target.exists() and not overwrite:
        raise UsageError(f"{label}: already exists; pass --overwrite to replace it.")


#: Temporary files created and neither renamed nor removed yet. A signal can interrupt the
#: program between creating one and entering the ``with`` block that would remove it; the
#: top-level handler then calls :func:`remove_temporaries`.
_LIVE_TEMPORARIES: set[Path] = set()


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM back (main thread, POSIX) so a few steps happen together or not at all."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def remove_temporaries() -> None:
    """Remove every temporary output of this process still on disk (after an interrupt)."""
    for path in list(_LIVE_TEMPORARIES):
        _remove(path)


def _create_temp(target: Path, label: str) -> tuple[int, Path]:
    """Create the hidden temporary file next to ``target``: ``(descriptor, path)``, registered."""
    try:
        with _signals_deferred():
            descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            _LIVE_TEMPORARIES.add(Path(name))
    except OSError as exc:
        raise UsageError(
            f"{label}: cannot create a file in {str(target.parent)!r} ({_reason(exc)}); "
            "choose a writable output directory."
        ) from exc
    return descriptor, Path(name)


def _sync(file: BinaryIO) -> None:
    """Flush a file's buffers to the disk."""
    file.flush()
    os.fsync(file.fileno())


def _publish(
    temp: Path, target: Path, label: str, overwrite: bool, on_published: Callable[[], None] | None = None
) -> None:
    """Give the finished temporary file its final permissions and rename it onto ``target``.

    ``on_published`` runs together with the rename (signals held back), so a caller interrupted
    right after it still knows that ``target`` now holds the new file.
    """
    exists = target.exists()
    if exists and not overwrite:
        raise UsageError(f"{label}: already exists; pass --overwrite to replace it.")
    # mkstemp makes the file private (0600); use the replaced file's mode or the usual 0666 - umask.
    os.chmod(temp, stat.S_IMODE(target.stat().st_mode) if exists else 0o666 & ~_umask())
    with _signals_deferred():
        os.replace(temp, target)
        _LIVE_TEMPORARIES.discard(temp)
        if on_published is not None:
            on_published()
    _sync_directory(target.parent)


def _umask() -> int:
    """The process umask (it can only be read by setting it, so it is set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable where the platform allows it (best effort)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _remove(path: Path) -> None:
    """Delete a temporary file if it is still there."""
    with contextlib.suppress(OSError):
        path.unlink()
    _LIVE_TEMPORARIES.discard(path)


def _write_failed(label: str, exc: BaseException) -> DataError:
    """The error for an output that could not be written."""
    if isinstance(exc, pa.ArrowException) and not isinstance(exc, OSError):
        # Not the disk: pyarrow refused a value (vectors are plain float64, so a --keep column's).
        return DataError(
            f"{label}: could not write the file ({_reason(exc)}); a --keep column holds values "
            "this format cannot store, so write Parquet or leave that column out of --keep."
        )
    return DataError(
        f"{label}: could not write the file ({_reason(exc)}); "
        "check free disk space and permissions, then run again."
    )
