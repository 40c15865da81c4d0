"""CSV: reading with pyarrow's streaming CSV reader (block by block, never the whole file) and
writing with ``CSVWriter``; registered for ``.csv``. Files of thousands of columns are read by
:mod:`ldpcli.io._csv_wide` and written by :mod:`ldpcli.io._csv_wide_write`, in memory that does not
grow by the column.

A CSV file holds one column per coordinate, so it cannot hold a list layout nor nested keep
columns (:func:`_check_holds`). Every pyarrow CSV failure becomes a one-line message naming the
data row and column where pyarrow knows them (:func:`_csv_error`).

Kept columns keep the type pyarrow infers from the first block (:func:`_keep_types`), so an
integer id stays an integer in a Parquet output. With ``skip_invalid`` the vector columns are read
as bytes and parsed here (:func:`_parse_numbers`), so that a cell that is not a number (or not
UTF-8) marks its row invalid instead of failing the whole block. A column is a vector column
whatever the row of its first bad cell (:func:`_numbers_read_as_text`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ldpcli.errors import DataError, UsageError
from ldpcli.io import _csv_wide
from ldpcli.io._atomic import Sink
from ldpcli.io._columns import _Choice, _resolve
from ldpcli.io._csv_text import (
    _CSV_NULLS,
    _NULL_CELLS,
    _NUMBER_CELL,
    CSV_PRECISION,
    _check_header,
    _check_no_header,
    _csv_error,
    _first_cells,
    _parse_numbers,
)
from ldpcli.io._csv_wide_write import open_wide_writer
from ldpcli.io._formats import compression_of, not_text, register_format
from ldpcli.io._layout import VectorLayout
from ldpcli.io._messages import _no_rows, _reason
from ldpcli.io._read import VectorReader, _ArrowFailure, _open_input, translated_batches

# pyarrow's streaming CSV reader reads up to 32 blocks ahead on a background thread, so its memory
# grows with the block size, not with batch_rows: blocks stay at 1 MiB unless lines are long, when a
# block holds at least _CSV_BLOCK_LINES of the longest line seen in the first _CSV_SAMPLE bytes (or
# more: see _sample).
_CSV_BLOCK = 1 << 20
_CSV_BLOCK_LINES = 16
_CSV_SAMPLE = 1 << 20
_CSV_MAX_SAMPLE = 1 << 28
#: pyarrow's block size is an int32: the largest block asked for (a line longer than this is refused).
_CSV_MAX_BLOCK = (1 << 31) - 1
#: Bytes read at the start of a CSV file to tell it from binary or compressed bytes.
_TEXT_SNIFF = 1 << 16
# An integer written with a leading zero ("007", "-01"): such a kept column stays text.
_LEADING_ZERO = r"^\s*[+-]?0\d"


def _open_csv(
    path: Path, label: str, choice: _Choice, batch_rows: Callable[[int], int]
) -> VectorReader:
    """Open a CSV file: infer column types from its first block, resolve the layout, and
    re-open it converting vector columns to float64 (text with ``skip_invalid``) and keep columns
    to their inferred types (:func:`_keep_types`).

    Batches are pyarrow's blocks cut to at most ``batch_rows`` rows, so they may be smaller.
    """
    _check_text(path, label)
    sample = _sample(path, label)
    cells = _first_cells(sample)
    keeps = bool(choice.keep or (choice.layout is not None and choice.layout.keep))
    if cells is not None and len(cells) > (_csv_wide.CSV_MAX_COLUMNS if keeps else _csv_wide.CSV_WIDE_COLUMNS):
        del sample, cells  # the wide reader reads the first line again: not held twice (10⁶ names: ~100 MB)
        return _csv_wide._open_wide_csv(path, label, choice, batch_rows, not choice.no_header)
    block = min(_CSV_MAX_BLOCK, max(_CSV_BLOCK, _CSV_BLOCK_LINES * _longest_line(sample)))
    header = not choice.no_header
    schema = _CsvStream(path, label, block, pacsv.ConvertOptions(null_values=_CSV_NULLS), header=header).peek()
    if header:
        _check_header(label, schema.names, choice.offer_no_header)
    automatic = choice.layout is None and choice.column is None and choice.columns is None
    typed = _numbers_read_as_text(path, label, block, schema, choice.keep, header) if automatic else schema
    if not header and cells is not None:
        _check_no_header(label, cells, typed.names)
    kind, vector, keep, _ = _resolve(typed, label, choice, check_types=False)
    if not header and cells is not None:
        _check_no_header(label, cells, typed.names, vector)
    layout = choice.layout if choice.layout is not None else VectorLayout(kind, vector, len(vector), keep)
    rows = batch_rows(layout.width)
    keep_types = _keep_types(path, label, block, schema, keep, header)
    vector_type = pa.binary() if choice.skip_invalid else pa.float64()
    convert = pacsv.ConvertOptions(
        column_types={**{name: vector_type for name in vector}, **keep_types},
        include_columns=[*keep, *vector],
        null_values=_CSV_NULLS,
        strings_can_be_null=False,
    )
    stream = _CsvStream(path, label, block, convert, header=header, names=schema.names, keep_types=keep_types)
    reader = stream.open()
    batches = stream.batches(reader)
    return VectorReader(
        path=path,
        label=label,
        format="csv",
        layout=layout,
        num_rows=None,
        batch_rows=rows,
        keep_schema=pa.schema(list(keep_types.items())) if keep else None,
        batches=_parsed(batches, vector, label) if choice.skip_invalid else batches,
        release=reader.close,
        precision=CSV_PRECISION,
        columns_in_file=schema.names,
    )


def _numbers_read_as_text(
    path: Path, label: str, block: int, schema: pa.Schema, keep: Sequence[str], header: bool = True
) -> pa.Schema:
    """``schema`` with float64 for each column that pyarrow inferred as text (or binary) from the
    first block but whose non-missing cells there are at least half numbers.

    pyarrow types a column as text when a single cell of the first block is not a number (or not
    UTF-8), but as a number when that cell comes after the first block, where reading it as a
    number then reports the cell. Whether a column is a coordinate must not depend on where a bad
    cell falls, so such a column is a coordinate either way and its bad cells are reported (or,
    with skip_invalid, skipped) by row. A column of identifiers or names, mostly not numbers,
    stays text. Kept columns are left as they are.
    """
    kept = set(keep)
    text = [
        field.name for field in schema
        if field.name not in kept and (pa.types.is_string(field.type) or pa.types.is_binary(field.type))
    ]
    if not text:
        return schema
    convert = pacsv.ConvertOptions(
        column_types={name: pa.binary() for name in text}, include_columns=text, strings_can_be_null=False
    )
    first = _CsvStream(path, label, block, convert, header=header, names=schema.names).first_batch()
    numeric = set()
    for name in text:
        cells = first.column(name)
        present = pc.invert(pc.is_in(cells, value_set=_NULL_CELLS))
        numbers = pc.and_(present, pc.match_substring_regex(cells, _NUMBER_CELL))
        if 0 < pc.sum(present).as_py() <= 2 * pc.sum(numbers).as_py():
            numeric.add(name)
    return pa.schema([field.with_type(pa.float64()) if field.name in numeric else field for field in schema])


def _keep_types(
    path: Path, label: str, block: int, schema: pa.Schema, keep: Sequence[str], header: bool = True
) -> dict[str, pa.DataType]:
    """The type each kept column is read with: the one pyarrow inferred from the first block
    (int64, float64, bool, date32, timestamp, string...), except text for a column that is all
    missing there (inferred as null), for one that is not UTF-8 there (inferred as binary: reading
    it as text reports the row), and for an integer column written with a leading zero in the first
    block ("007", a zip code), which a number would lose."""
    types = {name: schema.field(name).type for name in keep}
    types = {name: pa.string() if _not_typed(dtype) else dtype for name, dtype in types.items()}
    integers = [name for name, dtype in types.items() if pa.types.is_integer(dtype)]
    if integers:
        convert = pacsv.ConvertOptions(
            column_types={name: pa.string() for name in integers},
            include_columns=integers,
            strings_can_be_null=False,
        )
        stream = _CsvStream(path, label, block, convert, header=header, names=schema.names)
        first = stream.first_batch()
        for name in integers:
            if pc.any(pc.match_substring_regex(first.column(name), _LEADING_ZERO)).as_py():
                types[name] = pa.string()
    return types


def _not_typed(dtype: pa.DataType) -> bool:
    """A type inferred for a CSV column that says nothing about its values: null or binary."""
    return pa.types.is_null(dtype) or pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype)


def _parsed(
    batches: Generator[pa.RecordBatch, None, None], vector: Sequence[str], label: str
) -> Generator[pa.RecordBatch, None, None]:
    """The batches with their vector columns, read as bytes, parsed into float64 (null where a
    cell is missing, not a number or not UTF-8, so that the reader marks that row invalid)."""
    wanted = set(vector)
    with contextlib.closing(batches):
        for batch in batches:
            names = batch.schema.names
            arrays = [
                _parse_numbers(column, label, name) if name in wanted else column
                for name, column in zip(names, batch.columns)
            ]
            yield pa.RecordBatch.from_arrays(arrays, names=names)


def _check_text(path: Path, label: str) -> None:
    """:class:`DataError` for a ``.csv`` file whose first bytes are not text (:func:`not_text`: Parquet,
    gzip, NUL bytes…), which pyarrow would report as a CSV field-count error or worse. A compressed
    ``.csv.gz``/``.csv.zst`` is checked by its codec when it is read."""
    if compression_of(path) is not None:
        return
    found = not_text(_open_input(path, label, _TEXT_SNIFF))
    if found is not None:
        what, todo = found
        raise DataError(f"{label}: looks like {what}, not UTF-8 CSV text; {todo}.")


def _sample(path: Path, label: str) -> bytes:
    """The first ``_CSV_SAMPLE`` bytes of the file's text, or more when they do not hold two whole lines
    (the header and a row of a table of 10⁵ or more columns): doubled until they do, up to
    ``_CSV_MAX_SAMPLE``, so that a block holds ``_CSV_BLOCK_LINES`` such lines."""
    size = _CSV_SAMPLE
    sample = _head(path, label, size)
    while sample.count(b"\n") < 2 and len(sample) == size and size < _CSV_MAX_SAMPLE:
        size *= 2
        sample = _head(path, label, size)
    return sample


def _head(path: Path, label: str, size: int) -> bytes:
    """The first ``size`` bytes of the text (decompressed, for ``.csv.gz``/``.csv.zst``; empty when that
    fails: pyarrow's reader then says what is wrong with the file)."""
    head = _open_input(path, label, size)
    codec = compression_of(path)
    if codec is None:
        return head
    try:
        with pa.input_stream(path, compression=codec) as stream:
            return bytes(stream.read(size))
    except _ArrowFailure:
        return b""


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
        header: bool = True,
        names: Sequence[str] = (),
        keep_types: Mapping[str, pa.DataType] | None = None,
    ) -> None:
        """``header``: whether the first line holds the column names (else pyarrow names them f0, f1, ...);
        ``names``: the file's column names, to name a column from pyarrow's column index;
        ``keep_types``: the kept columns and the types they are read with, for their messages."""
        self._path = path
        self._label = label
        self._block_size = block_size
        self._convert = convert
        self._has_header = header
        self._header = names
        self._keep_types = keep_types or {}

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

    def first_batch(self) -> pa.RecordBatch:
        """The first non-empty record batch (that of the first block); :class:`DataError` if none."""
        reader = self.open()
        with contextlib.closing(reader), contextlib.closing(self.batches(reader)) as batches:
            for batch in batches:
                if batch.num_rows:
                    return batch
        raise _no_rows(self._label)

    def batches(self, reader: pacsv.CSVStreamingReader) -> Generator[pa.RecordBatch, None, None]:
        """The reader's record batches, with read failures turned into :class:`DataError`."""
        with contextlib.closing(reader):
            yield from translated_batches(reader.read_next_batch, self._failure)

    def _reader(self, *, use_threads: bool) -> pacsv.CSVStreamingReader:
        """A fresh pyarrow streaming reader over the whole file (decompressed as it is read)."""
        codec = compression_of(self._path)
        return pacsv.open_csv(
            self._path if codec is None else pa.input_stream(self._path, compression=codec),
            read_options=pacsv.ReadOptions(
                block_size=self._block_size, use_threads=use_threads, autogenerate_column_names=not self._has_header
            ),
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
        return _csv_error(self._label, message, self._header, self._block_size, self._keep_types, self._has_header)


def _check_holds(label: str, layout: VectorLayout, keep_schema: pa.Schema | None) -> None:
    """:class:`UsageError` for an output a CSV file cannot hold: a list column, a nested keep column."""
    if layout.kind == "list":
        raise UsageError(f"{label}: CSV holds one column per coordinate; write Parquet or use `columns`.")
    if keep_schema is not None:
        for field in keep_schema:
            if pa.types.is_nested(field.type):
                raise UsageError(
                    f"{label}: `keep` column {field.name!r} holds {field.type}, which a CSV file cannot hold; "
                    "write Parquet or leave it out of `keep`."
                )


def _open_writer(
    sink: Sink | pa.NativeFile, schema: pa.Schema, layout: VectorLayout | None, codec: str | None = None
) -> pacsv.CSVWriter:
    """A CSV writer into ``sink`` (the layout changes nothing: every column is written as it is).
    CSV has no codecs of its own (``codec`` is None): a ``.csv.gz`` file is compressed as a stream."""
    return pacsv.CSVWriter(sink, schema)


register_format("csv", (".csv",), _open_csv, _open_writer, check_output=_check_holds, values_encoder=open_wide_writer)
