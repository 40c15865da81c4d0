"""The text of ``feature_eps``: per-feature privacy levels written as
``FEATURE=LEVEL`` items, inline or in a .json / .csv file, resolved against the vectors' columns.

:func:`parse_feature_levels` reads it into one level per coordinate (:class:`FeatureLevels`): a
FEATURE is a column name, a range ``A:B`` of column names, a glob over the names, or 0-based
coordinates ``i`` / ``i:j``; levels above ε are clipped to ε. Its canonical form
(:func:`format_levels`, :func:`canonical_coordinates`) reads back as exactly the same levels, and
:func:`group_summary` groups the coordinates by level for a sidecar's table. Nothing here knows a
mechanism: BCDP (:mod:`ldpcli.mechanisms._bcdp`) takes the levels, and the math of its budget
(Aliakbarpour et al. 2024, Thm 2, Prop. 4) is :mod:`ldpcli.mechanisms._feature_levels`'s.

Every message is one :class:`~ldpcli.errors.UsageError` line naming the item (and its file row or
entry) and what to write instead; :class:`ValueError` is for a caller's programming error.
"""

from __future__ import annotations

import csv
import fnmatch
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli.errors import UsageError, counted, quoted
from ldpcli.io._jsonfile import read_json

#: 0-based coordinates ``i`` or an inclusive range ``i:j`` (a sign only so that -1 is reported as out of range).
_INDEX = re.compile(r"\s*([+-]?\d+)\s*(?::\s*([+-]?\d+)\s*)?")


_GLOB_CHARS = "*?["


#: The parameter the levels are given by, marked for messages (:mod:`ldpcli.errors`).
FEATURE_EPS = "`feature_eps`"


@dataclass(frozen=True, eq=False)
class FeatureLevels:
    """The parsed ``feature_eps``.

    ``levels``: δ̃, one per coordinate in the original order (read-only), ε for the coordinates no
    item names, and levels above ε clipped to ε; ``clipped``: the keys (as written) whose level was
    above ε, for the caller to report; ``canonical``: the text :func:`format_levels` writes, which
    :func:`parse_feature_levels` turns back into exactly these levels ("" when every level is ε).
    """

    levels: np.ndarray
    clipped: tuple[str, ...]
    canonical: str


def _name_list(names: Sequence[str]) -> str:
    """Column names for a message, shortened when there are many."""
    shown = ", ".join(repr(name) for name in names[:10])
    return shown + (f", ... ({len(names) - 10} more)" if len(names) > 10 else "")


def _available(d: int, names: Sequence[str] | None) -> str:
    if names is None:
        return f"the vectors are one list column, so name coordinates 0..{d - 1} (0-based, ranges i:j)"
    return f"available columns: {_name_list(names)} (or coordinates 0..{d - 1})"


def _items(spec: str) -> list[tuple[str, Any, str]]:
    """``(key, raw level, where)`` from inline text or a .json / .csv file; ``where`` says where the
    item came from, for messages."""
    text = spec.strip()
    if not text:
        raise UsageError(f"{FEATURE_EPS}: the levels are empty; give at least one FEATURE=LEVEL, e.g. 'age=0.5' or '0:3=0.2'")
    lower = text.lower()
    if lower.endswith(".json") or lower.endswith(".csv"):
        path = Path(text)
        if not path.is_file():
            raise UsageError(f"{FEATURE_EPS}: no such file {text!r}; give an existing .json or .csv file, or inline FEATURE=LEVEL items")
        items = _json_items(path, text) if lower.endswith(".json") else _csv_items(path, text)
        if not items:
            raise UsageError(f"{FEATURE_EPS} {text}: the file holds no FEATURE=LEVEL item; add at least one")
        return items
    items = []
    for raw in text.split(","):
        if not raw.strip():
            continue  # a trailing or doubled comma
        if "=" not in raw:
            raise UsageError(f"{FEATURE_EPS}: item {raw.strip()!r} is not FEATURE=LEVEL; write e.g. age=0.5 or 0:3=0.2")
        key, _, value = raw.rpartition("=")
        items.append((key.strip(), value.strip(), f"item {raw.strip()!r}"))
    if not items:
        raise UsageError(f"{FEATURE_EPS}: the levels are empty; give at least one FEATURE=LEVEL, e.g. 'age=0.5' or '0:3=0.2'")
    return items


def _json_items(path: Path, label: str) -> list[tuple[str, Any, str]]:
    shape = ('expected an object {"FEATURE": level, ...} or a list of objects '
             '[{"features": "FEATURE", "eps": level}, ...]')
    try:
        data = read_json(path, object_pairs_hook=lambda pairs: pairs)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{FEATURE_EPS} {label}: cannot read it as JSON ({quoted(str(exc))}); {shape}") from exc
    # With the hook every JSON object is a list of (key, value) pairs; a JSON array is a list of those.
    if isinstance(data, list) and all(isinstance(p, tuple) for p in data):
        return [(str(key), value, label) for key, value in data]
    if isinstance(data, list):
        items = []
        for n, entry in enumerate(data):
            fields = dict(entry) if isinstance(entry, list) and all(isinstance(p, tuple) for p in entry) else None
            if fields is None or set(fields) != {"features", "eps"}:
                raise UsageError(f"{FEATURE_EPS} {label}: entry {n} is not {{\"features\": ..., \"eps\": ...}}; {shape}")
            key = fields["features"]
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise UsageError(f"{FEATURE_EPS} {label}: entry {n}: \"features\" must be a name, a range or a "
                                 f"coordinate, got {key!r}")
            items.append((str(key).strip(), fields["eps"], f"{label}: entry {n}"))
        return items
    raise UsageError(f"{FEATURE_EPS} {label}: {shape}")


def _csv_items(path: Path, label: str) -> list[tuple[str, Any, str]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{FEATURE_EPS} {label}: cannot read it as CSV ({quoted(str(exc))}); write a header 'feature,eps' "
                         "then one FEATURE,LEVEL per row") from exc
    if not rows or [cell.strip().lower() for cell in rows[0]] != ["feature", "eps"]:
        raise UsageError(f"{FEATURE_EPS} {label}: the first row must be the header 'feature,eps', then one FEATURE,LEVEL per row")
    items = []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != 2:
            raise UsageError(f"{FEATURE_EPS} {label}: row {number} has {counted(len(row), 'cell')}, not 2 (FEATURE,LEVEL); "
                             "quote a feature name that holds a comma")
        items.append((row[0].strip(), row[1].strip(), f"{label}: row {number}"))
    return items


def _level(key: str, value: Any, where: str) -> float:
    """The level of an item: a finite number > 0."""
    try:
        if isinstance(value, bool) or value is None:
            raise TypeError(value)
        level = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{FEATURE_EPS}: {where}: the level of {key!r} is not a number ({value!r}); "
                         "write a number > 0, e.g. 0.5") from None
    if not (math.isfinite(level) and level > 0):
        raise UsageError(f"{FEATURE_EPS}: {where}: the level of {key!r} must be a finite number > 0, got {value!r}")
    return level


def _indices(key: str, d: int, where: str) -> range | None:
    """0-based coordinates ``i`` or ``i:j`` (inclusive); None if ``key`` is not written with integers."""
    match = _INDEX.fullmatch(key)
    if match is None:
        return None
    start = int(match[1])
    stop = int(match[2]) if match[2] is not None else start
    if stop < start:
        raise UsageError(f"{FEATURE_EPS}: {where}: the range {key!r} is backwards; write {stop}:{start}")
    if start < 0 or stop >= d:
        raise UsageError(f"{FEATURE_EPS}: {where}: coordinates {key!r} are not within 0..{d - 1} (0-based, inclusive "
                         "ranges i:j); name coordinates of the vectors")
    return range(start, stop + 1)


def _name_range(key: str, position: Mapping[str, int], where: str) -> range | None:
    """An inclusive range ``A:B`` of column names in column order (``position``: each name's first
    coordinate); None if no split of ``key`` at a ``:`` has two column names as ends."""
    for i, char in enumerate(key):
        if char != ":":
            continue
        first, last = key[:i].strip(), key[i + 1:].strip()
        if first in position and last in position:
            start, stop = position[first], position[last]
            if stop < start:
                raise UsageError(f"{FEATURE_EPS}: {where}: the range {key!r} is backwards ({last!r} comes before "
                                 f"{first!r}); write {last}:{first}")
            return range(start, stop + 1)
    return None


def _coordinates(
    key: str, d: int, names: Sequence[str] | None, position: Mapping[str, int], where: str
) -> Sequence[int]:
    """The 0-based coordinates ``key`` names: an exact column name, a range ``A:B`` of column names,
    a glob over the names (``*``, ``?``, ``[``; :func:`fnmatch.fnmatchcase`), else coordinates
    ``i`` / ``i:j`` written with integers. (The ``columns`` helpers of :mod:`ldpcli.io._columns` do
    the same for columns, but their messages name the column option and a ``:`` item that is not a range
    of names is an error there, not coordinates.) ``position``: each name's first coordinate, built
    once for all keys, so that naming each of d columns takes time linear in d."""
    if names is not None:
        if key in position:
            return [position[key]]
        span = _name_range(key, position, where)
        if span is not None:
            return span
        if any(char in key for char in _GLOB_CHARS):
            found = [i for i, name in enumerate(names) if fnmatch.fnmatchcase(name, key)]
            if not found:
                raise UsageError(f"{FEATURE_EPS}: {where}: the pattern {key!r} matches no column; {_available(d, names)}")
            return found
    coordinates = _indices(key, d, where)
    if coordinates is not None:
        return coordinates
    if not key:
        raise UsageError(f"{FEATURE_EPS}: {where}: the feature is missing before '='; {_available(d, names)}")
    if names is not None and ":" in key:
        raise UsageError(f"{FEATURE_EPS}: {where}: {key!r} is neither a range A:B of two columns nor coordinates i:j; "
                         f"{_available(d, names)}")
    raise UsageError(f"{FEATURE_EPS}: {where}: {key!r} names no feature; {_available(d, names)}")


def parse_feature_levels(spec: str, *, d: int, epsilon: float, names: Sequence[str] | None) -> FeatureLevels:
    """The d per-feature levels δ̃ = min(δ, ε) from ``feature_eps``.

    ``spec`` is inline text ``KEY=LEVEL,KEY=LEVEL`` (whitespace around keys and levels ignored) or,
    if it ends with ``.json`` or ``.csv`` (any case), a file: JSON ``{"KEY": level, ...}`` or
    ``[{"features": "KEY", "eps": level}, ...]``; CSV with the header ``feature,eps`` and one
    ``KEY,LEVEL`` per row. KEY is an exact column name of ``names`` (the coordinates' columns in
    order, ``len(names) == d``; None for vectors in one list column), else an inclusive range ``A:B``
    of column names, else a glob over the names, else 0-based coordinates ``i`` or ``i:j`` (inclusive).

    Coordinates no item names get ε; levels above ε are clipped to ε and their keys listed in
    ``clipped``. ε may be +∞ (no clipping: used by :func:`canonical_coordinates`). UsageError, one
    line naming the item, for an empty spec, a missing file, a level that is not a finite number > 0,
    a key that names nothing, coordinates out of range and a coordinate named by two items.
    """
    d = int(d)
    if d < 1:
        raise ValueError(f"d must be at least 1, got {d}")
    if not (epsilon > 0):  # +∞ allowed
        raise UsageError(f"`epsilon`: ε must be a number > 0, got {epsilon!r}")
    if names is not None:
        names = list(names)
        if len(names) != d:
            raise ValueError(f"names has {counted(len(names), 'entry', 'entries')} for d = {counted(d, 'coordinate')}")
    position = {name: i for i, name in reversed(list(enumerate(names)))} if names is not None else {}
    levels = np.full(d, float(epsilon))
    named = np.zeros(d, dtype=bool)
    items = _items(spec)
    clipped: list[str] = []
    for n, (key, value, where) in enumerate(items):
        level = _level(key, value, where)
        chosen = np.asarray(_coordinates(key, d, names, position, where), dtype=np.int64)
        taken = named[chosen]
        if taken.any():
            i = int(chosen[int(np.argmax(taken))])
            first = next(k for k, _, w in items[:n] if i in _coordinates(k, d, names, position, w))
            label = f"coordinate {i}" + (f" ({names[i]!r})" if names is not None else "")
            raise UsageError(f"{FEATURE_EPS}: {label} is named twice (by {first!r} and {key!r}); name each feature once")
        named[chosen] = True
        levels[chosen] = min(level, float(epsilon))
        if level > epsilon:
            clipped.append(key)
    levels.flags.writeable = False
    return FeatureLevels(levels, tuple(clipped), format_levels(levels, epsilon))


def _runs(levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops) of the maximal runs of equal adjacent levels (stops inclusive)."""
    d = levels.size
    breaks = np.flatnonzero(levels[1:] != levels[:-1]) + 1
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks - 1, [d - 1]))
    return starts, stops


def _span(start: int, stop: int) -> str:
    return str(start) if start == stop else f"{start}:{stop}"


def format_levels(levels: np.ndarray, epsilon: float) -> str:
    """The canonical ``feature_eps`` text of δ̃ (levels in (0, ε]).

    Only coordinates whose level is below ε, as 0-based inclusive ranges of equal adjacent levels, in
    coordinate order, e.g. ``"0:1=0.2,5=0.7"``; levels written with ``float.__repr__`` (the shortest
    text that reads back as the identical float); "" when every level is ε. Hence
    ``parse_feature_levels(text, d=d, epsilon=epsilon, names=None).levels`` equals ``levels`` exactly
    (for a non-empty text; "" stands for all ε, which the caller handles since the parser refuses an
    empty spec).
    """
    arr = np.asarray(levels, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"levels must be a non-empty 1-D vector, got shape {arr.shape}")
    if not np.all((arr > 0) & (arr <= epsilon) & (np.isfinite(arr) | (arr == epsilon))):
        raise ValueError("levels must be in (0, ε] (parse them with parse_feature_levels or tilde_levels first)")
    starts, stops = _runs(arr)
    keep = arr[starts] < epsilon
    return ",".join(
        f"{_span(int(a), int(b))}={float(arr[a])!r}" for a, b in zip(starts[keep], stops[keep])
    )


def canonical_coordinates(text: str) -> str:
    """``feature_eps`` as a spec stores it before the data is known: text that names coordinates
    only (inline ``i=…`` / ``i:j=…`` items) in canonical form (:func:`format_levels`, without
    clipping, since ε is applied later); any other text (column names, globs, a file) unchanged, for
    the mechanism to resolve against the data's columns; "" unchanged.
    """
    stripped = text.strip()
    if not stripped:
        return ""
    lower = stripped.lower()
    if lower.endswith(".json") or lower.endswith(".csv"):
        return text
    try:
        items = _items(stripped)
    except UsageError:
        return text
    spans = [_INDEX.fullmatch(key) for key, _, _ in items]
    if not all(spans):
        return text
    top = max(int(part) for match in spans if match is not None for part in match.groups() if part is not None)
    if top < 0:
        return text
    parsed = parse_feature_levels(stripped, d=top + 1, epsilon=math.inf, names=None)
    return parsed.canonical


def group_summary(levels: np.ndarray, epsilon: float) -> list[dict[str, Any]]:
    """The coordinates grouped by level, most sensitive first, ε group included, for a sidecar table:
    ``[{"coordinates": "0:1", "delta": 0.2, "count": 2}, ...]``.

    ``coordinates`` is the canonical range text (0-based, inclusive; several ranges comma-joined when
    a level appears in non-adjacent places). One Python iteration per run of equal adjacent levels.
    """
    arr = np.asarray(levels, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"levels must be a non-empty 1-D vector, got shape {arr.shape}")
    if not np.all((arr > 0) & (arr <= epsilon)):
        raise ValueError("levels must be in (0, ε]")
    starts, stops = _runs(arr)
    order = np.lexsort((starts, arr[starts]))  # by level, then position
    groups: list[dict[str, Any]] = []
    spans: list[str] = []
    for r in order:
        value = float(arr[starts[r]])
        if not groups or groups[-1]["delta"] != value:
            if groups:
                groups[-1]["coordinates"] = ",".join(spans)
            groups.append({"coordinates": "", "delta": value, "count": 0})
            spans = []
        spans.append(_span(int(starts[r]), int(stops[r])))
        groups[-1]["count"] += int(stops[r] - starts[r] + 1)
    groups[-1]["coordinates"] = ",".join(spans)
    return groups
