"""The losses, the private step and the optimiser of ``ldp train`` (ldpcli.learn), without files.

- every loss's gradient against central finite differences, and its batch forms against each other;
- the clipped, privatized gradient that reaches the iterate is unbiased for the clipped gradient
  (seeded Monte Carlo through ``run_steps`` itself, tolerance from the sample's own spread);
- both geometries keep θ in the parameter ball, whatever the steps;
- the empirical minimiser satisfies its optimality conditions (interior, ℓ2 sphere, ℓ1 ball);
- at large ε private SGD lands next to non-private SGD on the same pass, within a tolerance
  derived from the predicted variance H⁻¹CH⁻¹/T of the averaged iterate.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import bonferroni_z
from scipy.optimize import minimize

from ldpcli.learn._reference import empirical_minimizer
from ldpcli.learn._losses import LOSSES, make_loss
from ldpcli.learn._sgd import (
    EntropicIterate,
    EuclideanIterate,
    Iterate,
    StepRule,
    default_step_rule,
    gradient_moment_bounds,
    project_l1,
    project_l2,
    run_steps,
    sgd_pass,
)
from ldpcli.mechanisms import MechanismSpec, get_mechanism

TRAIN_MECHANISMS = ["privunit2", "separated", "duchi-l2", "duchi-linf", "privunit-inf", "gaussian-sign", "privunitg"]


def _problem(name: str, n: int = 40, d: int = 5, k: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    loss = make_loss(name, d, k if name == "softmax" else 2)
    X = rng.standard_normal((n, d))
    codes = rng.integers(0, k if name == "softmax" else 2, n)
    t = loss.targets(rng.standard_normal(n) if name == "squared" else codes)
    theta = rng.standard_normal(loss.n_params) * 0.7
    return loss, X, t, theta


@pytest.mark.parametrize("name", list(LOSSES))
def test_gradients_match_finite_differences(name: str) -> None:
    loss, X, t, theta = _problem(name)
    if name == "hinge":  # keep every row's margin away from the kink at 1
        margins = t * (X @ theta)
        keep = np.abs(margins - 1.0) > 1e-2
        X, t = X[keep], t[keep]
    gradients = loss.gradients(theta, X, t)
    h = 1e-6
    numeric = np.empty_like(gradients)
    for j in range(loss.n_params):
        step = np.zeros(loss.n_params)
        step[j] = h
        numeric[:, j] = (loss.losses(theta + step, X, t) - loss.losses(theta - step, X, t)) / (2 * h)
    np.testing.assert_allclose(gradients, numeric, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(loss.mean_gradient(theta, X, t), gradients.mean(axis=0), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(LOSSES))
def test_gradient_norms_respect_the_stated_factor(name: str) -> None:
    loss, X, t, theta = _problem(name, n=500)
    norms = np.linalg.norm(loss.gradients(theta, X, t), axis=1)
    if loss.gradient_factor is None:
        assert name == "squared"
        return
    assert np.all(norms <= loss.gradient_factor * np.linalg.norm(X, axis=1) * (1 + 1e-12))


def test_closed_forms_at_zero() -> None:
    """At θ = 0: logistic loss log 2 and gradient −t·x/2; softmax loss log k and gradient (1/k − e_t)·x."""
    loss, X, t, _ = _problem("logistic")
    zero = np.zeros(loss.n_params)
    np.testing.assert_allclose(loss.losses(zero, X, t), math.log(2))
    np.testing.assert_allclose(loss.gradients(zero, X, t), -0.5 * t[:, None] * X)
    soft, X, t, _ = _problem("softmax", k=4)
    zero = np.zeros(soft.n_params)
    np.testing.assert_allclose(soft.losses(zero, X, t), math.log(4))
    expected = np.full((len(t), 4), 0.25)
    expected[np.arange(len(t)), t] -= 1.0
    np.testing.assert_allclose(soft.gradients(zero, X, t), (expected[:, :, None] * X[:, None, :]).reshape(len(t), -1))


def test_softmax_gradients_lie_in_the_centred_subspace() -> None:
    """Σ_c ∇_c = 0: projecting a true gradient changes nothing, and adding one vector to every class
    changes no loss (so ``canonical`` is the right way to compare softmax models)."""
    loss, X, t, theta = _problem("softmax")
    gradients = loss.gradients(theta, X, t)
    for g in gradients:
        np.testing.assert_allclose(loss.project_gradient(g), g, atol=1e-12)
    shared = np.tile(np.arange(1.0, loss.d + 1), loss.outputs)
    np.testing.assert_allclose(loss.losses(theta + shared, X, t), loss.losses(theta, X, t), rtol=1e-10)
    np.testing.assert_allclose(loss.canonical(theta + shared), loss.canonical(theta), atol=1e-12)


class _Recorder(Iterate):
    """An iterate that stays at θ₀ and records every gradient estimate it is handed."""

    geometry = "l2"

    def __init__(self, theta: np.ndarray) -> None:
        super().__init__(theta.size, 1e9)
        self.theta = theta.copy()
        self.seen: list[np.ndarray] = []

    def _move(self, g: np.ndarray, eta: float) -> None:
        self.seen.append(g.copy())


@pytest.mark.slow
@pytest.mark.parametrize("name", TRAIN_MECHANISMS)
@pytest.mark.parametrize("scale", [10.0, 0.4])
def test_privatized_clipped_gradient_is_unbiased(name: str, scale: float) -> None:
    """What ``run_steps`` feeds the iterate averages to the *clipped* gradient (scale 10: clipped; 0.4: not).

    One logistic row, repeated; each step releases its gradient at the fixed θ₀. The mean of the
    releases along the gradient's direction and a fixed orthogonal one must lie within the
    Bonferroni z of the sample's standard error (α = 1e−6 over all tests of this function).
    """
    rng = np.random.default_rng(7)
    d = 6
    loss = make_loss("logistic", d, 2)
    x = rng.standard_normal(d)
    x *= scale / np.linalg.norm(x)
    theta0 = rng.standard_normal(d) * 0.3
    mech = MechanismSpec(name, 2.0, None, 1.0, {}).calibrate(d)
    n = 20_000
    X, t = np.tile(x, (n, 1)), np.ones(n)
    recorder = _Recorder(theta0)
    run_steps(loss, mech, recorder, None, X, t, 1, StepRule(1.0, 0.5), rng)
    releases = np.array(recorder.seen)
    clipped = mech.project(loss.gradients(theta0, x[None, :], np.ones(1)))[0][0]
    u = clipped / np.linalg.norm(clipped)
    w = rng.standard_normal(d)
    w -= (w @ u) * u
    w /= np.linalg.norm(w)
    z_max = bonferroni_z(1e-6, 2 * len(TRAIN_MECHANISMS) * 2 * 2)
    for v in (u, w):
        along = releases @ v
        z = (along.mean() - clipped @ v) / (along.std(ddof=1) / math.sqrt(n))
        assert abs(z) < z_max, (name, scale, z)
    if scale > 1:  # the clipping did happen (σ·10·|x_j| > 1 for some j: the box clips too)
        assert not np.allclose(clipped, loss.gradients(theta0, x[None, :], np.ones(1))[0])


@pytest.mark.parametrize("iterate_cls, norm_ord", [(EuclideanIterate, 2), (EntropicIterate, 1)])
def test_iterates_never_leave_the_ball(iterate_cls: type[Iterate], norm_ord: int) -> None:
    rng = np.random.default_rng(3)
    radius = 2.5
    it = iterate_cls(7, radius)
    for k in range(1, 400):
        it.step(rng.standard_normal(7) * 10 ** rng.uniform(-3, 4), 10 ** rng.uniform(-3, 3))
        assert np.linalg.norm(it.theta, ord=norm_ord) <= radius * (1 + 1e-12)
        assert np.linalg.norm(it.average, ord=norm_ord) <= radius * (1 + 1e-12)  # a convex combination
        assert np.all(np.isfinite(it.theta))


def test_entropic_step_is_mirror_descent_on_the_doubled_simplex() -> None:
    """One step from θ = 0 with gradient g: w± ∝ exp(∓ηRg), θ = R(w⁺ − w⁻) = R·tanh-like, in closed form."""
    it = EntropicIterate(3, 2.0)
    g = np.array([1.0, -0.5, 0.0])
    it.step(g, 0.3)
    plus, minus = np.exp(-0.3 * 2.0 * g), np.exp(0.3 * 2.0 * g)
    total = plus.sum() + minus.sum()
    np.testing.assert_allclose(it.theta, 2.0 * (plus - minus) / total, rtol=1e-14)


def test_projections() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        v = rng.standard_normal(6) * 3
        p2 = project_l2(v, 1.5)
        assert np.linalg.norm(p2) <= 1.5 * (1 + 1e-15)
        p1 = project_l1(v, 1.5)
        assert abs(np.abs(p1).sum() - min(1.5, np.abs(v).sum())) < 1e-12
        # the ℓ1 projection is the soft threshold at the λ that meets the radius: check against bisection
        lo, hi = 0.0, float(np.abs(v).max())
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if np.maximum(np.abs(v) - mid, 0).sum() > 1.5 else (lo, mid)
        np.testing.assert_allclose(p1, np.sign(v) * np.maximum(np.abs(v) - hi, 0), atol=1e-12)


def test_default_step_rules_and_moment_bounds() -> None:
    """l2: η₀ = 1/(G·M), β = 0.51 (Bhowmick Sec. 5.1's rule for the mechanism's own second moment);
    l1: the entropic step with M∞ = B for the cube."""
    mech = get_mechanism("privunit2").calibrate(500, 16.0)
    rule = default_step_rule("l2", mech, 10.0)
    assert rule.eta0 == pytest.approx(1.0 / math.sqrt(gradient_moment_bounds(mech)[0])) and rule.beta == 0.51
    assert "M² = " in rule.basis and default_step_rule("l2", mech, 10.0, eta0=0.3).basis == "η₀ as given"
    cube = get_mechanism("duchi-linf").calibrate(9, 2.0, norm_bound=0.5)
    m2, minf = gradient_moment_bounds(cube)
    z = cube.privatize(np.full((200, 9), 0.1), np.random.default_rng(0))
    np.testing.assert_allclose(np.abs(z).max(axis=1), math.sqrt(minf), rtol=1e-12)  # every |Z_j| is B·L
    np.testing.assert_allclose((z**2).sum(axis=1), m2, rtol=1e-12)  # ‖Z‖² = p·B²L² exactly
    rule = default_step_rule("l1", cube, 3.0)
    assert rule.eta0 == pytest.approx(math.sqrt(2 * math.log(18)) / (3.0 * math.sqrt(minf))) and rule.beta == 0.5
    ball = get_mechanism("privunit2").calibrate(9, 2.0)
    m2, minf = gradient_moment_bounds(ball)
    z = ball.privatize(np.full((50, 9), 0.1), np.random.default_rng(0))
    np.testing.assert_allclose((z**2).sum(axis=1), m2, rtol=1e-12)  # a constant norm 1/m
    assert minf == m2
    gauss = get_mechanism("gaussian-sign").calibrate(9, 2.0)  # no constant norm: error + L²
    assert gradient_moment_bounds(gauss)[0] == pytest.approx(gauss.expected_error_max + 1.0)


def _kkt_residual(loss, X, t, theta: np.ndarray) -> np.ndarray:
    return loss.mean_gradient(theta, X, t)


@pytest.mark.parametrize("name", ["logistic", "softmax", "squared"])
def test_minimizer_interior_is_stationary(name: str) -> None:
    loss, X, t, _ = _problem(name, n=200, seed=1)
    found = empirical_minimizer(loss, X, t, "l2", 1e6)
    assert found.converged and not found.on_boundary
    assert np.abs(_kkt_residual(loss, X, t, found.theta)).max() < 1e-7


@pytest.mark.parametrize("name", ["logistic", "softmax", "squared"])
def test_minimizer_on_the_sphere_meets_the_kkt_conditions(name: str) -> None:
    """∇F(θ̂) = −μθ̂ with μ > 0 and ‖θ̂‖ = R; and no feasible point of a fine search does better."""
    loss, X, t, _ = _problem(name, n=200, seed=2)
    free = empirical_minimizer(loss, X, t, "l2", 1e6).theta
    radius = 0.3 * float(np.linalg.norm(loss.canonical(free)))
    found = empirical_minimizer(loss, X, t, "l2", radius)
    assert found.converged and found.on_boundary
    assert np.linalg.norm(found.theta) == pytest.approx(radius, rel=1e-9)
    g = _kkt_residual(loss, X, t, found.theta)
    mu = -(g @ found.theta) / radius**2
    assert mu > 0
    np.testing.assert_allclose(g, -mu * found.theta, atol=1e-6 * np.linalg.norm(g))
    rng = np.random.default_rng(0)
    for _ in range(200):  # random feasible points never beat it
        other = project_l2(found.theta + rng.standard_normal(found.theta.size) * 0.05, radius)
        assert loss.losses(other, X, t).mean() >= found.objective - 1e-10


def test_minimizer_on_the_l1_ball_matches_slsqp() -> None:
    loss, X, t, _ = _problem("logistic", n=300, d=4, seed=4)
    radius = 0.5 * float(np.abs(empirical_minimizer(loss, X, t, "l2", 1e6).theta).sum())
    found = empirical_minimizer(loss, X, t, "l1", radius)
    assert found.converged and found.on_boundary

    def f(theta: np.ndarray) -> float:
        return float(loss.losses(theta, X, t).mean())

    # The ℓ1 ball as θ = u − v, u, v ≥ 0, Σ(u + v) ≤ R: a smooth problem SLSQP solves.
    ref = minimize(lambda uv: f(uv[:4] - uv[4:]), np.full(8, 0.01), method="SLSQP", bounds=[(0, None)] * 8,
                   constraints=[{"type": "ineq", "fun": lambda uv: radius - uv.sum()}], options={"ftol": 1e-14})
    assert found.objective <= ref.fun + 1e-9
    np.testing.assert_allclose(found.theta, ref.x[:4] - ref.x[4:], atol=1e-4)


@pytest.mark.slow
def test_private_sgd_at_large_eps_is_next_to_non_private_sgd() -> None:
    """Same pass, same steps: the averaged private iterate differs from the non-private one by the
    averaged noise, whose covariance is about H⁻¹CH⁻¹/T (Polyak–Juditsky), and tr(C) ≤ the
    mechanism's largest error E‖Z − g‖². So ‖θ̄_priv − θ̄‖ ≲ √(err_max / (λ_min(H)²·T)) = s; the test
    allows 5s (a 5σ event for a Gaussian in each direction; seeded, so it cannot flake) and checks
    that the two are both near the MLE while θ = 0 is far."""
    rng = np.random.default_rng(11)
    d, n = 3, 40_000
    theta_star = np.array([1.5, -1.0, 0.5])
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    t = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ theta_star)), 1.0, -1.0)
    loss = make_loss("logistic", d, 2)
    mle = empirical_minimizer(loss, X, t, "l2", 100.0).theta
    weights = 0.25 / np.cosh(0.5 * X @ mle) ** 2  # σ'(⟨θ̂, x⟩)
    hessian = (X * weights[:, None]).T @ X / n
    lam = float(np.linalg.eigvalsh(hessian)[0])
    for name in ("separated", "privunit2"):
        mech = MechanismSpec(name, 16.0, None, 1.0, {}).calibrate(d)
        rule = StepRule(1.0, 0.51)
        private, twin = EuclideanIterate(d, 10.0), EuclideanIterate(d, 10.0)
        sgd_pass(loss, mech, private, twin, X, t, 1, rule, np.random.default_rng(12))
        s = math.sqrt(mech.expected_error_max / (lam**2 * n))
        gap = float(np.linalg.norm(private.average - twin.average))
        assert gap < 5 * s, (name, gap, s)
        assert np.linalg.norm(twin.average - mle) < 0.1 * np.linalg.norm(mle)
