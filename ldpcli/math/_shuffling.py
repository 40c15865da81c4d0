"""Amplification by shuffling: the central (ε, δ) of n shuffled reports from a pure ε0-LDP randomizer.

The bound is Feldman, McMillan & Talwar, *Hiding among the clones* (FOCS 2021), evaluated
numerically (docs/shuffling.md has the derivation). Their Thm 3.2 reduces the shuffled output, for
two data sets that differ in one person's input (the "replace one" relation), to a post-processing
of the pair P, Q of laws of (C, K): with p = e^{−ε0} and α = e^{ε0}/(1 + e^{ε0}),

    C ~ Bin(n − 1, p),  A | C ~ Bin(C, 1/2),  Δ ~ Bern(α),
    P: K = A + Δ,       Q: K = A + 1 − Δ,

so the shuffled release is (ε, δ(ε))-DP with δ(ε) = Σ_c Bin(n−1, p)(c) · D_c(ε), where D_c(ε) is
the hockey-stick divergence sup_S P_c(S) − e^ε Q_c(S) of the laws of K given C = c:

    P_c(k) = α B_c(k−1) + (1−α) B_c(k),   Q_c(k) = (1−α) B_c(k−1) + α B_c(k),   B_c = Bin(c, 1/2).

Facts this module relies on (each proved in docs/shuffling.md and tested in tests/accounting/):

1. P_c(k)/Q_c(k) is increasing in k, so the sup is over the tails {K ≥ k}, and
   D_c = max_k P_c(K ≥ k) − e^ε Q_c(K ≥ k), a pair of binomial tails.
2. Q_c(k) = P_c(c + 1 − k), so D(P‖Q) = D(Q‖P): one direction suffices.
3. D_c is non-increasing in c: P_{c+1} and Q_{c+1} are P_c and Q_c convolved with the same fair
   coin, and the hockey-stick divergence cannot grow under post-processing. So on an interval of c
   its left end bounds D_c from above and its right end from below.

:func:`shuffle_bound` brackets the reduction's exact ε at δ: ``epsilon_upper`` is certified
(δ_upper(ε) ≥ δ(ε) at every step, with a stated floating-point slack), ``epsilon_lower`` is a value the
reduction's exact ε is at least. Both are bounds on the reduction, which itself bounds the true ε of
any pure ε0-LDP randomizer from above: ``epsilon_lower`` is not a lower bound for a given mechanism.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math._lazy import LazyModule

stats: Any = LazyModule("scipy.stats")

THEOREM = ("Feldman, McMillan & Talwar 2021 (Hiding among the clones), Thm 3.2: the reduction to two "
           "binomial mixtures, its divergence evaluated numerically; closed form: their Thm 3.1")
"""The result a shuffled claim rests on, as the ``theorem`` string of :meth:`ShuffleBound.to_dict`."""

ASSUMPTIONS = ("an honest shuffler: the n reports are published in a uniformly random order that no one "
               "observing the output can undo, with nothing else linking a report to its sender",
               "one report per person: each of the n reports comes from a different person",
               "identical shapes: every report has the same shape and length, so none is told apart by "
               "its form")
"""The trust assumptions every shuffled claim rests on, in words."""

TAIL_SHARE = 1e-3
"""The window of c evaluated one by one holds all but TAIL_SHARE·δ of Bin(n − 1, p)'s mass; the two
tails outside it are bounded as whole intervals (fact 3)."""

RELATIVE_SLACK = 1e-10
"""Floating-point slack of the certified bound: each D_c is taken as D̂_c + RELATIVE_SLACK·P_c(K ≥ k)
(its cancellation error is at most a few ulps of the larger tail), and the sum is multiplied by
1 + RELATIVE_SLACK (the binomial weights' relative error); scipy's binomial tails (Boost's
incomplete beta) are accurate to about 1e-14 relative, so this is a margin of several thousand."""

ABSOLUTE_SLACK = 1e-290
"""Added to the certified δ: the tails that underflow double precision (below about 1e-300)."""

MAX_INTERVALS = 1024
"""The window is split into at most this many intervals of equal width (width 1: every c exactly)."""

RELATIVE_TOLERANCE = 1e-6
"""The binary search over ε stops when its interval is shorter than this share of its right end."""

NO_AMPLIFICATION_EPSILON0 = 690.0
"""Above this ε0, p = e^{−ε0} is below 1e-299 and no report is ever a clone: the bound is ε0 itself."""


@dataclass(frozen=True)
class ShuffleBound:
    """The central guarantee of n shuffled reports from an ε0-LDP randomizer, at δ.

    ``epsilon_upper`` is a certified upper bound on the central ε at δ (never optimistic);
    ``epsilon_lower`` is a value the reduction's exact ε is at least (the bracket's lower end);
    ``epsilon_closed_form`` is Thm 3.1's ε where its condition ε0 ≤ log(n / (16 log(2/δ))) holds,
    else None.
    """

    epsilon0: float
    n: int
    delta: float
    epsilon_upper: float
    epsilon_lower: float
    epsilon_closed_form: float | None

    def to_dict(self) -> dict[str, Any]:
        """The bound as JSON-able data, with the theorem it rests on and its assumptions."""
        return {"epsilon0": self.epsilon0, "n": self.n, "delta": self.delta,
                "epsilon_upper": self.epsilon_upper, "epsilon_lower": self.epsilon_lower,
                "epsilon_closed_form": self.epsilon_closed_form, "theorem": THEOREM,
                "assumptions": list(ASSUMPTIONS)}


def check_shuffle_arguments(epsilon0: float, n: int, delta: float) -> None:
    """Refuse what the bound does not cover: ε0 ≤ 0, n < 1, δ outside (0, 1)."""
    if not (math.isfinite(epsilon0) and epsilon0 > 0):
        raise UsageError(f"`epsilon0` must be a positive number, not {epsilon0}")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise UsageError(f"`n` (the number of shuffled reports) must be a whole number ≥ 1, not {n}")
    if not (0 < delta < 1):
        raise UsageError(f"`delta` must be in (0, 1), not {delta}")


def check_central_delta(delta: float, n: int, name: str = "delta") -> None:
    """Refuse a central δ of 1/n or more for n reports: at δ ≥ 1/n an (ε, δ) guarantee allows publishing
    one person's report in the clear, so it protects no one (the release's δ must be well below 1/n)."""
    if not (0 < delta < 1 / n):
        raise UsageError(f"`{name}` must be in (0, 1/n) = (0, {1 / n:.6g}) for n = {n} shuffled reports, not "
                         f"{delta:g}: a δ of 1/n or more allows publishing one person's report in the clear")


def default_central_delta(n: int, delta: float | None = None, name: str = "delta") -> float:
    """The central δ for n reports: ``delta``, by default 1/n², refused unless 0 < δ < 1/n
    (:func:`check_central_delta`)."""
    chosen = 1.0 / n**2 if delta is None else float(delta)
    check_central_delta(chosen, n, name)
    return chosen


def closed_form_epsilon(epsilon0: float, n: int, delta: float) -> float | None:
    """Feldman–McMillan–Talwar 2021, Thm 3.1: for ε0 ≤ log(n / (16 log(2/δ))), the shuffled output is
    (ε, δ)-DP with ε = log(1 + (e^{ε0} − 1)/(e^{ε0} + 1) · (8 √(e^{ε0} log(4/δ)) / √n + 8 e^{ε0} / n)).
    None outside that regime."""
    if n <= 16 * math.log(2 / delta) or epsilon0 > math.log(n / (16 * math.log(2 / delta))):
        return None
    e0 = math.exp(epsilon0)
    return math.log1p((e0 - 1) / (e0 + 1) * (8 * math.sqrt(e0 * math.log(4 / delta)) / math.sqrt(n) + 8 * e0 / n))


def _log_alpha(epsilon0: float) -> tuple[float, float]:
    """log α and log(1 − α) for α = e^{ε0}/(1 + e^{ε0}), without overflow."""
    log_norm = math.log1p(math.exp(-epsilon0))
    return -log_norm, -epsilon0 - log_norm


def divergence_bounds(epsilon: float, epsilon0: float, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (upper, lower) on D_c(ε) = sup_S P_c(S) − e^ε Q_c(S) for every c in the array ``c``.

    By fact 1 the sup is over tails {K ≥ k}; the best k is the first with P_c(k) > e^ε Q_c(k), i.e.
    k > t·(c + 1) with t = (e^{ε+ε0} − 1)/(e^{ε0} − e^ε + e^{ε+ε0} − 1) (module docstring). Its three
    nearest integers are all evaluated and the largest value kept, so a rounding of t·(c + 1) cannot
    lose the optimum. Tails are computed in log space (scipy.stats.binom.logsf), so nothing overflows
    for ε0 up to 10⁴. The upper value adds RELATIVE_SLACK·P_c(K ≥ k), the lower one subtracts it.
    """
    c = np.asarray(c, dtype=np.float64)
    if epsilon >= epsilon0:
        zeros = np.zeros_like(c)
        return zeros, zeros
    log_a, log_1ma = _log_alpha(epsilon0)
    # t = (1 − e^{−ε−ε0}) / (e^{−ε} − e^{−ε0} + 1 − e^{−ε−ε0}): every exponent negative
    u = -math.expm1(-epsilon - epsilon0)
    t = u / (math.exp(-epsilon) - math.exp(-epsilon0) + u)
    first = np.floor(t * (c + 1)) + 1
    # log S_c(j) = log Pr[Bin(c, 1/2) ≥ j] for j = first − 2, …, first + 1
    log_s = [stats.binom.logsf(first + shift - 1, c, 0.5) for shift in (-2, -1, 0, 1)]
    upper = np.zeros_like(c)
    lower = np.zeros_like(c)
    for shift in (-1, 0, 1):
        k = first + shift
        inside = (k >= 1) & (k <= c + 1)
        s_before, s_at = log_s[shift + 1], log_s[shift + 2]  # log S_c(k − 1), log S_c(k)
        log_p = np.logaddexp(log_a + s_before, log_1ma + s_at)
        log_qe = epsilon + np.logaddexp(log_1ma + s_before, log_a + s_at)
        p_tail = np.exp(log_p)
        with np.errstate(invalid="ignore"):  # −inf − (−inf) where both tails are empty: no set there
            gap = np.where(log_qe < log_p, log_qe - log_p, 0.0)
        value = p_tail * -np.expm1(gap)
        slack = RELATIVE_SLACK * p_tail
        upper = np.where(inside, np.maximum(upper, value + slack), upper)
        lower = np.where(inside, np.maximum(lower, value - slack), lower)
    return upper, lower


@dataclass(frozen=True)
class Grid:
    """[0, n − 1] cut into intervals [left_i, right_i] with their Bin(n − 1, p) masses."""

    left: np.ndarray
    right: np.ndarray
    weight: np.ndarray


def _edge(log_mass: Callable[[int], float], low: int, high: int, log_tail: float) -> int:
    """The largest c in [low, high] with ``log_mass(c) ≤ log_tail`` for an increasing ``log_mass`` (``low``
    itself if none), by bisection: scipy's binom.ppf is unreliable for quantiles far below 1e-15."""
    if log_mass(low) > log_tail:
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if log_mass(middle) <= log_tail:
            low = middle
        else:
            high = middle
    return high if log_mass(high) <= log_tail else low


CHUNK = 1 << 20
"""The window's binomial pmf is summed into its intervals this many values of c at a time."""


def grid_of(epsilon0: float, n: int, delta: float, max_intervals: int | None = None) -> Grid:
    """The window of c holding all but about TAIL_SHARE·δ of Bin(n − 1, p) in at most ``max_intervals``
    (default MAX_INTERVALS) intervals of equal width, their masses summed from the pmf; the two tails
    outside it are one interval each, their masses from binom.cdf and binom.sf. Where the window ends
    changes only how tight the bracket is: every c is in exactly one interval."""
    m, p = n - 1, math.exp(-epsilon0)
    binom = stats.binom(m, p)
    log_tail = math.log(TAIL_SHARE * delta / 2)
    mode = min(m, int((m + 1) * p))
    start = _edge(lambda c: float(binom.logcdf(c - 1)), 0, mode, log_tail)  # cdf(start − 1) ≤ τ/2
    stop = m - _edge(lambda k: float(binom.logsf(m - k)), 0, m - mode, log_tail)  # sf(stop) ≤ τ/2
    width = max(1, -(-(stop - start + 1) // (max_intervals or MAX_INTERVALS)))
    left = np.arange(start, stop + 1, width, dtype=np.int64)
    right = np.minimum(left + width - 1, stop)
    per_chunk = max(1, CHUNK // width) * width
    chunks = (binom.pmf(np.arange(first, min(first + per_chunk, stop + 1))) for first in range(start, stop + 1, per_chunk))
    weight = np.concatenate([np.add.reduceat(pmf, np.arange(0, len(pmf), width)) for pmf in chunks])
    if start > 0:
        left, right = np.r_[0, left], np.r_[start - 1, right]
        weight = np.r_[binom.cdf(start - 1), weight]
    if stop < m:
        left, right = np.r_[left, stop + 1], np.r_[right, m]
        weight = np.r_[weight, binom.sf(stop)]
    return Grid(left, right, weight)


def delta_upper(epsilon: float, epsilon0: float, grid: Grid) -> float:
    """A certified upper bound on the reduction's δ(ε) = Σ_c Bin(n−1, p)(c) D_c(ε): each interval of c
    contributes its mass times the upper value of D at its left end (fact 3: D_c is non-increasing in c);
    the sum is multiplied by 1 + RELATIVE_SLACK and gets ABSOLUTE_SLACK added."""
    upper, _ = divergence_bounds(epsilon, epsilon0, grid.left)
    return float(np.dot(grid.weight, upper)) * (1 + RELATIVE_SLACK) + ABSOLUTE_SLACK


def delta_lower(epsilon: float, epsilon0: float, grid: Grid) -> float:
    """A lower bound on the reduction's δ(ε): each interval's mass times the lower value of D at its right
    end, the sum multiplied by 1 − RELATIVE_SLACK."""
    _, lower = divergence_bounds(epsilon, epsilon0, grid.right)
    return float(np.dot(grid.weight, lower)) * (1 - RELATIVE_SLACK)


def _search(certified: Callable[[float], bool], epsilon0: float) -> tuple[float, float]:
    """Binary search on [0, ε0] for the edge of the set where ``certified(ε)`` holds (a set of the form
    [e*, ε0], ε0 holding by assumption); returns the final interval (left, right): right holds."""
    left, right = 0.0, epsilon0
    if certified(0.0):
        return 0.0, 0.0
    while right - left > RELATIVE_TOLERANCE * right:
        middle = (left + right) / 2
        if certified(middle):
            right = middle
        else:
            left = middle
    return left, right


def shuffle_bound(epsilon0: float, n: int, delta: float) -> ShuffleBound:
    """The central (ε, δ) of n shuffled reports, each from an ε0-LDP randomizer (replace-one neighbours).

    Binary search over ε ∈ [0, ε0] (δ(ε) decreases in ε, and the shuffled output is ε0-DP by post-
    processing): ``epsilon_upper`` is the right end of the final interval where δ_upper ≤ δ, so the
    reduction's exact δ(ε_upper) ≤ δ; ``epsilon_lower`` is the left end of the final interval where
    δ_lower ≥ δ, so the exact ε is at least it. Cost: one grid of at most MAX_INTERVALS + 2 values of c
    (the binomial pmf over the window, once), then about 2·log2(1/RELATIVE_TOLERANCE) ≈ 40 evaluations
    of four binomial tails per value: about 0.1 s for n = 10⁵ and about 1 s for n = 10⁹ on a loaded
    two-core machine (benchmarks/shuffle_bound.py).
    """
    check_shuffle_arguments(epsilon0, n, delta)
    closed = closed_form_epsilon(epsilon0, n, delta)
    if epsilon0 > NO_AMPLIFICATION_EPSILON0:
        # Every report comes from the user's own input with probability 1 − (n−1)e^{−ε0} ≥ 1/2; the
        # exact δ(ε) is at least half of D_0(ε) = α − e^ε(1 − α), so ε ≥ log((α − 2δ)/(1 − α)).
        log_a, log_1ma = _log_alpha(epsilon0)
        lower = math.log(max(math.exp(log_a) - 2 * delta, 1e-300)) - log_1ma
        return ShuffleBound(epsilon0, n, delta, epsilon0, max(0.0, min(lower, epsilon0)), closed)
    grid = grid_of(epsilon0, n, delta)
    _, upper = _search(lambda e: delta_upper(e, epsilon0, grid) <= delta, epsilon0)
    lower, _ = _search(lambda e: delta_lower(e, epsilon0, grid) < delta, epsilon0)
    return ShuffleBound(epsilon0, n, delta, min(upper, epsilon0), min(lower, upper), closed)
