"""Duchi–Jordan–Wainwright's ℓ2 (hemisphere) mechanism, with the corrected radius.

Algorithm (Duchi, Jordan, Wainwright 2014, App. C.2, scheme (50); "Strategy A" of their 2013
paper): round x (‖x‖ ≤ L) without bias to g̃ = ±L·x/‖x‖ with probabilities (1 ± ‖x‖/L)/2
(``spheremath.round_to_sphere``), draw T ~ Bernoulli(π_ε), π_ε = e^ε/(1 + e^ε), and release Z
uniform on the half {⟨z, g̃⟩ > 0} of the sphere of radius B if T = 1, on the other half otherwise.

Radius (docs/errata.md §11: printed twice too large in App. C.2 and in BCDP Mechanism 2):

    B = L · (e^ε + 1)/(e^ε − 1) · √π · Γ((d + 1)/2)/Γ(d/2)
      = L · coth(ε/2) · π / B(d/2, 1/2).

Then E[Z | x] = x. With the printed B (an extra factor d/(d/2) = 2) E[Z | x] = 2x. At d = 1 the
mechanism is randomized response on {−B, B} and B = L·coth(ε/2).

It is PrivUnit2 at γ = 0, p = π_ε (Bhowmick et al. Alg. 1; Asi et al. Alg. 1): the cap
probability is P = 1/2, so PrivUnit2's normaliser m = c(0)·(p/P − (1 − p)/(1 − P)) =
2c(0)·tanh(ε/2) with 1/(2c(0)) = √π·Γ((d + 1)/2)/Γ(d/2), i.e. B = L/m. It is sampled that way
(exactly): the cosine ⟨Z, g̃⟩/B from the Beta law truncated to one hemisphere
(``sample_cap_cosines`` with y = 0), then a uniform direction orthogonal to g̃
(``directions_with_cosines``). Privacy: the density ratio between two inputs is at most
p(1 − P)/((1 − p)P) = e^ε, attained, so ε_exact = ε for every d.

Error: ‖Z‖ = B always, so E‖Z − x‖² = B² − ‖x‖²: L²(scale² − 1) at ‖x‖ = L (= L²/sinh²(ε/2) at
d = 1) and B² at x = 0, with scale = B/L. log Γ((d + 1)/2) − log Γ(d/2) is a difference of two
numbers of size d·log d, so it is taken from math.gamma for d ≤ 100 and from its asymptotic
series (Bernoulli polynomials at 1/2) above, both to full double precision; coth(ε/2) from
log tanh(ε/2) so that ε from 0.01 to 10⁴ and beyond stays finite and exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.math import _logspace as logspace
from ldpcli.math import _sphere as sm
from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms._base import Mechanism, register
from ldpcli.mechanisms._hooks import OutputBranch
from ldpcli.mechanisms._privunit import cap_cosines

_LOG_SQRT_PI = 0.5 * math.log(math.pi)
def hemisphere_log_scale(d: int, epsilon: float) -> float:
    """log(B/L) = log coth(ε/2) + ½ log π + log Γ((d + 1)/2) − log Γ(d/2) (docs/errata.md §11)."""
    return -sm.log_tanh_half(epsilon) + _LOG_SQRT_PI + sm.log_gamma_half_ratio(d)


def hemisphere_masses_by_quadrature(d: int) -> tuple[float, float]:
    """(log ∫_0^{π/2} sin^{d−2}θ dθ, log ∫_{π/2}^π sin^{d−2}θ dθ), d ≥ 2, by adaptive quadrature.

    For audits: the unnormalised masses of the two hemispheres {⟨z, u⟩ > 0} and {⟨z, u⟩ < 0} in
    the polar angle θ (density ∝ sin^{d−2}θ on the sphere S^{d−1}). The integrand is at most 1 (at
    θ = π/2), so no scaling is needed for any d; its width there is ≈ 1/√(d − 2), and the break
    points form a geometric ladder away from π/2 at that scale.
    """
    import warnings

    from scipy import integrate  # only audits need it

    n = d - 2.0
    width = 1.0 / math.sqrt(max(n, 1.0))
    offsets = [width * 2.0**j for j in range(-4, 64) if width * 2.0**j < 0.5 * math.pi]

    def g(theta: float) -> float:
        s = math.sin(theta)
        if n == 0.0:
            return 1.0
        return math.exp(n * math.log(s)) if s > 0.0 else 0.0

    half = 0.5 * math.pi
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        upper = integrate.quad(g, 0.0, half, points=[half - o for o in offsets] or None, limit=1000,
                               epsabs=0.0, epsrel=1e-13)[0]
        lower = integrate.quad(g, half, math.pi, points=[half + o for o in offsets] or None, limit=1000,
                               epsabs=0.0, epsrel=1e-13)[0]
    return math.log(upper), math.log(lower)


@register(
    name="duchi-l2",
    title="Duchi et al. ℓ2 hemisphere mechanism (J. ACM 2014, App. C.2; corrected radius B)",
    calibrations=("classic",),
)
@dataclass(frozen=True)
class DuchiL2(Mechanism):
    """The hemisphere mechanism on the ℓ2 ball of radius L (module docstring for the formulas)."""

    log_scale: float  # log(B/L)

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> DuchiL2:
        """The hemisphere mechanism at level ε in dimension d (its one calibration, ``classic``)."""
        return cls(d, epsilon, norm_bound, calibration, hemisphere_log_scale(d, epsilon))

    @property
    def logit_p(self) -> float:
        """logit π_ε = ε."""
        return self.epsilon

    @property
    def p(self) -> float:
        """π_ε = e^ε/(1 + e^ε), the probability of the hemisphere facing g̃."""
        return math.exp(logspace.log_expit(self.epsilon))

    @property
    def radius(self) -> float:
        """B, the constant ℓ2 norm of every output."""
        return self.norm_bound * self.scale

    @property
    def epsilon_exact(self) -> float:
        """logit(π_ε) + logit(1 − P) with P = 1/2: exactly ε."""
        return self.epsilon

    @property
    def scale(self) -> float:
        """B/L."""
        return math.exp(self.log_scale)

    @property
    def expected_error(self) -> float:
        """B² − L² = L²·expm1(2 log(B/L)) for ‖x‖ = L (L²/sinh²(ε/2) at d = 1); inf beyond the double
        range (ε < 1e−154 at d = 1, which bcdp's budget search evaluates for tiny q)."""
        return self.norm_bound**2 * logspace.expm1_or_inf(2.0 * self.log_scale)

    @property
    def expected_error_max(self) -> float:
        """B², attained at x = 0 (inf beyond the double range, as ``expected_error``)."""
        return self.norm_bound**2 * logspace.exp_or_inf(2.0 * self.log_scale)

    def second_moments(self) -> tuple[float, float]:
        """(B²/d, B²/d): Z is uniform on a hemisphere of radius B, and z ↦ −z maps it onto the other
        half without changing zzᵀ, so E[ZZᵀ] is that of the whole sphere, (B²/d)·I."""
        each = self.expected_error_max / self.d
        return each, (each if self.d > 1 else 0.0)

    def parameters(self) -> dict[str, Any]:
        """p = π_ε (and its logit), γ = 0 and the radius B."""
        return {"p": self.p, "p_logit": self.logit_p, "gamma": 0.0, "B": self.radius}

    def audit_epsilon(self) -> tuple[float, str]:
        """ε as the worst-case ratio of the output law, with the hemisphere mass P integrated numerically.

        For input u the output density (w.r.t. the uniform law on the sphere of radius B) is p/P on
        {⟨z, u⟩ > 0} and (1 − p)/(1 − P) off it, p = π_ε (the logit the sampler draws with); for
        any u' ≠ u a set of positive mass lies in one half for u and in the other for u', so the
        ratio p(1 − P)/((1 − p)P) is attained. P = ½ by symmetry; here it is not assumed but
        integrated: the polar angle θ = ∠(z, u) has density ∝ sin^{d−2}θ on [0, π], and the two
        halves [0, π/2] and [π/2, π] are integrated separately (``hemisphere_masses_by_quadrature``,
        no Gamma or Beta function). d = 1: randomized response, the two outputs ±B enumerated.
        """
        eps = self.logit_p
        # log p and log(1 − p) for p = e^ε/(1 + e^ε), ε > 0, without expit/softplus helpers
        log_p = -math.log1p(math.exp(-eps))
        log_1mp = -eps + log_p
        if self.d == 1:
            return log_p - log_1mp, "randomized response: the two outputs ±B enumerated, ratio p/(1 − p)"
        log_upper, log_lower = hemisphere_masses_by_quadrature(self.d)
        return (
            log_p - log_1mp + log_lower - log_upper,
            "worst-case ratio p(1 − P)/((1 − p)P) of the output law, hemisphere mass P by quadrature of sin^{d−2}θ",
        )

    def output_branches(self, x: np.ndarray) -> list[OutputBranch]:
        """The two hemispheres about u (d = 1: the two outputs), as PrivUnit2's regions at γ = 0 with
        m = L/B (``lawtests.sphere_output_branches``). 1 − m = −expm1(−log(B/L)) is at least 1 − 2/π for
        d ≥ 2; at d = 1, m = tanh(ε/2) and 1 − m = 2/(1 + e^ε), which that would round to 0."""
        from ldpcli.math import _lawtests as lawtests

        if self.d == 1:
            log_one_minus_m = logspace.LOG2 + logspace.log_expit(-self.epsilon)
        else:
            log_one_minus_m = math.log(-math.expm1(-self.log_scale))
        return [OutputBranch(*b) for b in lawtests.sphere_output_branches(
            x, norm_bound=self.norm_bound, d=self.d, cap_logit=0.0, log_p_cap=-logspace.LOG2, logit_p=self.logit_p,
            log_m=-self.log_scale, log_one_minus_m=log_one_minus_m)]

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The hemisphere of each row (``lawtests.sphere_branch_labels`` at γ = 0)."""
        from ldpcli.math import _lawtests as lawtests

        return lawtests.sphere_branch_labels(x, z, 0.0)

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """PrivUnit2's tests at γ = 0, P = ½, p = π_ε (``lawtests.sphere_tests``): ‖Z‖ = B, the
        cosine to u against the two half-sphere laws (× the rounding ±u inside the ball), the
        direction orthogonal to u uniform; x = 0: uniform direction; d = 1: exact binomial."""
        from ldpcli.math import _lawtests as lawtests

        return lawtests.sphere_tests(
            x, z, norm_bound=self.norm_bound, radius=self.radius, s_gamma=0.5, log_p_cap=-logspace.LOG2,
            logit_p=self.epsilon,
        )

    def cap_cosines(self, rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The facing events (probability π_ε) and cosines (t, r) of ``rows`` rows: PrivUnit2's
        :func:`~ldpcli.mechanisms._privunit.cap_cosines` at γ = 0, P = 1/2; the host's part of the
        sampler, which the device path (:mod:`ldpcli.math._devices`) sends to the device."""
        return cap_cosines(self.d, self.epsilon, 0.0, -logspace.LOG2, rows, rng)

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The hemisphere mechanism on each row of ``x`` (rows with ‖x‖ ≤ L); rows of norm B."""
        n = x.shape[0]
        radius = self.radius
        if self.d == 1:  # randomized response: keep the sign with probability π_ε
            u = sm.round_to_sphere(x, self.norm_bound, rng)
            return self.cap_cosines(n, rng)[0][:, None] * u * radius
        return sm.rounded_cap_directions(x, self.norm_bound, lambda rows: self.cap_cosines(rows, rng), radius, rng)
