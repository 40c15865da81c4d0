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
it applies the data row ("row 3 (counting from 1)": the header is not a row), the column and the
coordinate of a list ("coordinate 5, counting from 0").

Columns are chosen safely: automatic detection refuses numeric columns that look like an
identifier or a label, ``columns`` takes exact names, ``A:B`` ranges and globs, and kept text
columns that look like free text are refused unless ``keep_unsafe`` (:mod:`~ldpcli.io.columns`).
``skip_invalid`` marks bad rows in :attr:`VectorBatch.valid` instead of raising.

The modules (``layout``, ``messages``, ``atomic``, ``publication`` and ``formats`` load no pyarrow):

- :mod:`~ldpcli.io.layout`: :class:`VectorLayout`, where the vectors live in a file.
- :mod:`~ldpcli.io.messages`: one-line error messages shared by the other modules.
- :mod:`~ldpcli.io.atomic`: temporary files and crash safety: the :class:`Sink` protocol,
  :class:`AtomicFileSink`, :func:`atomic_write_bytes`, :func:`remove_temporaries`.
- :mod:`~ldpcli.io.publication`: several outputs published as one (:class:`Publication`, with its
  journal and backups) and :func:`sweep_stale`, which finishes what dead runs left.
- :mod:`~ldpcli.io.formats`: the format registry: :func:`register_format`, :func:`file_format`
  (by suffix), :func:`get_format`, ``FORMATS``.
- :mod:`~ldpcli.io.columns`: choosing the vector and keep columns from a file's schema, and the
  checks that keep identifiers out of the vectors and free text out of the kept columns.
- :mod:`~ldpcli.io.vectors`: :func:`open_vectors`, the entry to reading a file in any format.
- :mod:`~ldpcli.io.read`: :class:`VectorReader`, :class:`VectorBatch` and
  the checks of every batch's values; :func:`open_table`, the same rules for an in-memory table.
- :mod:`~ldpcli.io.parquet`: reading and writing Parquet (``.parquet``, ``.pq``).
- :mod:`~ldpcli.io.csv`: reading and writing CSV (``.csv``).
- :mod:`~ldpcli.io.write`: :class:`VectorWriter` (batches encoded into a sink),
  :class:`AtomicVectorWriter` (that writer over an :class:`AtomicFileSink`), :func:`table_bytes`.

Importing this package loads no pyarrow: the names below are imported from their modules when
first asked for (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ldpcli.io.atomic import (
        AtomicFileSink,
        Sink,
        atomic_write_bytes,
        atomic_write_text,
        file_sha256,
        remove_temporaries,
    )
    from ldpcli.io.atomic import (
        _publish as _publish,
    )
    from ldpcli.io.formats import (
        FORMATS,
        Format,
        file_format,
        get_format,
        register_format,
    )
    from ldpcli.io.layout import VectorLayout
    from ldpcli.io.read import (
        DEFAULT_BATCH_MEMORY,
        VectorBatch,
        VectorReader,
        default_batch_rows,
        open_table,
    )
    from ldpcli.io.vectors import open_vectors
    from ldpcli.io.write import AtomicVectorWriter, VectorWriter, table_bytes

#: Each name this package re-exports, and the module that holds it.
_EXPORTS: dict[str, str] = {
    "VectorLayout": "layout",
    "Sink": "atomic",
    "AtomicFileSink": "atomic",
    "atomic_write_bytes": "atomic",
    "atomic_write_text": "atomic",
    "file_sha256": "atomic",
    "remove_temporaries": "atomic",
    "_publish": "atomic",
    "FORMATS": "formats",
    "Format": "formats",
    "file_format": "formats",
    "get_format": "formats",
    "register_format": "formats",
    "DEFAULT_BATCH_MEMORY": "read",
    "VectorBatch": "read",
    "VectorReader": "read",
    "default_batch_rows": "read",
    "open_table": "read",
    "open_vectors": "vectors",
    "AtomicVectorWriter": "write",
    "VectorWriter": "write",
    "table_bytes": "write",
}

__all__ = [
    "DEFAULT_BATCH_MEMORY",
    "FORMATS",
    "AtomicFileSink",
    "AtomicVectorWriter",
    "Format",
    "Sink",
    "VectorBatch",
    "VectorLayout",
    "VectorReader",
    "VectorWriter",
    "atomic_write_bytes",
    "atomic_write_text",
    "default_batch_rows",
    "file_format",
    "file_sha256",
    "get_format",
    "open_table",
    "open_vectors",
    "register_format",
    "remove_temporaries",
    "table_bytes",
]


def __getattr__(name: str) -> Any:
    """Import the module that holds ``name`` and return the name's current value there."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    """The module's own names and the lazily re-exported ones."""
    return sorted({*globals(), *_EXPORTS})
