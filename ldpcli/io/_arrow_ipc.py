"""Arrow IPC streams: reading with ``pyarrow.ipc.open_stream`` batch by batch and writing with
``pyarrow.ipc.new_stream``; registered for ``.arrows`` (the stream format's suffix).

The stream format is what Arrow tools pass through pipes (``ldp privatize - -o -`` reads and writes
it on stdin and stdout, :mod:`ldpcli.io._streams`). The row count is known only at the end, like CSV.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ldpcli.errors import DataError
from ldpcli.io._atomic import Sink
from ldpcli.io._columns import _Choice, _fields, _resolve
from ldpcli.io._formats import register_format
from ldpcli.io._layout import VectorLayout
from ldpcli.io._messages import _no_rows, _reason
from ldpcli.io._read import VectorReader, _ArrowFailure, _open_input, source_precision, translated_batches


def _not_arrow(label: str, exc: BaseException) -> DataError:
    return DataError(
        f"{label}: not a valid Arrow IPC stream ({_reason(exc)}); check that it is complete and is the stream "
        "format (pyarrow.ipc.new_stream), not the file format."
    )


def _stream_batches(path: Path, label: str, columns: list[str] | None = None) -> Generator[pa.RecordBatch, None, None]:
    """The stream's record batches (of ``columns``), read failures turned into :class:`DataError`."""
    try:
        reader = pa.ipc.open_stream(pa.memory_map(str(path)))
    except _ArrowFailure as exc:
        raise _not_arrow(label, exc) from exc
    with contextlib.closing(reader):
        for batch in translated_batches(reader.read_next_batch, lambda exc: _not_arrow(label, exc)):
            yield batch if columns is None else batch.select(columns)


def _open_arrow(path: Path, label: str, choice: _Choice, batch_rows: Callable[[int], int]) -> VectorReader:
    """Open an Arrow IPC stream file: its schema, the layout, then its batches."""
    _open_input(path, label)
    try:
        with pa.ipc.open_stream(pa.memory_map(str(path))) as probe:
            schema = probe.schema
    except _ArrowFailure as exc:
        raise _not_arrow(label, exc) from exc
    kind, vector, keep, d = _resolve(schema, label, choice, check_types=True)
    fields = _fields(schema)
    if d is None or d == 0:  # variable-length lists: the first non-empty one gives d
        d = _first_length(path, label, vector[0])
    layout = choice.layout if choice.layout is not None else VectorLayout(kind, vector, d, keep)
    if not any(batch.num_rows for batch in _stream_batches(path, label, [vector[0]])):
        raise _no_rows(label)
    keep_schema = pa.schema([fields[name] for name in keep]) if keep else None
    batches = _stream_batches(path, label, [*keep, *vector])
    return VectorReader(
        path=path,
        label=label,
        format="arrow",
        layout=layout,
        num_rows=None,
        batch_rows=batch_rows(layout.width),
        keep_schema=keep_schema,
        batches=batches,
        release=batches.close,
        precision=source_precision([fields[name].type for name in vector]),
        columns_in_file=schema.names,
    )


def _first_length(path: Path, label: str, name: str) -> int:
    """The length of the first non-empty list in column ``name``."""
    for batch in _stream_batches(path, label, [name]):
        lengths = pc.list_value_length(batch.column(0))
        usable = pc.fill_null(pc.greater(lengths, 0), False)
        if pc.any(usable).as_py():
            return int(lengths[pc.index(usable, True).as_py()].as_py())
    raise DataError(f"{label}: column {name!r} holds no vector with at least one coordinate; check the vector column.")


#: The codecs an Arrow IPC stream applies to its record batches (pyarrow's names), the default first.
ARROW_CODECS = ("none", "lz4", "zstd")


def _open_writer(
    sink: Sink | pa.NativeFile, schema: pa.Schema, layout: VectorLayout | None, codec: str | None = None
) -> pa.ipc.RecordBatchStreamWriter:
    """An Arrow IPC stream writer into ``sink``, its batches compressed with ``codec`` (one of
    :data:`ARROW_CODECS`; None or ``"none"``: uncompressed, the default)."""
    compression = None if codec in (None, "none") else codec
    return pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(compression=compression))


register_format("arrow", (".arrows",), _open_arrow, _open_writer, codecs=ARROW_CODECS)
