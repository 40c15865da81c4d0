"""The non-private reference θ̂ of ``ldp train``: the minimiser of the training loss over the parameter ball.

θ̂ = argmin_{θ ∈ Θ} F(θ), F(θ) = (1/n)Σℓ(θ; x_i, t_i), Θ the ℓ2 (or ℓ1) ball of radius R, is a
yardstick for the data owner: the distance ‖θ̄ − θ̂‖ and θ̂'s loss and accuracy beside the private
model's. It is a statistic of the raw rows computed without any privacy, so it is never a release:
:mod:`ldpcli.learn._model` never writes it to the model file, its sidecar or the ledger.

The ℓ2 ball (:func:`empirical_minimizer`). By the KKT conditions θ̂ = θ(μ*), where θ(μ) = argmin
F(θ) + (μ/2)‖θ‖² is the ridge path and μ* > 0 solves ‖θ(μ*)‖ = R when the ball binds (θ̂ = θ(0)
inside the ball otherwise). ‖θ(μ)‖ decreases in μ and is at most ‖∇F(0)‖/μ, so the path starts
inside the ball at μ₀ = ‖∇F(0)‖/R and divides μ by 10 (each θ(μ) by L-BFGS warm-started from the
last one, with the analytic gradient, and well conditioned: F + (μ/2)‖θ‖² is μ-strongly convex)
until ‖θ(μ)‖ ≥ R brackets μ*; Brent's method on log μ then stops once |‖θ(μ)‖ − R| ≤ tol·R, and
θ̂ is θ(μ) scaled onto the sphere. Only a path that reaches μ₀·10⁻¹² still inside the ball solves
the unconstrained problem (an interior θ̂). Solving the unconstrained problem first, as this did
before, runs L-BFGS to its iteration cap twice whenever F has no minimiser, which is the rule for
classes that a linear model separates (3,850 softmax parameters for 2,059 rows, say), where the
ball always binds.

Accuracy. Each θ(μ) stops when ‖∇F_μ(θ)‖₂ ≤ μ·tol·R, which by μ-strong convexity puts it within
tol·R of θ(μ) (‖θ − θ(μ)‖ ≤ ‖∇F_μ(θ)‖/μ). For any feasible θ the Frank–Wolfe gap
gap(θ) = ⟨∇F(θ), θ⟩ + R‖∇F(θ)‖_* (the dual norm: ℓ2 for the ℓ2 ball, ℓ∞ for the ℓ1 ball) bounds
F(θ) − F(θ̂) by convexity (Jaggi 2013, Sec. 2), and on the sphere, where F + (μ*/2)‖θ‖² is
μ*-strongly convex with its minimum at θ̂, ‖θ − θ̂‖ ≤ √(2·gap/μ*); :class:`Minimizer` carries both.
The default tol = 10⁻⁷ is below what the reports print: ``ldp train`` shows six significant
digits, ‖θ̄ − θ̂‖ moves by at most ‖Δθ̂‖ (triangle inequality), 10⁻⁷·R, under half a unit in the
sixth digit of any distance above R/5, and a mean loss moves by at most G·10⁻⁷·R with G the
gradient bound of one row (2·10⁻⁶ for unit rows, an intercept and R = 10, under the half unit
5·10⁻⁶ of a loss ≥ 1). The solver asks no more: its 10⁻¹⁵ relative decrease of F (L-BFGS-B's
``ftol``) before made it run to rounding.

The ℓ1 ball: unconstrained L-BFGS, left as soon as an iterate's ‖θ‖₁ passes 2R (the ball is then
likely to bind), then accelerated projected gradient (FISTA with backtracking and adaptive
restart, Beck and Teboulle 2009) from its projection onto the ball, which finds θ̂ whether or not
the ball binds; it stops when the gradient mapping's norm is below tol/100·(1 + ‖∇F‖).

Limits. A run stops after ``max_iter`` iterations in all (L-BFGS and FISTA together) or
``seconds`` of wall clock, and then returns its last feasible point with ``stopped`` saying why,
``converged`` False and the gap that bounds how far its objective is from min F.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ldpcli.errors import counted
from ldpcli.learn._losses import Loss
from ldpcli.learn._sgd import project_l1

#: The default accuracy of θ̂, relative to R (module docstring: below the six digits printed).
REFERENCE_TOL = 1e-7
#: The default wall-clock limit of one θ̂ in ``ldp train``: a yardstick, so it should not cost many
#: times the training itself (about a second for 2,059 rows × 3,850 parameters).
REFERENCE_SECONDS = 60.0
#: The default cap on L-BFGS and FISTA iterations of one θ̂, all solves together.
REFERENCE_MAX_ITER = 20_000
#: The ridge path's first μ₀ = ‖∇F(0)‖/R is divided by this at each step until the ball binds.
_PATH_FACTOR = 10.0
#: The path stops looking for the sphere at μ₀·this (θ̂ is then inside the ball).
_PATH_FLOOR = 1e-12
#: FISTA's tolerance on the gradient mapping, in units of ``tol``: 10⁻⁹ by default (the tolerance it had
#: before), which on the tests' problems puts θ̂ within 10⁻⁷·R; 10⁻¹⁰ is already below its rounding.
_FISTA_TOL = 1e-2
#: Gradient tolerance (∞-norm, absolute) of the unconstrained solve of an interior θ̂.
_INTERIOR_GTOL = 1e-9

Objective = Callable[..., tuple[float, np.ndarray]]


@dataclass(frozen=True)
class Minimizer:
    """θ̂ = argmin over the parameter set of the mean loss, and how it was found.

    ``gap`` bounds F(θ) − min F for the returned θ (the Frank–Wolfe gap, :mod:`ldpcli.learn._reference`);
    ``distance_bound`` bounds ‖θ − θ̂‖ on the sphere (None inside the ball, where F need not be strongly
    convex). ``stopped`` is None, or why the solve ended before its tolerance: ``"time"`` or
    ``"iterations"``. ``iterations`` counts every L-BFGS and FISTA iteration.
    """

    theta: np.ndarray
    objective: float
    converged: bool
    on_boundary: bool
    method: str
    gap: float = 0.0
    distance_bound: float | None = None
    iterations: int = 0
    stopped: str | None = None

    def stop_note(self, seconds: float | None) -> str | None:
        """The sentence that says θ̂ stopped early, and how far it can be from min F; None when it did not."""
        if self.stopped is None:
            return None
        why = (f"after {seconds:g} s (`reference_seconds`)" if self.stopped == "time" and seconds is not None
               else f"after {self.iterations} iterations")
        bound = "" if self.distance_bound is None else f", and θ̂ within {self.distance_bound:.2g} of it"
        return (f"θ̂ stopped {why}, before its tolerance: its mean training loss is within {self.gap:.2g} of the "
                f"minimum{bound}; raise `reference_seconds` for the exact θ̂, or pass `reference=False` to skip it")


class _Spent(Exception):
    """The budget ran out during a solve; ``theta`` is its last iterate."""

    def __init__(self, theta: np.ndarray) -> None:
        super().__init__()
        self.theta = theta


class _Budget:
    """The iterations and seconds one θ̂ may take: :meth:`tick` says when they are spent."""

    def __init__(self, max_iter: int, seconds: float | None, report: Callable[[str], None] | None) -> None:
        self.left = max_iter
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.report = report
        self.used = 0
        self.stopped: str | None = None
        self.stage = ""

    def tick(self) -> bool:
        """One iteration, counted and reported; True once the budget is spent (``stopped`` says which)."""
        self.used += 1
        if self.report is not None:
            self.report(f"{self.stage}, {counted(self.used, 'iteration')}")
        if self.used >= self.left:
            self.stopped = "iterations"
        elif self.deadline is not None and time.monotonic() > self.deadline:
            self.stopped = "time"
        return self.stopped is not None


def empirical_minimizer(loss: Loss, X: np.ndarray, t: np.ndarray, geometry: str, radius: float, *,
                        tol: float = REFERENCE_TOL, max_iter: int = REFERENCE_MAX_ITER,
                        seconds: float | None = None,
                        on_progress: Callable[[str], None] | None = None) -> Minimizer:
    """θ̂ minimising F(θ) = (1/n)Σℓ(θ; x_i, t_i) over the ℓ2 (or ℓ1) ball of radius R (module docstring).

    ``tol``: the accuracy asked of θ̂, relative to R. ``max_iter``, ``seconds``: the limits of the
    whole computation (``seconds`` None: none). ``on_progress``: called at every iteration with a
    short line saying where the solve is. Needs a smooth loss.
    """
    from scipy.optimize import minimize

    last: dict[str, Any] = {}  # the last point evaluated and its gradient, for the callback's test

    def objective(theta: np.ndarray, mu: float = 0.0) -> tuple[float, np.ndarray]:
        value = float(loss.losses(theta, X, t).mean()) + 0.5 * mu * float(theta @ theta)
        gradient = loss.mean_gradient(theta, X, t) + mu * theta
        last.update(theta=theta.copy(), gradient=gradient)
        return value, gradient

    budget = _Budget(max_iter, seconds, on_progress)

    def solve(mu: float, x0: np.ndarray, *, gtol: float = 0.0, done: Callable[[np.ndarray, float], bool] | None = None,
              leave: float | None = None) -> np.ndarray:
        """argmin F + (μ/2)‖θ‖² by L-BFGS from x0, until the gradient's ∞-norm is ≤ ``gtol``, ``done(θ,
        ‖∇‖₂)`` is true, or (``leave``) ‖θ‖₁ passes ``leave``; :class:`_Spent` when the budget runs out."""

        def callback(intermediate_result: Any) -> None:
            theta = intermediate_result.x
            if budget.tick() or leave is not None and float(np.abs(theta).sum()) > leave:
                raise StopIteration
            if done is not None:
                gradient = last["gradient"] if np.array_equal(theta, last["theta"]) else objective(theta, mu)[1]
                if done(theta, float(np.linalg.norm(gradient))):
                    raise StopIteration

        found = minimize(objective, x0, args=(mu,), jac=True, method="L-BFGS-B", callback=callback,
                         options={"maxiter": max_iter, "maxfun": 2 * max_iter, "ftol": 0.0, "gtol": gtol})
        if budget.stopped is not None:
            raise _Spent(found.x)
        return np.asarray(found.x)

    zero = np.zeros(loss.n_params)
    if geometry == "l1":
        return _l1(objective, solve, budget, zero, radius, tol, max_iter)
    return _l2(objective, solve, budget, zero, radius, tol)


def _l2(objective: Objective, solve: Callable[..., np.ndarray], budget: _Budget, zero: np.ndarray,
        radius: float, tol: float) -> Minimizer:
    """θ̂ on the ℓ2 ball by the ridge path (module docstring)."""
    from scipy.optimize import brentq

    accuracy = tol * radius
    g0 = float(np.linalg.norm(objective(zero)[1]))
    if g0 == 0.0:
        return _finish(objective, zero, radius, "l2", budget, "θ = 0 is stationary (interior)")
    boundary = "L-BFGS on the ridge path (on the boundary)"
    known: dict[float, float] = {}  # log μ → ‖θ(μ)‖ − R, for the ends of the bracket
    theta = zero

    class _Close(Exception):
        """‖θ(μ)‖ is within the accuracy of R: the root is found."""

    def excess(log_mu: float) -> float:
        nonlocal theta
        if log_mu in known:
            return known[log_mu]
        mu = math.exp(log_mu)
        budget.stage = f"θ̂: ridge path, μ = {mu:.4g}"
        # ‖θ − θ(μ)‖ ≤ ‖∇F_μ(θ)‖/μ: stop once that is below the accuracy, or below a tenth of ‖θ‖'s
        # distance to R (far from the sphere Brent needs the sign and a rough value, not θ(μ) itself)
        theta = solve(mu, theta, done=lambda x, g: g <= mu * max(accuracy, 0.1 * abs(float(np.linalg.norm(x)) - radius)))
        known[log_mu] = value = float(np.linalg.norm(theta)) - radius
        if abs(value) <= accuracy:
            raise _Close
        return value

    try:
        high = low = math.log(g0 / radius)  # θ(μ₀) is inside the ball
        while excess(low) < 0:
            high, low = low, low - math.log(_PATH_FACTOR)
            if low < math.log(g0 / radius * _PATH_FLOOR):
                budget.stage = "θ̂: interior, unconstrained"
                free = solve(0.0, theta, gtol=_INTERIOR_GTOL)
                if float(np.linalg.norm(free)) <= radius:
                    return _finish(objective, free, radius, "l2", budget, "L-BFGS (interior)")
                theta = free
                raise _Close  # not reached for a convex F: ‖θ(μ)‖ → ‖θ(0)‖ as μ → 0
        if high == low:  # θ(μ₀) outside the ball only by the solver's own tolerance
            high = low + math.log(_PATH_FACTOR)
        brentq(excess, low, high, xtol=1e-14, rtol=1e-14, maxiter=200)
    except _Close:
        pass
    except _Spent as spent:
        theta = spent.theta
    size = float(np.linalg.norm(theta))
    if budget.stopped is None or size > radius:  # θ̂ is on the sphere: θ(μ) is within the accuracy of it
        theta = theta * (radius / size)
    return _finish(objective, theta, radius, "l2", budget, boundary)


def _l1(objective: Objective, solve: Callable[..., np.ndarray], budget: _Budget, zero: np.ndarray,
        radius: float, tol: float, max_iter: int) -> Minimizer:
    """θ̂ on the ℓ1 ball: unconstrained L-BFGS while it stays near the ball, then FISTA (module docstring)."""
    budget.stage = "θ̂: unconstrained"
    boundary = "projected FISTA (on the boundary)"
    try:
        free = solve(0.0, zero, gtol=_INTERIOR_GTOL, leave=2.0 * radius)
    except _Spent as spent:
        return _finish(objective, project_l1(spent.theta, radius), radius, "l1", budget, boundary)
    if float(np.abs(free).sum()) <= radius:
        return _finish(objective, free, radius, "l1", budget, "L-BFGS (interior)")
    budget.stage = "θ̂: projected FISTA"
    theta, converged = _fista_l1(objective, project_l1(free, radius), radius, tol * _FISTA_TOL, max_iter, budget)
    found = _finish(objective, theta, radius, "l1", budget, boundary)
    return replace(found, converged=found.converged and converged)


def _finish(objective: Objective, theta: np.ndarray, radius: float, geometry: str, budget: _Budget,
            method: str) -> Minimizer:
    """The Minimizer at the feasible θ: its objective, Frank–Wolfe gap and (on the sphere) distance bound."""
    value, gradient = objective(theta)
    if geometry == "l1":
        size, dual = float(np.abs(theta).sum()), float(np.abs(gradient).max())
    else:
        size, dual = float(np.linalg.norm(theta)), float(np.linalg.norm(gradient))
    gap = max(0.0, float(gradient @ theta) + radius * dual)
    on_boundary = size >= radius * (1.0 - 1e-9)
    distance: float | None = None
    converged = budget.stopped is None
    if on_boundary and geometry == "l2":
        mu = -float(gradient @ theta) / radius**2  # KKT: ∇F(θ̂) = −μθ̂
        distance = math.sqrt(2.0 * gap / mu) if mu > 0 else None
        # the gradient points straight into the ball
        cosine = -float(gradient @ theta) / (float(np.linalg.norm(gradient)) * radius + 1e-300)
        converged = converged and cosine > 1 - 1e-6
    return Minimizer(theta, value, converged, on_boundary, method, gap, distance, budget.used, budget.stopped)


def _fista_l1(objective: Objective, x: np.ndarray, radius: float, tol: float, max_iter: int,
              budget: _Budget) -> tuple[np.ndarray, bool]:
    """Accelerated projected gradient onto the ℓ1 ball from x until the gradient mapping's norm is below
    ``tol``·(1 + ‖∇F‖) (see the module); (θ, whether it got there)."""
    y, fx = x.copy(), objective(x)[0]
    momentum, lipschitz = 1.0, 1.0
    for _ in range(max_iter):
        if budget.tick():
            return x, False
        fy, gy = objective(y)
        while True:
            candidate = project_l1(y - gy / lipschitz, radius)
            step = candidate - y
            f_new = objective(candidate)[0]
            if f_new <= fy + gy @ step + 0.5 * lipschitz * (step @ step) + 1e-15 * abs(fy):
                break
            lipschitz *= 2.0
        mapping = lipschitz * float(np.sqrt(step @ step))
        if f_new > fx:  # adaptive restart: drop the momentum
            momentum, y = 1.0, x.copy()
            continue
        next_momentum = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * momentum**2))
        y = candidate + ((momentum - 1.0) / next_momentum) * (candidate - x)
        x, fx, momentum = candidate, f_new, next_momentum
        lipschitz *= 0.9  # let the estimate shrink again
        if mapping <= tol * (1.0 + float(np.sqrt(gy @ gy))):
            return x, True
    return x, False
