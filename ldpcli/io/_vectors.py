"""Open a file of vectors in any registered format: :func:`open_vectors`, the one entry to reading.

It picks the format by the file's suffix (:mod:`ldpcli.io._formats`), lets the format resolve the
vector layout and returns its :class:`~ldpcli.io._read.VectorReader`; the checks every batch goes
through live in :mod:`ldpcli.io._read`. Kept apart from both so that the format registry and the
reader never import each other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ldpcli.errors import UsageError, counted
from ldpcli.io._columns import _check_keep_names, _Choice, _name_option, _text_columns
from ldpcli.io._formats import file_format, get_format
from ldpcli.io._layout import VectorLayout
from ldpcli.io._read import DEFAULT_BATCH_MEMORY, BatchRows, VectorReader

#: Names of left-out columns shown in the note (:func:`dropped_note`); the rest are counted.
_DROPPED_SHOWN = 8


def open_vectors(
    path: str | os.PathLike[str],
    *,
    column: str | None = None,
    columns: Sequence[str] | None = None,
    keep: Sequence[str] = (),
    layout: VectorLayout | None = None,
    batch_rows: int | None = None,
    memory_bytes: int = DEFAULT_BATCH_MEMORY,
    writable: bool = True,
    granule: Callable[[int], int] | None = None,
    keep_unsafe: bool = False,
    skip_invalid: bool = False,
    offer_keep: bool = True,
    no_header: bool = False,
    offer_no_header: bool = True,
) -> VectorReader:
    """Open a Parquet or CSV file of vectors for batch-by-batch reading.

    Which columns hold the vectors: ``layout`` (exactly those columns, e.g. when re-reading a
    privatized file), else the list column ``column``, else the numeric ``columns`` in that
    order, else the file's only list column of numbers, else all its numeric columns except
    ``keep`` (unnamed columns and pandas ``__index_level_N__`` columns are never picked
    automatically). Automatic detection refuses (:class:`UsageError`, with the options that fix
    it) numeric columns that look like an identifier or a label
    (:func:`~ldpcli.io._columns._suspicious_columns`); naming ``columns`` bypasses that. Items of
    ``columns`` are exact names, ``A:B`` ranges in file order or globs
    (:func:`~ldpcli.io._columns._expand_columns`). ``batch_rows`` defaults to :func:`default_batch_rows` for the file's ``d``
    and ``memory_bytes`` (the budget of one batch's working copies). ``writable=False`` lets
    read-only consumers (estimators, and the mechanisms, which never write to their input)
    receive zero-copy views of list columns instead of copies. ``granule(d)``: every batch but the
    last then has exactly ``batch_rows`` rows, rounded to a multiple of ``granule(d)`` (at least
    one), so batches start on fixed row boundaries whatever the file's own blocks (keyed
    randomness needs this).

    ``keep_unsafe=False`` refuses (:class:`UsageError`) kept text columns that look like free text,
    by name when opening and by value in each batch (:func:`~ldpcli.io._columns._check_keep_names`,
    :func:`~ldpcli.io._columns._check_keep_values`); ``True`` keeps them as they are. With a
    ``layout`` (re-reading a privatized file, whose kept columns are already out) nothing is checked.

    Without a ``layout``, ``reader.dropped_columns`` lists the file's columns that are neither
    vectors nor kept, in file order: they are in no output (:func:`dropped_note` says so).

    ``offer_keep=False`` (a caller whose user has no ``keep``, like ``ldp train``, which keeps only its
    label): a refused identifier-like column is answered with ``columns`` alone, never with ``keep``.

    ``skip_invalid=True`` marks invalid rows (missing vector or value, NaN/inf, list of the wrong
    length, text in a CSV vector column) in :attr:`VectorBatch.valid` instead of raising, and
    counts them in ``reader.skipped`` / ``reader.skipped_rows``; batches keep all their rows. A
    variable-length list column then takes d from its first non-empty vector. Damage to the file
    itself (a CSV line with the wrong number of fields, a corrupt Parquet page) is still an error.

    ``no_header=True`` (CSV only): the file has no header row, so every line is data and the columns
    are named ``f0``, ``f1``, … in file order (pyarrow's names for unnamed CSV columns), the names that
    ``columns``, ``keep`` and any output use. A first line whose cells are not numbers where vectors are
    read is then refused as a header (:func:`~ldpcli.io._csv_text._check_no_header`).
    ``offer_no_header=False`` (a caller whose user has no ``no_header``, like ``ldp answer``): a
    first line of numbers read as a header is answered with adding a header row alone.
    """
    label = os.fspath(path)
    fmt = get_format(file_format(path))
    column_names = _name_option(columns, "columns", label)
    keep_names = _name_option(keep, "keep", label) or ()
    if column is not None and column_names is not None:
        raise UsageError(
            f"{label}: give either `column` (one list column) or `columns` "
            "(one column per coordinate), not both."
        )
    if column_names == ():
        raise UsageError(f"{label}: `columns` needs at least one column name.")
    if layout is not None and (column is not None or column_names is not None or keep_names):
        raise UsageError(
            f"{label}: the vector layout already fixes the columns; "
            "do not combine it with `column`, `columns` or `keep`."
        )
    if batch_rows is not None and batch_rows < 1:
        raise UsageError(f"{label}: the batch size must be at least 1 row, got {batch_rows}.")
    if no_header and fmt.name != "csv":
        raise UsageError(
            f"{label}: `no_header` is for CSV files, and this is a {fmt.name} file, whose columns have names; "
            "leave `no_header` out."
        )
    target = Path(path)
    choice = _Choice(
        column=column, columns=column_names, keep=keep_names, layout=layout, skip_invalid=skip_invalid,
        offer_keep=offer_keep, no_header=no_header, offer_no_header=offer_no_header,
    )

    reader = fmt.open_reader(target, label, choice, BatchRows(batch_rows, memory_bytes, granule))
    reader.writable = writable
    reader.skip_invalid = skip_invalid
    if granule is not None:
        reader.granule = granule(reader.layout.d)
    if layout is None and not keep_unsafe:
        try:
            _check_keep_names(label, reader.keep_schema)
        except BaseException:
            reader.close()
            raise
        reader._text_keep = _text_columns(reader.keep_schema)
    if layout is None:
        used = {*reader.layout.columns, *reader.layout.keep}
        reader.dropped_columns = tuple(name for name in reader.columns_in_file if name not in used)
    return reader


def dropped_note(names: Sequence[str]) -> str | None:
    """The note that names the input's columns left out of the output (None when there are none):
    neither vectors nor kept, they are not copied anywhere. At most :data:`_DROPPED_SHOWN` names,
    then how many more."""
    if not names:
        return None
    shown = ", ".join(repr(name) for name in names[:_DROPPED_SHOWN])
    more = f" and {len(names) - _DROPPED_SHOWN} more" if len(names) > _DROPPED_SHOWN else ""
    return (f"left out {counted(len(names), 'column')} of the input, neither vectors nor kept (`keep`): {shown}{more}; "
            "the output holds only the vectors and the kept columns")
