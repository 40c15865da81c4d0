"""The shuffle bound (ldpcli.math._shuffling) against an independent exact evaluation, its monotonicity,
the closed form, and the reference code's defect.

The independent evaluation enumerates every (c, k) of Feldman–McMillan–Talwar's reduction (Thm 3.2)
in 40-digit arithmetic (mpmath, exact binomial coefficients) and sums max(0, P − e^ε Q) over the
whole joint law of (C, K): no monotone ratio, no symmetry, no grouping of c and no tail is assumed.
"""

from __future__ import annotations

import math
from functools import lru_cache

import mpmath
import numpy as np
import pytest

from ldpcli.errors import UsageError
from ldpcli.math import _shuffling as shuffling
from ldpcli.math._shuffling import (
    ASSUMPTIONS,
    ShuffleBound,
    check_central_delta,
    closed_form_epsilon,
    delta_lower,
    delta_upper,
    divergence_bounds,
    grid_of,
    shuffle_bound,
)

mpmath.mp.dps = 40


@lru_cache(maxsize=None)
def exact_joint(n: int, epsilon0: float) -> tuple[list[mpmath.mpf], list[mpmath.mpf]]:
    """P(c, k) and Q(c, k) for every c in [0, n−1], k in [0, c+1], flattened, in 40 digits."""
    e0 = mpmath.mpf(epsilon0)
    p = mpmath.exp(-e0)
    alpha = mpmath.exp(e0) / (1 + mpmath.exp(e0))
    ps, qs = [], []
    for c in range(n):
        w = math.comb(n - 1, c) * p**c * (1 - p) ** (n - 1 - c)
        b = [mpmath.mpf(math.comb(c, k)) / 2**c for k in range(c + 1)]
        for k in range(c + 2):
            before = b[k - 1] if k >= 1 else 0
            at = b[k] if k <= c else 0
            ps.append(w * (alpha * before + (1 - alpha) * at))
            qs.append(w * ((1 - alpha) * before + alpha * at))
    return ps, qs


def exact_divergence(c: int, epsilon0: float, epsilon: float, reverse: bool = False) -> mpmath.mpf:
    """D_c(ε) = Σ_k max(0, P_c(k) − e^ε Q_c(k)) over every k (or with P and Q swapped), in 40 digits."""
    e0 = mpmath.mpf(epsilon0)
    alpha = mpmath.exp(e0) / (1 + mpmath.exp(e0))
    scale = mpmath.exp(mpmath.mpf(epsilon))
    b = [mpmath.mpf(0)] + [mpmath.mpf(math.comb(c, k)) / 2**c for k in range(c + 1)] + [mpmath.mpf(0)]
    total = mpmath.mpf(0)
    for k in range(c + 2):  # b[k] is B_c(k − 1), b[k + 1] is B_c(k)
        p, q = alpha * b[k] + (1 - alpha) * b[k + 1], (1 - alpha) * b[k] + alpha * b[k + 1]
        if reverse:
            p, q = q, p
        total += max(mpmath.mpf(0), p - scale * q)
    return total


def exact_delta(n: int, epsilon0: float, epsilon: float, reverse: bool = False) -> mpmath.mpf:
    """The reduction's δ(ε) = Σ_{c,k} max(0, P(c,k) − e^ε Q(c,k)) (or with P and Q swapped)."""
    ps, qs = exact_joint(n, epsilon0)
    if reverse:
        ps, qs = qs, ps
    scale = mpmath.exp(mpmath.mpf(epsilon))
    return mpmath.fsum(max(mpmath.mpf(0), a - scale * b) for a, b in zip(ps, qs))


CASES = [(2, 1.0, 0.1), (10, 0.5, 1e-3), (30, 2.0, 1e-3), (50, 1.0, 1e-4), (120, 3.0, 1e-5), (200, 0.3, 1e-5),
         (200, 4.0, 1e-6), (500, 1.5, 1e-7)]


def assert_brackets_exact(bound: ShuffleBound) -> None:
    """The exact ε lies in [ε_lower, ε_upper]: δ(ε) decreases in ε, so it is enough that the exact δ at
    ε_upper is at most δ and the exact δ at ε_lower at least δ."""
    n, epsilon0, delta = bound.n, bound.epsilon0, bound.delta
    assert exact_delta(n, epsilon0, bound.epsilon_upper) <= delta
    assert bound.epsilon_lower == 0 or exact_delta(n, epsilon0, bound.epsilon_lower) >= delta


@pytest.mark.slow
@pytest.mark.parametrize(("n", "epsilon0", "delta"), CASES)
def test_bracket_holds_the_independent_exact_epsilon(n: int, epsilon0: float, delta: float) -> None:
    bound = shuffle_bound(epsilon0, n, delta)
    assert_brackets_exact(bound)
    assert bound.epsilon_upper <= epsilon0
    # a bracket, not a loose bound: the search's relative tolerance (1e-6) plus the slack
    assert bound.epsilon_upper - bound.epsilon_lower <= 1e-5 * epsilon0


@pytest.mark.parametrize(("n", "epsilon0", "delta"), [(200, 0.3, 1e-5), (200, 4.0, 1e-6), (120, 3.0, 1e-5)])
def test_grouping_c_into_intervals_keeps_the_bracket(n: int, epsilon0: float, delta: float,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With at most 4 intervals of c (each bounded by its ends, fact 3) the bracket is wider but still
    holds the exact ε: the path that large n takes, checked where the exact value is known."""
    monkeypatch.setattr(shuffling, "MAX_INTERVALS", 4)
    grouped = shuffle_bound(epsilon0, n, delta)
    assert_brackets_exact(grouped)
    exact_window = len(shuffling.grid_of(epsilon0, n, delta).left)
    assert exact_window <= 6  # the window really was grouped (4 intervals and at most 2 tails)


@pytest.mark.slow
@pytest.mark.parametrize(("n", "epsilon0"), [(40, 1.0), (200, 2.5)])
def test_delta_bounds_hold_the_exact_delta_on_a_fine_grid(n: int, epsilon0: float) -> None:
    grid = grid_of(epsilon0, n, 1e-6)
    for epsilon in np.linspace(0, epsilon0, 25):
        exact = exact_delta(n, epsilon0, float(epsilon))
        # 1e-30: the 40-digit sum's own rounding (at ε = ε0 it gives ~1e-45 for an exact 0)
        assert delta_lower(float(epsilon), epsilon0, grid) <= exact + 1e-30
        assert exact - 1e-30 <= delta_upper(float(epsilon), epsilon0, grid)


@pytest.mark.parametrize(("n", "epsilon0", "epsilon"), [(30, 1.0, 0.3), (80, 2.0, 0.5), (15, 0.2, 0.05)])
def test_the_divergence_is_symmetric(n: int, epsilon0: float, epsilon: float) -> None:
    """D(P‖Q) = D(Q‖P): Q_c(k) = P_c(c + 1 − k), so one direction suffices (docs/shuffling.md)."""
    forward, backward = exact_delta(n, epsilon0, epsilon), exact_delta(n, epsilon0, epsilon, reverse=True)
    assert abs(forward - backward) <= mpmath.mpf(10) ** -35


@pytest.mark.parametrize(("epsilon0", "epsilon"), [(0.5, 0.1), (2.0, 0.3), (4.0, 1.0), (8.0, 0.05), (1.0, 0.999)])
def test_divergence_is_non_increasing_in_c(epsilon0: float, epsilon: float) -> None:
    """Fact 3, which lets an interval's left end bound it from above: D_c ≥ D_{c+1} for every c, checked
    on the exact D_c (a sup over every set of k, in 40 digits) and on the module's own evaluation."""
    previous = mpmath.inf
    for c in range(60):
        d = exact_divergence(c, epsilon0, epsilon)
        assert d <= previous
        previous = d
    upper, lower = divergence_bounds(epsilon, epsilon0, np.arange(0, 3000, 7))
    assert np.all(np.diff(lower) <= 1e-15) and np.all(np.diff(upper) <= 1e-15)


def test_monotone_in_n_epsilon0_and_delta() -> None:
    by_n = [shuffle_bound(2.0, n, 1e-8).epsilon_upper for n in (10, 100, 1000, 10**4, 10**5, 10**6, 10**8)]
    assert all(a >= b for a, b in zip(by_n, by_n[1:])) and by_n[-1] < by_n[0]
    by_e0 = [shuffle_bound(e0, 10**5, 1e-8).epsilon_upper for e0 in (0.01, 0.1, 0.5, 1, 2, 4, 8, 16)]
    assert all(a < b for a, b in zip(by_e0, by_e0[1:]))
    by_delta = [shuffle_bound(3.0, 10**4, d).epsilon_upper for d in (1e-5, 1e-7, 1e-9, 1e-12, 1e-15)]
    assert all(a < b for a, b in zip(by_delta, by_delta[1:]))


@pytest.mark.slow
@pytest.mark.parametrize("n", [10**3, 10**4, 10**5, 10**6, 10**9])
@pytest.mark.parametrize("epsilon0", [0.01, 0.5, 1.0, 2.0, 4.0, 8.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-9])
def test_upper_below_the_closed_form_where_it_holds(n: int, epsilon0: float, delta: float) -> None:
    bound = shuffle_bound(epsilon0, n, delta)
    assert bound.epsilon_lower <= bound.epsilon_upper <= epsilon0
    closed = closed_form_epsilon(epsilon0, n, delta)
    assert bound.epsilon_closed_form == closed
    if epsilon0 <= math.log(n / (16 * math.log(2 / delta))):
        assert closed is not None and bound.epsilon_upper <= closed
    else:
        assert closed is None


def test_closed_form_matches_theorem_3_1() -> None:
    """Thm 3.1 at ε0 = 1, n = 10⁶, δ = 10⁻⁶ by hand: log(1 + (e − 1)/(e + 1)·(8√(e·log(4·10⁶))/10³ + 8e/10⁶))."""
    expected = math.log(1 + (math.e - 1) / (math.e + 1) * (8 * math.sqrt(math.e * math.log(4e6)) / 1e3 + 8 * math.e / 1e6))
    assert closed_form_epsilon(1.0, 10**6, 1e-6) == pytest.approx(expected, rel=1e-12)
    assert closed_form_epsilon(6.0, 10**4, 1e-6) is None  # log(10⁴ / (16 log(2·10⁶))) = 3.8 < 6


@pytest.mark.parametrize("epsilon0", [50.0, 700.0, 1e4])
def test_huge_epsilon0_has_no_amplification_and_no_overflow(epsilon0: float) -> None:
    bound = shuffle_bound(epsilon0, 10**6, 1e-13)
    assert bound.epsilon_upper == pytest.approx(epsilon0, rel=1e-6) and bound.epsilon_upper <= epsilon0
    assert 0 < bound.epsilon_lower <= bound.epsilon_upper


def test_to_dict_names_the_theorem_and_assumptions() -> None:
    data = shuffle_bound(4.0, 10**5, 1e-6).to_dict()
    assert {"n", "delta", "epsilon_upper", "epsilon_lower", "epsilon_closed_form", "theorem", "assumptions"} <= set(data)
    assert "Feldman" in data["theorem"] and "Thm 3.2" in data["theorem"]
    assert data["assumptions"] == list(ASSUMPTIONS) and any("honest shuffler" in a for a in ASSUMPTIONS)


@pytest.mark.parametrize(("epsilon0", "n", "delta", "word"), [
    (0.0, 10, 1e-3, "epsilon0"), (1.0, 0, 1e-3, "number of shuffled reports"), (1.0, 100, 1.0, "delta"),
    (1.0, 100, 0.0, "delta"),
])
def test_refuses_what_the_bound_does_not_cover(epsilon0: float, n: int, delta: float, word: str) -> None:
    with pytest.raises(UsageError, match=word):
        shuffle_bound(epsilon0, n, delta)


def test_a_central_delta_of_one_over_n_or_more_is_refused() -> None:
    check_central_delta(0.99e-4, 10**4)
    for delta in (1e-4, 0.5, 0.0):
        with pytest.raises(UsageError, match=r"\(0, 1/n\)"):
            check_central_delta(delta, 10**4)


def endpoint_delta(n: int, epsilon0: float, epsilon: float, step: int, end: str) -> mpmath.mpf:
    """The reference code's evaluation (apple/ml-shuffling-amplification, computeamplification.py,
    ``deltacomp``): c cut into intervals of ``step`` values, each interval's exact mass times the exact
    D(Q‖P) at one chosen end. Its upper-bound branch takes ``max(deltaq_upperc, deltaq_upperc)``: the
    upper end only (``end="right"``), where D_c is smallest (fact 3); the sound choice is the left end."""
    p = mpmath.exp(-mpmath.mpf(epsilon0))
    mass = [math.comb(n - 1, c) * p**c * (1 - p) ** (n - 1 - c) for c in range(n)]
    total = mpmath.mpf(0)
    for left in range(0, n, step):
        right = min(left + step - 1, n - 1)
        at = right if end == "right" else left
        total += mpmath.fsum(mass[left:right + 1]) * exact_divergence(at, epsilon0, epsilon, reverse=True)
    return total


@pytest.mark.slow
def test_the_reference_codes_upper_end_only_evaluation_is_optimistic() -> None:
    """The defect, built here: with D(Q‖P) taken at each interval's upper end, the δ(ε) found is below the
    exact δ(ε), so a binary search on it certifies an ε below the exact one. The left end, which this
    module uses (fact 3), stays above the exact δ(ε); and the module's certified ε is above the exact ε.
    (In the reference code the defective sum is maxed with the other direction's, taken at both ends;
    by the symmetry D(P‖Q) = D(Q‖P) that masks it there: docs/shuffling.md.)"""
    n, epsilon0, delta, step = 300, 1.0, 1e-6, 30
    bound = shuffle_bound(epsilon0, n, delta)
    assert_brackets_exact(bound)
    at = bound.epsilon_lower  # the exact δ here is at least δ: a sound bound must not certify it
    exact = exact_delta(n, epsilon0, at)
    assert exact >= delta
    defective = endpoint_delta(n, epsilon0, at, step, end="right")
    assert defective < delta <= exact  # an upper end certifies (at, δ): optimistic
    assert endpoint_delta(n, epsilon0, at, step, end="left") >= exact


@pytest.mark.parametrize(("n", "epsilon0"), [(10**7, 1.0), (10**9, 1.0), (10**9, 4.0)])
def test_large_n_window_is_narrow_and_the_bracket_tight(n: int, epsilon0: float) -> None:
    """δ = 1/n², far below what scipy's binom.ppf resolves: the window of c evaluated on its own must
    still be a few tens of standard deviations of Bin(n − 1, e^{−ε0}) wide (not the whole support), so
    the 1024 intervals are narrow and the bracket tight."""
    delta = 1 / n**2
    grid = grid_of(epsilon0, n, delta)
    p = math.exp(-epsilon0)
    sd = math.sqrt((n - 1) * p * (1 - p))
    window = grid.right[-2] - grid.left[1] + 1  # without the two tail intervals
    assert grid.left[0] == 0 and grid.right[-1] == n - 1 and window <= 40 * sd
    assert float(np.sum(grid.weight)) == pytest.approx(1.0, abs=1e-12)
    bound = shuffle_bound(epsilon0, n, delta)
    assert 0 < bound.epsilon_upper - bound.epsilon_lower <= 1e-4 * bound.epsilon_upper
