"""Reading vectors batch by batch: :func:`open_vectors`, :class:`VectorReader`, :class:`VectorBatch`.

Reading never loads a whole file: :func:`open_vectors` finds the file's format in the registry
(:mod:`ldpcli.io.formats`) by its suffix and lets that format open it, and every batch is
checked (missing values, NaN/inf, ragged lists) with vectorized code before it is handed out as
a :class:`VectorBatch` of float64 values.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ldpcli.domains import FLOAT32_PRECISION, FLOAT64_PRECISION
from ldpcli.errors import DataError, UsageError
from ldpcli.io.columns import _Choice, _fixed_size, _name_option
from ldpcli.io.formats import file_format, get_format
from ldpcli.io.layout import VectorLayout
from ldpcli.io.messages import _missing_vector, _reason

_MAX_BATCH_ROWS = 1_000_000
# A mechanism holds about this many float64 copies of a batch at once.
_WORKING_COPIES = 4

# What pyarrow raises for damaged input or failed output (names in a damaged file can also fail to
# decode as UTF-8).
_ArrowFailure = (pa.ArrowException, OSError, UnicodeDecodeError)

DEFAULT_BATCH_MEMORY = 64 * 2**20


def default_batch_rows(d: int, memory_bytes: int = DEFAULT_BATCH_MEMORY) -> int:
    """Rows per batch so that a batch's working copies fit in ``memory_bytes``.

    A batch of ``rows`` vectors of dimension ``d`` takes ``8 * d`` bytes per row as float64,
    and a mechanism holds about four such copies at once. The result is at least 1 and at
    most 1,000,000.
    """
    if d < 1:
        raise ValueError(f"d must be at least 1, got {d}")
    return min(_MAX_BATCH_ROWS, max(1, memory_bytes // (8 * d * _WORKING_COPIES)))


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
        precision: float = FLOAT64_PRECISION,
    ) -> None:
        """Wrap a stream of raw record batches (already translating pyarrow errors).

        ``precision``: the unit roundoff of the values as stored (2⁻²⁴ for float32 columns), so
        that a domain can tell a row rounded onto its boundary from one outside it.
        """
        self.path = path
        self.precision = precision
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
        #: When set, every batch but the last has exactly ``batch_rows`` rows, a multiple of this
        #: (see open_vectors' ``granule``): batches start on fixed row boundaries.
        self.granule: int | None = None

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
        """Cut the raw batches to ``batch_rows`` rows (joining them too, with a granule) and convert them."""
        first_row = 0
        try:
            pieces = self._aligned() if self.granule is not None else (
                record.slice(start, self.batch_rows)
                for record in self._batches for start in range(0, record.num_rows, self.batch_rows)
            )
            for piece in pieces:
                yield self._convert(piece, first_row)
                first_row += piece.num_rows
        finally:
            self.close()

    def _aligned(self) -> Iterator[pa.RecordBatch]:
        """Record batches of exactly ``batch_rows`` rows (the last may be shorter), joining the
        file's batches where their boundaries fall elsewhere (CSV blocks, Parquet row groups)."""
        held: list[pa.RecordBatch] = []
        rows = 0
        for record in self._batches:
            held.append(record)
            rows += record.num_rows
            while rows >= self.batch_rows:
                piece, held = _take(held, self.batch_rows)
                rows -= self.batch_rows
                yield piece
        if rows:
            yield _take(held, rows)[0]

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


def _take(held: list[pa.RecordBatch], rows: int) -> tuple[pa.RecordBatch, list[pa.RecordBatch]]:
    """The first ``rows`` rows of the held batches as one batch, and what is left."""
    taken: list[pa.RecordBatch] = []
    while rows:
        first = held[0]
        if first.num_rows <= rows:
            taken.append(held.pop(0))
            rows -= first.num_rows
        else:
            taken.append(first.slice(0, rows))
            held[0] = first.slice(rows)
            rows = 0
    if len(taken) == 1:
        return taken[0], held
    return pa.Table.from_batches(taken).combine_chunks().to_batches()[0], held


def source_precision(types: Sequence[pa.DataType]) -> float:
    """The unit roundoff of the coarsest floating type among the vector columns' value types
    (2⁻⁵³ for float64, integers and decimals; 2⁻²⁴ for float32; 2⁻¹¹ for float16)."""
    precision = FLOAT64_PRECISION
    for dtype in types:
        value = dtype.value_type if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or (
            pa.types.is_fixed_size_list(dtype)) else dtype
        if pa.types.is_float32(value):
            precision = max(precision, FLOAT32_PRECISION)
        elif pa.types.is_float16(value):
            precision = max(precision, 2.0**-11)
    return precision


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
    granule: Callable[[int], int] | None = None,
) -> VectorReader:
    """Open a Parquet or CSV file of vectors for batch-by-batch reading.

    Which columns hold the vectors: ``layout`` (exactly those columns, e.g. when re-reading a
    privatized file), else the list column ``column``, else the numeric ``columns`` in that
    order, else the file's only list column of numbers, else all its numeric columns except
    ``keep`` (unnamed columns and pandas ``__index_level_N__`` columns are never picked
    automatically). ``batch_rows`` defaults to :func:`default_batch_rows` for the file's ``d``
    and ``memory_bytes`` (the budget of one batch's working copies). ``writable=False`` lets
    read-only consumers (estimators, and the mechanisms, which never write to their input)
    receive zero-copy views of list columns instead of copies. ``granule(d)``: every batch but the
    last then has exactly ``batch_rows`` rows, rounded to a multiple of ``granule(d)`` (at least
    one), so batches start on fixed row boundaries whatever the file's own blocks (keyed
    randomness needs this).
    """
    label = os.fspath(path)
    fmt = get_format(file_format(path))
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

    def rows_for(d: int) -> int:
        rows = batch_rows or default_batch_rows(d, memory_bytes)
        if granule is None:
            return rows
        step = granule(d)
        return max(1, rows // step) * step

    reader = fmt.open_reader(target, label, choice, rows_for)
    reader.writable = writable
    if granule is not None:
        reader.granule = granule(reader.layout.d)
    return reader


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


def _first_true(mask: pa.Array) -> int:
    """Index of the first true value of a boolean array that has one."""
    return int(np.argmax(mask.to_numpy(zero_copy_only=False)))


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
