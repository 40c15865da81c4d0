"""Duchi–Jordan–Wainwright's ℓ2 (hemisphere) mechanism, with the corrected radius.

Algorithm (Duchi, Jordan, Wainwright 2014, App. C.2, scheme (50); "Strategy A" of their 2013
paper): round x (‖x‖ ≤ L) without bias to g̃ = ±L·x/‖x‖ with probabilities (1 ± ‖x‖/L)/2
(``spheremath.round_to_sphere``), draw T ~ Bernoulli(π_ε), π_ε = e^ε/(1 + e^ε), and release Z
uniform on the half {⟨z, g̃⟩ > 0} of the sphere of radius B if T = 1, on the other half otherwise.

Radius (ERRATA 11: printed twice too large in App. C.2 and in BCDP Mechanism 2):

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

from ldpcli import spheremath as sm
from ldpcli.mechanisms.base import Mechanism, check_common, register

_LOG_SQRT_PI = 0.5 * math.log(math.pi)
def hemisphere_log_scale(d: int, epsilon: float) -> float:
    """log(B/L) = log coth(ε/2) + ½ log π + log Γ((d + 1)/2) − log Γ(d/2) (ERRATA 11)."""
    return -sm.log_tanh_half(epsilon) + _LOG_SQRT_PI + sm.log_gamma_half_ratio(d)


@register
@dataclass(frozen=True)
class DuchiL2(Mechanism):
    """The hemisphere mechanism on the ℓ2 ball of radius L (module docstring for the formulas)."""

    log_scale: float  # log(B/L)

    name = "duchi-l2"
    title = "Duchi et al. ℓ2 hemisphere mechanism (J. ACM 2014, App. C.2; corrected radius B)"
    calibrations = ("classic",)

    @classmethod
    def calibrate(
        cls, d: int, epsilon: float, *, norm_bound: float = 1.0, calibration: str | None = None, **options: Any
    ) -> DuchiL2:
        """The hemisphere mechanism at level ε in dimension d (its one calibration, ``classic``)."""
        cls.check_options(options)
        check_common(d, epsilon, norm_bound)
        calibration = cls.check_calibration(calibration)
        d, epsilon, norm_bound = int(d), float(epsilon), float(norm_bound)
        return cls(d, epsilon, norm_bound, calibration, hemisphere_log_scale(d, epsilon))

    @property
    def logit_p(self) -> float:
        """logit π_ε = ε."""
        return self.epsilon

    @property
    def p(self) -> float:
        """π_ε = e^ε/(1 + e^ε), the probability of the hemisphere facing g̃."""
        return math.exp(sm.log_expit(self.epsilon))

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
        """B² − L² = L²·expm1(2 log(B/L)) for ‖x‖ = L (L²/sinh²(ε/2) at d = 1)."""
        return self.norm_bound**2 * math.expm1(2.0 * self.log_scale)

    @property
    def expected_error_max(self) -> float:
        """B², attained at x = 0."""
        return self.norm_bound**2 * math.exp(2.0 * self.log_scale)

    def parameters(self) -> dict[str, Any]:
        """p = π_ε (and its logit), γ = 0 and the radius B."""
        return {"p": self.p, "p_logit": self.logit_p, "gamma": 0.0, "B": self.radius}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The hemisphere mechanism on each row of ``x`` (rows with ‖x‖ ≤ L); rows of norm B."""
        n = x.shape[0]
        u = sm.round_to_sphere(x, self.norm_bound, rng)
        facing = sm.bernoulli_logit(self.epsilon, n, rng)
        radius = self.radius
        if self.d == 1:  # randomized response: keep the sign with probability π_ε
            return np.where(facing[:, None], u, -u) * radius
        t, r = sm.sample_cap_cosines(facing, 0.0, -sm.LOG2, self.d, rng)
        return sm.directions_with_cosines(u, t, r, radius, rng)
