"""Choosing the vector and keep columns from a pyarrow schema.

The caller's column options (:class:`_Choice`: ``column``, ``columns``, ``keep`` or a
saved layout) are checked for consistency, then resolved against a file's schema by
:func:`_resolve`, which expands the globs and ranges of ``columns`` (:func:`_expand_columns`)
and auto-detects the vector column(s) when none are named, refusing to take columns that look
like an identifier or a label as coordinates (:func:`_suspicious_columns`).

Kept columns are copied unprivatized, so free text is refused there: by the column's name when
the file is opened (:func:`_check_keep_names`) and by its values batch by batch
(:func:`_check_keep_values`), unless the caller passes ``keep_unsafe``.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ldpcli.errors import DataError, UsageError, counted
from ldpcli.io._layout import VectorLayout
from ldpcli.io._messages import _row

# Columns pandas adds for a DataFrame index; like unnamed columns, never picked automatically.
_PANDAS_INDEX = re.compile(r"__index_level_\d+__")

# --- identifiers and labels among the automatic numeric columns (see _suspicious_columns) ---
_ID_NAMES = frozenset({"id", "idx", "index"})
_ID_SUFFIX = re.compile(r".+[_-]id", re.IGNORECASE)  # user_id, user-ID
_ID_CAMEL = re.compile(r".*[a-z0-9](?:Id|ID)")  # userId, userID (not "paid", "grid", "AID")
_LABEL_NAMES = frozenset({"label", "labels", "target", "class", "y"})
_DIGITS = re.compile(r"\d+")

# --- free text among the kept columns (see _check_keep_names and _check_keep_values) ---
_TEXT_WORDS = frozenset({
    "text", "email", "e-mail", "mail", "name", "firstname", "first_name", "lastname", "last_name",
    "fullname", "address", "phone", "comment", "comments", "description", "note", "notes", "message",
    "body", "content", "review", "summary", "url", "ip",
})
_TEXT_PARTS = re.compile(r"[_-]")
_EMAIL = r"[^@\s]+@[^@\s]+\.[^@\s]+"
_FOUR_WORDS = r"\S+\s+\S+\s+\S+\s+\S+"
_TEXT_LENGTH = 64
_UNSAFE = "pass `keep_unsafe=True` to release it anyway, unprivatized"


@dataclass(frozen=True)
class _Choice:
    """The caller's column options, validated for consistency but not yet against a file."""

    column: str | None
    columns: tuple[str, ...] | None
    keep: tuple[str, ...]
    layout: VectorLayout | None
    #: Invalid rows are marked rather than refused (CSV then reads vector columns as bytes).
    skip_invalid: bool = False
    #: Whether the caller's user can keep columns (``keep``); ``ldp train`` keeps only its label.
    offer_keep: bool = True
    #: A CSV file without a header row: every line is data, the columns are named f0, f1, ... (pyarrow's names).
    no_header: bool = False
    #: Whether the caller's user can pass ``no_header`` (``ldp privatize``); a numeric header then names it.
    offer_no_header: bool = True


def _name_option(names: Sequence[str] | None, option: str, label: str) -> tuple[str, ...] | None:
    """A column-name option as a tuple, refusing a bare string and repeated names."""
    if names is None:
        return None
    if isinstance(names, str):
        raise TypeError(f"{option} must be a sequence of column names, not a string")
    result = tuple(names)
    if "" in result:
        raise UsageError(f"{label}: `{option}` contains an empty column name; name real columns.")
    repeated = _first_repeated(result)
    if repeated is not None:
        raise UsageError(f"{label}: column {repeated!r} is listed twice in `{option}`; list it once.")
    return result


def _first_repeated(names: Sequence[str]) -> str | None:
    """The first name that occurs a second time in ``names``, ``None`` if all differ (one pass)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _fields(schema: pa.Schema) -> dict[str, pa.Field]:
    """The schema's fields by name (the first of a repeated name): one pass, so that looking up
    every column of a wide table stays linear in its width."""
    fields: dict[str, pa.Field] = {}
    for field in schema:
        fields.setdefault(field.name, field)
    return fields


class _Columns:
    """A file's columns as :func:`_resolve` reads them: their names in file order and their types,
    without one pyarrow field object per column (a schema of 10⁶ fields and a dict of them held
    ~450 MB), and the place of each name (:func:`_positions`), built at the first look-up by name.
    ``types`` may hold the same type object for many columns (a wide CSV file's float64 columns)."""

    def __init__(self, names: Sequence[str], types: Sequence[pa.DataType]) -> None:
        self.names, self.types = names, types
        self._position: dict[str, int] | None = None

    @classmethod
    def of(cls, schema: pa.Schema | _Columns) -> _Columns:
        """``schema``'s columns (itself if it is already :class:`_Columns`)."""
        return schema if isinstance(schema, _Columns) else cls(schema.names, schema.types)

    def position(self) -> dict[str, int]:
        """The place of each column name (of its first column, for a repeated name)."""
        if self._position is None:
            self._position = _positions(self.names)
        return self._position

    def type_of(self, name: str) -> pa.DataType | None:
        """The type of the (first) column named ``name``, ``None`` if there is none."""
        at = self.position().get(name)
        return None if at is None else self.types[at]

    def has_repeats(self) -> bool:
        """Whether some name is the name of two columns."""
        distinct = len(self._position) if self._position is not None else len(set(self.names))
        return distinct < len(self.names)


def _each(types: Sequence[pa.DataType], test: Callable[[pa.DataType], bool]) -> np.ndarray:
    """``test`` of each column's type, as a boolean array; called once for a run of columns that share
    one type object (a wide CSV file's), so that 10⁶ columns cost one call, not 10⁶."""
    last: list[object] = [None, False]

    def cached(dtype: pa.DataType) -> bool:
        if dtype is not last[0]:
            last[:] = [dtype, test(dtype)]
        return bool(last[1])

    return np.fromiter((cached(dtype) for dtype in types), dtype=bool, count=len(types))


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
    schema: pa.Schema | _Columns, label: str, choice: _Choice, *, check_types: bool
) -> tuple[Literal["list", "columns"], tuple[str, ...], tuple[str, ...], int | None]:
    """Pick the vector and keep columns from ``schema`` (or a file's :class:`_Columns`): ``(kind, columns, keep, d)``.

    ``d`` is ``None`` for a variable-length list column (it is measured on the data).
    ``check_types=False`` trusts explicitly named columns to be numeric (CSV: a bad value is
    reported with its row when the file is converted). The items of ``choice.columns`` may be
    ranges and globs (:func:`_expand_columns`); the automatic numeric columns are refused when
    some look like an identifier or a label (:func:`_refuse_suspicious`).
    """
    columns = _Columns.of(schema)
    names = columns.names
    if choice.layout is not None:
        return _match_layout(columns, label, choice.layout, check_types)
    for name in choice.keep:
        if columns.type_of(name) is None:
            raise UsageError(
                f"{label}: no column named {name!r} to keep; available columns: {_name_list(names)}."
            )
    kind: Literal["list", "columns"]
    vector: tuple[str, ...]
    if choice.column is not None:
        kind, vector = "list", (choice.column,)
        dtype = _field_type(columns, choice.column, "column", label)
        if not _is_number_list(dtype):
            raise DataError(
                f"{label}: column {choice.column!r} holds {dtype}, not lists of numbers; "
                "`column` takes a list column, use `columns` for one numeric column per coordinate."
            )
    elif choice.columns is not None:
        kind, vector = "columns", _expand_columns(names, choice.columns, label, columns.position())
        for name in vector:
            dtype = _field_type(columns, name, "columns", label)
            if check_types and not _is_number(dtype):
                raise DataError(
                    f"{label}: column {name!r} holds {dtype}, not numbers; vector columns must be "
                    "numeric, so leave it out of `columns` or convert it."
                )
    else:
        kept = set(choice.keep)
        candidate = np.fromiter((_automatic(name) and name not in kept for name in names), dtype=bool,
                                count=len(names))
        lists = np.flatnonzero(candidate & _each(columns.types, _is_number_list)).tolist()
        numeric = np.flatnonzero(candidate & _each(columns.types, _is_number))
        if len(lists) > 1:
            raise UsageError(
                f"{label}: several list columns could hold the vectors ({_name_list([names[i] for i in lists])}); "
                "choose one with `column`."
            )
        if lists:
            kind, vector = "list", (names[lists[0]],)
        elif numeric.size:
            kind = "columns"
            vector = tuple(names) if numeric.size == len(names) else tuple(names[i] for i in numeric.tolist())
            _refuse_suspicious(columns, label, choice.keep, numeric, choice.offer_keep)
        else:
            raise DataError(
                f"{label}: no numeric vector column (columns: {_name_list(names)}); the file needs "
                "a list column of numbers or numeric columns, one per coordinate."
            )
    if choice.keep:
        chosen = set(vector)
        for name in choice.keep:
            if name in chosen:
                raise UsageError(
                    f"{label}: column {name!r} cannot be both a vector column and a `keep` column; "
                    "keep a different column."
                )
    if columns.has_repeats():  # some name is repeated: refuse it if a chosen column has it
        counts = Counter(names)
        for name in (*vector, *choice.keep):
            if counts[name] > 1:
                raise DataError(f"{label}: the file has two columns named {name!r}; give every column its own name.")
    d = len(vector) if kind == "columns" else _fixed_size(columns.type_of(vector[0]))
    return kind, vector, choice.keep, d


def _automatic(name: str) -> bool:
    """Whether auto-detection may use this column (not unnamed, not a pandas index)."""
    return bool(name) and not (name.startswith("__index_level_") and _PANDAS_INDEX.fullmatch(name) is not None)


def _field_type(columns: _Columns, name: str, option: str, label: str) -> pa.DataType:
    """The type of column ``name`` of the file's ``columns``; :class:`UsageError` listing the
    columns if there is none."""
    dtype = columns.type_of(name)
    if dtype is None:
        raise UsageError(
            f"{label}: no column named {name!r} (from `{option}`); available columns: {_name_list(columns.names)}."
        )
    return dtype


def _fixed_size(dtype: pa.DataType) -> int | None:
    """The list size of a fixed-size list type, ``None`` for a variable-length list."""
    return dtype.list_size if pa.types.is_fixed_size_list(dtype) else None


def _match_layout(
    columns: _Columns, label: str, layout: VectorLayout, check_types: bool
) -> tuple[Literal["list", "columns"], tuple[str, ...], tuple[str, ...], int | None]:
    """Check that a file (its :class:`_Columns`) has the columns a given layout names;
    :class:`DataError` if not."""
    mismatch = "the file does not match its vector layout; use the file written with it, unchanged."
    for name in (*layout.columns, *layout.keep):
        if columns.type_of(name) is None:
            raise DataError(f"{label}: column {name!r} is missing; {mismatch}")
    for name in layout.columns:
        dtype = columns.types[columns.position()[name]]
        if layout.kind == "list" and not _is_number_list(dtype):
            raise DataError(f"{label}: column {name!r} holds {dtype}, not lists of numbers; {mismatch}")
        if layout.kind == "columns" and check_types and not _is_number(dtype):
            raise DataError(f"{label}: column {name!r} holds {dtype}, not numbers; {mismatch}")
        size = _fixed_size(dtype) if layout.kind == "list" else None
        if size is not None and size != layout.d:
            raise DataError(
                f"{label}: column {name!r} holds vectors of {counted(size, 'coordinate')}, "
                f"not d={layout.d}; {mismatch}"
            )
    return layout.kind, layout.columns, layout.keep, layout.d


# --------------------------------------------------------------------------- ``columns`` patterns


def _expand_columns(names: Sequence[str], items: Sequence[str], label: str,
                    position: Mapping[str, int] | None = None) -> tuple[str, ...]:
    """The columns that the items of ``columns`` name, in the order of the items.

    Each item is an exact column name if the file has such a column; otherwise ``A:B`` is the
    inclusive range of columns from A to B in file order (both must exist, B not before A), and an
    item containing ``*``, ``?`` or ``[`` is a glob (:func:`fnmatch.fnmatchcase`, so case-sensitive)
    over the file's columns in file order, which must match at least one. :class:`UsageError` for
    an item that names nothing and for a column that the items name twice. ``position``:
    :func:`_positions` of ``names``, if the caller has it.
    """
    position = _positions(names) if position is None else position
    result: list[str] = []
    source: dict[str, str] = {}
    for item in items:
        if item in position:
            chosen = [item]
        elif (span := _range(names, position, item, label)) is not None:
            chosen = span
        elif any(char in item for char in "*?["):
            chosen = [name for name in names if fnmatch.fnmatchcase(name, item)]
            if not chosen:
                raise UsageError(
                    f"{label}: `columns` pattern {item!r} matches no column; "
                    f"available columns: {_name_list(names)}."
                )
        else:
            raise UsageError(
                f"{label}: no column named {item!r} (from `columns`); available columns: {_name_list(names)}."
            )
        for name in chosen:
            if name in source:
                raise UsageError(
                    f"{label}: `columns` names column {name!r} twice (by {source[name]!r} and {item!r}); "
                    "name each column once."
                )
            source[name] = item
            result.append(name)
    return tuple(result)


def _positions(names: Sequence[str]) -> dict[str, int]:
    """The place of each column name in file order (of its first column, for a repeated name: the
    names are entered last to first, so the first place is the one left), built without a pair per name."""
    return dict(zip(reversed(names), range(len(names) - 1, -1, -1)))


def _range(names: Sequence[str], position: Mapping[str, int], item: str, label: str) -> list[str] | None:
    """The columns of a range item ``A:B`` in file order (``position``: :func:`_positions` of
    ``names``); ``None`` if ``item`` is no range.

    An item with a ``:`` but no wildcard must be a range: :class:`UsageError` if an end is missing
    or B comes before A. With a wildcard, an item whose ends are not both columns is a glob.
    """
    if ":" not in item:
        return None
    splits = [(item[:i], item[i + 1:]) for i, char in enumerate(item) if char == ":"]
    for first, last in splits:
        if first in position and last in position:
            start, stop = position[first], position[last]
            if stop < start:
                raise UsageError(
                    f"{label}: `columns` range {item!r} is backwards: {last!r} comes before {first!r} "
                    f"in the file; write {last}:{first}."
                )
            return list(names[start: stop + 1])
    if any(char in item for char in "*?["):
        return None
    first, last = splits[0]
    missing = first if first not in position else last
    raise UsageError(
        f"{label}: `columns` range {item!r} needs two columns of the file, and there is no column "
        f"named {missing!r}; available columns: {_name_list(names)}."
    )


def _column_spec(chosen: Sequence[str], names: Sequence[str]) -> str:
    """A ``columns`` value for exactly ``chosen`` (in file order): runs of three or more adjacent
    columns as ``A:B`` ranges, the rest by name, comma-separated and quoted for a shell."""
    position = _positions(names)
    runs: list[list[str]] = []
    for name in chosen:
        if runs and position[name] == position[runs[-1][-1]] + 1:
            runs[-1].append(name)
        else:
            runs.append([name])
    parts = [f"{run[0]}:{run[-1]}" if len(run) >= 3 else ",".join(run) for run in runs]
    return shlex.quote(",".join(parts))


# --------------------------------------------------------------------------- identifiers and labels


def _id_or_label(name: str, others: Sequence[str]) -> str | None:
    """``"identifier"`` or ``"label"`` when the name says so, else ``None``. ``y`` is a label
    unless a column ``x`` is among ``others`` (then x, y are read as coordinates)."""
    folded = name.casefold()
    if folded in _ID_NAMES or _ID_SUFFIX.fullmatch(name) or _ID_CAMEL.fullmatch(name):
        return "identifier"
    if folded == "y" and any(other.casefold() == "x" for other in others):
        return None
    return "label" if folded in _LABEL_NAMES else None


def _shape(name: str) -> str:
    """A column name with every run of digits as ``#``, case-folded: p00 and P63 are both ``p#``."""
    return _DIGITS.sub("#", name.casefold())


def _suspicious_columns(names: Sequence[str], types: Sequence[pa.DataType]) -> list[tuple[str, str]]:
    """``(name, kind)`` of the automatically chosen numeric columns (``names``, of ``types``) that look
    like an identifier or a label rather than a coordinate, in file order; kind is ``"identifier"``,
    ``"label"`` or ``"integer"``.

    - By name (case-insensitive): ``id``, ``idx``, ``index``, a name ending in ``_id`` or ``-id``,
      a camelCase name ending in ``Id``/``ID`` after a lower-case letter or digit (``userId``);
      ``label``, ``labels``, ``target``, ``class``, and ``y`` unless a column ``x`` is also
      among them.
    - By type, only when the columns mix integer and floating-point (or decimal) types: the
      integer columns that come before the first floating-point column, except those whose name
      has the shape of a floating-point column's name (digits aside: an all-integer ``p00`` next
      to a floating-point ``p01``, as CSV type inference gives for a column of ``0`` cells), and
      only if they are fewer than half of the columns. Integer columns after the first
      floating-point one are flagged only by name.
    """
    found = {name: kind for name in names if (kind := _id_or_label(name, names)) is not None}
    floats = np.flatnonzero(_each(types, lambda dtype: pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)))
    if floats.size and floats.size < len(names):
        shapes = {_shape(names[i]) for i in floats.tolist()}
        leading: list[str] = []
        for name, dtype in zip(names, types):
            if not pa.types.is_integer(dtype):
                break
            if name not in found and _shape(name) not in shapes:
                leading.append(name)
        if 2 * len(leading) < len(names):
            found.update((name, "integer") for name in leading)
    return [(name, found[name]) for name in names if name in found]


_KIND_PHRASES = {
    "identifier": ("an identifier", "identifiers"),
    "label": ("a label", "labels"),
    "integer": (
        "an integer id or label (integers before floating-point columns)",
        "integer ids or labels (integers before floating-point columns)",
    ),
}


def _refuse_suspicious(columns: _Columns, label: str, keep: Sequence[str], numeric: np.ndarray,
                       offer_keep: bool = True) -> None:
    """:class:`UsageError` if automatic detection would take an identifier or a label as a
    coordinate (:func:`_suspicious_columns`; ``numeric``: the places of the automatic numeric columns
    among the file's ``columns``), with the options that fix it, computed from the file."""
    names = columns.names
    every = numeric.size == len(names)
    numeric_names = names if every else [names[i] for i in numeric.tolist()]
    suspicious = _suspicious_columns(numeric_names, columns.types if every else [columns.types[i] for i in numeric.tolist()])
    if not suspicious:
        return
    flagged = [name for name, _ in suspicious]
    kinds = [kind for _, kind in suspicious]
    what = " and ".join(
        _KIND_PHRASES[kind][kinds.count(kind) > 1] for kind in _KIND_PHRASES if kind in kinds
    )
    if len(flagged) == 1:
        head = f"column {flagged[0]!r} looks like {what}, not a coordinate"
    else:
        head = f"columns {', '.join(repr(n) for n in flagged)} look like {what}, not coordinates"
    carried_names = {*keep, *flagged}
    carried = [name for name in names if name in carried_names]
    rest = [name for name in numeric_names if name not in carried_names]
    choose = f"`columns` {_column_spec(rest, names)} to choose the vector columns, or " if rest else ""
    everything = _column_spec(numeric_names, names)
    them = "them" if len(flagged) > 1 else "it"
    if not offer_keep:  # nothing to carry them with: the way out is naming the vector columns
        raise UsageError(f"{label}: {head}; pass {choose}`columns` {everything} to really use {them}.")
    raise UsageError(
        f"{label}: {head}; pass `keep` {shlex.quote(','.join(carried))} to carry {them} through "
        f"(or {choose}`columns` {everything} to really privatize {them})."
    )


# --------------------------------------------------------------------------- free text in kept columns


def _is_text(dtype: pa.DataType) -> bool:
    """A string column (``string``, ``large_string``, ``string_view``, or dictionary-encoded text)."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    is_view = getattr(pa.types, "is_string_view", None)  # pyarrow >= 16
    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or bool(is_view and is_view(dtype))


def _text_name(name: str) -> bool:
    """Whether a column's name says it holds free text: the whole name, or one of its
    ``_``/``-``-separated parts, is one of :data:`_TEXT_WORDS` (case-insensitive)."""
    folded = name.casefold()
    return folded in _TEXT_WORDS or any(part in _TEXT_WORDS for part in _TEXT_PARTS.split(folded))


def _text_columns(keep_schema: pa.Schema | None) -> tuple[str, ...]:
    """The kept columns that hold text (whose values :func:`_check_keep_values` checks)."""
    return tuple(field.name for field in keep_schema if _is_text(field.type)) if keep_schema else ()


def _check_keep_names(label: str, keep_schema: pa.Schema | None) -> None:
    """:class:`UsageError` for a kept text column whose name says it holds free text."""
    for field in keep_schema or ():
        if _is_text(field.type) and _text_name(field.name):
            raise UsageError(
                f"{label}: `keep` column {field.name!r} holds text and its name suggests free text "
                "(a name, an address, a message...), which would be copied unprivatized; leave it out "
                f"of `keep`, or {_UNSAFE}."
            )


def _check_keep_values(label: str, keep: pa.Table, names: Sequence[str], first_row: int) -> None:
    """:class:`UsageError` naming the first row whose value in a kept text column looks like free
    text: an e-mail address, 4 or more whitespace-separated words, or more than 64 characters.

    Vectorized (pyarrow.compute, RE2); the value itself is never shown, being private data.
    """
    found: list[tuple[int, int, str]] = []
    for j, name in enumerate(names):
        column = keep.column(name)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            column = column.cast(pa.large_string())  # dictionary-encoded text, string views
        tests = (
            ("looks like an e-mail address", pc.match_substring_regex(column, _EMAIL)),
            ("has 4 or more words", pc.match_substring_regex(column, _FOUR_WORDS)),
            (f"is longer than {_TEXT_LENGTH} characters", pc.greater(pc.utf8_length(column), _TEXT_LENGTH)),
        )
        for reason, mask in tests:
            hits = pc.fill_null(mask, False)
            if pc.any(hits).as_py():
                row = pc.index(hits, True).as_py()
                found.append((row, j, reason))
    if found:
        row, j, reason = min(found)
        name = names[j]
        raise UsageError(
            f"{label}: {_row(first_row + row + 1)}, column {name!r}: the kept value {reason}, so the "
            f"column looks like free text, which `keep` would copy unprivatized; leave it out of `keep`, "
            f"or {_UNSAFE}."
        )
