"""Reading vectors batch by batch: :func:`open_vectors`, :class:`VectorReader`, :class:`VectorBatch`.

Reading never loads a whole file: :func:`open_vectors` finds the file's format in the registry
(:mod:`ldpcli.io._formats`) by its suffix and lets that format open it, and every batch is
checked (missing values, NaN/inf, ragged lists) with vectorized code before it is handed out as
a :class:`VectorBatch` of float64 values. With ``skip_invalid`` a bad row is marked in the batch's
``valid`` mask instead (its values set to 0.0), and kept text columns are checked for free text
unless the caller passes ``keep_unsafe`` (:mod:`ldpcli.io._columns`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ldpcli.errors import DataError, UsageError, counted
from ldpcli.io._columns import (
    _check_keep_names,
    _check_keep_values,
    _Choice,
    _fixed_size,
    _name_option,
    _resolve,
    _text_columns,
)
from ldpcli.io._layout import VectorLayout
from ldpcli.io._messages import _coordinate, _missing_vector, _no_rows, _reason, _row

_MAX_BATCH_ROWS = 1_000_000
# A mechanism holds about this many float64 copies of a batch at once.
_WORKING_COPIES = 4

# What pyarrow raises for damaged input or failed output (names in a damaged file can also fail to
# decode as UTF-8).
_ArrowFailure = (pa.ArrowException, OSError, UnicodeDecodeError)

#: The memory a batch's working copies take by default, in bytes (:func:`default_batch_rows`).
DEFAULT_BATCH_MEMORY = 64 * 2**20
#: How many skipped row numbers a reader keeps (``VectorReader.skipped_rows``).
SKIPPED_ROWS_SHOWN = 20


#: The unit roundoff of float64 (numpy's ``epsneg``, 2⁻⁵³): the precision of float64, integer and decimal values.
FLOAT64_ROUNDOFF = float(np.finfo(np.float64).epsneg)


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
class BatchRows:
    """Rows per batch for vectors of dimension d, as a format's reader asks once it knows d:
    ``rows`` if given, else :func:`default_batch_rows` of ``memory_bytes``; with ``granule`` (the
    keyed randomness's block, per d) a multiple of it. A value the reader calls, not a closure of
    the caller's."""

    rows: int | None
    memory_bytes: int
    granule: Callable[[int], int] | None = None

    def __call__(self, d: int) -> int:
        rows = self.rows or default_batch_rows(d, self.memory_bytes)
        if self.granule is None:
            return rows
        step = self.granule(d)
        return max(1, rows // step) * step


@dataclass
class VectorBatch:
    """One batch of vectors read from a file.

    ``values``: shape ``(rows, d)`` (``(rows, copies·d)`` for a release of copies), float64, C-contiguous, finite; a fresh writable array unless
    the reader was opened with ``writable=False`` (then possibly a read-only view).
    ``keep``: the keep columns for exactly these rows, or ``None`` when the layout keeps none.
    ``first_row``: 0-based index in the file of this batch's first row.
    ``valid``: only with ``skip_invalid``: ``None`` when every row is valid, else a boolean array
    of shape ``(rows,)``, False for each invalid row (missing vector or value, NaN/inf, wrong list
    length, CSV text in a vector column), whose ``values`` are all 0.0. Invalid rows stay in the
    batch (and in ``keep``), so rows keep their positions in the file.
    """

    values: np.ndarray
    keep: pa.Table | None
    first_row: int
    valid: np.ndarray | None = None


class VectorReader:
    """Batches of vectors from one file; a context manager, iterated once.

    Made by :func:`open_vectors`. ``num_rows`` is known up front for Parquet and ``None`` for
    CSV; ``batch_rows`` is the most rows any batch holds; ``keep_schema`` is the schema of the
    batches' ``keep`` tables (``None`` without keep columns), e.g. for
    :class:`AtomicVectorWriter`. With ``skip_invalid``, ``skipped`` counts the invalid rows of the
    batches handed out so far and ``skipped_rows`` holds the first 20 of them (1-based data rows).
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
        precision: float = FLOAT64_ROUNDOFF,
        seek: Callable[[int], tuple[Generator[pa.RecordBatch, None, None], int]] | None = None,
        columns_in_file: Sequence[str] = (),
    ) -> None:
        """Wrap a stream of raw record batches (already translating pyarrow errors).

        ``precision``: the unit roundoff of the values as stored (2⁻²⁴ for float32 columns), so
        that a domain can tell a row rounded onto its boundary from one outside it. ``seek(row)``,
        for formats that can (Parquet, by row group), gives a stream of the raw batches that starts
        at or before ``row`` and the row it starts at (:meth:`restrict`). ``columns_in_file``: every
        column of the file, in order (what :func:`~ldpcli.io._vectors.open_vectors` compares with
        the columns read, to say which are left out).
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
        self._seek = seek
        self._first_row = 0
        self._started = False
        self._closed = False
        #: Batches are fresh writable arrays; False allows read-only zero-copy views (see open_vectors).
        self.writable = True
        #: When set, every batch but the last has exactly ``batch_rows`` rows, a multiple of this
        #: (see open_vectors' ``granule``): batches start on fixed row boundaries.
        self.granule: int | None = None
        #: Mark invalid rows in ``VectorBatch.valid`` instead of raising (see open_vectors).
        self.skip_invalid = False
        #: Invalid rows marked so far, and the first ``SKIPPED_ROWS_SHOWN`` of them (1-based).
        self.skipped = 0
        self.skipped_rows: list[int] = []
        #: Kept text columns whose values are checked for free text (empty with keep_unsafe).
        self._text_keep: tuple[str, ...] = ()
        self.columns_in_file = tuple(columns_in_file)
        #: The file's columns that are neither vectors nor kept: left out of any output (set by
        #: :func:`~ldpcli.io._vectors.open_vectors` when it chose the columns).
        self.dropped_columns: tuple[str, ...] = ()

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

    def restrict(self, start: int, stop: int) -> None:
        """Read only the rows [start, stop) (0-based, before iterating); batches then number their
        rows from ``start``, so keyed randomness and messages see the rows' places in the file.

        Parquet starts reading at the row group that holds ``start``; other formats read and drop
        the rows before it. ``num_rows`` becomes the rows of the range (fewer if the file ends first).
        """
        if self._started or self._closed:
            raise RuntimeError(f"{self._label}: restrict a VectorReader before iterating it")
        if not 0 <= start <= stop:
            raise ValueError(f"a row range needs 0 <= start <= stop, got [{start}, {stop})")
        at = 0
        if self._seek is not None and start > 0:
            self._batches.close()
            self._batches, at = self._seek(start)
        self._batches = _row_range(self._batches, start - at, stop - at)
        self._first_row = start
        if self.num_rows is not None:
            self.num_rows = max(0, min(stop, self.num_rows) - start)

    def close(self) -> None:
        """Release the file; safe to call more than once."""
        if not self._closed:
            self._closed = True
            self._batches.close()
            self._release()

    def _read(self) -> Iterator[VectorBatch]:
        """Cut the raw batches to ``batch_rows`` rows (joining them too, with a granule) and convert them."""
        first_row = self._first_row
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
        layout, skip = self.layout, self.skip_invalid
        if layout.kind == "list" and layout.copies == 1:
            name = layout.columns[0]
            values, invalid = _list_values(
                record.column(name), name, layout.d, first_row, self._label, self.writable, skip
            )
        elif layout.kind == "list":  # the copies of a release side by side
            parts = [
                _list_values(record.column(name), name, layout.d, first_row, self._label, self.writable, skip)
                for name in layout.columns
            ]
            values = np.concatenate([part[0] for part in parts], axis=1)
            masks = [part[1] for part in parts if part[1] is not None]
            invalid = np.logical_or.reduce(masks) if masks else None
        else:
            values, invalid = _column_values(record, layout.columns, first_row, self._label, skip)
        keep = pa.Table.from_batches([record.select(list(layout.keep))]) if layout.keep else None
        if keep is not None and self._text_keep:
            _check_keep_values(self._label, keep, self._text_keep, first_row)
        if invalid is None:
            return VectorBatch(values=values, keep=keep, first_row=first_row)
        rows = np.flatnonzero(invalid)
        self.skipped += int(rows.size)
        shown = SKIPPED_ROWS_SHOWN - len(self.skipped_rows)
        self.skipped_rows.extend(int(row) + first_row + 1 for row in rows[: max(shown, 0)])
        return VectorBatch(values=values, keep=keep, first_row=first_row, valid=~invalid)


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
    precision = FLOAT64_ROUNDOFF
    for dtype in types:
        value = dtype.value_type if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or (
            pa.types.is_fixed_size_list(dtype)) else dtype
        if pa.types.is_float32(value) or pa.types.is_float16(value):
            precision = max(precision, float(np.finfo(value.to_pandas_dtype()).epsneg))
    return precision


def translated_batches(
    next_batch: Callable[[], pa.RecordBatch], failure: Callable[[BaseException], DataError],
    close: Callable[[], None] | None = None,
) -> Generator[pa.RecordBatch, None, None]:
    """The record batches ``next_batch`` returns until it raises StopIteration, a pyarrow read
    failure turned into ``failure(exc)``: the loop every format's reader runs. ``close`` (the
    source's own, if it has one) is called once the loop has started and then ends or is closed."""
    try:
        while True:
            try:
                batch = next_batch()
            except StopIteration:
                return
            except _ArrowFailure as exc:
                raise failure(exc) from exc
            yield batch
    finally:
        if close is not None:
            close()


def _row_range(
    batches: Generator[pa.RecordBatch, None, None], start: int, stop: int
) -> Generator[pa.RecordBatch, None, None]:
    """The rows [start, stop) of a stream of record batches (counted from the stream's first row)."""
    row = 0
    with contextlib.closing(batches):
        for record in batches:
            end = row + record.num_rows
            if end > start:
                first = max(start - row, 0)
                piece = record.slice(first, min(stop, end) - row - first)
                if piece.num_rows:
                    yield piece
            row = end
            if row >= stop:
                return


def open_table(
    table: pa.Table,
    *,
    label: str = "table",
    column: str | None = None,
    columns: Sequence[str] | None = None,
    keep: Sequence[str] = (),
    keep_unsafe: bool = False,
) -> tuple[np.ndarray, VectorLayout, float]:
    """The rows of an in-memory table by :func:`open_vectors`' rules: ``(values, layout, precision)``.

    The same column choice (automatic detection and its refusal of identifiers and labels,
    ``columns`` ranges and globs), the same checks of every row (nothing is skipped) and of the
    kept columns (free text refused unless ``keep_unsafe``); ``label`` names the table in messages.
    ``values`` is a fresh ``(rows, d)`` float64 array; ``precision`` as ``VectorReader.precision``.
    """
    column_names = _name_option(columns, "columns", label)
    keep_names = _name_option(keep, "keep", label) or ()
    if column is not None and column_names is not None:
        raise UsageError(f"{label}: give either column (one list column) or columns, not both.")
    if column_names == ():
        raise UsageError(f"{label}: columns needs at least one column name.")
    if table.num_rows == 0:
        raise _no_rows(label)
    choice = _Choice(column=column, columns=column_names, keep=keep_names, layout=None)
    kind, vector, kept, d = _resolve(table.schema, label, choice, check_types=True)
    record = table.select([*kept, *vector]).combine_chunks().to_batches()[0]
    if d is None or d == 0:  # variable-length lists (or a fixed size of 0): the first row's length
        first = record.column(vector[0]).slice(0, 1)
        if first.null_count:
            raise _missing_vector(label, 1, vector[0])
        d = int(pc.list_value_length(first)[0].as_py())
        if d == 0:
            raise DataError(
                f"{label}: {_row(1)}, column {vector[0]!r}: vector is empty; vectors need at least one coordinate."
            )
    layout = VectorLayout(kind, vector, d, kept)
    keep_schema = pa.schema([record.schema.field(name) for name in kept]) if kept else None
    if kind == "list":
        values, _ = _list_values(record.column(vector[0]), vector[0], d, 0, label)
    else:
        values, _ = _column_values(record, vector, 0, label)
    if not keep_unsafe:
        _check_keep_names(label, keep_schema)
        text = _text_columns(keep_schema)
        if text:
            _check_keep_values(label, pa.Table.from_batches([record.select(list(kept))]), text, 0)
    return values, layout, source_precision([table.schema.field(name).type for name in vector])


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
    array: pa.Array, name: str, d: int, first_row: int, label: str, writable: bool = True, skip: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``(rows, d)`` float64 values of a list column, checked for nulls, length and finiteness,
    and (``skip``) the mask of invalid rows, ``None`` when there is none; without ``skip`` the
    first invalid row raises :class:`DataError`."""
    bad = None  # with skip: rows whose list is missing or of the wrong length
    if array.null_count:
        if not skip:
            raise _missing_vector(label, first_row + _first_true(array.is_null()) + 1, name)
        bad = array.is_null().to_numpy(zero_copy_only=False)
    if _fixed_size(array.type) != d:
        lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False)  # NaN for a null list
        wrong = lengths != d
        if wrong.any():
            if not skip:
                i = int(np.argmax(wrong))
                raise DataError(
                    f"{label}: {_row(first_row + i + 1)}, column {name!r}: vector has "
                    f"{counted(int(lengths[i]), 'coordinate')}, expected {d}; every vector must have the same length."
                )
            bad = wrong if bad is None else bad | wrong
    if bad is not None:  # fill the good rows around the bad ones, which stay 0.0
        values = np.zeros((len(array), d), dtype=np.float64)
        values[~bad] = _float64(array.filter(pa.array(~bad)).flatten()).reshape(-1, d)  # null -> NaN
        return _mark_invalid(values, bad)
    flat = array.flatten()
    if flat.null_count and not skip:
        row, coordinate = divmod(_first_true(flat.is_null()), d)
        raise DataError(
            f"{label}: {_row(first_row + row + 1)}, {_coordinate(name, coordinate)}: value is missing; "
            "remove or impute missing values before privatizing."
        )
    values = _float64(flat, writable).reshape(len(array), d)  # with skip, a missing value is NaN
    if skip:
        return _mark_invalid(values, None)
    _check_finite(values, first_row, label, lambda j: _coordinate(name, j))
    return values, None


def _column_values(
    record: pa.RecordBatch, names: tuple[str, ...], first_row: int, label: str, skip: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``(rows, d)`` float64 values of one numeric column per coordinate, checked, and
    (``skip``) the mask of invalid rows as for :func:`_list_values`."""
    arrays = [record.column(name) for name in names]
    nulls = [(_first_true(array.is_null()), j) for j, array in enumerate(arrays) if array.null_count]
    if nulls and not skip:
        row, j = min(nulls)
        raise DataError(
            f"{label}: {_row(first_row + row + 1)}, column {names[j]!r}: value is missing; "
            "remove or impute missing values before privatizing."
        )
    values = np.empty((record.num_rows, len(names)), dtype=np.float64)
    for j, array in enumerate(arrays):
        if pa.types.is_decimal(array.type):
            array = array.cast(pa.float64())
        values[:, j] = array.to_numpy(zero_copy_only=False)  # a null is NaN
    if skip:
        return _mark_invalid(values, None)
    _check_finite(values, first_row, label, lambda j: f"column {names[j]!r}")
    return values, None


def _mark_invalid(values: np.ndarray, bad: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """``values`` with the rows that are ``bad`` or not finite set to 0.0 (a read-only view is
    copied first), and the mask of those rows; ``(values, None)`` when every row is valid."""
    finite = np.isfinite(values)
    if bad is None:
        if finite.all():  # the common case: one pass, as without skip_invalid
            return values, None
        bad = ~finite.all(axis=1)
    else:
        bad = bad | ~finite.all(axis=1)
    if not values.flags.writeable:
        values = np.array(values)
    values[bad] = 0.0
    return values, bad


def _check_finite(values: np.ndarray, first_row: int, label: str, where: Callable[[int], str]) -> None:
    """:class:`DataError` naming the first NaN/±inf in row-major order; ``where(j)`` names coordinate j."""
    finite = np.isfinite(values)
    if finite.all():
        return
    row, j = divmod(int(np.argmin(finite, axis=None)), values.shape[1])
    value = values[row, j]
    shown = "NaN" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    raise DataError(
        f"{label}: {_row(first_row + row + 1)}, {where(j)}: value is {shown}; "
        "remove or impute non-finite values before privatizing."
    )
