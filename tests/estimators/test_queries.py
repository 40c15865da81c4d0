"""Query release math: the workload's geometry, Lemma 5.3 in Monte Carlo, the central calibration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ldpcli.estimators._queries import (
    Workload,
    central_sigma,
    diameter,
    gaussian_epsilon,
    greedy_cover,
    local_bound,
    marginal_workload,
    mean_width,
    nearest_rows,
    zcdp_epsilon,
)
from ldpcli.mechanisms import get_mechanism
from ldpcli.mechanisms._baselines import gaussian_log_delta_by_quadrature


def test_two_way_marginals_of_eight_bits() -> None:
    w = marginal_workload(8)
    assert w.m == 112 and w.items == 256 and w.distinct.shape == (256, 112)
    assert np.all(w.values.sum(axis=1) == 28)  # one cell of each of the 28 pairs
    assert np.allclose(w.center, 0.25)
    assert w.radius == pytest.approx(math.sqrt(21.0))  # 28·(3/4)² + 84·(1/4)²
    assert w.diameter == pytest.approx(math.sqrt(2 * 28))  # complementary records share no cell


@pytest.mark.slow
def test_diameter_nearest_rows_and_cover_against_brute_force() -> None:
    rng = np.random.default_rng(2)
    for n, m in ((1, 3), (2, 1), (7, 4), (600, 9)):
        points = rng.integers(0, 3, size=(n, m)).astype(float) + rng.normal(0, 0.01, size=(n, m))
        brute = max(np.linalg.norm(a - b) for a, b in itertools.combinations(points, 2)) if n > 1 else 0.0
        assert diameter(points) == pytest.approx(brute, rel=1e-12, abs=1e-12)
        targets = points[rng.choice(n, size=min(n, 5), replace=False)]
        nearest = nearest_rows(points, targets)
        direct = np.argmin(np.linalg.norm(points[:, None, :] - targets[None], axis=2), axis=1)
        assert np.allclose(np.linalg.norm(points - targets[nearest], axis=1),
                           np.linalg.norm(points - targets[direct], axis=1))
        for alpha in (0.05, 0.3, 1.0):
            cover = greedy_cover(points, alpha)
            radius = 0.5 * alpha * math.sqrt(m)
            chosen = points[cover]
            gaps = [np.linalg.norm(a - b) for a, b in itertools.combinations(chosen, 2)]
            assert all(g > radius for g in gaps)  # separated
            assert np.max(np.min(np.linalg.norm(points[:, None] - chosen[None], axis=2), axis=1)) <= radius  # covers


def test_mean_width_estimate_is_below_its_rigorous_bound_and_exact_for_a_segment() -> None:
    """g(conv{−a, a}) = ‖a‖·E|N(0, 1)| = ‖a‖√(2/π); g ≤ R√(2 log N)."""
    a = np.array([3.0, 4.0])
    width = mean_width(np.vstack([-a, a]), draws=20_000)
    assert abs(width.estimate - 5.0 * math.sqrt(2 / math.pi)) <= 5 * width.std_error
    w = marginal_workload(6)
    assert w.width.estimate <= w.width.upper_bound
    assert mean_width(w.distinct).estimate == w.width.estimate  # seeded: a function of the workload only


@pytest.mark.parametrize("rho", (0.01, 0.5, 2.0))
@pytest.mark.parametrize("delta", (1e-3, 1e-6, 1e-10))
def test_rho_to_epsilon_delta(rho: float, delta: float) -> None:
    """Prop. 1.3 of Bun–Steinke against the formula; the exact Gaussian ε has δ(ε) = δ by the
    independent quadrature route and is never above Prop. 1.3's."""
    assert zcdp_epsilon(rho, delta) == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / delta)), rel=1e-15)
    eps = gaussian_epsilon(rho, delta)
    assert 0.0 < eps <= zcdp_epsilon(rho, delta)
    assert math.exp(gaussian_log_delta_by_quadrature(math.sqrt(2 * rho), eps)) == pytest.approx(delta, rel=1e-6)


def test_central_noise_is_calibrated_to_the_diameter() -> None:
    """Erratum 18: replacing one of n rows moves the mean by at most diam/n, attained by a diametral
    pair; with σ = diam/(n√(2ρ)) the release is ρ-zCDP (Δ²/(2σ²) = ρ). Calibrating to the radius of
    a ball centred at 0 (the misreading) halves σ and gives 4ρ."""
    w = marginal_workload(5)
    n, rho = 1000, 0.5
    sigma = central_sigma(w.diameter, n, rho)
    i, j = 0, w.distinct.shape[0] - 1  # 00000 and 11111: complementary, a diametral pair
    moved = np.linalg.norm(w.distinct[i] - w.distinct[j]) / n
    assert moved == pytest.approx(w.diameter / n)
    assert moved**2 / (2 * sigma**2) == pytest.approx(rho)
    ball = np.vstack([np.eye(3), -np.eye(3)])
    radius_sigma = central_sigma(1.0, n, rho)  # radius 1 instead of the diameter 2
    assert diameter(ball) == pytest.approx(2.0)
    assert (diameter(ball) / n) ** 2 / (2 * radius_sigma**2) == pytest.approx(4 * rho)


def _local_errors(mechanism: str, eps: float, n: int, reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Squared ℓ2 errors of the raw and projected answers over ``reps`` local releases of the
    2-way marginals of 6 bits, on data drawn from a skewed product law."""
    w = marginal_workload(6)
    rng = np.random.default_rng(seed)
    p = np.linspace(0.1, 0.8, 6)
    records = (rng.random((n, 6)) < p).astype(int)
    items = records @ (1 << np.arange(5, -1, -1))
    truth = w.values[items].mean(axis=0)
    mech = get_mechanism(mechanism).calibrate(w.m, eps, norm_bound=w.radius * (1 + 1e-12))
    encoded = w.values[items] - w.center
    raw_err, proj_err = np.empty(reps), np.empty(reps)
    for r in range(reps):
        raw = mech.privatize(encoded, rng).mean(axis=0) + w.center
        projected = w.hull.project(raw)
        raw_err[r] = np.sum((raw - truth) ** 2)
        proj_err[r] = np.sum((projected - truth) ** 2)
    return raw_err, proj_err


@pytest.mark.parametrize("mechanism", ("privunit2", "gaussian-sign"))
def test_lemma_5_3_projection_never_hurts_and_helps_on_marginals(mechanism: str) -> None:
    """Pointwise ‖P(y) − x‖ ≤ ‖y − x‖ for x in the hull (every repetition), and on this thin hull
    (60 queries, 64 items) the mean squared error falls by far more than its sampling error."""
    raw, projected = _local_errors(mechanism, 1.0, 2000, 30, seed=11)
    assert np.all(projected <= raw * (1 + 1e-9) + 1e-12)
    gain = raw.mean() - projected.mean()
    spread = (raw - projected).std(ddof=1) / math.sqrt(raw.size)
    assert gain > 5 * spread
    assert projected.mean() < 0.5 * raw.mean()
    mech = get_mechanism(mechanism).calibrate(60, 1.0, norm_bound=marginal_workload(6).radius * (1 + 1e-12))
    # the raw error matches the mechanism's guarantee (≤ expected_error_max / n, within sampling error)
    assert raw.mean() <= mech.expected_error_max / 2000 + 5 * raw.std(ddof=1) / math.sqrt(raw.size)


def test_workload_keys_default_to_none_and_items_map_to_distinct_rows() -> None:
    values = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    w = Workload(("q0", "q1"), values)
    assert w.keys is None and w.distinct.shape == (2, 2)
    assert np.array_equal(w.distinct[w.item_rows], values)


def test_theorem_5_1_form() -> None:
    """(Δ·g/(ε√(nm)))^{1/2}: halves when n grows 16-fold, and matches the formula by hand."""
    assert local_bound(0.5, 3.0, 2.0, 100, 4) == pytest.approx(math.sqrt(0.5 * 3.0 / (2.0 * 20.0)), rel=1e-15)
    assert local_bound(0.5, 3.0, 2.0, 1600, 4) == pytest.approx(0.5 * local_bound(0.5, 3.0, 2.0, 100, 4), rel=1e-15)
