"""NumPy ``.npy`` files holding one 2-D array (rows × d): read through a memory map batch by batch,
written as a stream; registered for ``.npy``.

A ``.npy`` file has no column names: its vectors are the list column ``vector`` (a re-read of a
privatized ``.npy`` takes the layout its sidecar records). It holds only the vectors, so kept columns
and several copies are refused for an ``.npy`` output. The format's header states the row count
before the data, which a stream does not know in advance, so the writer spools the rows to an
anonymous temporary file and writes header and rows into the output when it closes: one more
write and read of the output, on disk, never in memory.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ldpcli.errors import DataError, UsageError, counted
from ldpcli.io._atomic import Sink
from ldpcli.io._columns import _Choice, _resolve
from ldpcli.io._formats import register_format
from ldpcli.io._layout import VectorLayout
from ldpcli.io._messages import _no_rows, _reason
from ldpcli.io._read import VectorReader, _open_input, source_precision

#: The vector column a ``.npy`` file is read as.
NPY_COLUMN = "vector"
_TYPES = {np.dtype(np.float16): pa.float16(), np.dtype(np.float32): pa.float32(), np.dtype(np.float64): pa.float64()}


def _load(path: Path, label: str) -> np.ndarray:
    """The file's array, memory-mapped; DataError unless it is a 2-D array of real numbers."""
    _open_input(path, label)
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(f"{label}: not a valid .npy file ({_reason(exc)}); save it with numpy.save.") from exc
    if array.ndim != 2:
        raise DataError(f"{label}: holds a {array.ndim}-D array of shape {array.shape}; ldp reads a 2-D array "
                        "(one row per vector).")
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)) or (
        array.dtype.itemsize > 8
    ):
        raise DataError(f"{label}: holds values of type {array.dtype}; vectors must be real numbers.")
    if array.shape[0] == 0:
        raise _no_rows(label)
    if array.shape[1] == 0:
        raise DataError(f"{label}: its rows have no coordinate; vectors need at least one.")
    return array


def _open_npy(path: Path, label: str, choice: _Choice, batch_rows: Callable[[int], int]) -> VectorReader:
    """Open an .npy file: its array (memory-mapped), then batches of rows in the layout asked for."""
    array = _load(path, label)
    n, d = array.shape
    value = _TYPES.get(array.dtype, pa.float64())
    if choice.layout is None:
        schema = pa.schema([(NPY_COLUMN, pa.list_(value, d))])
        kind, vector, keep, _ = _resolve(schema, label, choice, check_types=True)
        layout = VectorLayout(kind, vector, d, keep)
    else:  # a privatized .npy re-read: its columns are the recorded layout's (names are not stored)
        layout = choice.layout
        if layout.d != d or layout.keep or layout.copies != 1:
            raise DataError(f"{label}: rows of {counted(d, 'value')}, but its sidecar's layout has d = {layout.d}"
                            f"{' and kept columns' if layout.keep else ''}; use the file written with it.")
    rows = batch_rows(layout.width)

    def batches_from(start: int) -> Generator[pa.RecordBatch, None, None]:
        for first in range(start, n, rows):
            block = np.ascontiguousarray(array[first: first + rows])
            if array.dtype not in _TYPES:
                block = block.astype(np.float64)
            yield _record(block, layout)

    def seek(row: int) -> tuple[Generator[pa.RecordBatch, None, None], int]:
        return batches_from(row), row

    return VectorReader(
        path=path, label=label, format="npy", layout=layout, num_rows=n, batch_rows=rows, keep_schema=None,
        batches=batches_from(0), release=lambda: None, precision=source_precision([value]), seek=seek,
    )


def _record(block: np.ndarray, layout: VectorLayout) -> pa.RecordBatch:
    """Rows of the array as a record batch of ``layout``: one list column, or one column per coordinate."""
    if layout.kind == "list":
        flat = pa.array(block.reshape(-1))
        return pa.RecordBatch.from_arrays([pa.FixedSizeListArray.from_arrays(flat, block.shape[1])],
                                          names=[layout.columns[0]])
    return pa.RecordBatch.from_arrays([pa.array(block[:, j]) for j in range(block.shape[1])],
                                      names=list(layout.columns))


class _NpyEncoder:
    """Writes the vector columns of each table as rows of one 2-D array; the header at :meth:`close`."""

    def __init__(
        self, sink: Sink | pa.NativeFile, schema: pa.Schema, layout: VectorLayout | None, codec: str | None = None
    ) -> None:
        """An .npy file has no codecs (``codec`` is None): the array is written as it is."""
        self._sink = sink
        vector = set(layout.columns) if layout is not None else None
        self._names = [name for name in schema.names if vector is None or name in vector]
        values = [field.type.value_type if pa.types.is_fixed_size_list(field.type) else field.type
                  for field in (schema.field(name) for name in self._names)]
        self._dtype = np.result_type(*(np.dtype(value.to_pandas_dtype()) for value in values))
        self._width = sum(schema.field(name).type.list_size if pa.types.is_fixed_size_list(schema.field(name).type)
                          else 1 for name in self._names)
        self._rows = 0
        self._spool: Any = tempfile.TemporaryFile(prefix="ldp-npy-")

    def write_table(self, table: pa.Table) -> None:
        parts = []
        for name in self._names:
            column = table.column(name).combine_chunks()
            if pa.types.is_fixed_size_list(column.type):
                parts.append(np.asarray(column.flatten()).reshape(len(column), -1))
            else:
                parts.append(np.asarray(column)[:, None])
        block = np.ascontiguousarray(np.hstack(parts) if len(parts) > 1 else parts[0], dtype=self._dtype)
        self._spool.write(block.tobytes())
        self._rows += block.shape[0]

    def close(self) -> None:
        try:
            header = {"descr": np.lib.format.dtype_to_descr(self._dtype), "fortran_order": False,
                      "shape": (self._rows, self._width)}
            np.lib.format.write_array_header_1_0(self._sink, header)
            self._spool.seek(0)
            shutil.copyfileobj(self._spool, self._sink, 8 * 2**20)
        finally:
            self._spool.close()


def _check_holds(label: str, layout: VectorLayout, keep_schema: pa.Schema | None) -> None:
    """:class:`UsageError` for an output an .npy file cannot hold: kept columns, several copies."""
    if layout.keep:
        raise UsageError(f"{label}: an .npy file holds only the vectors; leave out `keep` or write Parquet.")
    if layout.copies > 1:
        raise UsageError(f"{label}: an .npy file holds one array of vectors; write `copies` to Parquet.")


register_format("npy", (".npy",), _open_npy, _NpyEncoder, check_output=_check_holds)
