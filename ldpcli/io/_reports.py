"""Reading seed-compressed reports back: the uint64 words of a file's report column, bit for bit.

A release of seed-compressed reports (:mod:`ldpcli.mechanisms._compressed`) is a Parquet file whose
privatized column holds each row's seed: a ``uint64`` column for a 64-bit seed (the layout's
``kind="columns"``, d = 1 word), a list of two ``uint64`` for a 128-bit one (``kind="list"``, d = 2), beside
the kept columns. The vector readers (:func:`ldpcli.io.open_vectors`) hand out float64, which would round
a seed to 53 bits; :func:`open_reports` hands out the words themselves, as ``(rows, words)`` uint64 arrays
with the kept columns, batch by batch (never the whole file).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ldpcli.errors import DataError, counted
from ldpcli.io._formats import file_format
from ldpcli.io._layout import VectorLayout
from ldpcli.io._parquet import _not_parquet, _parquet_batches
from ldpcli.io._read import _ArrowFailure


def report_type(layout: VectorLayout) -> pa.DataType:
    """The Arrow type of the report column of ``layout``: uint64, or a list of d = 2 uint64 words."""
    return pa.uint64() if layout.kind == "columns" else pa.list_(pa.uint64(), layout.d)


def open_reports(path: Path, layout: VectorLayout, *, batch_rows: int) -> Iterator[tuple[np.ndarray, pa.Table | None]]:
    """The ``(rows, words)`` uint64 reports of the Parquet file ``path`` and its kept columns, ``batch_rows``
    rows at a time. DataError, naming the file (and the row, counting from 1), for a file that is not
    Parquet, a missing report column, one of another type, a missing value or a list of another length."""
    label = str(path)
    if file_format(path) != "parquet":
        raise DataError(f"{label}: seed-compressed reports are stored in Parquet, and this is not a Parquet file; "
                        "pass the .parquet file that ldp privatize wrote")
    (column,) = layout.columns
    try:
        parquet = pq.ParquetFile(path, pre_buffer=False)
        schema = parquet.schema_arrow
    except _ArrowFailure as exc:
        raise _not_parquet(label, exc) from exc
    index = schema.get_field_index(column)
    if index < 0:
        raise DataError(f"{label}: has no column {column!r}, where its sidecar says the reports are; pass the "
                        "file this sidecar was written for")
    stored, expected = schema.field(index).type, report_type(layout)
    if not (stored == expected or (layout.kind == "list" and pa.types.is_list(stored)
                                   and stored.value_type == pa.uint64())):
        raise DataError(f"{label}: column {column!r} holds {stored}, but a {64 * layout.d}-bit report is {expected}; "
                        "the file was re-encoded after privatization or the sidecar belongs to another file")
    first = 0
    for batch in _parquet_batches(parquet, [*layout.keep, column], batch_rows, label):
        values = batch.column(column)
        if values.null_count:
            row = first + int(np.argmax(np.asarray(pc.is_null(values))))
            raise DataError(f"{label}: row {row + 1} (counting from 1) has no report in column {column!r}; "
                            "restore the file from the privatize run")
        if layout.kind == "columns":
            words = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.uint64).reshape(-1, 1)
        else:
            words = _list_words(values, layout.d, first, label, column)
        keep = pa.Table.from_batches([batch.select(list(layout.keep))]) if layout.keep else None
        first += batch.num_rows
        yield words, keep


def _list_words(values: pa.Array, words: int, first: int, label: str, column: str) -> np.ndarray:
    """The (rows, ``words``) uint64 array of a list column of reports; DataError for a list of another length."""
    lengths = np.asarray(pc.list_value_length(values), dtype=np.int64)
    wrong = lengths != words
    if wrong.any():
        row = int(np.argmax(wrong))
        raise DataError(f"{label}: row {first + row + 1} (counting from 1) holds {counted(int(lengths[row]), 'word')} "
                        f"in column {column!r}, and a report here is {words}; restore the file from the privatize run")
    flat = values.flatten()
    if flat.null_count:
        row = int(np.argmax(np.asarray(pc.is_null(flat)))) // words
        raise DataError(f"{label}: row {first + row + 1} (counting from 1) has a missing word in column {column!r}; "
                        "restore the file from the privatize run")
    return np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.uint64).reshape(-1, words)
