"""BCDP's least-error c_d (issue 26 item 15; ldpcli.mechanisms._bcdp_budget) against a brute-force grid.

The oracle here shares nothing with the optimiser: Thm 2 (16)'s budget vector one coordinate at a
time, the increments, each release's per-coordinate variance from the base mechanism's own
``expected_error``, and Σ_i 1/Σ_{k≤i} w_k as plain loops; admissibility is c_d ∈ (0, c_max] with
c_1 > 0 (errata §14), c_max from its formula. The optimiser's error is the mechanism's own
``expected_error``; it must be admissible and never above the grid's best admissible point by more
than the certified relative tolerance RTOL (the grid cannot go below the infimum, which the
optimiser is within RTOL of).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpcli.errors import UsageError
from ldpcli.mechanisms import BCDP, get_mechanism
from ldpcli.mechanisms import _bcdp_budget as bb
from ldpcli.mechanisms import _feature_levels as fl

#: The issue's setting (Aliakbarpour et al. App. C): d = 10, δ = (0.2, 0.2, 8 × 2), ε = 2.
PAPER_LEVELS = "0:1=0.2"


def oracle_budget(tilde: list[float], q: float, c_d: float) -> list[float]:
    """Thm 2 (16): c_i = c_d if c_d ≤ δ̃_i, else δ̃_i − log(1 + q·e^{c_d} − q); c_d last (δ̃ sorted)."""
    cost = math.log(1 + q * math.expm1(c_d))
    return [c_d if i == len(tilde) - 1 or c_d <= t else t - cost for i, t in enumerate(tilde)]


def oracle_c_max(tilde: list[float], q: float) -> float:
    first = math.inf if q == 0 else math.log((math.exp(tilde[0]) + q - 1) / q)
    return min(first, tilde[-1])


def oracle_error(c: list[float], base: str) -> float:
    """Σ_i 1/Σ_{k≤i} w_k, w_k = m_k / E‖Y^k − x‖² of the base releasing the last m_k features at c_k − c_{k−1}."""
    d = len(c)
    cls = get_mechanism(base)
    weights = []
    for k in range(d):
        step = c[k] - (c[k - 1] if k else 0.0)
        if step > 0:
            m = d - k
            weights.append(m / cls.calibrate(m, step, norm_bound=math.sqrt(m)).expected_error)
        else:
            weights.append(0.0)
    total, running = 0.0, 0.0
    for w in weights:
        running += w
        total += math.inf if running == 0 else 1.0 / running
    return total


def grid_best(tilde: list[float], q: float, base: str, points: int) -> tuple[float, float]:
    """(least error, its c_d) over a uniform grid of (0, c_max] plus each level and a point just above it."""
    top = oracle_c_max(tilde, q)
    grid = set(np.linspace(top / points, top, points).tolist())
    for level in set(tilde):
        if level < top:
            grid |= {level, level * (1 + 1e-9)}
    best = (math.inf, math.nan)
    for c_d in sorted(grid):
        c = oracle_budget(tilde, q, c_d)
        if c[0] > 0:  # admissible (errata §14)
            best = min(best, (oracle_error(c, base), c_d))
    return best


def check_against_grid(d: int, eps: float, q: float, levels: str, base: str, points: int) -> tuple[BCDP, float]:
    mech = get_mechanism("bcdp").calibrate(d, eps, q=q, feature_eps=levels, base=base)
    assert isinstance(mech, BCDP)
    tilde = sorted(mech.levels.tolist())
    c_d = mech.c_total
    assert 0 < c_d <= oracle_c_max(tilde, q) * (1 + 1e-12) and oracle_budget(tilde, q, c_d)[0] > 0
    assert np.all(mech.feature_levels() <= mech.levels * (1 + 1e-12))
    assert math.isclose(mech.expected_error, oracle_error(oracle_budget(tilde, q, c_d), base), rel_tol=1e-9)
    best, _ = grid_best(tilde, q, base, points)
    assert mech.expected_error <= best * (1 + bb.RTOL), (d, eps, q, levels, c_d, mech.expected_error, best)
    return mech, best


@pytest.mark.parametrize("q,c_d,error,gain", [(0.2, 0.36557, 1.42027e4, 0.0552), (0.21, 0.35689, 1.47455e4, 0.0191)])
def test_the_issue_cases_find_the_interior_minimum(q: float, c_d: float, error: float, gain: float) -> None:
    """Issue 26 item 15: the old search fell back to c_d = δ̃_1 = 0.2 (error 1.50328e4 with duchi-l2)."""
    mech, _ = check_against_grid(10, 2.0, q, PAPER_LEVELS, "duchi-l2", 4000)
    baseline = get_mechanism("duchi-l2").calibrate(10, 0.2, norm_bound=math.sqrt(10)).expected_error
    assert round(baseline, 1) == 15032.8
    assert abs(mech.c_total - c_d) <= 1e-4 and math.isclose(mech.expected_error, error, rel_tol=1e-5)
    assert 1 - mech.expected_error / baseline == pytest.approx(gain, abs=5e-4)


def test_the_issue_case_with_privunit2() -> None:
    mech, best = check_against_grid(10, 2.0, 0.2, PAPER_LEVELS, "privunit2", 600)
    assert mech.c_total > 0.3 and mech.expected_error < 0.95 * 14942.7  # below one privunit2 release at 0.2


def _random_levels(rng: np.random.Generator) -> tuple[int, float, float, str]:
    d = int(rng.integers(2, 11))
    eps = float(rng.uniform(0.2, 6.0))
    distinct = np.sort(rng.uniform(0.05, 1.0, size=int(rng.integers(1, 4))) * eps)
    levels = rng.choice(distinct, size=d)
    text = ",".join(f"{i}={float(level)!r}" for i, level in enumerate(levels))
    q = float(rng.choice([0.0, rng.uniform(0.0, 0.5), 10 ** rng.uniform(-4, -1), rng.uniform(0.5, 1.0)]))
    return d, eps, q, text


def test_a_seeded_random_set_never_loses_to_the_grid() -> None:
    rng = np.random.default_rng(26)
    for _ in range(25):
        d, eps, q, text = _random_levels(rng)
        check_against_grid(d, eps, q, text, "duchi-l2", 1500)


def test_the_admissible_set_is_one_interval() -> None:
    """The budget vector is accepted on an initial segment of (0, δ̃_d] and refused after it (the
    module docstring's proof: c_1/c_d is 1, then decreasing), and it holds δ̃_1 and the optimum."""
    tilde = np.array([0.2, 0.2, 0.7] + [2.0] * 7)
    for q in (0.05, 0.2, 0.6):
        accepted = []
        for c_d in np.linspace(1e-6, tilde[-1], 4001):
            try:
                fl.budget_vector(tilde, q, float(c_d))
                accepted.append(True)
            except UsageError:
                accepted.append(False)
        assert accepted[0] and accepted == sorted(accepted, reverse=True), q  # True then False, never back
        best = bb.best_c_d(tilde, q, bb.paper_log_weight)
        fl.budget_vector(tilde, q, best)
        fl.budget_vector(tilde, q, float(tilde[0]))


def test_the_search_certifies_a_cheap_bound_per_piece() -> None:
    """A piece whose bound over its whole span is above the incumbent costs only its two ends."""
    tilde = np.array([0.2, 0.2] + [2.0] * 8)
    calls: list[tuple[int, float]] = []

    def log_weight(m: int, budget: float) -> float:
        calls.append((m, budget))
        return bb.paper_log_weight(m, budget)

    assert bb.best_c_d(tilde, 0.5, log_weight) == 0.2  # errata §15 at q = 0.5: the baseline
    assert len(calls) <= 5
