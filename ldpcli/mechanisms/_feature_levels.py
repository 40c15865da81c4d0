"""Per-feature privacy levels (BCDP): the math of Thm 2 and Prop. 4, and the ``--feature-eps`` text.

Aliakbarpour, Chaudhuri, Courtade, Fallah, Jordan 2024, "Enhancing feature-specific data protection
via Bayesian coordinate differential privacy" (BCDP). :mod:`ldpcli.mechanisms._bcdp` builds Mechanism 1
on this module; everything here is independent of the base mechanism.

The math, vectorised over the d coordinates (no Python loop over d; loops run over distinct levels
or releases only) and safe in floating point for levels ε, δ up to 10⁴ and d up to 10⁷: every e^c is
kept inside a logarithm (:func:`log_dependence_cost`, :func:`c_d_for_zeta`), so nothing overflows.

- :func:`log_dependence_cost`: log(1 + q·e^c − q), the price of dependence in Thm 2 (16) and Prop. 4;
- :func:`tilde_levels`: δ̃_i = min(δ_i, ε) (Thm 2);
- :func:`c_max`, :func:`c_d_for_zeta`, :func:`budget_vector`: Thm 2 (16), with docs/errata.md §14
  (zero increments skipped, c_1 = 0 refused) and docs/errata.md §15 (c_d a free public parameter in
  (0, c_max]);
- :func:`bcdp_levels` (Prop. 4 part 2 as the proof of Thm 2 uses it, App. B.2) and
  :func:`cdp_to_bcdp` (Prop. 4 part 1, the sum over the d coordinates: docs/errata.md §16);
- :func:`increments`: the releases Mechanism 1 makes (docs/errata.md §14);
- :func:`paper_error_proxy` (the sum in (17) without constants and without its ∧ d cap); the
  least-error c_d (docs/errata.md §15) is :func:`ldpcli.mechanisms._bcdp_budget.best_c_d`.

The text of ``--feature-eps`` (:func:`parse_feature_levels`, :class:`FeatureLevels`), its canonical
form (:func:`format_levels`, :func:`canonical_coordinates`), the per-level groups of a sidecar
(:func:`group_summary`) and the order in which the mechanism sorts the features (:func:`sort_order`).

Conventions: :class:`~ldpcli.errors.UsageError` (one line, for a person) for values a user chose —
levels, ε, q, ζ, c_d and the ``--feature-eps`` text; :class:`ValueError` for a caller's programming
error (an input that should be sorted and is not, an empty vector).
"""

from __future__ import annotations

import csv
import fnmatch
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np

from ldpcli.errors import UsageError, counted, quoted
from ldpcli.io._jsonfile import read_json

#: Above this, e^c − 1 would overflow (expm1 is finite up to ≈ 709.78): use the log-sum-exp form.
_EXPM1_SAFE = 700.0
#: A c_1 at most this fraction of c_d is 0 up to rounding (ζ = 1 gives exactly 0: docs/errata.md §14).
_ROUNDING = 64.0 * float(np.finfo(float).eps)
#: c_d may exceed c_max by this relative amount (a few ulps) and is then taken as c_max.
_ULPS = 8.0 * float(np.finfo(float).eps)
#: 0-based coordinates ``i`` or an inclusive range ``i:j`` (a sign only so that -1 is reported as out of range).
_INDEX = re.compile(r"\s*([+-]?\d+)\s*(?::\s*([+-]?\d+)\s*)?")
_GLOB_CHARS = "*?["
#: The parameter the levels are given by, marked for messages (:mod:`ldpcli.errors`).
_OPTION = "`feature_eps`"


# ============================================================================================ the math


def _check_q(q: float) -> float:
    q = float(q)
    if not 0.0 <= q <= 1.0:  # also refuses NaN
        raise UsageError(f"bcdp: the dependence bound q must be in [0, 1] (Assumption 1), got {q!r}")
    return q


def _sorted_levels(values: np.ndarray, what: str, *, positive: bool) -> np.ndarray:
    """A 1-D, non-empty, finite, non-decreasing float vector (> 0 or ≥ 0); ValueError if not."""
    out = np.asarray(values, dtype=float)
    if out.ndim != 1 or out.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-D vector, got shape {out.shape}")
    bad = ~np.isfinite(out) | ((out <= 0.0) if positive else (out < 0.0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{what}[{i}] = {out[i]!r} is not a finite number {'>' if positive else '≥'} 0")
    if out.size > 1 and np.any(out[1:] < out[:-1]):
        i = int(np.argmax(out[1:] < out[:-1]))
        raise ValueError(f"{what} must be sorted non-decreasing (most sensitive first); {what}[{i + 1}] < {what}[{i}]")
    return out


@overload
def log_dependence_cost(c: float, q: float) -> float: ...


@overload
def log_dependence_cost(c: np.ndarray, q: float) -> np.ndarray: ...


def log_dependence_cost(c: float | np.ndarray, q: float) -> float | np.ndarray:
    """log(1 + q·e^c − q) = log((1 − q) + q·e^c): the price of dependence in Thm 2 (16) and Prop. 4.

    Exact special cases q = 0 → 0 and q = 1 → c. For 0 < q < 1, log1p(q·expm1(c)) where e^c is
    finite (relative accuracy of a few ulps, also for tiny c), else the log-sum-exp
    logaddexp(log(1 − q), log q + c), which never overflows. A float in, a float out; an array in,
    an array out.
    """
    q = _check_q(q)
    arr = np.asarray(c, dtype=float)
    if q == 0.0:
        out = np.zeros_like(arr)
    elif q == 1.0:
        out = arr.copy()
    else:
        out = np.empty_like(arr)
        small = arr <= _EXPM1_SAFE
        out[small] = np.log1p(q * np.expm1(arr[small]))
        out[~small] = np.logaddexp(math.log1p(-q), math.log(q) + arr[~small])
    if np.ndim(c) == 0:
        return float(out)
    return out


def tilde_levels(levels: np.ndarray, epsilon: float) -> np.ndarray:
    """δ̃_i = min(δ_i, ε) (Thm 2): no feature can be more exposed than the whole row.

    UsageError naming the first coordinate whose level is not a finite number > 0, and for an ε that
    is not a finite number > 0.
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"`epsilon`: ε must be a finite number > 0, got {epsilon!r}")
    arr = np.asarray(levels, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise UsageError(f"{_OPTION}: give one level per coordinate (got shape {arr.shape})")
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise UsageError(f"{_OPTION}: the level of coordinate {i} must be a finite number > 0, got {arr[i]!r}")
    return np.minimum(arr, float(epsilon))


def _log_ratio(x: float, q: float) -> float:
    """log((e^x + q − 1)/q) = log1p(expm1(x)/q) for x > 0 and 0 < q < 1, without overflow; never below x.

    log1p(expm1(x)/q) has no cancellation (a relative error of a few ulps); where e^x − 1 or its
    quotient by q would overflow, x + log1p(−(1 − q)·e^{−x}) − log q (then x > 1, so no
    cancellation either). Mathematically (e^x + q − 1)/q ≥ e^x since (e^x − 1)(1 − q) ≥ 0; the
    result is clamped to ≥ x so that rounding cannot put δ̃_1 above c_max (docs/errata.md §15).
    """
    ratio = math.expm1(x) / q if x <= _EXPM1_SAFE else math.inf
    if math.isfinite(ratio):
        value = math.log1p(ratio)
    else:
        value = x + math.log1p(-(1.0 - q) * math.exp(-x)) - math.log(q)
    return max(value, x)


def c_d_for_zeta(sorted_tilde: np.ndarray, q: float, zeta: float) -> float:
    """Thm 2 (16): c_d = min{log((e^{ζδ̃_1} + q − 1)/q), δ̃_d} for ζ ∈ (0, 1].

    The first term is +∞ at q = 0 (independent features: c_d = δ̃_d) and ζδ̃_1 at q = 1 (copies of
    one value); computed as log1p(expm1(ζδ̃_1)/q) without overflow (:func:`_log_ratio`).
    At ζ = 1 this is :func:`c_max`, where c_1 = 0 whenever the first term is the smaller
    (docs/errata.md §14), so ζ = 1 is refused by :func:`budget_vector` in that case.
    """
    tilde = _sorted_levels(sorted_tilde, "sorted_tilde", positive=True)
    q = _check_q(q)
    zeta = float(zeta)
    if not 0.0 < zeta <= 1.0:
        raise UsageError(f"bcdp: ζ must be in (0, 1] (Thm 2), got {zeta!r}")
    first, last = float(tilde[0]), float(tilde[-1])
    x = zeta * first
    if q == 0.0:
        return last
    term = x if q == 1.0 else _log_ratio(x, q)
    return min(term, last)


def c_max(sorted_tilde: np.ndarray, q: float) -> float:
    """The largest admissible c_d: Thm 2 (16) with ζ = 1, min{log((e^{δ̃_1} + q − 1)/q), δ̃_d}.

    docs/errata.md §15: c_d is a free public parameter in (0, c_max]. δ̃_1 ≤ c_max always (both terms
    are ≥ δ̃_1), and c_d = δ̃_1 is plain min(δ)-LDP.
    """
    return c_d_for_zeta(sorted_tilde, q, 1.0)


def budget_vector(sorted_tilde: np.ndarray, q: float, c_d: float) -> np.ndarray:
    """Thm 2 (16): the budget vector c over the sorted coordinates for a total budget c_d.

    For i < d, c_i = c_d if c_d ≤ δ̃_i, else δ̃_i − log(1 + q·e^{c_d} − q); c_d is the last entry.
    ``sorted_tilde`` is δ̃ sorted non-decreasing (most sensitive first).

    c is non-decreasing: {i : δ̃_i < c_d} is a prefix because δ̃ is sorted; on it c_i = δ̃_i − L
    (L = log(1 + q·e^{c_d} − q) ≥ 0 is one number) grows with δ̃_i and stays below δ̃_i < c_d; on
    the rest c_i = c_d. The result is also made safe in floating point: where the second branch
    applies, c_i + L ≤ δ̃_i holds exactly as computed (so :func:`bcdp_levels` gives back ≤ δ̃_i), by
    lowering c_i by two ulps of δ̃_i where rounding went up, and a reverse running minimum keeps c
    non-decreasing (it only ever lowers a budget, which keeps every guarantee).

    UsageError if c_d is not in (0, c_max] (a c_d above c_max by a few ulps is taken as c_max), or
    if c_1 ≤ 0 up to rounding: docs/errata.md §14, c_1 = 0 (ζ = 1 with c_d < δ̃_d) leaves
    coordinate 1 unestimable (weight 0, ν̂_1 = 0/0).
    """
    tilde = _sorted_levels(sorted_tilde, "sorted_tilde", positive=True)
    q = _check_q(q)
    c_d = float(c_d)
    top = c_max(tilde, q)
    if not (c_d > 0.0 and c_d <= top * (1.0 + _ULPS)):  # also refuses NaN
        raise UsageError(
            f"bcdp: the total budget c_d = {c_d!r} must be in (0, {top!r}] for these levels and q = {q!r} "
            "(Thm 2 (16) with ζ = 1); choose a smaller c_d or ζ"
        )
    c_d = min(c_d, top)
    cost = log_dependence_cost(c_d, q)
    reduced = c_d > tilde
    c = np.where(reduced, tilde - cost, c_d)
    over = reduced & (c + cost > tilde)
    if over.any():
        c[over] -= 2.0 * np.spacing(tilde[over])
    if np.any(reduced & (c + cost > tilde)):  # pragma: no cover - impossible by the rounding argument above
        raise AssertionError("bcdp: a budget c_i + log(1 + q·e^{c_d} − q) still exceeds δ̃_i")
    c[-1] = c_d
    c = np.minimum.accumulate(c[::-1])[::-1]
    if not c[0] > _ROUNDING * c_d:
        raise UsageError(
            f"bcdp: c_d = {c_d!r} leaves the most sensitive feature no budget (c_1 = {float(c[0]):.3g}, 0 up to "
            "rounding: docs/errata.md §14), so it could not be estimated; use a smaller c_d (calibration "
            "optimal) or ζ below 1"
        )
    return c


def bcdp_levels(sorted_c: np.ndarray, q: float) -> np.ndarray:
    """δ'_i = min(c_i + log(1 + q·e^{c_d} − q), c_d) with c_d = ``sorted_c[-1]``, the total LDP level.

    The second route to each feature's guarantee, as the proof of Thm 2 (App. B.2) takes it: the
    release (all used increments of Mechanism 1) is c-CDP and c_d-LDP, so Prop. 4 part 2 (with
    ε = c_d) and Prop. 3 give δ'_i. For a budget vector from :func:`budget_vector`, δ'_i ≤ δ̃_i,
    with equality (up to rounding) where c_i < c_d.
    """
    c = _sorted_levels(sorted_c, "sorted_c", positive=False)
    total = float(c[-1])
    return np.minimum(c + log_dependence_cost(total, q), total)


def cdp_to_bcdp(c: np.ndarray, q: float) -> np.ndarray:
    """Prop. 4 part 1: a c-CDP mechanism is δ-BCDP with δ_i = c_i + log(1 + q·e^{Σ_{j≠i} c_j} − q).

    The sum runs over the d coordinates of c (docs/errata.md §16: printed Σ_{i=1}^n, n being the
    number of users), and the mechanism is also (Σ_{j=1}^d c_j)-LDP by composition. Σ_{j≠i} c_j is
    the exclusive prefix sum plus the exclusive suffix sum (no cancellation). With q = 1 (every
    coordinate a copy of one value) every δ_i is Σ_j c_j, the paper's example under Prop. 4. c needs
    no order here.
    """
    arr = np.asarray(c, dtype=float)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr) & (arr >= 0)):
        raise ValueError("c must be a non-empty 1-D vector of finite numbers ≥ 0")
    before = np.concatenate(([0.0], np.cumsum(arr)[:-1]))
    after = np.concatenate((np.cumsum(arr[::-1])[::-1][1:], [0.0]))
    return arr + log_dependence_cost(before + after, q)


def increments(sorted_c: np.ndarray) -> list[tuple[int, int, float]]:
    """The releases of Mechanism 1: ``(start, stop, budget)`` for each k with c_k − c_{k−1} > 0.

    ``start`` is k − 1 (0-based first coordinate of the suffix x_{k:d}), ``stop`` is d, ``budget`` is
    c_k − c_{k−1} with c_0 = 0. Zero increments (ties, the normal case in Thm 2) are skipped: no
    query, weight 0 (docs/errata.md §14). The budgets add up to c_d (up to rounding). One Python
    iteration per release, i.e. per distinct budget.
    """
    c = _sorted_levels(sorted_c, "sorted_c", positive=False)
    steps = np.diff(c, prepend=0.0)
    d = int(c.size)
    return [(int(k), d, float(steps[k])) for k in np.flatnonzero(steps > 0.0)]


def paper_error_proxy(sorted_c: np.ndarray) -> float:
    """Σ_{i=1}^d 1 / Σ_{k≤i} (c_k − c_{k−1})²/(d − k + 1): the sum in Thm 2 (17), without constants,
    without 1/n and without the "∧ d" cap (at d = 10 the cap makes every choice equal: docs/errata.md
    §15). +∞ when c_1 = 0 (coordinate 1 unestimable, docs/errata.md §14). O(d) to find the used
    increments, then cumulative sums over them: the inner sum is constant between two increments.
    """
    c = _sorted_levels(sorted_c, "sorted_c", positive=False)
    d = c.size
    steps = np.diff(c, prepend=0.0)
    used = np.flatnonzero(steps > 0.0)  # the inner sum only grows at a used increment (docs/errata.md §14)
    if used.size == 0 or used[0] != 0:
        return math.inf
    totals = np.cumsum(steps[used] ** 2 / (d - used).astype(float))
    if totals[0] <= 0.0:  # c_1² underflows
        return math.inf
    lengths = np.diff(np.append(used, d)).astype(float)  # coordinates sharing each inner sum
    return float(np.sum(lengths / totals))


# ============================================================================================ the text


@dataclass(frozen=True, eq=False)
class FeatureLevels:
    """The parsed ``--feature-eps``.

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
        raise UsageError(f"{_OPTION}: the levels are empty; give at least one FEATURE=LEVEL, e.g. 'age=0.5' or '0:3=0.2'")
    lower = text.lower()
    if lower.endswith(".json") or lower.endswith(".csv"):
        path = Path(text)
        if not path.is_file():
            raise UsageError(f"{_OPTION}: no such file {text!r}; give an existing .json or .csv file, or inline FEATURE=LEVEL items")
        items = _json_items(path, text) if lower.endswith(".json") else _csv_items(path, text)
        if not items:
            raise UsageError(f"{_OPTION} {text}: the file holds no FEATURE=LEVEL item; add at least one")
        return items
    items = []
    for raw in text.split(","):
        if not raw.strip():
            continue  # a trailing or doubled comma
        if "=" not in raw:
            raise UsageError(f"{_OPTION}: item {raw.strip()!r} is not FEATURE=LEVEL; write e.g. age=0.5 or 0:3=0.2")
        key, _, value = raw.rpartition("=")
        items.append((key.strip(), value.strip(), f"item {raw.strip()!r}"))
    if not items:
        raise UsageError(f"{_OPTION}: the levels are empty; give at least one FEATURE=LEVEL, e.g. 'age=0.5' or '0:3=0.2'")
    return items


def _json_items(path: Path, label: str) -> list[tuple[str, Any, str]]:
    shape = ('expected an object {"FEATURE": level, ...} or a list of objects '
             '[{"features": "FEATURE", "eps": level}, ...]')
    try:
        data = read_json(path, object_pairs_hook=lambda pairs: pairs)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{_OPTION} {label}: cannot read it as JSON ({quoted(str(exc))}); {shape}") from exc
    # With the hook every JSON object is a list of (key, value) pairs; a JSON array is a list of those.
    if isinstance(data, list) and all(isinstance(p, tuple) for p in data):
        return [(str(key), value, label) for key, value in data]
    if isinstance(data, list):
        items = []
        for n, entry in enumerate(data):
            fields = dict(entry) if isinstance(entry, list) and all(isinstance(p, tuple) for p in entry) else None
            if fields is None or set(fields) != {"features", "eps"}:
                raise UsageError(f"{_OPTION} {label}: entry {n} is not {{\"features\": ..., \"eps\": ...}}; {shape}")
            key = fields["features"]
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise UsageError(f"{_OPTION} {label}: entry {n}: \"features\" must be a name, a range or a "
                                 f"coordinate, got {key!r}")
            items.append((str(key).strip(), fields["eps"], f"{label}: entry {n}"))
        return items
    raise UsageError(f"{_OPTION} {label}: {shape}")


def _csv_items(path: Path, label: str) -> list[tuple[str, Any, str]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{_OPTION} {label}: cannot read it as CSV ({quoted(str(exc))}); write a header 'feature,eps' "
                         "then one FEATURE,LEVEL per row") from exc
    if not rows or [cell.strip().lower() for cell in rows[0]] != ["feature", "eps"]:
        raise UsageError(f"{_OPTION} {label}: the first row must be the header 'feature,eps', then one FEATURE,LEVEL per row")
    items = []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != 2:
            raise UsageError(f"{_OPTION} {label}: row {number} has {counted(len(row), 'cell')}, not 2 (FEATURE,LEVEL); "
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
        raise UsageError(f"{_OPTION}: {where}: the level of {key!r} is not a number ({value!r}); "
                         "write a number > 0, e.g. 0.5") from None
    if not (math.isfinite(level) and level > 0):
        raise UsageError(f"{_OPTION}: {where}: the level of {key!r} must be a finite number > 0, got {value!r}")
    return level


def _indices(key: str, d: int, where: str) -> range | None:
    """0-based coordinates ``i`` or ``i:j`` (inclusive); None if ``key`` is not written with integers."""
    match = _INDEX.fullmatch(key)
    if match is None:
        return None
    start = int(match[1])
    stop = int(match[2]) if match[2] is not None else start
    if stop < start:
        raise UsageError(f"{_OPTION}: {where}: the range {key!r} is backwards; write {stop}:{start}")
    if start < 0 or stop >= d:
        raise UsageError(f"{_OPTION}: {where}: coordinates {key!r} are not within 0..{d - 1} (0-based, inclusive "
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
                raise UsageError(f"{_OPTION}: {where}: the range {key!r} is backwards ({last!r} comes before "
                                 f"{first!r}); write {last}:{first}")
            return range(start, stop + 1)
    return None


def _coordinates(
    key: str, d: int, names: Sequence[str] | None, position: Mapping[str, int], where: str
) -> Sequence[int]:
    """The 0-based coordinates ``key`` names: an exact column name, a range ``A:B`` of column names,
    a glob over the names (``*``, ``?``, ``[``; :func:`fnmatch.fnmatchcase`), else coordinates
    ``i`` / ``i:j`` written with integers. (The ``--columns`` helpers of :mod:`ldpcli.io._columns` do
    the same for columns, but their messages name ``--columns`` and a ``:`` item that is not a range
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
                raise UsageError(f"{_OPTION}: {where}: the pattern {key!r} matches no column; {_available(d, names)}")
            return found
    coordinates = _indices(key, d, where)
    if coordinates is not None:
        return coordinates
    if not key:
        raise UsageError(f"{_OPTION}: {where}: the feature is missing before '='; {_available(d, names)}")
    if names is not None and ":" in key:
        raise UsageError(f"{_OPTION}: {where}: {key!r} is neither a range A:B of two columns nor coordinates i:j; "
                         f"{_available(d, names)}")
    raise UsageError(f"{_OPTION}: {where}: {key!r} names no feature; {_available(d, names)}")


def parse_feature_levels(spec: str, *, d: int, epsilon: float, names: Sequence[str] | None) -> FeatureLevels:
    """The d per-feature levels δ̃ = min(δ, ε) from ``--feature-eps``.

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
            raise UsageError(f"{_OPTION}: {label} is named twice (by {first!r} and {key!r}); name each feature once")
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
    """The canonical ``--feature-eps`` text of δ̃ (levels in (0, ε]).

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
    """``--feature-eps`` as a spec stores it before the data is known: text that names coordinates
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


def sort_order(levels: np.ndarray) -> np.ndarray:
    """The permutation the mechanism applies: coordinates by level ascending (most sensitive first),
    ties in their original order (a stable sort)."""
    return np.argsort(np.asarray(levels, dtype=float), kind="stable")
