"""How well the natural reconstruction recovers a row's direction: E⟨Z/‖Z‖, x/‖x‖⟩ for a row on the boundary.

The reconstruction attack (``Release.attack``, :mod:`ldpcli.analysis._attack`, Bhowmick et al. 2018 Sec. 2.3.1
with k = d) guesses the direction of a raw row x by the direction of its released row Z. Here is
its expected cosine for a row on the boundary of the domain (‖x‖ = L; a vertex of the ℓ∞ box),
the row whose error ``expected_error`` states, computed from public parameters only:

- **Constant-norm mechanisms** (``scale`` is not None: privunit2, duchi-l2, privunit-inf,
  duchi-linf). Every output has norm scale·L and E[Z] = x, so E⟨Z/‖Z‖, x/‖x‖⟩ = ⟨E Z, x⟩/(scale·L·‖x‖)
  = ‖x‖/(scale·L): 1/scale on the ball (PrivUnit2's normaliser m, Bhowmick et al. Alg. 1), √d/scale
  at a vertex of the box (the channel's c = 1/B). Exact, closed form.
- **gaussian-sign** (Błasiok et al. 2019, Def. 5.5): Z/‖Z‖ = S·G/‖G‖ with E[S | G] = b·sign⟨G, u⟩,
  b = tanh(ε/2), so the cosine's mean is b·E|⟨Y, u⟩| for Y uniform on S^{d−1}, which is
  b·Γ(d/2)/(√π·Γ((d + 1)/2)). Exact, closed form; at most √(2/(πd))·(1 + O(1/d)) however large ε is.
- **privunitg** (Asi, Feldman, Talwar 2022, Alg. 2): Z ∝ z·u + W with z from the two-sided
  truncated normal of threshold c (E[z] = μ) and W ~ N(0, I_{d−1}) orthogonal to u, so the cosine is
  z/√(z² + R), R ~ χ²_{d−1}. With 1/√s = π^{−1/2}∫₀^∞ t^{−1/2}e^{−ts} dt, E[e^{−tR}] = (1 + 2t)^{−(d−1)/2}
  and E[z·e^{−tz²}] = μ·e^{−tc²}/(1 + 2t) (each truncated half integrates in closed form):

      E[cos] = (2μ/√π) ∫₀^∞ (1 + 2u²)^{−(d+1)/2} e^{−c²u²} du,

  an exact one-dimensional integral (in closed form μ/√2·U(½, 1 − d/2, c²/2), Tricomi's U, DLMF
  13.4.4), evaluated by adaptive Gauss–Kronrod quadrature (relative error ≤ 1e−10) after the
  substitution u = v/√(c² + d + 1), which puts its width near 1. This is the one value here that is
  computed numerically rather than in closed form.
- **separated** (Bhowmick et al. 2018, Eq. 22): Z = R̂·Û with Û from PrivUnit2 at ε₁ (cosine mean m)
  and R̂ from ScalarDP at ε₂, independent, so the cosine's mean is m·E[sign R̂]. At ‖x‖ = r_max the
  grid index is k; randomized response reports each other index j with probability 1/(e^ε₂ + k),
  and R̂ < 0 exactly when j < k(k + 1)/(2(e^ε₂ + k)) (the paper's b; Alg. 3), so
  E[sign R̂] = 1 − 2·n₋/(e^ε₂ + k) with n₋ the number of such j. Exact, closed form.

The other mechanisms (bcdp, the baselines, d = 1) get None: no formula is computed for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldpcli.math import _sphere as sm
from ldpcli.math._domains import L2_BALL, LINF_BOX
from ldpcli.mechanisms import GaussianSign, Mechanism, PrivUnitG, Separated

#: The relative accuracy asked of the quadrature (privunitg).
QUADRATURE_RTOL = 1e-10


@dataclass(frozen=True)
class ExpectedCosine:
    """E⟨Z/‖Z‖, x/‖x‖⟩ for a row x on the boundary, and how it was computed (``how``, for messages)."""

    value: float
    how: str


def expected_cosine(mech: Mechanism) -> ExpectedCosine | None:
    """The natural reconstruction's expected cosine for a boundary row of ``mech`` (module docstring),
    or None where it has no direction (d = 1) or no formula here (bcdp, the baselines)."""
    if mech.d < 2:
        return None
    if isinstance(mech, PrivUnitG):
        return ExpectedCosine(_privunitg(mech), "exact 1-D integral, by quadrature")
    if isinstance(mech, GaussianSign):
        return ExpectedCosine(mech.bias * math.exp(-sm.log_gamma_half_ratio(mech.d)) / math.sqrt(math.pi),
                              "exact, closed form")
    if isinstance(mech, Separated):
        return ExpectedCosine(_separated(mech), "exact, closed form")
    scale = mech.scale
    if scale is None or mech.domain not in (L2_BALL, LINF_BOX):
        return None
    boundary = 1.0 if mech.domain == L2_BALL else math.sqrt(mech.d)  # ‖x‖/L on the sphere, at a vertex
    return ExpectedCosine(boundary / scale, "exact, closed form")


def _privunitg(mech: PrivUnitG) -> float:
    """(2μ/√π)·∫₀^∞ (1 + 2u²)^{−(d+1)/2}·e^{−c²u²} du, with u = s·v and s = 1/√(c² + d + 1)."""
    from scipy import integrate

    c2, half = mech.threshold**2, 0.5 * (mech.d + 1)
    s2 = 1.0 / (c2 + mech.d + 1.0)

    def integrand(v: float) -> float:
        t = s2 * v * v
        return math.exp(-half * math.log1p(2.0 * t) - c2 * t)

    integral = integrate.quad(integrand, 0.0, math.inf, epsabs=0.0, epsrel=QUADRATURE_RTOL, limit=200)[0]
    return 2.0 * math.exp(mech.log_mu) * math.sqrt(s2) * integral / math.sqrt(math.pi)


def _separated(mech: Separated) -> float:
    """m·(1 − 2·n₋/(e^ε₂ + k)): the direction's cosine mean times the mean sign of the magnitude."""
    k, eps2 = mech.magnitude.k, mech.magnitude.epsilon
    log_norm = float(np.logaddexp(eps2, math.log(k)))  # log(e^ε₂ + k), finite at every ε₂
    below = math.exp(math.log(k) + math.log(k + 1) - math.log(2.0) - log_norm)  # k(k + 1)/(2(e^ε₂ + k))
    negative = min(k, math.ceil(below))  # the indices 0, …, ⌈b⌉ − 1 give R̂ < 0
    return (1.0 - 2.0 * math.exp(math.log(negative) - log_norm)) / mech.direction.scale
