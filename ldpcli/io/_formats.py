"""The registry of file formats: which suffixes name a format, how it is read, how it is written.

A format module registers itself with :func:`register_format` when it is imported: Parquet
(``.parquet``, ``.pq``) in :mod:`ldpcli.io._parquet`, CSV (``.csv``) in :mod:`ldpcli.io._csv`.
The built-in ones are imported, in that order, on the first look-up, so this module itself needs
no pyarrow. ``FORMATS`` is the tuple of registered names, built-in ones first.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ldpcli.errors import UsageError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from ldpcli.io._atomic import Sink
    from ldpcli.io._columns import _Choice
    from ldpcli.io._layout import VectorLayout
    from ldpcli.io._read import VectorReader

#: The modules of the built-in formats, in the order the formats are listed.
_BUILTIN_MODULES = ("ldpcli.io._parquet", "ldpcli.io._csv", "ldpcli.io._arrow_ipc", "ldpcli.io._npy")


class ReaderOpener(Protocol):
    """Open a file of this format: resolve its layout and return a reader of its batches."""

    def __call__(self, path: Path, label: str, choice: _Choice, batch_rows: Callable[[int], int]) -> VectorReader:
        """``batch_rows(d)``: the rows of each batch once the file's dimension d is known."""
        ...


class TableEncoder(Protocol):
    """Writes Arrow tables into a sink in one format (pyarrow's ParquetWriter, CSVWriter)."""

    def write_table(self, table: pa.Table) -> None: ...

    def close(self) -> None: ...


class Encoder(Protocol):
    """Start encoding tables of ``schema`` into ``sink``.

    ``layout`` is that of a vector file; ``None`` for a plain table, written with the format's
    defaults (:func:`~ldpcli.io._write.table_bytes` writes into an in-memory pyarrow stream).
    ``codec`` is one of the format's :attr:`Format.codecs` (checked by :func:`check_codec`), applied
    to the privatized columns inside the file; None: the format's default, its first codec.
    """

    def __call__(
        self, sink: Sink | pa.NativeFile, schema: pa.Schema, layout: VectorLayout | None, codec: str | None = None
    ) -> TableEncoder: ...


class ValuesEncoder(Protocol):
    """Writes a vector file's batches into a sink straight from their values: ``values`` of shape
    (rows, width), one column per coordinate, and the kept columns as a table (None without any)."""

    def write_values(self, values: np.ndarray, keep: pa.Table | None) -> None: ...

    def close(self) -> None: ...


class WideEncoder(Protocol):
    """Start encoding a vector file laid out by ``layout`` (its kept columns, of ``keep_schema``, then a
    column per coordinate) into ``sink`` from its values, or return None to leave it to the format's
    :class:`Encoder`: a table of one Arrow array per column, and its schema, cost memory by the column,
    which a format writing thousands of columns (CSV) avoids this way."""

    def __call__(
        self, sink: pa.NativeFile, layout: VectorLayout, keep_schema: pa.Schema | None
    ) -> ValuesEncoder | None: ...


class OutputCheck(Protocol):
    """:class:`UsageError` naming ``label`` if the format cannot hold this layout or keep schema."""

    def __call__(self, label: str, layout: VectorLayout, keep_schema: pa.Schema | None) -> None: ...


@dataclass(frozen=True)
class Format:
    """A file format: its name, the file suffixes (lower case) that select it, and how it is
    read and written. ``check_output``, if any, refuses outputs the format cannot hold.
    ``codecs``: the compression codecs its writer applies inside the file, the default first;
    empty for a format compressed only as a whole stream, by its suffix (``.csv.gz``).
    ``values_encoder``, if any, writes the vector files it accepts from their values
    (:class:`WideEncoder`), the others being written by ``encoder``."""

    name: str
    suffixes: tuple[str, ...]
    open_reader: ReaderOpener
    encoder: Encoder
    check_output: OutputCheck | None = None
    codecs: tuple[str, ...] = ()
    values_encoder: WideEncoder | None = None


_FORMATS: dict[str, Format] = {}


def register_format(
    name: str,
    suffixes: Iterable[str],
    open_reader: ReaderOpener,
    encoder: Encoder,
    *,
    check_output: OutputCheck | None = None,
    codecs: Iterable[str] = (),
    values_encoder: WideEncoder | None = None,
) -> Format:
    """Register a format for files whose suffix (any case) is one of ``suffixes``, e.g. ``".csv"``;
    ``codecs`` and ``values_encoder`` as in :class:`Format`.

    :class:`ValueError` if the name or a suffix is already registered.
    """
    fmt = Format(name, tuple(suffix.lower() for suffix in suffixes), open_reader, encoder, check_output, tuple(codecs),
                 values_encoder)
    if name in _FORMATS:
        raise ValueError(f"format {name!r} is already registered")
    for other in _FORMATS.values():
        taken = [suffix for suffix in fmt.suffixes if suffix in other.suffixes]
        if taken:
            raise ValueError(f"suffix {taken[0]!r} already selects format {other.name!r}")
    _FORMATS[name] = fmt
    return fmt


def _registry() -> dict[str, Format]:
    """The registered formats by name, the built-in ones imported (so registered) first."""
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)
    return _FORMATS


def file_suffixes() -> frozenset[str]:
    """Every suffix (lower case, with its dot) that selects a registered format, compressed ones
    (``.csv.gz``) included."""
    plain = {suffix for fmt in _registry().values() for suffix in fmt.suffixes}
    compressed = {suffix + ext for fmt in _registry().values() if fmt.name in _COMPRESSIBLE
                  for suffix in fmt.suffixes for ext in COMPRESSIONS}
    return frozenset(plain | compressed)


def check_codec(format: str, codec: str | None, label: str) -> None:
    """:class:`UsageError` naming ``label`` when a writer of ``format`` cannot apply ``codec``.

    None always passes (the format's default). A format without codecs of its own (CSV) is
    compressed as a whole by its suffix, and the message says so.
    """
    if codec is None:
        return
    codecs = get_format(format).codecs
    if codec in codecs:
        return
    if not codecs:
        raise UsageError(
            f"{label}: a {format} file takes no `compression` of its own; "
            + ("compress it as a whole by its suffix (.csv.gz, .csv.zst)" if format in _COMPRESSIBLE
               else "write Parquet or Arrow to compress the vectors")
        )
    raise UsageError(f"{label}: `compression` must be one of {', '.join(codecs)} for a {format} file, got {codec!r}")


def suffix_words() -> str:
    """Every registered suffix, in the order of the formats, with the compressed forms of a text format in
    parentheses (``".parquet, .pq, .csv (.csv.gz, .csv.zst), .arrows, .npy"``): the formats a help text names."""
    return ", ".join(
        suffix + (f" ({', '.join(suffix + ext for ext in COMPRESSIONS)})" if fmt.name in _COMPRESSIBLE else "")
        for fmt in _registry().values() for suffix in fmt.suffixes
    )


def get_format(name: str) -> Format:
    """The registered format called ``name``; :class:`ValueError` for an unknown one."""
    formats = _registry()
    if name not in formats:
        raise ValueError(f"format must be one of {tuple(formats)}, got {name!r}")
    return formats[name]


#: ``scheme:/rest`` or ``scheme://rest``: a URL, possibly after ``pathlib`` collapsed its ``//``. The
#: scheme has two letters or more, so a Windows drive (``C:/data``) is not one.
_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):/+(?P<rest>.*)$")


def check_local(path: str | os.PathLike[str]) -> None:
    """UsageError for a path that is a URL (``https://…``, ``s3://…``, ``file://…``) where a local
    file is needed: ldp writes local files only and reads URLs only as the inputs of privatize and
    of the estimating commands (:mod:`ldpcli.io._remote`, which they resolve before this check).
    Without it ``Path`` turns ``https://host/x`` into the local name ``https:/host/x`` and the user
    gets "no such file"."""
    match = _URL.match(os.fspath(path))
    if match is not None:
        scheme, rest = match.group("scheme").lower(), match.group("rest")
        shown = f"file:///{rest}" if scheme == "file" else f"{scheme}://{rest}"
        local = f" (here: /{rest})" if scheme == "file" else ""
        raise UsageError(
            f"{shown}: URLs are not supported ({scheme}://) here; ldp writes local files only, and reads s3://, "
            f"gs://, hf:// and file:// URLs only as inputs of privatize and the estimating commands: download the "
            f"file first, or give a local or mounted path{local}."
        )


#: Compressed files: the suffix after the format's own, and pyarrow's codec for it. Only text
#: formats are compressed as a whole (Parquet compresses inside the file).
COMPRESSIONS = {".gz": "gzip", ".zst": "zstd"}
_COMPRESSIBLE = ("csv",)


def compression_of(path: str | os.PathLike[str]) -> str | None:
    """pyarrow's codec for a compressed file's name (``x.csv.gz`` → ``"gzip"``), else None."""
    return COMPRESSIONS.get(Path(path).suffix.lower())


#: The first bytes of an Arrow IPC stream (the continuation marker of its first message).
ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
#: The first bytes of the binary data files ldp reads or writes, and what they mark: a sidecar (JSON)
#: or CSV text begins otherwise, and standard input takes only the Arrow IPC stream among them.
_MAGIC = (
    (b"PAR1", "a Parquet file"),
    (ARROW_STREAM_MAGIC, "an Arrow IPC stream"),
    (b"ARROW1", "an Arrow IPC file"),
    (b"\x93NUMPY", "an .npy file"),
)
#: How many first bytes :func:`binary_format` needs to tell them apart.
MAGIC_BYTES = max(len(magic) for magic, _ in _MAGIC)


def binary_format(head: bytes) -> str | None:
    """What a file whose first bytes are ``head`` is by its magic bytes (``"a Parquet file"``), or None
    if it has none of theirs (text such as CSV or JSON, or anything else)."""
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


#: Compressed or archived bytes, which a text format must not be read as (the codec's own magic).
_COMPRESSED_MAGIC = (
    (b"\x1f\x8b", "a gzip-compressed file", "decompress it (gunzip) or name it .csv.gz"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file", "decompress it (unzstd) or name it .csv.zst"),
    (b"BZh", "a bzip2-compressed file", "decompress it (bunzip2)"),
    (b"\xfd7zXZ\x00", "an xz-compressed file", "decompress it (unxz)"),
    (b"PK\x03\x04", "a zip archive", "extract the CSV file from it (unzip)"),
)
#: What to do with a binary data file ldp reads that was named as text.
_RENAME = {"a Parquet file": "rename it to .parquet", "an Arrow IPC stream": "rename it to .arrows",
           "an Arrow IPC file": "convert it to an Arrow IPC stream (.arrows) or Parquet",
           "an .npy file": "rename it to .npy"}


def not_text(head: bytes) -> tuple[str, str] | None:
    """(what it is, what to do) for a file whose first bytes ``head`` are not text: a binary data file
    (:func:`binary_format`), compressed bytes, or any NUL byte (a binary file, or a device such as
    /dev/zero); None for bytes that may be text."""
    kind = binary_format(head)
    if kind is not None:
        return kind, _RENAME[kind]
    for magic, what, todo in _COMPRESSED_MAGIC:
        if head.startswith(magic):
            return what, todo
    if b"\x00" in head:
        return "a binary file (it holds NUL bytes)", "give a CSV text file"
    return None


def data_suffix(path: str | os.PathLike[str]) -> str:
    """The suffix that names a data file's format, compression included: ``.csv.gz``, ``.parquet``."""
    name = Path(path)
    if compression_of(name) is not None:
        return name.with_suffix("").suffix + name.suffix
    return name.suffix


def file_format(path: str | os.PathLike[str]) -> str:
    """Return ``"parquet"`` for ``.parquet``/``.pq`` and ``"csv"`` for ``.csv``, ``.csv.gz`` and
    ``.csv.zst`` (any case).

    Raises :class:`UsageError` for any other extension, a compressed non-text format, and for a
    URL (:func:`check_local`).
    """
    check_local(path)
    compressed = compression_of(path) is not None
    inner = Path(path).with_suffix("") if compressed else Path(path)
    suffix = inner.suffix.lower()
    formats = _registry().values()
    for fmt in formats:
        if suffix in fmt.suffixes:
            if compressed and fmt.name not in _COMPRESSIBLE:
                raise UsageError(
                    f"{os.fspath(path)}: a compressed {fmt.name} file; only CSV is read and written compressed "
                    f"({', '.join('.csv' + ext for ext in COMPRESSIONS)}): Parquet compresses inside the file."
                )
            return fmt.name
    shown = repr(data_suffix(path).lower() if compressed else suffix) if suffix or compressed else "no extension"
    known = [known for fmt in formats for known in fmt.suffixes]
    raise UsageError(
        f"{os.fspath(path)}: unsupported file type ({shown}); "
        f"use a {', '.join(known[:-1])} or {known[-1]} file."
    )


def __getattr__(name: str) -> tuple[str, ...]:
    """``FORMATS``: the names of the registered formats, looked up when asked for (PEP 562)."""
    if name == "FORMATS":
        return tuple(_registry())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
