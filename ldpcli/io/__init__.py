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
columns that look like free text are refused unless ``keep_unsafe`` (:mod:`~ldpcli.io._columns`).
``skip_invalid`` marks bad rows in :attr:`VectorBatch.valid` instead of raising.

The modules (``layout``, ``messages``, ``atomic``, ``publication`` and ``formats`` load no pyarrow):

- :mod:`~ldpcli.io._layout`: :class:`VectorLayout`, where the vectors live in a file.
- :mod:`~ldpcli.io._messages`: one-line error messages shared by the other modules.
- :mod:`~ldpcli.io._atomic`: temporary files and crash safety: the :class:`Sink` protocol,
  :class:`AtomicFileSink`, :func:`atomic_write_bytes`, :func:`remove_temporaries`.
- :mod:`~ldpcli.io._publication`: several outputs published as one (:class:`Publication`, with its
  journal and backups) and :func:`sweep_stale`, which finishes what dead runs left.
- :mod:`~ldpcli.io._formats`: the format registry: :func:`register_format`, :func:`file_format`
  (by suffix), :func:`get_format`, ``FORMATS``.
- :mod:`~ldpcli.io._columns`: choosing the vector and keep columns from a file's schema, and the
  checks that keep identifiers out of the vectors and free text out of the kept columns.
- :mod:`~ldpcli.io._vectors`: :func:`open_vectors`, the entry to reading a file in any format.
- :mod:`~ldpcli.io._read`: :class:`VectorReader`, :class:`VectorBatch` and
  the checks of every batch's values; :func:`open_table`, the same rules for an in-memory table.
- :mod:`~ldpcli.io._parquet`: reading and writing Parquet (``.parquet``, ``.pq``).
- :mod:`~ldpcli.io._csv`: reading and writing CSV (``.csv``).
- :mod:`~ldpcli.io._write`: :class:`VectorWriter` (batches encoded into a sink),
  :class:`AtomicVectorWriter` (that writer over an :class:`AtomicFileSink`), :func:`table_bytes`.

Importing this package loads no pyarrow: the names below are imported from their modules when
first asked for (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.io._atomic import AtomicFileSink as AtomicFileSink
    from ldpcli.io._atomic import Sink as Sink
    from ldpcli.io._atomic import atomic_write_bytes as atomic_write_bytes
    from ldpcli.io._atomic import atomic_write_text as atomic_write_text
    from ldpcli.io._atomic import file_sha256 as file_sha256
    from ldpcli.io._atomic import remove_temporaries as remove_temporaries
    from ldpcli.io._formats import Format as Format
    from ldpcli.io._formats import file_format as file_format
    from ldpcli.io._formats import get_format as get_format
    from ldpcli.io._formats import register_format as register_format
    from ldpcli.io._layout import VectorLayout as VectorLayout
    from ldpcli.io._parquet import PARQUET_CODECS as PARQUET_CODECS
    from ldpcli.io._parquet import writer_settings as writer_settings
    from ldpcli.io._read import DEFAULT_BATCH_MEMORY as DEFAULT_BATCH_MEMORY
    from ldpcli.io._read import VectorBatch as VectorBatch
    from ldpcli.io._read import VectorReader as VectorReader
    from ldpcli.io._read import default_batch_rows as default_batch_rows
    from ldpcli.io._read import open_table as open_table
    from ldpcli.io._vectors import open_vectors as open_vectors
    from ldpcli.io._write import AtomicVectorWriter as AtomicVectorWriter
    from ldpcli.io._write import VectorWriter as VectorWriter
    from ldpcli.io._write import table_bytes as table_bytes

__getattr__, __dir__, __all__ = attach(__name__, __file__, dynamic={"FORMATS": "ldpcli.io._formats"})
