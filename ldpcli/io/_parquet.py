"""Parquet: reading with ``ParquetFile.iter_batches`` (never the whole file) and writing with
``ParquetWriter``; registered for ``.parquet`` and ``.pq``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ldpcli.errors import DataError
from ldpcli.io._atomic import Sink
from ldpcli.io._columns import _Choice, _fields, _resolve
from ldpcli.io._formats import not_text, register_format
from ldpcli.io._layout import VectorLayout
from ldpcli.io._messages import _missing_vector, _no_rows, _reason, _row
from ldpcli.io._read import VectorReader, _ArrowFailure, _open_input, source_precision, translated_batches

#: Bytes read from a Parquet file at a time (the reader streams column chunks through this buffer).
_PARQUET_READ_BUFFER = 8 * 2**20


def _not_parquet(label: str, exc: BaseException) -> DataError:
    """The error for a file pyarrow cannot read as Parquet."""
    return DataError(
        f"{label}: not a valid Parquet file ({_reason(exc)}); "
        "check that the file is complete and really is Parquet."
    )


def _open_parquet(
    path: Path, label: str, choice: _Choice, batch_rows: Callable[[int], int]
) -> VectorReader:
    """Open a Parquet file: read its schema and row count, resolve the layout."""
    head = _open_input(path, label, 1 << 12)
    try:
        # pre_buffer would read every row group ahead (the whole file in memory); stream instead.
        parquet = pq.ParquetFile(path, pre_buffer=False, buffer_size=_PARQUET_READ_BUFFER)
        schema, num_rows = parquet.schema_arrow, parquet.metadata.num_rows
    except _ArrowFailure as exc:
        if head and not head.startswith(b"PAR1"):  # not Parquet at all: say what it looks like
            what, todo = not_text(head) or ("text, such as CSV", "rename a CSV file to .csv")
            raise DataError(f"{label}: not a valid Parquet file: it looks like {what}; {todo}.") from exc
        raise _not_parquet(label, exc) from exc
    try:
        if num_rows == 0:
            raise _no_rows(label)
        kind, vector, keep, d = _resolve(schema, label, choice, check_types=True)
        fields = _fields(schema)
        if d is None or d == 0:  # variable-length lists (or a fixed size of 0): look at row 1
            d = _first_list_length(parquet, vector[0], label, choice.skip_invalid)
        layout = choice.layout if choice.layout is not None else VectorLayout(kind, vector, d, keep)
        rows = batch_rows(layout.width)
        keep_schema = pa.schema([fields[name] for name in keep]) if keep else None
        batches = _parquet_batches(parquet, [*keep, *vector], rows, label)

        def seek(row: int) -> tuple[Generator[pa.RecordBatch, None, None], int]:
            """Batches from the row group that holds ``row``, and that group's first row."""
            first = group = 0
            while group < parquet.num_row_groups - 1 and first + parquet.metadata.row_group(group).num_rows <= row:
                first += parquet.metadata.row_group(group).num_rows
                group += 1
            groups = list(range(group, parquet.num_row_groups))
            return _parquet_batches(parquet, [*keep, *vector], rows, label, groups), first
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
        precision=source_precision([fields[name].type for name in vector]),
        seek=seek,
        columns_in_file=schema.names,
    )


def _first_list_length(parquet: pq.ParquetFile, name: str, label: str, skip: bool = False) -> int:
    """The length of the first row's list in column ``name`` (which must be a usable vector), or
    with ``skip`` (skip_invalid) that of the first non-empty list."""
    if skip:
        return _first_usable_length(parquet, name, label)
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
            f"{label}: {_row(1)}, column {name!r}: vector is empty; vectors need at least one coordinate."
        )
    return int(length)


def _first_usable_length(parquet: pq.ParquetFile, name: str, label: str) -> int:
    """The length of the first non-null, non-empty list in column ``name``, read batch by batch."""
    try:
        with contextlib.closing(parquet.iter_batches(batch_size=65_536, columns=[name])) as batches:
            for batch in batches:
                lengths = pc.list_value_length(batch.column(0))
                usable = pc.fill_null(pc.greater(lengths, 0), False)
                if pc.any(usable).as_py():
                    return int(lengths[pc.index(usable, True).as_py()].as_py())
    except _ArrowFailure as exc:
        raise _not_parquet(label, exc) from exc
    raise DataError(
        f"{label}: column {name!r} holds no vector with at least one coordinate in any row; "
        "check that this is the vector column."
    )


def _parquet_batches(
    parquet: pq.ParquetFile, columns: list[str], batch_rows: int, label: str, row_groups: list[int] | None = None
) -> Generator[pa.RecordBatch, None, None]:
    """Record batches of ``columns`` (of ``row_groups``, default all), read failures turned into :class:`DataError`:
    the reader's own loop (:func:`~ldpcli.io._read.translated_batches`) over pyarrow's iterator, which it closes."""
    iterator = parquet.iter_batches(batch_size=batch_rows, columns=columns, row_groups=row_groups)
    return translated_batches(iterator.__next__, lambda exc: _not_parquet(label, exc), close=iterator.close)


#: The codecs ldp's Parquet writer applies to privatized columns (pyarrow's names), the default first.
#: The default was chosen by ``benchmarks/writer_settings.py`` on privatized rows (README, Benchmarks).
PARQUET_CODECS = ("none", "snappy", "lz4", "zstd", "gzip", "brotli")


def vector_leaves(schema: pa.Schema, layout: VectorLayout) -> list[str]:
    """The Parquet column paths of the privatized values: ``vec.list.element`` for a list column
    (pyarrow's compliant nested naming, which the writer's per-column settings are keyed by), the
    column's own name for one column per coordinate."""
    return [f"{name}.list.element" if pa.types.is_nested(schema.field(name).type) else name
            for name in schema.names if name not in layout.keep]


def writer_settings(schema: pa.Schema, layout: VectorLayout, codec: str | None = None) -> dict[str, Any]:
    """The ``ParquetWriter`` keywords for a privatized file of ``schema``; ``codec`` one of
    :data:`PARQUET_CODECS` (None: the first).

    Privatized values are random floats, so on their columns: no dictionary (nothing repeats; it
    nearly halves the write speed), no min/max statistics (noise spans the whole range in every row
    group, so a reader can skip nothing by them, and computing them costs time), ``codec``, and,
    whenever a codec is applied, BYTE_STREAM_SPLIT encoding (it gathers the sign and exponent bytes
    of the values into runs, the only part of random floats a codec can shrink). The kept columns
    (ids, labels) keep pyarrow's defaults: dictionary, statistics and snappy; they are small and
    readers filter on them.
    """
    codec = codec or PARQUET_CODECS[0]
    leaves = vector_leaves(schema, layout)
    keep = list(layout.keep)
    settings: dict[str, Any] = {
        "use_dictionary": keep or False,
        "write_statistics": keep or False,
        "compression": {**dict.fromkeys(keep, "snappy"), **dict.fromkeys(leaves, codec)},
    }
    if codec != "none":
        settings["use_byte_stream_split"] = leaves
    return settings


def _open_writer(
    sink: Sink | pa.NativeFile, schema: pa.Schema, layout: VectorLayout | None, codec: str | None = None
) -> pq.ParquetWriter:
    """A Parquet writer into ``sink`` with :func:`writer_settings`; a plain table (no ``layout``)
    gets pyarrow's defaults."""
    if layout is None:
        return pq.ParquetWriter(sink, schema)
    return pq.ParquetWriter(sink, schema, **writer_settings(schema, layout, codec))


register_format("parquet", (".parquet", ".pq"), _open_parquet, _open_writer, codecs=PARQUET_CODECS)
