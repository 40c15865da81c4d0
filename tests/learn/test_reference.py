"""The non-private reference θ̂ of ``ldp train`` (ldpcli.learn._reference) and the public gradient bounds.

- the default tolerance agrees with a tight solve to the six digits printed, on the sphere, inside
  the ball and on the ℓ1 ball; a problem with no minimiser (separable classes) costs a few hundred
  iterations, not the old 2 × 5,000 (counted, never timed);
- an iteration cap stops it early, with a feasible point, its gap and a note;
- the data-independent gradient bound covers every gradient, and the norm at θ = 0 is exact.

What ``ldp train`` does with it, in real processes: tests/learn/test_train_reference_cli.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpcli.cli.render import fmt
from ldpcli.learn._reference import REFERENCE_TOL, empirical_minimizer
from ldpcli.learn._losses import make_loss
from ldpcli.learn._sgd import project_l2


def _softmax_problem(n: int, d: int, k: int, seed: int, *, separable: bool = False):
    """Unit rows with an intercept and k classes; ``separable``: more parameters than rows, random labels."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    centres = rng.standard_normal((k, d))
    codes = rng.integers(0, k, n) if separable else np.argmax(X @ centres.T + rng.gumbel(size=(n, k)), axis=1)
    X = np.hstack([X, np.ones((n, 1))])
    return make_loss("softmax", d + 1, k), X, codes


def _shown(loss, X, t, found, other: np.ndarray) -> tuple[str, str]:
    """What ``ldp train`` prints of θ̂: ‖θ − θ̂‖ for another model, and θ̂'s mean loss (six digits, fmt)."""
    gap = loss.canonical(other) - loss.canonical(found.theta)
    return fmt(float(np.sqrt(gap @ gap))), fmt(float(loss.losses(found.theta, X, t).mean()))


@pytest.mark.slow
@pytest.mark.parametrize(("geometry", "radius", "separable"), [
    ("l2", 3.0, False),   # the ball binds
    ("l2", 1e4, False),   # interior
    ("l2", 10.0, True),   # no minimiser at all: the ball binds
    ("l1", 2.0, False),
])
def test_the_default_tolerance_agrees_with_a_tight_solve_to_the_printed_digits(
        geometry: str, radius: float, separable: bool) -> None:
    loss, X, t = _softmax_problem(300, 12 if separable else 6, 4, seed=3, separable=separable)
    if separable:
        X, t = X[:40], t[:40]  # 40 rows, 52 parameters
    default = empirical_minimizer(loss, X, t, geometry, radius)
    tight = empirical_minimizer(loss, X, t, geometry, radius, tol=1e-9 if geometry == "l1" else 1e-12, max_iter=20_000)
    assert default.converged and default.stopped is None
    other = np.random.default_rng(0).standard_normal(loss.n_params) * 0.3  # a "private model"
    assert _shown(loss, X, t, default, other) == _shown(loss, X, t, tight, other)
    assert default.objective <= tight.objective + 1e-9 * (1 + abs(tight.objective))
    if geometry == "l2" and default.on_boundary:
        assert default.distance_bound is not None
        assert np.linalg.norm(default.theta - tight.theta) <= max(default.distance_bound, 10 * REFERENCE_TOL * radius)
        # and no feasible point near it does better
        rng = np.random.default_rng(1)
        for _ in range(50):
            near = project_l2(default.theta + rng.standard_normal(loss.n_params) * 0.01, radius)
            assert loss.losses(near, X, t).mean() >= default.objective - 1e-10


def test_a_problem_without_a_minimiser_is_solved_in_hundreds_of_iterations() -> None:
    """Separable classes: F has no minimiser, so an unconstrained L-BFGS first (the code before) runs to its
    cap of 5,000 iterations, and a bracket end near μ = 0 again. The ridge path from above never
    solves the unconstrained problem."""
    loss, X, t = _softmax_problem(300, 12, 4, seed=3, separable=True)
    found = empirical_minimizer(loss, X[:40], t[:40], "l2", 10.0)
    assert found.on_boundary and found.converged
    assert found.iterations < 1000


def test_an_iteration_cap_stops_it_with_a_feasible_point_and_a_note() -> None:
    loss, X, t = _softmax_problem(300, 6, 4, seed=3)
    full = empirical_minimizer(loss, X, t, "l2", 3.0)
    capped = empirical_minimizer(loss, X, t, "l2", 3.0, max_iter=3)
    assert capped.stopped == "iterations" and not capped.converged and capped.iterations == 3
    assert np.linalg.norm(capped.theta) <= 3.0 * (1 + 1e-12)
    assert capped.objective - full.objective <= capped.gap + 1e-12  # the gap bounds how far it is
    note = capped.stop_note(None)
    assert note is not None and "after 3 iterations" in note and "reference=False" in note
    assert full.stop_note(None) is None


@pytest.mark.parametrize("name", ["logistic", "softmax", "hinge"])
def test_the_public_bound_covers_every_gradient_and_the_start_is_exact(name: str) -> None:
    rng = np.random.default_rng(5)
    d, k, r = 6, 4, 1.7
    loss = make_loss(name, d + 1, k if name == "softmax" else 2)
    X = rng.standard_normal((500, d))
    X *= r * rng.random((500, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    X = np.hstack([X, np.ones((500, 1))])
    t = loss.targets(rng.integers(0, k if name == "softmax" else 2, 500))
    bound = loss.gradient_bound(r, intercept=True)
    for scale in (0.0, 1.0, 30.0):
        theta = rng.standard_normal(loss.n_params) * scale
        assert np.linalg.norm(loss.gradients(theta, X, t), axis=1).max() <= bound * (1 + 1e-12)
    at_zero = np.linalg.norm(loss.gradients(np.zeros(loss.n_params), X, t), axis=1)
    np.testing.assert_allclose(at_zero, loss.start_factor() * np.linalg.norm(X, axis=1), rtol=1e-12)
