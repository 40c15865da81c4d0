"""Choosing the vector and keep columns from a pyarrow schema.

The caller's column options (:class:`_Choice`: ``--column``, ``--columns``, ``--keep`` or a
saved layout) are checked for consistency, then resolved against a file's schema by
:func:`_resolve`, which auto-detects the vector column(s) when none are named.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from ldpcli.errors import DataError, UsageError
from ldpcli.io.layout import VectorLayout

# Columns pandas adds for a DataFrame index; like unnamed columns, never picked automatically.
_PANDAS_INDEX = re.compile(r"__index_level_\d+__")


@dataclass(frozen=True)
class _Choice:
    """The caller's column options, validated for consistency but not yet against a file."""

    column: str | None
    columns: tuple[str, ...] | None
    keep: tuple[str, ...]
    layout: VectorLayout | None


def _name_option(names: Sequence[str] | None, option: str, label: str) -> tuple[str, ...] | None:
    """A column-name option as a tuple, refusing a bare string and repeated names."""
    if names is None:
        return None
    if isinstance(names, str):
        raise TypeError(f"{option} must be a sequence of column names, not a string")
    result = tuple(names)
    if "" in result:
        raise UsageError(f"{label}: {option} contains an empty column name; name real columns.")
    repeated = [name for i, name in enumerate(result) if name in result[:i]]
    if repeated:
        raise UsageError(f"{label}: column {repeated[0]!r} is listed twice in {option}; list it once.")
    return result


def _is_number(dtype: pa.DataType) -> bool:
    """Integer, floating-point or decimal (booleans are not numbers here)."""
    return pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)


def _is_number_list(dtype: pa.DataType) -> bool:
    """A list, large list or fixed-size list of numbers."""
    is_list = pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype)
    return is_list and _is_number(dtype.value_type)


def _name_list(names: Sequence[str]) -> str:
    """Column names for a message, shortened when there are many."""
    shown = ", ".join(repr(name) for name in names[:10])
    return shown + (f", ... ({len(names) - 10} more)" if len(names) > 10 else "")


def _resolve(
    schema: pa.Schema, label: str, choice: _Choice, *, check_types: bool
) -> tuple[Literal["list", "columns"], tuple[str, ...], tuple[str, ...], int | None]:
    """Pick the vector and keep columns from ``schema``: ``(kind, columns, keep, d)``.

    ``d`` is ``None`` for a variable-length list column (it is measured on the data).
    ``check_types=False`` trusts explicitly named columns to be numeric (CSV: a bad value is
    reported with its row when the file is converted).
    """
    names = schema.names
    if choice.layout is not None:
        return _match_layout(schema, label, choice.layout, check_types)
    for name in choice.keep:
        if name not in names:
            raise UsageError(
                f"{label}: no column named {name!r} to keep; available columns: {_name_list(names)}."
            )
    kind: Literal["list", "columns"]
    vector: tuple[str, ...]
    if choice.column is not None:
        kind, vector = "list", (choice.column,)
        dtype = _field_type(schema, choice.column, "--column", label)
        if not _is_number_list(dtype):
            raise DataError(
                f"{label}: column {choice.column!r} holds {dtype}, not lists of numbers; "
                "--column takes a list column, use --columns for one numeric column per coordinate."
            )
    elif choice.columns is not None:
        kind, vector = "columns", choice.columns
        for name in vector:
            dtype = _field_type(schema, name, "--columns", label)
            if check_types and not _is_number(dtype):
                raise DataError(
                    f"{label}: column {name!r} holds {dtype}, not numbers; vector columns must be "
                    "numeric, so leave it out of --columns or convert it."
                )
    else:
        candidates = [f for f in schema if f.name not in choice.keep and _automatic(f.name)]
        lists = [f.name for f in candidates if _is_number_list(f.type)]
        numeric = [f.name for f in candidates if _is_number(f.type)]
        if len(lists) > 1:
            raise UsageError(
                f"{label}: several list columns could hold the vectors ({_name_list(lists)}); "
                "choose one with --column."
            )
        if lists:
            kind, vector = "list", (lists[0],)
        elif numeric:
            kind, vector = "columns", tuple(numeric)
        else:
            raise DataError(
                f"{label}: no numeric vector column (columns: {_name_list(names)}); the file needs "
                "a list column of numbers or numeric columns, one per coordinate."
            )
    for name in choice.keep:
        if name in vector:
            raise UsageError(
                f"{label}: column {name!r} cannot be both a vector column and a --keep column; "
                "keep a different column."
            )
    for name in (*vector, *choice.keep):
        if names.count(name) > 1:
            raise DataError(f"{label}: the file has two columns named {name!r}; give every column its own name.")
    d = len(vector) if kind == "columns" else _fixed_size(schema.field(vector[0]).type)
    return kind, vector, choice.keep, d


def _automatic(name: str) -> bool:
    """Whether auto-detection may use this column (not unnamed, not a pandas index)."""
    return bool(name) and _PANDAS_INDEX.fullmatch(name) is None


def _field_type(schema: pa.Schema, name: str, option: str, label: str) -> pa.DataType:
    """The type of column ``name``; :class:`UsageError` listing the columns if there is none."""
    if name not in schema.names:
        raise UsageError(
            f"{label}: no column named {name!r} (from {option}); "
            f"available columns: {_name_list(schema.names)}."
        )
    return schema.field(schema.names.index(name)).type


def _fixed_size(dtype: pa.DataType) -> int | None:
    """The list size of a fixed-size list type, ``None`` for a variable-length list."""
    return dtype.list_size if pa.types.is_fixed_size_list(dtype) else None


def _match_layout(
    schema: pa.Schema, label: str, layout: VectorLayout, check_types: bool
) -> tuple[Literal["list", "columns"], tuple[str, ...], tuple[str, ...], int | None]:
    """Check that a file has the columns a given layout names; :class:`DataError` if not."""
    mismatch = "the file does not match its vector layout; use the file written with it, unchanged."
    for name in (*layout.columns, *layout.keep):
        if name not in schema.names:
            raise DataError(f"{label}: column {name!r} is missing; {mismatch}")
    for name in layout.columns:
        dtype = schema.field(schema.names.index(name)).type
        if layout.kind == "list" and not _is_number_list(dtype):
            raise DataError(f"{label}: column {name!r} holds {dtype}, not lists of numbers; {mismatch}")
        if layout.kind == "columns" and check_types and not _is_number(dtype):
            raise DataError(f"{label}: column {name!r} holds {dtype}, not numbers; {mismatch}")
        size = _fixed_size(dtype) if layout.kind == "list" else None
        if size is not None and size != layout.d:
            raise DataError(
                f"{label}: column {name!r} holds vectors of {size} coordinates, "
                f"not d={layout.d}; {mismatch}"
            )
    return layout.kind, layout.columns, layout.keep, layout.d
