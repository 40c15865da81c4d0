"""One-line error messages shared by the reading, format and writing modules.

Standard library only (no pyarrow), so :mod:`ldpcli.io._atomic` can use them.
"""

from __future__ import annotations

from ldpcli.errors import DataError, quoted


def _reason(exc: BaseException) -> str:
    """The first line of an exception's message, shortened, for use inside a one-line message (quoted:
    its backticks are its own, not parameters of ldp's, :func:`ldpcli.errors.quoted`)."""
    lines = str(exc).strip().splitlines()
    return quoted(_clip(lines[0].strip() if lines else type(exc).__name__, 200))


def _clip(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _row(row: int) -> str:
    """A 1-based data row for a message, saying how rows are counted (the header is not a row)."""
    return f"row {row} (counting from 1)"


def _coordinate(name: str, coordinate: int) -> str:
    """A 0-based coordinate of list column ``name`` for a message, saying how it is counted."""
    return f"column {name!r} (coordinate {coordinate}, counting from 0)"


def _no_rows(label: str) -> DataError:
    """The error for a file without data rows."""
    return DataError(f"{label}: has no rows; the file needs at least one data row.")


def _missing_vector(label: str, row: int, name: str) -> DataError:
    """The error for a null list in a list column."""
    return DataError(
        f"{label}: {_row(row)}, column {name!r}: vector is missing (null); "
        "remove rows without a vector before privatizing."
    )


def _write_failed(label: str, exc: BaseException) -> DataError:
    """The error for an output that could not be written to the disk."""
    return DataError(
        f"{label}: could not write the file ({_reason(exc)}); "
        "check free disk space and permissions, then run again."
    )
