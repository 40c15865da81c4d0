"""Per-feature privacy levels (BCDP): the math of Thm 2 and Prop. 4.

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

The order in which the mechanism sorts the features (:func:`sort_order`) is here too; the text of
``feature_eps`` (its parser, canonical form and per-level groups) is :mod:`ldpcli.io._feature_eps`.

Conventions: :class:`~ldpcli.errors.UsageError` (one line, for a person) for values a user chose —
levels, ε, q, ζ, c_d and the ``feature_eps`` text; :class:`ValueError` for a caller's programming
error (an input that should be sorted and is not, an empty vector).
"""

from __future__ import annotations

import math
from typing import overload

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.io._feature_eps import FEATURE_EPS

#: Above this, e^c − 1 would overflow (expm1 is finite up to ≈ 709.78): use the log-sum-exp form.
_EXPM1_SAFE = 700.0
#: A c_1 at most this fraction of c_d is 0 up to rounding (ζ = 1 gives exactly 0: docs/errata.md §14).
_ROUNDING = 64.0 * float(np.finfo(float).eps)
#: c_d may exceed c_max by this relative amount (a few ulps) and is then taken as c_max.
_ULPS = 8.0 * float(np.finfo(float).eps)


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
        raise UsageError(f"{FEATURE_EPS}: give one level per coordinate (got shape {arr.shape})")
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise UsageError(f"{FEATURE_EPS}: the level of coordinate {i} must be a finite number > 0, got {arr[i]!r}")
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


def sort_order(levels: np.ndarray) -> np.ndarray:
    """The permutation the mechanism applies: coordinates by level ascending (most sensitive first),
    ties in their original order (a stable sort)."""
    return np.argsort(np.asarray(levels, dtype=float), kind="stable")
