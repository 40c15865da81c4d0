"""Writing vectors: :class:`VectorWriter` encodes batches into any :class:`~ldpcli.io._atomic.Sink`
in a registered format; :class:`AtomicVectorWriter` is that writer over an
:class:`~ldpcli.io._atomic.AtomicFileSink`, so the file appears on commit or not at all.
:func:`table_bytes` encodes a small table as a whole file's bytes.

Vectors are written as float64 or float32 (``dtype``, one of :data:`DTYPES`; :func:`output_dtype`
picks the input's own precision by default); seed-compressed reports (:mod:`ldpcli.mechanisms._compressed`)
as uint64 words (:data:`REPORT_DTYPE`), which the release chooses itself. The values handed to a writer are float64; writing
float32 rounds each to the nearest float32, a fixed function of the privatized values alone
(post-processing), so it changes no privacy guarantee, only the precision of what is released.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa

from ldpcli.errors import DataError, UsageError, counted
from ldpcli.io import _formats as formats
from ldpcli.io._atomic import AtomicFileSink, Sink
from ldpcli.io._layout import VectorLayout
from ldpcli.io._messages import _reason, _write_failed
from ldpcli.io._read import VectorReader, _ArrowFailure

#: The value types vectors can be written as (``dtype``).
DTYPES = ("float32", "float64")
#: The type seed-compressed reports are written as: their uint64 words, bit for bit.
REPORT_DTYPE = "uint64"
_ARROW_TYPES = {"float32": pa.float32(), "float64": pa.float64(), REPORT_DTYPE: pa.uint64()}
_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Bytes gathered before they are handed to the sink in one write.
_WRITE_BUFFER = 4 * 2**20


def check_dtype(dtype: object) -> str:
    """``dtype`` if it is one of :data:`DTYPES`, else a :class:`UsageError`."""
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise UsageError(f"`dtype` must be float32 or float64, got {dtype!r}")
    return dtype


def output_dtype(dtype: str | None, source: VectorReader | None = None) -> str:
    """The dtype to write vectors as: ``dtype`` if given (checked by :func:`check_dtype`), else the
    precision of ``source``'s vector values.

    float32 when the source stores them as float32 (or coarser: float16) in a typed format
    (Parquet); float64 for float64, integer and decimal values, for CSV text (whose precision is
    unknown) and without a source. Writing float32 is post-processing: privacy is unchanged.
    """
    if dtype == REPORT_DTYPE:
        return dtype
    if dtype is not None:
        return check_dtype(dtype)
    if source is None or source.format == "csv":
        return "float64"
    return dtype_of_precision(source.precision)


def dtype_of_precision(precision: float) -> str:
    """The narrowest written dtype that holds values of this unit roundoff: float32 for float32 (and
    float16) values, float64 otherwise."""
    return "float32" if precision >= np.finfo(np.float32).epsneg else "float64"


def _output_format(
    label: str, layout: VectorLayout, format: str, keep_schema: pa.Schema | None
) -> formats.Format:
    """The registered format ``format``, checked to hold ``layout`` and ``keep_schema``."""
    if format not in formats.FORMATS:
        raise UsageError(f"{label}: unknown format {format!r}; choose one of: {', '.join(formats.FORMATS)}.")
    fmt = formats.get_format(format)
    if fmt.check_output is not None:
        fmt.check_output(label, layout, keep_schema)
    if keep_schema is not None and keep_schema.names != list(layout.keep):
        raise ValueError(
            f"keep_schema has columns {keep_schema.names}, the layout keeps {list(layout.keep)}"
        )
    return fmt


class VectorWriter:
    """Encode vectors batch by batch into a sink in one format; :meth:`commit` makes them final.

    A context manager: leaving the ``with`` block without :meth:`commit` discards the sink. The
    output columns are those described for :class:`AtomicVectorWriter`.
    """

    format: str
    layout: VectorLayout
    dtype: str
    rows_written: int

    def __init__(
        self,
        sink: Sink,
        layout: VectorLayout,
        format: str,
        keep_schema: pa.Schema | None = None,
        *,
        dtype: str = "float64",
        compression: str | None = None,
        codec: str | None = None,
    ) -> None:
        """Check that ``format`` can hold ``layout``; ``sink.label`` names the output in messages.

        ``keep_schema`` fixes the keep columns' types; without it they come from the first written
        batch. ``dtype`` (``"float64"`` or ``"float32"``) is the type the vectors are written as.
        ``compression`` (pyarrow's codec: ``"gzip"``, ``"zstd"``) compresses the whole stream;
        ``codec`` is applied by the format inside the file (one of its
        :attr:`~ldpcli.io._formats.Format.codecs`, else a :class:`UsageError`; None: its default).
        """
        self.dtype = dtype if dtype == REPORT_DTYPE else check_dtype(dtype)
        self._compression = compression
        self._format = _output_format(sink.label, layout, format, keep_schema)
        formats.check_codec(format, codec, sink.label)
        self._codec = codec
        self.format = format
        self.layout = layout
        self.rows_written = 0
        self._sink = sink
        self._label = sink.label
        self._keep_schema = keep_schema
        self._encoder: _Streamed | None = None
        self._state = "open"

    def __enter__(self) -> VectorWriter:
        """Return the writer itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Discard the sink unless :meth:`commit` succeeded."""
        if self._state == "open":
            self.discard()

    def write(self, values: np.ndarray, keep: pa.Table | None = None) -> None:
        """Append one batch: ``values`` of shape ``(rows, copies·d)`` and float64 (uint64 for
        :data:`REPORT_DTYPE`), ``keep`` with ``rows`` rows.

        With ``dtype="float32"`` the values are rounded to the nearest float32; a value beyond the
        float32 range is a :class:`UsageError` (write float64 instead).
        """
        self._check_open()
        width = self.layout.width
        if not isinstance(values, np.ndarray):
            raise ValueError(f"values must be a numpy array, got {type(values).__name__}")
        kind = np.uint64 if self.dtype == REPORT_DTYPE else np.float64
        if values.dtype != kind or values.ndim != 2 or values.shape[1] != width:
            raise ValueError(
                f"values must be a {np.dtype(kind)} array of shape (rows, {width}), got {values.dtype} {values.shape}"
            )
        keep_table = self._keep_table(keep, values.shape[0])
        if self.dtype == "float32":
            values = self._float32(values)
        try:
            if self._encoder is None:
                self._encoder = self._open_encoder()
            if values.shape[0]:
                self._encoder.write_values(values, keep_table)
        except _ArrowFailure as exc:
            raise _encode_failed(self._label, exc) from exc
        self.rows_written += values.shape[0]

    def commit(self) -> None:
        """Finish the encoding and commit the sink (for a file: flush it and rename it onto its path)."""
        self._end(self._sink.commit)

    def finish(self) -> None:
        """Finish the encoding and the sink's bytes without publishing them (a
        :class:`~ldpcli.io._publication.Publication` renames the file together with its sidecar)."""
        self._end(self._sink.finish)

    def _end(self, complete: Callable[[], None]) -> None:
        """Close the encoder, then ``complete`` the sink; discard everything on failure."""
        self._check_open()
        try:
            encoder = self._encoder if self._encoder is not None else self._open_encoder()
            self._encoder = None
            encoder.close()
            complete()
        except BaseException as exc:
            self.discard()
            if isinstance(exc, _ArrowFailure):
                raise _encode_failed(self._label, exc) from exc
            raise
        self._state = "committed"

    def discard(self) -> None:
        """Abandon the output: close the encoder and discard the sink."""
        self._state = "discarded"
        if self._encoder is not None:
            with contextlib.suppress(Exception):
                self._encoder.close()
            self._encoder = None
        self._sink.discard()

    def _float32(self, values: np.ndarray) -> np.ndarray:
        """``values`` rounded to the nearest float32; :class:`UsageError` if one does not fit."""
        with np.errstate(over="ignore"):
            rounded = values.astype(np.float32)
        if not np.isfinite(rounded).all():
            worst = float(np.max(np.abs(values)))
            raise UsageError(
                f"{self._label}: a privatized value ({worst:.4g}) is beyond the float32 range "
                f"(±{_FLOAT32_MAX:.4g}); write float64 (`dtype` float64)."
            )
        return rounded

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
            got = "none" if keep is None else counted(keep.num_rows, "row")
            raise ValueError(f"keep must be a table with {counted(rows, 'row')} and columns {names}, got {got}")
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
        value_type = _ARROW_TYPES[self.dtype]
        if self.layout.kind == "list":
            fields.extend(pa.field(name, pa.list_(value_type, self.layout.d)) for name in self.layout.columns)
        else:
            fields.extend(pa.field(name, value_type) for name in self.layout.columns)
        return pa.schema(fields)

    def _open_encoder(self) -> _Streamed:
        """The format's writer, writing into the sink through a buffer (and the compressor, if any):
        a Parquet file of d columns makes two small writes per column and batch, each a call into
        Python and a hash update, so unbuffered they cost more than the encoding. The format's
        values encoder where it takes this file (a wide CSV), else its pyarrow writer of tables."""
        stream: pa.NativeFile = pa.BufferedOutputStream(pa.PythonFile(self._sink, mode="w"), _WRITE_BUFFER)
        if self._compression is not None:
            stream = pa.CompressedOutputStream(stream, self._compression)
        direct = self._format.values_encoder
        encoder = direct(stream, self.layout, self._keep_schema) if direct is not None else None
        if encoder is None:
            schema = self._schema()
            encoder = _Tables(self._format.encoder(stream, schema, self.layout, self._codec), schema, self.layout)
        return _Streamed(encoder, stream)


@dataclass
class _Tables:
    """A format's writer of Arrow tables, handed each batch as a table of ``schema``: the kept columns,
    then one list column per copy (a list layout) or one column per coordinate."""

    encoder: formats.TableEncoder
    schema: pa.Schema
    layout: VectorLayout

    def write_values(self, values: np.ndarray, keep: pa.Table | None) -> None:
        """Write one batch (``values``: rows × width, ``keep``: its kept columns, or None)."""
        d = self.layout.d
        arrays: list[pa.Array | pa.ChunkedArray] = list(keep.columns) if keep is not None else []
        if self.layout.kind == "list" and self.layout.copies == 1:
            flat = pa.array(np.ascontiguousarray(values).reshape(-1))
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, d))
        elif self.layout.kind == "list":
            for copy in range(self.layout.copies):
                flat = pa.array(np.ascontiguousarray(values[:, copy * d: (copy + 1) * d]).reshape(-1))
                arrays.append(pa.FixedSizeListArray.from_arrays(flat, d))
        else:
            arrays.extend(pa.array(column) for column in np.ascontiguousarray(values.T))
        self.encoder.write_table(pa.Table.from_arrays(arrays, schema=self.schema))

    def close(self) -> None:
        self.encoder.close()


@dataclass
class _Streamed:
    """A format's writer into a buffering (or compressing) stream over the sink: closing it closes
    both, flushing the stream into the sink (whose own close does nothing: the sink is committed or
    discarded after)."""

    encoder: formats.ValuesEncoder
    stream: pa.NativeFile

    def write_values(self, values: np.ndarray, keep: pa.Table | None) -> None:
        self.encoder.write_values(values, keep)

    def close(self) -> None:
        try:
            self.encoder.close()
        finally:
            self.stream.close()


class AtomicVectorWriter:
    """Write vectors batch by batch to a temporary file, renamed onto ``path`` by :meth:`commit`.

    A context manager: leaving the ``with`` block without :meth:`commit` (an exception, Ctrl-C,
    or simply no commit) removes the temporary file, so ``path`` is never left half-written.
    Output columns: the keep columns (in layout order), then the vector column(s) as ``dtype``
    (float64 or float32): one ``FixedSizeList<dtype>[d]`` column for a list layout (Parquet only),
    else one column per coordinate. CSV text holds each value in the fewest digits that read back
    as the same float64 or float32.
    """

    path: Path
    format: str
    layout: VectorLayout
    dtype: str

    def __init__(
        self,
        path: str | os.PathLike[str],
        layout: VectorLayout,
        *,
        format: str | None = None,
        keep_schema: pa.Schema | None = None,
        overwrite: bool = False,
        dtype: str | None = None,
        like: VectorReader | None = None,
        codec: str | None = None,
        anonymous_in: Path | None = None,
    ) -> None:
        """Check the target and create the temporary file next to it (``anonymous_in``: a file without
        a name in that directory, :class:`AtomicFileSink`; finish it and :meth:`detach` it).

        ``format`` defaults to :func:`file_format` of ``path``. ``keep_schema`` fixes the keep
        columns' types; without it they come from the first written batch. ``dtype``
        (``"float32"`` or ``"float64"``, else a :class:`UsageError`) defaults to the precision of
        the input ``like`` (:func:`output_dtype`), float64 without one; :attr:`dtype` is the one
        chosen. Rounding to float32 is post-processing of the privatized values: no privacy cost.
        ``codec``: the compression inside the file (:class:`VectorWriter`).
        """
        if format is None:
            format = formats.file_format(path)
        dtype = output_dtype(dtype, like)
        # Checked before the temporary file exists (the VectorWriter checks the same again).
        _output_format(os.fspath(path), layout, format, keep_schema)
        formats.check_codec(format, codec, os.fspath(path))
        self._sink = AtomicFileSink(path, overwrite=overwrite, anonymous_in=anonymous_in)
        self._detached = False
        self._writer = VectorWriter(self._sink, layout, format, keep_schema, dtype=dtype,
                                    compression=formats.compression_of(path), codec=codec)
        self.path = self._sink.path
        self.format = format
        self.layout = layout
        self.dtype = dtype

    def __enter__(self) -> AtomicVectorWriter:
        """Return the writer itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Remove the temporary file unless it was published (by :meth:`commit` or a publication)."""
        self._writer.__exit__(exc_type, exc, traceback)
        if not self._sink.published and not self._detached:
            self._sink.discard()

    def write(self, values: np.ndarray, keep: pa.Table | None = None) -> None:
        """Append one batch: ``values`` of shape ``(rows, d)`` and float64 (written as :attr:`dtype`),
        ``keep`` with ``rows`` rows."""
        self._writer.write(values, keep)

    def commit(self) -> None:
        """Finish the file, flush it to disk and rename it onto ``path``."""
        self._writer.commit()

    def finish(self) -> None:
        """Finish the file and flush it to disk at its temporary name (publish :attr:`sink` after)."""
        self._writer.finish()

    def detach(self) -> AtomicFileSink:
        """Finish the file and hand its sink over: the caller publishes or discards it (leaving the
        ``with`` block no longer does)."""
        self.finish()
        self._detached = True
        return self._sink

    @property
    def sink(self) -> AtomicFileSink:
        """The temporary file (for :class:`~ldpcli.io._publication.Publication`)."""
        return self._sink

    @property
    def rows_written(self) -> int:
        """Rows written so far."""
        return self._writer.rows_written

    @property
    def published(self) -> bool:
        """True once ``path`` holds this writer's file (set atomically with the rename)."""
        return self._sink.published

    @property
    def sha256(self) -> str:
        """The SHA-256 (hex) of the bytes written; final once :meth:`commit` has run."""
        return self._sink.sha256


def table_bytes(columns: Mapping[str, Any], format: str) -> bytes:
    """A small in-memory table (column name to 1-D array) as the bytes of a whole Parquet or CSV
    file, for :func:`atomic_write_bytes`."""
    fmt = formats.get_format(format)
    table = pa.table(dict(columns))
    sink = pa.BufferOutputStream()
    encoder = fmt.encoder(sink, table.schema, None)
    encoder.write_table(table)
    encoder.close()
    return sink.getvalue().to_pybytes()


def _encode_failed(label: str, exc: BaseException) -> DataError:
    """The error for an output that could not be written."""
    if isinstance(exc, pa.ArrowException) and not isinstance(exc, OSError):
        # Not the disk: pyarrow refused a value (vectors are plain floats, so a kept column's).
        return DataError(
            f"{label}: could not write the file ({_reason(exc)}); a `keep` column holds values "
            "this format cannot store, so write Parquet or leave that column out of `keep`."
        )
    return _write_failed(label, exc)
