"""Least squares from two private copies (Aliakbarpour et al. 2024, Alg. 3, Eq. (74), Thm 3): the exact
trust-region solver (Moré–Sorensen optimality conditions, brute force on the disc), the unbiased
moments, the fit, Thm 3's rate and ``ldp regress`` end to end. Everything is seeded."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from helpers import bonferroni_z

from ldpcli.estimators._regression import (
    RegressionMoments,
    TrustRegionSolution,
    ball_least_squares,
    fit,
    least_squares_objective,
    solve_trust_region,
    theorem3_rate,
)

# --------------------------------------------------------------------------------- the solver


def quadratic(A: np.ndarray, b: np.ndarray, theta: np.ndarray) -> float:
    return float(0.5 * theta @ A @ theta - b @ theta)


def assert_optimal(A: np.ndarray, b: np.ndarray, radius: float) -> TrustRegionSolution:
    """Moré–Sorensen (1983): θ is a global minimiser over ‖θ‖ ≤ R iff, for some λ, (A + λI)θ = b,
    λ ≥ 0, A + λI ⪰ 0 and λ(R − ‖θ‖) = 0; checked to ~1e-8 relative."""
    solution = solve_trust_region(A, b, radius)
    theta, lam = solution.theta, solution.multiplier
    p = len(b)
    scale = max(float(np.abs(np.linalg.eigvalsh(A)).max()), lam, 1e-300)
    norm = float(np.linalg.norm(theta))
    assert theta.shape == (p,)
    assert lam >= 0.0
    assert norm <= radius * (1 + 1e-12)
    assert np.linalg.norm((A + lam * np.eye(p)) @ theta - b) <= 1e-8 * (scale * radius + np.linalg.norm(b))
    assert np.linalg.eigvalsh(A + lam * np.eye(p))[0] >= -1e-8 * scale
    assert lam * (radius - norm) <= 1e-8 * (scale * radius + np.linalg.norm(b))
    assert solution.on_boundary == (lam > 0 or solution.hard_case)
    if solution.on_boundary:
        assert math.isclose(norm, radius, rel_tol=1e-10)
    assert math.isclose(solution.objective, quadratic(A, b, theta), rel_tol=1e-9, abs_tol=1e-12 * scale * radius**2)
    return solution


def random_instance(kind: str, p: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric A of the given kind and a b; "hard" has b orthogonal to A's λ_min < 0 eigenspace."""
    M = rng.normal(size=(p, p))
    b = rng.normal(size=p)
    if kind == "indefinite":
        return (M + M.T) / 2, b
    if kind == "definite":
        return M @ M.T + 0.1 * np.eye(p), b
    if kind == "singular":  # A ⪰ 0 of rank p − 1 (A = 0 at p = 1), b with a null-space component
        k = max(p - 1, 0)
        return M[:, :k] @ M[:, :k].T, b
    if kind == "singular_in_range":  # the same A, b in its range: the minimum-norm solution is stationary
        k = max(p - 1, 0)
        A = M[:, :k] @ M[:, :k].T
        return A, A @ rng.normal(size=p)
    assert kind == "hard"
    Q, _ = np.linalg.qr(M)
    values = np.sort(rng.uniform(0.5, 3.0, size=p))
    values[0] = -1.0
    g = rng.normal(size=p)
    g[0] = 0.0
    return Q @ np.diag(values) @ Q.T, Q @ g


KINDS = ["indefinite", "definite", "singular", "singular_in_range", "hard"]
SIZES = [1, 2, 3, 10, 40]
RADII = [1e-3, 0.5, 3.0, 1e3]


@pytest.mark.parametrize("radius", RADII)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", SIZES)
def test_trust_region_optimality_conditions(p: int, kind: str, radius: float) -> None:
    rng = np.random.default_rng([p, KINDS.index(kind), RADII.index(radius)])
    for _ in range(5):
        A, b = random_instance(kind, p, rng)
        solution = assert_optimal(A, b, radius)
        if kind == "hard":  # the hard case exactly when ‖θ(−λ_min)‖ = ‖(A − λ_min I)⁺b‖ < R
            values, vectors = np.linalg.eigh(A)
            inner = np.linalg.norm((vectors.T @ b)[1:] / (values[1:] - values[0]))
            assert solution.hard_case == (inner < radius), (inner, radius)
        if kind == "definite" and np.linalg.norm(np.linalg.solve(A, b)) < radius:
            assert not solution.on_boundary and solution.multiplier == 0.0
        eigenvalues = np.linalg.eigvalsh(A)
        if eigenvalues[0] < -1e-10 * np.abs(eigenvalues).max() or kind == "singular":
            # no interior minimiser: A ⪰̸ 0, or A ⪰ 0 with b off its range
            assert solution.on_boundary


def test_interior_definite_case_is_the_linear_solve() -> None:
    A, b = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([0.3, -0.2])
    solution = solve_trust_region(A, b, 10.0)
    assert not solution.on_boundary and not solution.hard_case and solution.multiplier == 0.0
    assert np.allclose(solution.theta, np.linalg.solve(A, b), rtol=1e-13, atol=0)
    assert math.isclose(solution.objective, -0.5 * b @ np.linalg.solve(A, b), rel_tol=1e-13)


def test_boundary_definite_case() -> None:
    """The unconstrained minimiser lies outside: θ = (A + λI)⁻¹b with ‖θ‖ = R, λ > 0."""
    A, b, radius = np.diag([1.0, 4.0]), np.array([3.0, 4.0]), 1.0
    solution = assert_optimal(A, b, radius)
    assert solution.on_boundary and not solution.hard_case and solution.multiplier > 0
    lam = solution.multiplier
    assert math.isclose((3 / (1 + lam)) ** 2 + (4 / (4 + lam)) ** 2, 1.0, rel_tol=1e-13)


def test_hard_case() -> None:
    """b has no component on the eigenvector of λ_min < 0 and ‖θ(−λ_min)‖ < R: θ = θ(−λ_min) + τ·v_min."""
    A, b, radius = np.diag([-1.0, 2.0]), np.array([0.0, 1.0]), 5.0
    solution = assert_optimal(A, b, radius)
    assert solution.hard_case and solution.on_boundary
    assert math.isclose(solution.multiplier, 1.0, rel_tol=1e-13)
    assert math.isclose(solution.theta[1], 1.0 / 3.0, rel_tol=1e-13)
    assert math.isclose(abs(solution.theta[0]), math.sqrt(radius**2 - 1 / 9), rel_tol=1e-13)
    # the same problem in a rotated basis: b's component on v_min is rounding noise, not exactly 0
    rng = np.random.default_rng(11)
    Q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    values, g = np.array([-1.0, -1.0, 0.5, 2.0, 3.0]), np.array([0.0, 0.0, 1.0, -2.0, 0.5])
    rotated = assert_optimal(Q @ np.diag(values) @ Q.T, Q @ g, 10.0)
    assert rotated.hard_case and math.isclose(rotated.multiplier, 1.0, rel_tol=1e-10)
    # with a small radius the same instance is an ordinary boundary case (‖θ(−λ_min)‖ > R)
    easy = assert_optimal(A, b, 0.2)
    assert not easy.hard_case and easy.multiplier > 1.0


def test_near_hard_case() -> None:
    """A tiny but real component of b on v_min: the secular equation's root sits just above −λ_min."""
    A, radius = np.diag([-1.0, 2.0]), 5.0
    for eps in (1e-4, 1e-7, 1e-10):
        solution = assert_optimal(A, np.array([eps, 1.0]), radius)
        assert solution.on_boundary and solution.multiplier > 1.0
        assert math.isclose(abs(solution.theta[0]), math.sqrt(radius**2 - solution.theta[1] ** 2), rel_tol=1e-9)
        assert solution.theta[0] > 0  # the sign of b's component decides the side


def test_zero_b() -> None:
    """b = 0: θ = 0 when A ⪰ 0; on the boundary along the min eigenvector when A is indefinite."""
    for A in (np.eye(3), np.diag([0.0, 1.0, 2.0]), np.zeros((3, 3))):
        solution = assert_optimal(A, np.zeros(3), 2.0)
        assert np.all(solution.theta == 0) and solution.objective == 0.0 and not solution.on_boundary
    rng = np.random.default_rng(5)
    Q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    A = Q @ np.diag([-2.0, -0.5, 1.0, 3.0]) @ Q.T
    solution = assert_optimal(A, np.zeros(4), 1.5)
    assert solution.hard_case and solution.on_boundary
    assert math.isclose(abs(solution.theta @ Q[:, 0]), 1.5, rel_tol=1e-10)
    assert math.isclose(solution.objective, 0.5 * -2.0 * 1.5**2, rel_tol=1e-10)


def test_singular_a() -> None:
    A = np.diag([0.0, 2.0])
    inside = assert_optimal(A, np.array([0.0, 1.0]), 3.0)  # b in the range: the minimum-norm solution
    assert not inside.on_boundary and np.allclose(inside.theta, [0.0, 0.5], rtol=0, atol=1e-15)
    outside = assert_optimal(A, np.array([1.0, 1.0]), 3.0)  # b off the range: unbounded direction, boundary
    assert outside.on_boundary and outside.multiplier > 0 and outside.theta[0] > 2.9


def test_tiny_radius_follows_b() -> None:
    """As R → 0 the solution is R·b/‖b‖ (the linear term dominates), whatever A is."""
    rng = np.random.default_rng(9)
    for _ in range(10):
        M = rng.normal(size=(6, 6))
        A, b = (M + M.T) / 2, rng.normal(size=6)
        solution = assert_optimal(A, b, 1e-9)
        assert np.allclose(solution.theta, 1e-9 * b / np.linalg.norm(b), rtol=0, atol=1e-9 * 1e-7)


@pytest.mark.parametrize("a", [-2.0, -1e-3, 0.0, 1e-3, 0.5, 4.0])
@pytest.mark.parametrize("b", [-3.0, -0.1, 0.0, 0.2, 5.0])
def test_one_dimension(a: float, b: float) -> None:
    """p = 1 in closed form: b/a clipped to [−R, R] when a > 0, else R·sign(b) (either end when b = 0)."""
    radius = 1.5
    solution = assert_optimal(np.array([[a]]), np.array([b]), radius)
    if a > 0:
        expected = [min(max(b / a, -radius), radius)]
        assert np.allclose(solution.theta, expected, rtol=1e-12, atol=0)
    elif b != 0:
        assert solution.theta[0] == pytest.approx(math.copysign(radius, b), rel=1e-12)
    elif a < 0:
        assert abs(solution.theta[0]) == pytest.approx(radius, rel=1e-12)
    else:
        assert solution.theta[0] == 0.0


def test_brute_force_on_the_disc() -> None:
    """p = 2: the solver's objective is ≤ every value on a fine grid of the boundary circle (and the
    interior stationary point when it is a feasible minimum), and within grid resolution of their min."""
    rng = np.random.default_rng(7)
    angles = np.linspace(0, 2 * np.pi, 200_001)
    for trial in range(60):
        A, b = random_instance(["indefinite", "definite", "singular", "hard"][trial % 4], 2, rng)
        radius = float(rng.uniform(0.05, 4))
        best = solve_trust_region(A, b, radius).objective
        circle = radius * np.stack([np.cos(angles), np.sin(angles)])
        values = 0.5 * np.einsum("it,ij,jt->t", circle, A, circle) - b @ circle
        candidates = [float(values.min())]
        eigenvalues = np.linalg.eigvalsh(A)
        if eigenvalues[0] > 1e-10 * np.abs(eigenvalues).max():
            inside = np.linalg.solve(A, b)
            if np.linalg.norm(inside) <= radius:
                candidates.append(quadratic(A, b, inside))
        slack = 1e-12 * (1 + abs(min(candidates)))
        assert best <= min(candidates) + slack, (trial, best, candidates)
        resolution = (np.abs(A).sum() + np.abs(b).sum()) * radius**2 * (2 * np.pi / 200_000) ** 2
        assert best >= min(candidates) - resolution - slack, (trial, best, candidates)


def test_larger_p_is_exact_and_quick() -> None:
    rng = np.random.default_rng(21)
    M = rng.normal(size=(400, 400))
    assert_optimal((M + M.T) / 2, rng.normal(size=400), 2.0)


def test_trust_region_argument_checks() -> None:
    for radius in (0.0, -1.0, math.inf, math.nan, True, "1"):
        with pytest.raises(ValueError, match="radius"):
            solve_trust_region(np.eye(2), np.ones(2), radius)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        solve_trust_region(np.ones((2, 3)), np.ones(2), 1.0)
    with pytest.raises(ValueError):
        solve_trust_region(np.eye(2), np.ones(3), 1.0)
    with pytest.raises(ValueError):
        solve_trust_region(np.array([[np.nan, 0], [0, 1]]), np.ones(2), 1.0)
    assert solve_trust_region(np.eye(2), np.ones(2), np.float32(2.0)).theta == pytest.approx([1.0, 1.0])


def test_only_the_symmetric_part_matters() -> None:
    rng = np.random.default_rng(4)
    M, b = rng.normal(size=(5, 5)), rng.normal(size=5)
    skewed = solve_trust_region(M, b, 1.0)
    symmetric = solve_trust_region((M + M.T) / 2, b, 1.0)
    assert np.allclose(skewed.theta, symmetric.theta, rtol=0, atol=1e-14)


# --------------------------------------------------------------------------------- the moments


def naive_moments(c1: np.ndarray, c2: np.ndarray, label: int) -> tuple[np.ndarray, np.ndarray, float]:
    """A, b and mean(l̂¹l̂²) by a loop over the rows, straight from the definitions."""
    features = [j for j in range(c1.shape[1]) if j != label % c1.shape[1]]
    n = c1.shape[0]
    A = sum(np.outer(u[features], v[features]) + np.outer(v[features], u[features]) for u, v in zip(c1, c2)) / (2 * n)
    b = sum(u[label] * v[features] + v[label] * u[features] for u, v in zip(c1, c2)) / (2 * n)
    return A, b, float(sum(u[label] * v[label] for u, v in zip(c1, c2)) / n)


@pytest.mark.parametrize("label_index", [-1, 3, 0, 1])
def test_moments_equal_the_naive_sums(label_index: int) -> None:
    rng = np.random.default_rng([1, label_index + 1])
    c1, c2 = rng.normal(size=(30, 4)), rng.normal(size=(30, 4))
    moments = RegressionMoments(label_index=label_index)
    moments.add_pair(c1, c2)
    A, b, labels = naive_moments(c1, c2, label_index)
    assert moments.n == 30 and moments.p == 3
    assert np.allclose(moments.A, A, rtol=1e-13, atol=1e-15) and np.array_equal(moments.A, moments.A.T)
    assert np.allclose(moments.b, b, rtol=1e-13, atol=1e-15)
    assert math.isclose(moments.label_second_moment, labels, rel_tol=1e-12)


def test_batches_and_merge_equal_one_batch() -> None:
    rng = np.random.default_rng(2)
    c1, c2 = rng.normal(size=(40, 5)), rng.normal(size=(40, 5))
    whole = RegressionMoments()
    whole.add_pair(c1, c2)
    first, second = RegressionMoments(), RegressionMoments(label_index=4)  # −1 and 4: the same column
    first.add_pair(c1[:11], c2[:11])
    first.add_pair(c1[11:11], c2[11:11])  # an empty batch changes nothing
    second.add_pair(c1[11:25], c2[11:25])
    second.add(np.hstack([c1[25:], c2[25:]]), None)  # the protocol's add: the copies side by side
    first.merge(second)
    first.merge(RegressionMoments())  # merging an empty accumulator changes nothing
    assert first.n == 40
    assert np.allclose(first.A, whole.A, rtol=1e-13, atol=1e-15)
    assert np.allclose(first.b, whole.b, rtol=1e-13, atol=1e-15)
    assert math.isclose(first.label_second_moment, whole.label_second_moment, rel_tol=1e-12)
    fresh = whole.empty()
    assert fresh.n == 0 and fresh.label_index == whole.label_index
    fresh.merge(whole)
    assert np.array_equal(fresh.A, whole.A)
    fresh.add_pair(c1, c2)  # the merged sums were copied: whole is untouched
    assert whole.n == 40 and fresh.n == 80


def test_float32_rows_accumulate_in_float64() -> None:
    rng = np.random.default_rng(6)
    c1, c2 = rng.normal(size=(1000, 3)).astype(np.float32), rng.normal(size=(1000, 3)).astype(np.float32)
    moments = RegressionMoments()
    moments.add_pair(c1, c2)
    A, b, _ = naive_moments(c1.astype(np.float64), c2.astype(np.float64), -1)
    assert moments.A.dtype == np.float64 and np.allclose(moments.A, A, rtol=1e-12, atol=1e-14)
    assert np.allclose(moments.b, b, rtol=1e-12, atol=1e-14)


def test_moments_argument_checks() -> None:
    rng = np.random.default_rng(8)
    c1, c2 = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    empty = RegressionMoments()
    for attribute in ("A", "b", "label_second_moment"):
        with pytest.raises(ValueError, match="no rows"):
            getattr(empty, attribute)
    moments = RegressionMoments()
    moments.add_pair(c1, c2)
    with pytest.raises(ValueError, match=r"\(5, 3\)"):  # rows of another width, named by shape
        moments.add_pair(c1[:, :3], c2[:, :3])
    with pytest.raises(ValueError, match=r"\(5, 4\).*\(5, 3\)"):
        moments.add_pair(c1, c2[:, :3])
    with pytest.raises(ValueError):
        moments.add_pair(c1[:, :1], c2[:, :1])  # no feature
    with pytest.raises(ValueError):
        moments.add(np.hstack([c1, c2[:, :3]]), None)  # an odd width cannot hold two copies
    with pytest.raises(ValueError):
        RegressionMoments(label_index=4).add_pair(c1, c2)
    with pytest.raises(ValueError):
        RegressionMoments(label_index=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        moments.add_pair(np.where(c1 > 0, np.nan, c1), c2)
    other_width = RegressionMoments()
    other_width.add_pair(c1[:, :3], c2[:, :3])
    with pytest.raises(ValueError):
        moments.merge(other_width)
    other_label = RegressionMoments(label_index=0)
    other_label.add_pair(c1, c2)
    with pytest.raises(ValueError):
        moments.merge(other_label)
    with pytest.raises(ValueError):
        moments.merge(RegressionMoments(label_index=0))  # an empty one, but of another label column
    assert moments.n == 5  # nothing was added by the failed calls


def test_moments_are_unbiased() -> None:
    """A, b and mean(l̂¹l̂²) from copies x + N(0, σ²) average to zᵀz/n, zᵀl/n and mean(l²): every entry
    within a Bonferroni-corrected z (family α = 0.001, norm.isf(α/2k)) of standard errors from the repetitions."""
    rng = np.random.default_rng(3)
    n, p, reps, sigma = 50, 3, 4000, 0.5
    x = rng.uniform(-1, 1, size=(n, p + 1))
    noise1 = sigma * rng.normal(size=(reps, n, p + 1))
    noise2 = sigma * rng.normal(size=(reps, n, p + 1))
    As, bs, ls = np.empty((reps, p, p)), np.empty((reps, p)), np.empty(reps)
    for k in range(reps):
        moments = RegressionMoments()
        moments.add_pair(x + noise1[k], x + noise2[k])
        As[k], bs[k], ls[k] = moments.A, moments.b, moments.label_second_moment
    z, label = x[:, :p], x[:, p]
    estimates = np.column_stack([As.reshape(reps, -1), bs, ls])
    truth = np.concatenate([(z.T @ z / n).ravel(), z.T @ label / n, [np.mean(label**2)]])
    se = estimates.std(axis=0, ddof=1) / math.sqrt(reps)
    crit = bonferroni_z(1e-3, estimates.shape[1])  # = scipy.stats.norm.isf(0.001 / (2k))
    assert np.all(se > 0)
    assert np.all(np.abs(estimates.mean(axis=0) - truth) <= crit * se), (estimates.mean(axis=0) - truth) / se
    # and the full objective at a fixed θ: f̂(θ) + ½·mean(l̂¹l̂²) is unbiased for (1/2n)Σ(θᵀz − l)²
    theta = np.array([0.3, -0.7, 0.2])
    full = 0.5 * np.einsum("i,kij,j->k", theta, As, theta) - bs @ theta + 0.5 * ls
    full_se = full.std(ddof=1) / math.sqrt(reps)
    assert abs(full.mean() - least_squares_objective(z, label, theta)) <= bonferroni_z(1e-3, 1) * full_se


# --------------------------------------------------------------------------------- the fit


def test_fit_without_noise_is_the_ball_least_squares() -> None:
    """With copies equal to the data, f̂ is the least-squares loss itself: fit = ball_least_squares."""
    rng = np.random.default_rng(12)
    z = rng.uniform(-1, 1, (200, 3))
    label = z @ np.array([0.8, -0.5, 0.4]) + 0.05 * rng.normal(size=200)
    x = np.column_stack([z, label])
    moments = RegressionMoments()
    moments.add_pair(x, x)
    for radius in (0.3, 10.0):
        fitted = fit(moments, radius)
        best = ball_least_squares(z, label, radius)
        assert np.allclose(fitted.theta, best, rtol=1e-10, atol=1e-12)
        assert math.isclose(fitted.objective, least_squares_objective(z, label, best), rel_tol=1e-10)
        assert fitted.n == 200 and fitted.radius == radius and not fitted.indefinite
        assert fitted.on_boundary == (radius == 0.3)
    lstsq = np.linalg.lstsq(z, label, rcond=None)[0]
    assert np.allclose(ball_least_squares(z, label, 10.0), lstsq, rtol=1e-10, atol=1e-12)
    assert math.isclose(np.linalg.norm(ball_least_squares(z, label, 0.3)), 0.3, rel_tol=1e-12)


def test_fit_reports_the_full_objective_and_indefiniteness() -> None:
    moments = RegressionMoments()
    # two rows, each copy pair gives ẑ¹ẑ²ᵀ = −1 on a single feature: A = −1, indefinite
    moments.add_pair(np.array([[1.0, 2.0], [1.0, 0.0]]), np.array([[-1.0, 1.0], [-1.0, 3.0]]))
    assert moments.A == pytest.approx(np.array([[-1.0]]))
    assert moments.b == pytest.approx(np.array([(2 * -1 + 1 * 1 + 0 * -1 + 3 * 1) / 4]))
    assert moments.label_second_moment == pytest.approx((2 * 1 + 0 * 3) / 2)
    fitted = fit(moments, 2.0)
    solution = solve_trust_region(moments.A, moments.b, 2.0)
    assert fitted.indefinite and fitted.on_boundary and fitted.multiplier == solution.multiplier
    assert fitted.theta == pytest.approx([2.0])
    assert fitted.objective == pytest.approx(solution.objective + 0.5 * moments.label_second_moment, rel=1e-14)
    with pytest.raises(ValueError, match="no rows"):
        fit(RegressionMoments(), 1.0)
    with pytest.raises(ValueError, match="radius"):
        fit(moments, 0.0)


def test_least_squares_helpers() -> None:
    z, label = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]), np.array([1.0, 0.0, 3.0])
    theta = np.array([2.0, -1.0])
    # residuals 2 − 1 = 1, −2 − 0 = −2, 1 − 3 = −2: (1 + 4 + 4)/(2·3)
    assert least_squares_objective(z, label, theta) == pytest.approx(9 / 6, rel=1e-15)
    with pytest.raises(ValueError):
        least_squares_objective(z, label[:2], theta)
    with pytest.raises(ValueError):
        ball_least_squares(z, label, -1.0)


def test_excess_risk_shrinks_with_n() -> None:
    """Thm 3's shape: the excess risk f(θ̂) − f(θ*) of the private fit falls with n (≈ 1/√n to 1/n)."""
    theta_star = np.array([0.5, -0.3, 0.2])
    radius, sigma, reps = math.sqrt(3), 1.0, 12

    def mean_excess(n: int, seed: int) -> float:
        rng = np.random.default_rng(seed)
        excess = []
        for _ in range(reps):
            z = rng.uniform(-1, 1, (n, 3))
            label = np.clip(z @ theta_star + 0.1 * rng.normal(size=n), -1, 1)
            x = np.column_stack([z, label])
            moments = RegressionMoments()
            moments.add_pair(x + sigma * rng.normal(size=x.shape), x + sigma * rng.normal(size=x.shape))
            theta = fit(moments, radius).theta
            best = ball_least_squares(z, label, radius)
            value = least_squares_objective(z, label, theta) - least_squares_objective(z, label, best)
            assert value >= -1e-12  # θ* is the minimum over the ball, θ̂ lies in it
            excess.append(value)
        return float(np.mean(excess))

    small, large = mean_excess(2000, 1), mean_excess(20000, 2)
    assert large < 0.6 * small, (small, large)


# --------------------------------------------------------------------------------- Thm 3's rate


def test_theorem3_rate() -> None:
    rate = theorem3_rate(n=100, d=4, r_squared=4.0, theta_radius=1.0)
    # (R² + R)·min((log 4/√100)(r² + r·d), d) = 2·min(0.1·ln 4·(4 + 2·4), 4) = 2.4·ln 4
    assert math.isclose(rate.rate, 2.4 * math.log(4), rel_tol=1e-14)
    assert rate.constant_stated is False
    assert "up to an unspecified universal constant (Thm 3 uses ≲; Tropp 2016 matrix Bernstein)" in rate.statement
    # d = 2: log d is taken as 1: (4 + 2)·min(1/10·(1 + 1·2), 2) = 1.8
    assert math.isclose(theorem3_rate(n=100, d=2, r_squared=1.0, theta_radius=2.0).rate, 1.8, rel_tol=1e-14)
    # the ∧ d branch: (1 + 1)·min(huge, 1) = 2
    assert theorem3_rate(n=1, d=1, r_squared=1e6, theta_radius=1.0).rate == 2.0
    assert theorem3_rate(n=np.int64(100), d=np.int64(4), r_squared=np.float64(4.0), theta_radius=1).rate == rate.rate
    # zero noise gives zero rate; the rate falls as 1/√n until the ∧ d cap
    assert theorem3_rate(n=10, d=3, r_squared=0.0, theta_radius=1.0).rate == 0.0
    small, large = (theorem3_rate(n=n, d=5, r_squared=0.5, theta_radius=1.0).rate for n in (10_000, 40_000))
    assert math.isclose(small / large, 2.0, rel_tol=1e-12)


@pytest.mark.parametrize(
    "bad",
    [{"n": 0}, {"n": 2.0}, {"n": True}, {"d": 0}, {"d": 1.5}, {"r_squared": -1.0}, {"r_squared": math.inf},
     {"r_squared": math.nan}, {"theta_radius": 0.0}, {"theta_radius": -1.0}, {"theta_radius": math.inf}],
)
def test_theorem3_rate_argument_checks(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        theorem3_rate(**{"n": 10, "d": 3, "r_squared": 1.0, "theta_radius": 1.0, **bad})


# End to end (privatize --copies 2, then ldp regress): tests/analysis/test_regress_cli.py.
