"""The text rules of CSV cells and the one-line messages of CSV failures, shared by pyarrow's path
(:mod:`ldpcli.io._csv`) and the wide reader (:mod:`ldpcli.io._csv_wide`): which cells are missing,
which are numbers, the checks of a file's first line, and pyarrow's failures in one line.
"""

from __future__ import annotations

import csv as stdlib_csv
import re
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ldpcli.errors import DataError, counted
from ldpcli.io._messages import _clip, _no_rows, _row

#: Decimal text is assumed to carry at least six significant digits (printf's %g); values are
#: read as float64, but a domain's slack must allow for the rounding of the text.
CSV_PRECISION = 1e-6
# Cells read as missing in a CSV vector column. "nan"/"inf" are not here: they parse as floats
# and are then reported as non-finite values rather than as missing ones.
_CSV_NULLS = ["", "NA", "N/A", "n/a", "NULL", "null", "#N/A"]
_CSV_CONVERSION = re.compile(r"In CSV column #(\d+): (?:Row #(\d+): )?CSV conversion error to (.+?): (.*)")
_CSV_INVALID_VALUE = re.compile(r"invalid value '(.*)'")
_CSV_FIELD_COUNT = re.compile(r"CSV parse error: (?:Row #(\d+): )?Expected (\d+) columns, got (\d+)")
_NULL_CELLS = pa.array(_CSV_NULLS, pa.binary())
# A cell that pyarrow's string-to-float cast accepts once trimmed: for marking the cells it refuses
# with skip_invalid (only when a whole column fails to cast), and for telling a column of numbers
# with a few bad cells from a text column (_numbers_read_as_text).
_NUMBER_CELL = r"(?i)^\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|nan|inf|infinity)\s*$"


def _parse_numbers(cells: pa.Array, label: str, name: str) -> pa.Array:
    """A column of CSV cells (bytes) as float64 the way the CSV reader parses numbers (surrounding
    whitespace is ignored, a cell in ``_CSV_NULLS`` is missing), with null for each cell that is
    not a number (text, or bytes that are not UTF-8).

    Vectorized: one cast, and where that fails a regular expression marks the bad cells first."""
    missing = pc.is_in(cells, value_set=_NULL_CELLS)
    try:
        text = pc.if_else(missing, pa.scalar(None, pa.string()), pc.utf8_trim_whitespace(cells.cast(pa.string())))
        return pc.cast(text, pa.float64())
    except pa.ArrowInvalid:  # a cell that is not UTF-8 or not a number
        number = pc.and_(pc.invert(missing), pc.fill_null(pc.match_substring_regex(cells, _NUMBER_CELL), False))
    try:
        text = pc.utf8_trim_whitespace(pc.if_else(number, cells, pa.scalar(None, pa.binary())).cast(pa.string()))
        return pc.cast(text, pa.float64())
    except pa.ArrowInvalid as exc:  # a cell that _NUMBER_CELL accepts and the cast does not
        raise DataError(
            f"{label}: column {name!r}: a value could not be read as a number; "
            "fix the value, or read the file without `skip_invalid=True` to find its row."
        ) from exc


def _check_header(label: str, names: Sequence[str], offer_no_header: bool = True) -> None:
    """:class:`DataError` for a header whose names are all numbers: a file without a header row, whose
    first row of data pyarrow would take as column names (dropping that row and publishing its values
    as names). No name is shown: they are a person's values. ``no_header`` is named only where the
    caller's user can pass it (``offer_no_header``)."""
    if names and all(re.match(_NUMBER_CELL, name) for name in names):
        way = (", or pass `no_header` to read every line as data, with the columns named f0, f1, ..."
               if offer_no_header else " (this command reads only CSV files with a header row)")
        raise DataError(
            f"{label}: the first line holds only numbers, so it is a row of data, not a header of column "
            f"names; add a header row (e.g. x0,x1,...) as the first line{way}"
        )


def _check_no_header(label: str, cells: Sequence[str], names: Sequence[str], vector: Sequence[str] | None = None) -> None:
    """:class:`DataError` for a file read with ``no_header`` whose first line (its ``cells``; ``names``:
    the columns' names) looks like a header of column names: none of its cells is a number, or
    (``vector``: the columns chosen for the vectors) one of those columns' cells is not a number there.
    No cell is shown: it may be a person's value."""
    number = [re.match(_NUMBER_CELL, cell) is not None for cell in cells]
    bad = None
    if vector is None:
        if not any(number) and any(cell.strip() and cell not in _CSV_NULLS for cell in cells):
            bad = "none of its cells is a number"
    else:
        at = {name: i for i, name in enumerate(names)}
        for name in vector:
            i = at.get(name, len(cells))
            if i < len(cells) and not number[i] and cells[i] not in _CSV_NULLS:
                bad = f"its cell in vector column {name!r} is not a number"
                break
    if bad is not None:
        raise DataError(
            f"{label}: read with `no_header`, but the first line looks like a header of column names ({bad}); "
            "leave `no_header` out to read that line as the column names, or fix the first row if it is data."
        )


def _first_cells(sample: bytes) -> list[str] | None:
    """The cells of the first line of a sample of a CSV file (quoted cells with commas read as one), or
    ``None`` where the csv module cannot read it (a stray NUL, say: pyarrow's reader then says what)."""
    first = re.split(rb"\r\n|\r|\n", sample, maxsplit=1)[0].decode("utf-8", errors="replace")
    try:
        return next(stdlib_csv.reader([first]), [])
    except stdlib_csv.Error:
        return None


def _csv_error(
    label: str,
    message: str,
    header: Sequence[str],
    block_size: int,
    keep_types: Mapping[str, pa.DataType] | None = None,
    has_header: bool = True,
) -> DataError:
    """Turn a pyarrow CSV error message into a one-line :class:`DataError`.

    pyarrow's "Row #N" counts the file's lines, the header as row 1, so the data row is N - 1 (N
    without ``has_header``). No cell's value is ever shown (it may be private): the message names its
    row and column and what is wrong.
    """
    skipped = 1 if has_header else 0
    lines = message.strip().splitlines()
    first = lines[0].strip() if lines else message
    conversion = _CSV_CONVERSION.search(first)
    if conversion is not None:
        index, row, target, detail = int(conversion[1]), conversion[2], conversion[3], conversion[4]
        name = header[index] if index < len(header) else f"#{index + 1}"
        where = f"{label}: {_row(int(row) - skipped)}, column {name!r}" if row else f"{label}: column {name!r}"
        if target == "string":  # a kept text column
            return DataError(f"{where}: the value is not valid UTF-8 text; save the file as UTF-8 text.")
        if keep_types and name in keep_types:
            return DataError(
                f"{where}: the value is not a valid {target}, the type of this `keep` column read from "
                "the start of the file; convert the file to Parquet, which stores each column's type, "
                "or fix the value."
            )
        return DataError(
            f"{where}: the value {_bad_number(detail)}; vector columns must be numeric, "
            "so fix the value or leave the column out (`columns`, `keep`)."
        )
    field_count = _CSV_FIELD_COUNT.search(first)
    if field_count is not None:
        row, expected, got = field_count[1], field_count[2], field_count[3]
        where = f"{_row(int(row) - skipped)} " if row else "a row "
        first_line, columns = ("the header", "header column") if has_header else ("the first line", "column of the first line")
        return DataError(
            f"{label}: not a valid CSV file: {where}has {counted(int(got), 'field')} but {first_line} has {expected}; "
            f"every row needs one value per {columns}."
        )
    if first == "Empty CSV file" or first.startswith("CSV parse error: Empty CSV file or block"):
        return _no_rows(label)  # the second: only blank lines, or a header without a line break
    if first.startswith("straddling object"):  # one line does not fit in a block
        return DataError(
            f"{label}: not a valid CSV file: a line is longer than {block_size} bytes, far longer than "
            "the lines at the start of the file; check the file for missing line breaks."
        )
    # pyarrow ends a parse error with the offending row's text after a ": "; a row is never shown.
    return DataError(
        f"{label}: not a valid CSV file ({_clip(': '.join(first.split(': ')[:2]), 200)}); "
        "check that it is a complete comma-separated text file with a header row."
    )


def _bad_number(detail: str) -> str:
    """What is wrong with a cell that pyarrow could not convert to a number (its conversion error's
    ``detail``), without the cell's value: blank, not UTF-8, or not a number."""
    value = _CSV_INVALID_VALUE.fullmatch(detail)
    if value is None:
        return "is not a number"
    if not value[1].strip():
        return "is blank (only spaces)"
    if "\ufffd" in value[1]:  # pyarrow shows bytes that are not UTF-8 as U+FFFD
        return "is not valid UTF-8 text, so not a number"
    return "is not a number"
