"""Locally private stochastic gradient and mirror descent: the optimiser behind ``ldp train``.

One step (Duchi, Jordan, Wainwright 2014, Sec. 3.1 and App. C; Bhowmick et al. 2018, Sec. 4.4):
the server sends θ_k; each of the step's B rows computes its gradient ∇ℓ(θ_k; x, y), clips it to
the mechanism's domain of public size L (the ℓ2 ball, or the ℓ∞ box of the box mechanisms) and
privatizes it; the server averages the B releases into ĝ_k (unbiased for the mean clipped
gradient, since every mechanism is unbiased on its domain) and moves

- ``l2`` geometry (projected stochastic gradient): θ_{k+1} = Π_R(θ_k − η_k ĝ_k), Π_R the projection
  onto the ball ‖θ‖₂ ≤ R;
- ``l1`` geometry (stochastic mirror descent with the entropy, Nemirovski et al. 2009 Sec. 2.3, the
  method of Duchi et al. 2014's bound (14a)): θ = R(w⁺ − w⁻) with w = (w⁺, w⁻) on the simplex of
  dimension 2p, w_{k+1} ∝ w_k·exp(−η_k R (ĝ_k, −ĝ_k)); every θ with ‖θ‖₁ ≤ R is reachable and no
  projection is needed.

Step sizes are η_k = η₀·k^{−β}. The output is the average θ̄_T = (1/T)Σ_{k=1}^{T} θ_k of the
iterates after each step (Polyak and Juditsky 1992, the averaging Bhowmick et al.'s Cor. 3.2 and
Thm. 3 assume, with β ∈ (1/2, 1)). Defaults: ``l2``: β = 0.51 (Bhowmick et al. Sec. 5.1) and
η₀ = 1/(G·M) (:func:`default_step_rule`), G = sup‖g‖₂ the public bound on a true gradient and M² the
public bound on the second moment E‖ĝ‖² of one step's averaged releases; ``l1``: β = 1/2 and
η₀ = √(2 log 2p)/(R·M∞), M∞² a bound on E‖ĝ‖∞² (the entropic setup's step, Nemirovski et al. 2009
Sec. 2.3, per step).

A non-private twin (:class:`Iterate` fed the exact mean gradient of the same rows, same steps, same
set) runs on the same pass as the baseline; :mod:`ldpcli.learn._reference` computes θ̂, the minimiser
of the empirical loss over the same set, for the distance ‖θ̄ − θ̂‖.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ldpcli.estimators._projection import Simplex
from ldpcli.learn._losses import Loss
from ldpcli.math._domains import L2_BALL, LINF_BOX
from ldpcli.mechanisms._base import Mechanism

GEOMETRIES = ("l2", "l1")
#: β of η_k = η₀·k^{−β} by geometry: Bhowmick et al. Sec. 5.1 (β = .51); the entropic setup's 1/2.
DEFAULT_BETA = {"l2": 0.51, "l1": 0.5}

#: The mechanism a training run uses unless told otherwise: Bhowmick et al.'s separated mechanism
#: (Eq. 22/23), whose noise shrinks with the gradient's norm at large ε (E‖Z‖² → ‖g‖²). privunit2,
#: the default before, rounds every gradient to norm L without bias, a noise that does not shrink
#: with ε: on Fig. 3's problem its error rises above that of θ = 0 as ε grows (benchmarks/train.py).
DEFAULT_MECHANISM = "separated"


@dataclass(frozen=True)
class StepRule:
    """η_k = η₀·k^{−β} for steps k = 1, 2, …; ``basis`` says where η₀ came from."""

    eta0: float
    beta: float
    basis: str = "η₀ as given"

    def eta(self, k: int) -> float:
        """The step size of step k (1-based)."""
        return self.eta0 * k ** (-self.beta)

    def describe(self) -> str:
        return f"η_k = {self.eta0:.6g}·k^−{self.beta:g}"


def gradient_bound(mechanism: Mechanism) -> float:
    """G = sup‖g‖₂ over the mechanism's domain: L for the ℓ2 ball, √p·L for the ℓ∞ box."""
    L, p = mechanism.norm_bound, mechanism.d
    return L * math.sqrt(p) if mechanism.domain == LINF_BOX else L


def gradient_moment_bounds(mechanism: Mechanism) -> tuple[float, float]:
    """(M₂², M∞²): bounds on E‖Z‖₂² and E‖Z‖∞² of one privatized gradient, exact where stated.

    A mechanism whose output has a constant norm (``scale``: PrivUnit2, duchi-l2, the hypercube
    mechanisms) has E‖Z‖² = (scale·L)² exactly; otherwise E‖Z‖² = E‖Z − g‖² + ‖g‖² for an unbiased
    Z gives M₂² = ``expected_error_max`` + G² (:func:`gradient_bound`: L² for the ball, p·L² for the
    box). The hypercube mechanisms release a vertex ±B·L of a cube (scale = B·√p), so their ‖Z‖∞
    is exactly scale·L/√p; any other mechanism uses ‖Z‖∞ ≤ ‖Z‖₂.
    """
    L, p = mechanism.norm_bound, mechanism.d
    box = mechanism.domain == LINF_BOX
    scale = mechanism.scale
    m2 = (scale * L) ** 2 if scale is not None else mechanism.expected_error_max + gradient_bound(mechanism) ** 2
    if box and scale is not None:
        return m2, m2 / p
    return m2, m2


def step_second_moment(mechanism: Mechanism, batch: int) -> float:
    """M² ≥ E‖ĝ‖² for ĝ the mean of one step's B releases Z_i of gradients g_i (‖g_i‖ ≤ G).

    The releases are independent and unbiased, so E‖ĝ‖² = ‖ḡ‖² + (1/B²)Σ(E‖Z_i‖² − ‖g_i‖²) with
    ḡ = (1/B)Σg_i; Jensen's ‖ḡ‖² ≤ (1/B)Σ‖g_i‖² and E‖Z_i‖² ≤ M₂² (:func:`gradient_moment_bounds`)
    give E‖ĝ‖² ≤ (1 − 1/B)·G² + M₂²/B: M₂² for one row a step, G² (no noise left) as B grows.
    """
    g2 = gradient_bound(mechanism) ** 2
    return (1.0 - 1.0 / batch) * g2 + gradient_moment_bounds(mechanism)[0] / batch


def default_step_rule(geometry: str, mechanism: Mechanism, radius: float, *, batch: int = 1,
                      eta0: float | None = None, beta: float | None = None,
                      noise_variance: float = 0.0) -> StepRule:
    """The default steps η_k = η₀·k^{−β}; ``eta0``/``beta`` override them.

    ``l2``: η₀ = 1/(G·M), M² = :func:`step_second_moment` and G = :func:`gradient_bound`. This is
    Bhowmick et al.'s rule (Sec. 5.1: η₀ = √(ε/d) with β = .51, "so that for large magnitude noises
    the stepsize is smaller", the robust step η ∝ 1/M of Nemirovski et al. 2009, their ref. [60])
    written for the mechanism actually used. Their separated mechanism (Eq. 22/23) at ε ≤ d releases
    Z with ‖Z‖ ≤ c·√(d/ε) for unit gradients (Prop. 4), so √(ε/d) is 1/M up to a constant, with
    their G = ‖x‖ = 1; at d = 500 and ε from 50 to 500, √(ε/d)·M₂ is 0.80 to 1.08 for separated
    and privunit2 (1.04 to 1.35 with Eq. 23's calibration). As ε grows past d the noise vanishes
    (M → G) while √(ε/d) keeps growing; 1/(G·M) settles at the noiseless step 1/G², a quarter of
    the inverse curvature bound 4/G² of the logistic loss (its Hessian is at most E[xxᵀ]/4). η₀
    depends on the mechanism only through M, so a mechanism with less noise never gets a smaller
    step; 1/G has the units of θ (G·‖θ‖ bounds a change of score).
    ``l1``: η₀ = √(2 log 2p)/(R·M∞) (module docstring).
    ``noise_variance``: E‖ξ‖₂² of independent zero-mean noise ξ added to ĝ (the central layer's
    p·σ², :mod:`ldpcli.learn._central`), added to M² and, as a bound on E‖ξ‖∞², to M∞².
    """
    if beta is None:
        beta = DEFAULT_BETA[geometry]
    if eta0 is not None:
        return StepRule(float(eta0), float(beta))
    if geometry == "l2":
        g, m2 = gradient_bound(mechanism), step_second_moment(mechanism, batch) + noise_variance
        central = f", central noise {noise_variance:.6g} included" if noise_variance else ""
        return StepRule(1.0 / (g * math.sqrt(m2)), float(beta),
                        f"η₀ = 1/(G·M), G = {g:.6g} the gradient bound, M² = {m2:.6g} ≥ E‖ĝ‖² (batch {batch}{central})")
    p, minf = mechanism.d, gradient_moment_bounds(mechanism)[1] + noise_variance
    return StepRule(math.sqrt(2.0 * math.log(2 * p)) / (radius * math.sqrt(minf)), float(beta),
                    f"η₀ = √(2 log 2p)/(R·M∞): p = {p}, R = {radius:g}, M∞² = {minf:.6g} bounds E‖Z‖∞² of one release")


def project_l2(theta: np.ndarray, radius: float) -> np.ndarray:
    """The nearest point of the ball ‖θ‖₂ ≤ R."""
    return L2_BALL.nearest(theta[None, :], radius)[0]


def project_l1(theta: np.ndarray, radius: float) -> np.ndarray:
    """The nearest point of the ball ‖θ‖₁ ≤ R: sign(θ)·Π_simplex(|θ|) when ‖θ‖₁ > R."""
    size = np.abs(theta)
    if size.sum() <= radius:
        return theta.copy()
    return np.sign(theta) * Simplex(radius).project(size)


PROJECTIONS: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {"l2": project_l2, "l1": project_l1}


class Iterate(ABC):
    """θ_k in the parameter set of radius R, and the running average of θ_1, …, θ_k."""

    geometry: str

    def __init__(self, p: int, radius: float) -> None:
        self.radius = float(radius)
        self.theta = np.zeros(p)
        self.average = np.zeros(p)
        self.steps = 0

    def step(self, g: np.ndarray, eta: float) -> None:
        """One update with the gradient estimate g and step η, then the average."""
        self._move(g, eta)
        self.steps += 1
        self.average += (self.theta - self.average) / self.steps

    @abstractmethod
    def _move(self, g: np.ndarray, eta: float) -> None:
        """θ ← the geometry's update."""


class EuclideanIterate(Iterate):
    """Projected stochastic gradient on ‖θ‖₂ ≤ R."""

    geometry = "l2"

    def _move(self, g: np.ndarray, eta: float) -> None:
        theta = self.theta - eta * g
        norm = float(np.sqrt(theta @ theta))
        if norm > self.radius:
            theta *= self.radius / norm
        self.theta = theta


class EntropicIterate(Iterate):
    """Mirror descent with the entropy on the doubled simplex: θ = R(w⁺ − w⁻), ‖θ‖₁ ≤ R.

    The weights are kept as logarithms (shifted so the largest is 0), so steps of any size never
    overflow. θ starts at 0 (uniform weights).
    """

    geometry = "l1"

    def __init__(self, p: int, radius: float) -> None:
        super().__init__(p, radius)
        self._log_w = np.zeros(2 * p)

    def _move(self, g: np.ndarray, eta: float) -> None:
        p = g.size
        self._log_w[:p] -= eta * self.radius * g
        self._log_w[p:] += eta * self.radius * g
        self._log_w -= self._log_w.max()
        w = np.exp(self._log_w)
        w /= w.sum()
        self.theta = self.radius * (w[:p] - w[p:])


ITERATES: dict[str, type[Iterate]] = {"l2": EuclideanIterate, "l1": EntropicIterate}


def run_steps(
    loss: Loss,
    mechanism: Mechanism,
    private: Iterate,
    baseline: Iterate | None,
    X: np.ndarray,
    t: np.ndarray,
    batch: int,
    rule: StepRule,
    rng: np.random.Generator,
) -> int:
    """Steps over the rows of (X, t) in order, ``batch`` rows a step (the last may be short).

    Each step computes the rows' gradients at the private θ as one (B, p) array, clips them to the
    mechanism's domain, privatizes them in one call, averages and updates ``private``;
    ``baseline`` (if any) takes the exact mean gradient of the same rows at its own θ. Returns the
    number of gradients clipped.
    """
    clipped = 0
    for start in range(0, len(t), batch):
        Xb, tb = X[start:start + batch], t[start:start + batch]
        eta = rule.eta(private.steps + 1)
        gradients, moved = mechanism.project(loss.gradients(private.theta, Xb, tb))
        clipped += moved
        released = mechanism.privatize(gradients, rng)
        private.step(loss.project_gradient(released.mean(axis=0)), eta)
        if baseline is not None:
            baseline.step(loss.mean_gradient(baseline.theta, Xb, tb), eta)
    return clipped


#: Rows between two progress reports of :func:`sgd_pass`.
REPORT_ROWS = 4096


def sgd_pass(
    loss: Loss,
    mechanism: Mechanism,
    private: Iterate,
    baseline: Iterate | None,
    X: np.ndarray,
    t: np.ndarray,
    batch: int,
    rule: StepRule,
    rng: np.random.Generator,
    on_rows: Callable[[int], None] | None = None,
) -> int:
    """One pass over every row of (X, t), in an order drawn from ``rng``: :func:`run_steps` on the
    permuted rows, reporting every ~4096 rows to ``on_rows``. Returns the gradients clipped."""
    order = rng.permutation(len(t))
    chunk = batch * max(1, REPORT_ROWS // batch)
    clipped = 0
    for start in range(0, len(order), chunk):
        rows = order[start:start + chunk]
        clipped += run_steps(loss, mechanism, private, baseline, X[rows], t[rows], batch, rule, rng)
        if on_rows is not None:
            on_rows(len(rows))
    return clipped
