"""ldpcli.mechanisms._feature_levels: BCDP's budget math (Aliakbarpour et al. 2024, Thm 2, Prop. 4, Cor. 1) and the
``--feature-eps`` text.

Every random draw is seeded, so nothing can flake. The oracles (Thm 2 (16) and the sum in (17)) are
written here again as plain-Python loops over the coordinates, independently of the module.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path

import mpmath
import numpy as np
import pytest

from ldpcli.errors import UsageError
from ldpcli.io import _feature_eps as feps
from ldpcli.mechanisms import _bcdp_budget as bb
from ldpcli.mechanisms import _feature_levels as fl

#: The paper's experiment (App. C; docs/errata.md §15): d = 10, δ = (0.2, 0.2, 2, …, 2), ε = 2.
PAPER_DELTA = [0.2, 0.2] + [2.0] * 8
PAPER_EPS = 2.0


# ------------------------------------------------------------------------------------------- oracles


def oracle_budget(delta: list[float], eps: float, q: float, c_d: float) -> list[float]:
    """Thm 2 (16), one coordinate at a time (δ sorted, small values: plain math.exp is safe)."""
    tilde = [min(x, eps) for x in delta]
    cost = math.log(1 + q * math.exp(c_d) - q)
    out = []
    for i, t in enumerate(tilde):
        if i == len(tilde) - 1 or c_d <= t:
            out.append(c_d)
        else:
            out.append(t - cost)
    return out


def oracle_c_d(delta: list[float], eps: float, q: float, zeta: float) -> float:
    """Thm 2 (16): c_d = min{log((e^{ζδ̃_1} + q − 1)/q), δ̃_d}."""
    tilde = sorted(min(x, eps) for x in delta)
    return min(math.log((math.exp(zeta * tilde[0]) + q - 1) / q), tilde[-1])


def oracle_error(c: list[float]) -> float:
    """The sum in Thm 2 (17) without constants and without ∧ d: Σ_i 1/Σ_{k≤i} (c_k − c_{k−1})²/(d − k + 1)."""
    d = len(c)
    total = 0.0
    for i in range(1, d + 1):
        inner = 0.0
        for k in range(1, i + 1):
            previous = c[k - 2] if k >= 2 else 0.0
            inner += (c[k - 1] - previous) ** 2 / (d - k + 1)
        total += 1.0 / inner
    return total


def paper_error(tilde: np.ndarray, q: float) -> Callable[[float], float]:
    """The module's (17) proxy as a function of c_d, to score a c_d (best_c_d minimises it through bb.paper_log_weight)."""
    return lambda c_d: fl.paper_error_proxy(fl.budget_vector(tilde, q, c_d))


def random_case(rng: np.random.Generator) -> tuple[np.ndarray, float, float]:
    """(sorted δ̃, ε, q): a few distinct levels, some above ε, q with its edge cases."""
    d = int(rng.integers(2, 13))
    eps = float(rng.uniform(0.05, 8.0))
    delta = rng.choice(np.exp(rng.uniform(math.log(0.01), math.log(12.0), size=3)), size=d)
    q = float(rng.choice([0.0, 1.0, rng.uniform(0, 1), 10 ** rng.uniform(-6, 0), 1 - 10 ** rng.uniform(-6, -1)]))
    return np.sort(fl.tilde_levels(delta, eps)), eps, q


# ---------------------------------------------------------------------------- log(1 + q·e^c − q)


def test_log_dependence_cost_matches_mpmath_and_its_special_cases() -> None:
    rng = np.random.default_rng(1)
    mpmath.mp.dps = 50
    c = np.concatenate([10 ** rng.uniform(-12, 4, 300), [0.0, 1e-300, 699.9, 700.1, 709.9, 1e4]])
    for q in (1e-9, 0.01, 0.3, 0.5, 0.999999):
        got = fl.log_dependence_cost(c, q)
        assert isinstance(got, np.ndarray) and got.shape == c.shape
        for x, value in zip(c, got):
            exact = mpmath.log1p(mpmath.mpf(q) * mpmath.expm1(mpmath.mpf(float(x))))
            assert abs(value - float(exact)) <= 8e-16 * max(abs(float(exact)), 1e-300), (q, x, value, exact)
    assert fl.log_dependence_cost(5.0, 0.0) == 0.0
    assert fl.log_dependence_cost(1e4, 1.0) == 1e4
    assert isinstance(fl.log_dependence_cost(0.5, 0.5), float)
    assert np.array_equal(fl.log_dependence_cost(c, 1.0), c)
    with pytest.raises(UsageError, match="q"):
        fl.log_dependence_cost(1.0, 1.5)


# --------------------------------------------------------------------------------- δ̃, c_max, ζ


def test_tilde_levels_clip_to_epsilon_and_name_the_first_bad_coordinate() -> None:
    assert list(fl.tilde_levels(np.array([0.5, 3.0, 2.0]), 2.0)) == [0.5, 2.0, 2.0]
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(UsageError, match="coordinate 2"):
            fl.tilde_levels(np.array([0.5, 1.0, bad, -3.0]), 2.0)
    for eps in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(UsageError, match="ε"):
            fl.tilde_levels(np.array([0.5]), eps)


def test_c_d_for_zeta_matches_mpmath_without_overflow() -> None:
    rng = np.random.default_rng(2)
    mpmath.mp.dps = 60
    for _ in range(300):
        first = float(10 ** rng.uniform(-8, 4))
        q = float(10 ** rng.uniform(-12, 0)) if rng.random() < 0.9 else 1 - float(10 ** rng.uniform(-12, -1))
        zeta = float(rng.uniform(0.01, 1.0))
        tilde = np.array([first, 2e4])
        x = mpmath.mpf(zeta) * mpmath.mpf(first)
        exact = float(mpmath.log((mpmath.exp(x) + mpmath.mpf(q) - 1) / mpmath.mpf(q)))
        got = fl.c_d_for_zeta(tilde, q, zeta)
        assert math.isfinite(got)
        assert abs(got - min(exact, 2e4)) <= 4e-16 * max(exact, 1.0) + 1e-300, (first, q, zeta, got, exact)
        assert got >= zeta * first  # (e^x + q − 1)/q ≥ e^x
    tilde = np.array([0.3, 0.5, 4.0])
    assert fl.c_d_for_zeta(tilde, 0.0, 0.5) == 4.0  # q = 0: the first term is +∞
    assert fl.c_d_for_zeta(tilde, 1.0, 0.5) == 0.15  # q = 1: ζδ̃_1
    assert fl.c_max(tilde, 0.2) == fl.c_d_for_zeta(tilde, 0.2, 1.0)
    for zeta in (0.0, -0.5, 1.5, math.nan):
        with pytest.raises(UsageError, match="ζ"):
            fl.c_d_for_zeta(tilde, 0.2, zeta)
    with pytest.raises(ValueError, match="sorted"):
        fl.c_d_for_zeta(np.array([1.0, 0.5]), 0.2, 0.5)


def test_c_max_is_never_below_the_min_delta_baseline() -> None:
    """docs/errata.md §15: c_d = δ̃_1 always lies in (0, c_max]."""
    rng = np.random.default_rng(3)
    for _ in range(500):
        tilde, _, q = random_case(rng)
        assert 0 < tilde[0] <= fl.c_max(tilde, q) <= tilde[-1]


# ------------------------------------------------------------------------------------ budget vector


def test_budget_vector_matches_the_oracle_and_is_non_decreasing() -> None:
    rng = np.random.default_rng(4)
    checked = 0
    for _ in range(400):
        tilde, eps, q = random_case(rng)
        top = fl.c_max(tilde, q)
        c_d = float(rng.uniform(0, top))
        try:
            c = fl.budget_vector(tilde, q, c_d)
        except UsageError:
            continue
        expected = oracle_budget(list(tilde), eps, q, c_d) if c_d < 700 else None
        if expected is not None:
            assert np.allclose(c, expected, rtol=1e-13, atol=1e-15), (tilde, q, c_d, c, expected)
        assert np.all(np.diff(c) >= 0) and c[-1] == c_d and c[0] > 0
        checked += 1
    assert checked > 300


def test_budget_vector_refuses_c_d_outside_its_range() -> None:
    tilde = np.sort(fl.tilde_levels(np.array(PAPER_DELTA), PAPER_EPS))
    top = fl.c_max(tilde, 0.0)  # q = 0: c_max = δ̃_d and c_1 = min(c_d, δ̃_1) > 0
    for c_d in (0.0, -1.0, math.nan, math.inf, top * 1.001):
        with pytest.raises(UsageError, match="c_d"):
            fl.budget_vector(tilde, 0.0, c_d)
    # a few ulps above c_max is rounding, taken as c_max
    assert fl.budget_vector(tilde, 0.0, float(np.nextafter(top, np.inf)))[-1] == top


def test_zeta_one_gives_c1_zero_and_is_refused() -> None:
    """docs/errata.md §14: with c_d = log((e^{δ̃_1} + q − 1)/q) < δ̃_d (ζ = 1), c_1 = 0 exactly."""
    rng = np.random.default_rng(5)
    refused = 0
    for _ in range(300):
        first = float(10 ** rng.uniform(-3, 1.5))
        q = float(rng.uniform(1e-3, 0.999))
        tilde = np.array([first, first, 1e3])
        c_d = fl.c_d_for_zeta(tilde, q, 1.0)
        assert c_d < tilde[-1] and c_d > first
        with pytest.raises(UsageError, match="no budget"):
            fl.budget_vector(tilde, q, c_d)
        refused += 1
    assert refused == 300
    # the paper's experiment at ζ = 1
    paper = np.sort(fl.tilde_levels(np.array(PAPER_DELTA), PAPER_EPS))
    with pytest.raises(UsageError, match="errata.md §14"):
        fl.budget_vector(paper, 0.5, fl.c_d_for_zeta(paper, 0.5, 1.0))


def test_c1_is_one_minus_zeta_times_delta1_whenever_c_d_exceeds_it() -> None:
    """docs/errata.md §14 "Check": 1 + q·e^{c_d} − q = e^{ζδ̃_1}, so c_1 = (1 − ζ)·δ̃_1."""
    rng = np.random.default_rng(6)
    seen = 0
    for _ in range(2000):
        first = float(10 ** rng.uniform(-2, 1))
        q = float(10 ** rng.uniform(-4, 0))
        zeta = float(rng.uniform(0.01, 0.99))
        tilde = np.array([first, 1e3])
        c_d = fl.c_d_for_zeta(tilde, q, zeta)
        if not c_d > first:
            continue
        c = fl.budget_vector(tilde, q, c_d)
        assert math.isclose(c[0], (1 - zeta) * first, rel_tol=1e-12), (first, q, zeta, c[0])
        seen += 1
    assert seen > 1000


@pytest.mark.parametrize("delta,eps,k,d", [(0.4, 2.0, 3, 10), (1.0, 3.0, 1, 5), (0.05, 5.0, 4, 9)])
def test_corollary_1_budgets(delta: float, eps: float, k: int, d: int) -> None:
    """Cor. 1 (δ_i = δ for i ≤ k, ε > 2δ for the rest, ζ = 1/2) and its proof in App. B.2.

    For q ≤ (e^{δ/2} − 1)/(e^ε − 1): c_{k+1..d} = ε and c_{1..k} = δ − log(1 + q·e^ε − q) ∈ [δ/2, δ].
    Otherwise c_{k+1..d} = c_d = log((e^{δ/2} + q − 1)/q), and c_{1..k} = δ/2 as the proof says only
    while c_d > δ, i.e. q < (e^{δ/2} − 1)/(e^δ − 1) = 1/(1 + e^{δ/2}); for larger q, c_d ≤ δ and Thm 2
    gives c_{1..k} = c_d ∈ [δ/2, δ] (the proof's c_{1..k} = δ/2 is then a lower bound, so (19) holds).
    """
    assert eps > 2 * delta
    tilde = np.array([delta] * k + [eps] * (d - k))
    threshold = math.expm1(delta / 2) / math.expm1(eps)
    upper = 1 / (1 + math.exp(delta / 2))
    qs = np.concatenate([[0.0, threshold], threshold * np.linspace(0.01, 0.99, 7),
                         np.linspace(threshold, 1, 40)[1:]])
    beyond = 0
    for q in qs:
        q = float(q)
        c = fl.budget_vector(tilde, q, fl.c_d_for_zeta(tilde, q, 0.5))
        if q <= threshold:
            assert np.all(c[k:] == eps)
            low = delta - math.log1p(q * math.expm1(eps))
            assert np.allclose(c[:k], low, rtol=1e-13) and delta / 2 * (1 - 1e-12) <= low <= delta
        else:
            c_d = math.log((math.exp(delta / 2) + q - 1) / q)
            assert np.allclose(c[k:], c_d, rtol=1e-13) and delta / 2 * (1 - 1e-12) <= c_d < eps
            if q < upper:
                assert c_d > delta and np.allclose(c[:k], delta / 2, rtol=1e-12)
            else:
                assert c_d <= delta * (1 + 1e-12) and np.all(c[:k] == c[-1])
                beyond += 1
    assert beyond > 0  # the grid reaches the case the proof of Cor. 1 misdescribes


# ----------------------------------------------------------------------- the two routes (Prop. 4)


def test_bcdp_levels_meet_every_requested_level() -> None:
    """Prop. 4 part 2 with the release c_d-LDP (the proof of Thm 2): δ'_i ≤ δ̃_i, equal where c_i < c_d."""
    rng = np.random.default_rng(7)
    cases = 0
    for _ in range(3000):
        tilde, _, q = random_case(rng)
        top = fl.c_max(tilde, q)
        c_d = float(rng.choice([rng.uniform(0, top), top * rng.uniform(0.999, 1.0), tilde[0], top]))
        try:
            c = fl.budget_vector(tilde, q, c_d)
        except UsageError:
            continue
        granted = fl.bcdp_levels(c, q)
        assert np.all(granted <= tilde), (tilde, q, c_d, granted)  # exact, no tolerance
        below = c < c[-1]
        assert np.all(np.abs(granted[below] - tilde[below]) <= 4 * np.spacing(tilde[below])), (tilde, q, c_d)
        assert np.all(granted[~below] == c[-1])
        cases += 1
    assert cases > 2000


def test_cdp_to_bcdp_sums_over_the_d_coordinates() -> None:
    """docs/errata.md §16: δ_i = c_i + log(1 + q·e^{Σ_{j≠i} c_j} − q), the sum over the d coordinates.

    With q = 1 (every coordinate a copy of one value) every δ_i is Σ_j c_j: the paper's example
    under Prop. 4. The number of users n plays no role.
    """
    rng = np.random.default_rng(8)
    for d in (1, 2, 7, 50):
        c = rng.uniform(0, 2, d)
        assert np.allclose(fl.cdp_to_bcdp(c, 1.0), math.fsum(c), rtol=1e-13)
        assert np.array_equal(fl.cdp_to_bcdp(c, 0.0), c)
        q = 0.3
        plain = [c[i] + math.log(1 + q * math.exp(math.fsum(c) - c[i]) - q) for i in range(d)]
        assert np.allclose(fl.cdp_to_bcdp(c, q), plain, rtol=1e-13)
    big = fl.cdp_to_bcdp(np.full(1000, 10.0), 0.5)  # Σ = 10⁴: e^Σ would overflow
    assert np.all(np.isfinite(big)) and np.allclose(big, 10.0 + 9990.0 + math.log(0.5), rtol=1e-13)


# ------------------------------------------------------------------------------------------ releases


def test_increments_skip_ties_and_add_up_to_c_d() -> None:
    """docs/errata.md §14: a zero increment asks for a 0-LDP release; it is skipped (no query, weight 0)."""
    c = np.array([0.1, 0.1, 0.4, 0.4, 0.4, 1.0])
    assert fl.increments(c) == [(0, 6, 0.1), (2, 6, 0.4 - 0.1), (5, 6, 1.0 - 0.4)]
    assert fl.increments(np.full(4, 0.7)) == [(0, 4, 0.7)]  # all tied: one release, min(δ)-LDP
    assert fl.increments(np.array([0.0, 0.0, 0.5])) == [(2, 3, 0.5)]  # c_1 = 0: coordinate 1 gets nothing
    rng = np.random.default_rng(9)
    for _ in range(500):
        tilde, _, q = random_case(rng)
        c_d = float(rng.uniform(0, fl.c_max(tilde, q)))
        try:
            c = fl.budget_vector(tilde, q, c_d)
        except UsageError:
            continue
        used = fl.increments(c)
        assert [start for start, _, _ in used] == [int(np.argmax(c == v)) for v in np.unique(c)]
        assert all(stop == c.size and budget > 0 for _, stop, budget in used)
        assert math.isclose(math.fsum(b for _, _, b in used), c_d, rel_tol=1e-14)
    with pytest.raises(ValueError, match="sorted"):
        fl.increments(np.array([0.5, 0.2]))


# --------------------------------------------------------------------- the error proxy and best c_d


def test_paper_error_proxy_matches_the_loop_oracle() -> None:
    rng = np.random.default_rng(10)
    for _ in range(200):
        c = np.sort(rng.choice(rng.uniform(0.01, 3, 4), size=int(rng.integers(1, 15))))
        assert math.isclose(fl.paper_error_proxy(c), oracle_error(list(c)), rel_tol=1e-12)
    assert fl.paper_error_proxy(np.array([0.0, 0.5])) == math.inf  # c_1 = 0 (docs/errata.md §14)
    assert math.isclose(fl.paper_error_proxy(np.full(10, 0.2)), 2500.0, rel_tol=1e-14)  # d²/δ²


@pytest.mark.parametrize("q,expected", [(0.1, 2605), (0.2, 3489), (0.5, 9162), (0.9, 201_612)])
def test_errata_15_the_paper_zeta_rule_loses_to_the_baseline(q: float, expected: int) -> None:
    """docs/errata.md §15: the baseline c_d = δ̃_1 scores 2500; ζ = (1 + q)/2 scores more."""
    baseline = oracle_error(oracle_budget(PAPER_DELTA, PAPER_EPS, q, 0.2))
    assert round(baseline) == 2500
    rule = oracle_error(oracle_budget(PAPER_DELTA, PAPER_EPS, q, oracle_c_d(PAPER_DELTA, PAPER_EPS, q, (1 + q) / 2)))
    assert round(rule) == expected and rule > baseline
    tilde = np.sort(fl.tilde_levels(np.array(PAPER_DELTA), PAPER_EPS))
    module = fl.paper_error_proxy(fl.budget_vector(tilde, q, fl.c_d_for_zeta(tilde, q, (1 + q) / 2)))
    assert math.isclose(module, rule, rel_tol=1e-12)


#: (q, the minimum of (17) over c_d). docs/errata.md §15 prints 689 at q = 0.01; the minimum is 688.49
#: (the dense scan below agrees to 1e-6), so it rounds to 688, and 689 is 0.51 away: an erratum slip,
#: probably a coarse scan (a c_d grid of step 0.1 gives 689.6; ζ in steps of 0.1 gives 689.8).
MINIMA = [(0.01, 688.4926), (0.1, 1499.5617), (0.3, 2500.0), (0.5, 2500.0)]


@pytest.mark.parametrize("q,minimum", MINIMA)
def test_errata_15_minimising_over_c_d(q: float, minimum: float) -> None:
    tilde = np.sort(fl.tilde_levels(np.array(PAPER_DELTA), PAPER_EPS))
    c_d = bb.best_c_d(tilde, q, bb.paper_log_weight)
    score = oracle_error(oracle_budget(PAPER_DELTA, PAPER_EPS, q, c_d))
    assert abs(score - minimum) <= 1e-3, (q, c_d, score)
    assert round(score) == {0.01: 688, 0.1: 1500, 0.3: 2500, 0.5: 2500}[q]
    # a dense plain-Python scan of (0, c_max] finds nothing better
    top = oracle_c_d(PAPER_DELTA, PAPER_EPS, q, 1.0)
    scan = min(
        oracle_error(budget) for x in np.linspace(top / 20_000, top, 20_000)[:-1]
        if (budget := oracle_budget(PAPER_DELTA, PAPER_EPS, q, float(x)))[0] > 0
    )
    assert score <= scan + 1e-6
    if q >= 0.3:
        assert c_d == 0.2  # the baseline itself: one release at δ̃_1, plain min(δ)-LDP


def test_best_c_d_never_predicts_more_error_than_the_baseline_or_zeta_half() -> None:
    """docs/errata.md §15: δ̃_1 and ζ = 1/2 are among the evaluated points, so the argmin is no worse."""
    rng = np.random.default_rng(11)
    for _ in range(150):
        tilde, _, q = random_case(rng)
        error = paper_error(tilde, q)
        c_d = bb.best_c_d(tilde, q, bb.paper_log_weight)
        assert 0 < c_d <= fl.c_max(tilde, q)
        best = error(c_d)
        assert best <= error(float(tilde[0]))
        try:
            half = error(fl.c_d_for_zeta(tilde, q, 0.5))
        except UsageError:
            half = math.inf
        assert best <= half


def test_best_c_d_scores_refused_points_as_infinite() -> None:
    """A budget of 0 (c_1 = 0 at c_max, errata §14) is never given to the base; a base that cannot
    release scores +∞, and with nothing finite the result is the baseline δ̃_1."""
    tilde = np.sort(fl.tilde_levels(np.array(PAPER_DELTA), PAPER_EPS))
    q = 0.5
    calls: list[float] = []

    def log_weight(m: int, budget: float) -> float:
        calls.append(budget)
        return 50.0 * math.log(budget)  # prefers the largest budgets: c_max itself leaves c_1 = 0

    c_d = bb.best_c_d(tilde, q, log_weight)
    top = fl.c_max(tilde, q)
    assert c_d < top and min(calls) > 0
    fl.budget_vector(tilde, q, c_d)  # accepted
    assert bb.best_c_d(tilde, q, lambda m, b: math.nan) == 0.2  # nothing finite: the baseline

    def refuses(m: int, budget: float) -> float:
        raise UsageError("the base cannot release here")

    assert bb.best_c_d(tilde, q, refuses) == 0.2


# --------------------------------------------------------------------------------------- large values


@pytest.mark.parametrize("sensitive", [5e3, 1.0, 1e4])
def test_large_levels_and_a_million_coordinates(sensitive: float) -> None:
    """ε = 10⁴, δ up to 10⁴, d = 10⁶ in two groups: no overflow, no NaN, no warning, vectorised."""
    d, k, eps, q = 1_000_000, 1000, 1e4, 0.5
    levels = np.full(d, eps)
    levels[d - k:] = sensitive  # the sensitive group last in column order
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        order = fl.sort_order(levels)
        assert np.array_equal(order[:k], np.arange(d - k, d)) if sensitive < eps else True
        tilde = fl.tilde_levels(levels, eps)[order]
        top = fl.c_max(tilde, q)
        assert math.isfinite(top) and tilde[0] <= top <= eps
        for c_d in (fl.c_d_for_zeta(tilde, q, 0.5), tilde[0], bb.best_c_d(tilde, q, bb.paper_log_weight)):
            c = fl.budget_vector(tilde, q, c_d)
            granted = fl.bcdp_levels(c, q)
            assert np.all(np.isfinite(c)) and np.all(granted <= tilde)
            assert len(fl.increments(c)) <= 2
            assert math.isfinite(fl.paper_error_proxy(c))
        assert np.all(np.isfinite(fl.log_dependence_cost(tilde, q)))
        text = feps.format_levels(fl.tilde_levels(levels, eps), eps)
        assert text == ("" if sensitive == eps else f"{d - k}:{d - 1}={sensitive!r}")
        if text:
            again = feps.parse_feature_levels(text, d=d, epsilon=eps, names=None)
            assert np.array_equal(again.levels, levels)
        groups = feps.group_summary(levels, eps)
        assert sum(g["count"] for g in groups) == d


# ============================================================================================ parsing

NAMES = ["age", "income", "zip", "p0", "p1", "p2"]


def parse(spec: str, names: list[str] | None = NAMES, d: int | None = None, eps: float = 2.0) -> feps.FeatureLevels:
    return feps.parse_feature_levels(spec, d=len(names) if d is None else d, epsilon=eps, names=names)


def test_keys_by_name_range_glob_and_coordinate() -> None:
    got = parse(" age = 0.5 , income:zip=0.7, p[01]=0.25 ,5=1e-3")
    assert list(got.levels) == [0.5, 0.7, 0.7, 0.25, 0.25, 1e-3]
    assert got.clipped == () and got.canonical == "0=0.5,1:2=0.7,3:4=0.25,5=0.001"
    assert list(parse("p*=0.3").levels) == [2.0, 2.0, 2.0, 0.3, 0.3, 0.3]
    assert list(parse("0:1=0.3,").levels) == [0.3, 0.3, 2.0, 2.0, 2.0, 2.0]  # a trailing comma is harmless
    assert list(parse("2=0.1,0:1=0.3", names=None, d=4).levels) == [0.3, 0.3, 0.1, 2.0]
    # an exact name wins over coordinates
    assert list(parse("1=0.4", names=["1", "0"]).levels) == [0.4, 2.0]
    assert not parse("age=0.5").levels.flags.writeable


def test_levels_above_epsilon_are_clipped_and_reported() -> None:
    got = parse("age=5,income=2,p*=9")
    assert list(got.levels) == [2.0] * 6
    assert got.clipped == ("age", "p*")  # ε itself is not clipped
    assert got.canonical == ""


@pytest.mark.parametrize(
    "spec,names,message",
    [
        ("", NAMES, "empty"),
        ("  ,  ", NAMES, "empty"),
        ("age", NAMES, "'age' is not FEATURE=LEVEL"),
        ("age=0", NAMES, "finite number > 0"),
        ("age=-1", NAMES, "finite number > 0"),
        ("age=nan", NAMES, "finite number > 0"),
        ("age=inf", NAMES, "finite number > 0"),
        ("age=1e400", NAMES, "finite number > 0"),
        ("age=abc", NAMES, "'age' is not a number"),
        ("age=", NAMES, "'age' is not a number"),
        ("agee=0.5", NAMES, "'agee' names no feature; available columns: 'age', 'income'"),
        ("q*=0.5", NAMES, "pattern 'q\\*' matches no column; available columns"),
        ("zip:age=0.5", NAMES, "backwards.*write age:zip"),
        ("age:nope=0.5", NAMES, "neither a range A:B of two columns nor coordinates"),
        ("=0.5", NAMES, "feature is missing"),
        ("6=0.5", NAMES, "not within 0..5"),
        ("-1=0.5", NAMES, "not within 0..5"),
        ("4:2=0.5", None, "backwards; write 2:4"),
        ("0:9=0.5", None, "not within 0..5"),
        ("age=0.5", None, "one list column, so name coordinates 0..5"),
        ("age=0.5,a*=0.3", NAMES, "coordinate 0 \\('age'\\) is named twice \\(by 'age' and 'a\\*'\\)"),
        ("0:2=0.5,2=0.3", None, "coordinate 2 is named twice \\(by '0:2' and '2'\\)"),
    ],
)
def test_bad_specs_are_refused_in_one_line(spec: str, names: list[str] | None, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        parse(spec, names=names, d=6)
    assert "\n" not in str(info.value) and str(info.value).startswith("feature_eps")


def test_json_and_csv_files(tmp_path: Path) -> None:
    obj = tmp_path / "levels.json"
    obj.write_text(json.dumps({"age": 0.5, "p*": 0.25}))
    assert list(parse(str(obj)).levels) == [0.5, 2.0, 2.0, 0.25, 0.25, 0.25]
    rows = tmp_path / "levels.JSON"
    rows.write_text(json.dumps([{"features": "income:zip", "eps": 0.7}, {"features": 0, "eps": "0.1"}]))
    assert list(parse(str(rows)).levels) == [0.1, 0.7, 0.7, 2.0, 2.0, 2.0]
    table = tmp_path / "levels.csv"
    table.write_text("feature, eps\nage,0.5\n\n\"p0:p1\",0.3\n")
    assert list(parse(str(table)).levels) == [0.5, 2.0, 2.0, 0.3, 0.3, 2.0]

    def refused(name: str, text: str, message: str) -> None:
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(UsageError, match=message):
            parse(str(path))

    refused("dup.json", '{"age": 0.5, "age": 0.4}', "named twice")
    refused("bad.json", "{not json", "cannot read it as JSON")
    refused("scalar.json", "3", "expected an object")
    refused("rows.json", '[{"features": "age", "level": 0.5}]', "entry 0 is not")
    refused("null.json", '{"age": null}', "not a number")
    refused("true.json", '{"age": true}', "not a number")
    refused("empty.json", "{}", "no FEATURE=LEVEL item")
    refused("head.csv", "name,eps\nage,0.5\n", "header 'feature,eps'")
    refused("cells.csv", "feature,eps\nage,0.5,1\n", "row 2 has 3 cells")
    refused("only.csv", "feature,eps\n", "no FEATURE=LEVEL item")
    refused("zero.csv", "feature,eps\nage,0\n", "levels.csv|zero.csv: row 2: the level of 'age'")
    with pytest.raises(UsageError, match="no such file"):
        parse(str(tmp_path / "missing.csv"))


def test_format_levels_is_canonical_and_round_trips() -> None:
    levels = np.array([0.2, 0.2, 1.0, 1.0, 1.0, 0.7])
    assert feps.format_levels(levels, 1.0) == "0:1=0.2,5=0.7"
    assert feps.format_levels(np.full(3, 1.0), 1.0) == ""
    awkward = np.array([0.1 + 0.2, 1 / 3, 1e-300, 2.0])
    text = feps.format_levels(awkward, 2.0)
    assert np.array_equal(feps.parse_feature_levels(text, d=4, epsilon=2.0, names=None).levels, awkward)
    with pytest.raises(ValueError):
        feps.format_levels(np.array([0.5, 3.0]), 2.0)


def test_round_trip_property_seeded() -> None:
    rng = np.random.default_rng(12)
    for _ in range(500):
        d = int(rng.integers(1, 40))
        eps = float(rng.choice([1.0, rng.uniform(0.01, 100.0)]))
        palette = np.concatenate([rng.uniform(1e-6, eps, 3), 10 ** rng.uniform(-8, 0, 2) * eps, [eps]])
        levels = rng.choice(palette, size=d)
        if rng.random() < 0.5:  # long runs
            levels = np.repeat(levels, rng.integers(1, 5, size=d))[:d]
        text = feps.format_levels(levels, eps)
        if not text:
            assert np.all(levels == eps)
            continue
        parsed = feps.parse_feature_levels(text, d=d, epsilon=eps, names=None)
        assert np.array_equal(parsed.levels, levels), (text, levels)
        assert parsed.canonical == text and parsed.clipped == ()
        names = [f"f{i}" for i in range(d)]
        assert np.array_equal(feps.parse_feature_levels(text, d=d, epsilon=eps, names=names).levels, levels)


def test_canonical_coordinates_before_the_data_is_known() -> None:
    assert feps.canonical_coordinates("3=0.5, 0:1=0.2") == "0:1=0.2,3=0.5"
    assert feps.canonical_coordinates("1=0.5,2=0.5") == "1:2=0.5"
    for text in ("", "age=0.5", "p*=0.2", "levels.json"):
        assert feps.canonical_coordinates(text) == text


def test_group_summary_and_sort_order() -> None:
    levels = np.array([0.2, 0.2, 1.0, 1.0, 0.7, 0.2])
    assert feps.group_summary(levels, 1.0) == [
        {"coordinates": "0:1,5", "delta": 0.2, "count": 3},
        {"coordinates": "4", "delta": 0.7, "count": 1},
        {"coordinates": "2:3", "delta": 1.0, "count": 2},
    ]
    assert list(fl.sort_order(levels)) == [0, 1, 5, 4, 2, 3]
    assert feps.group_summary(np.full(4, 2.0), 2.0) == [{"coordinates": "0:3", "delta": 2.0, "count": 4}]
