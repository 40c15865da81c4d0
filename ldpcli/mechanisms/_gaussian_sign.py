"""The local projection mechanism's randomizer (Błasiok, Bun, Nikolov, Steinke 2019, Def. 5.5), corrected.

Algorithm (``gaussian-sign``), for x in the ℓ2 ball of radius L:

1. round x without bias to U = ±x/‖x‖ with probabilities (1 ± ‖x‖/L)/2 (``spheremath.round_to_sphere``;
   a uniformly random direction for x = 0), so that L·E[U] = x;
2. draw Z ~ N(0, I_d);
3. draw S ∈ {±1} with P(S = sign⟨Z, U⟩ | Z, U) = e^ε/(1 + e^ε), i.e. E[S | Z, U] = b·sign⟨Z, U⟩ with
   b = tanh(ε/2);
4. release W = s·S·Z with s = L·√(π/2)/b.

Unbiased (docs/errata.md §17): given U = u, ⟨Z, u⟩ ~ N(0, 1) and E|⟨Z, u⟩| = √(2/π), so
E⟨W, u⟩ = s·b·√(2/π) = L, and for w ⊥ u, sign⟨Z, u⟩ is independent of ⟨Z, w⟩, so E⟨W, w⟩ = 0:
E[W | U] = L·U and E[W] = x. The printed Def. 5.5 takes b = ε/3 and s = 3/(√π·ε), for which
E[W] = (√2/π)·x ≈ 0.450·x (its Claim 5.6 uses E|⟨Z, u⟩| = √π), and b = ε/3 is a valid bias only for
ε < 3 (Fact 5.8, used for privacy, needs ε ≤ 3/2); the tanh bias is exactly ε-LDP for every ε.

Law and privacy: W/s = v exactly when (Z, S) = (v, +1) or (−v, −1), so given U = u the density of
W/s is φ(v)·(1 + b·sign⟨v, u⟩) = φ(v)·2p on the half-space {⟨v, u⟩ > 0} and φ(v)·2(1 − p) on the
other, p = e^ε/(1 + e^ε): the Gaussian analogue of Duchi et al.'s hemisphere mechanism. Averaged
over the rounding it is φ(v)·(1 + b·(‖x‖/L)·sign⟨v, x⟩). The ratio between two inputs is at most
(1 + b)/(1 − b) = e^ε, attained by x = L·u and x' = −L·u on either half-space: ε_exact = ε.

Error: E‖W‖² = s²·E‖Z‖² = s²·d, so E‖W − x‖² = s²d − ‖x‖² = L²·((π/2)·d/tanh²(ε/2) − ‖x‖²/L²):
``expected_error`` (‖x‖ = L) and ``expected_error_max`` (x = 0, s²d). For large d this approaches the
hemisphere mechanism's B² = L²·coth²(ε/2)·π²/B(d/2, 1/2)² ~ L²·coth²(ε/2)·(π/2)·d from above (the
Gaussian's norm varies, the sphere's does not), and both lose to PrivUnit2, whose error falls like
d/ε for large ε while theirs tends to (π/2)·d·L².

The local projection mechanism of Błasiok et al. (Sec. 5.1, Thm 5.1) is this randomizer followed by
the server's projection of the mean onto the convex hull of the universe:
``Release.mean(project=…)`` and ``Release.answer`` (:mod:`ldpcli.estimators._projection`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.math import _logspace as logspace
from ldpcli.math import _rows as rowmath
from ldpcli.math import _sphere as sm
from ldpcli.math._kernels import compiled, normal_chunks
from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms._base import Mechanism, register

_LOG_SQRT_HALF_PI = 0.5 * math.log(0.5 * math.pi)


@register(
    name="gaussian-sign",
    title="Gaussian direction with a private sign (Błasiok et al. 2019, Def. 5.5; corrected scale and bias)",
    calibrations=("tanh",),
)
@dataclass(frozen=True)
class GaussianSign(Mechanism):
    """Błasiok et al.'s local randomizer with bias tanh(ε/2) (module docstring for the formulas)."""

    log_scale: float  # log(s/L) = ½ log(π/2) − log tanh(ε/2)

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> GaussianSign:
        """Bias b = tanh(ε/2) and scale s = L·√(π/2)/b (its one calibration, ``tanh``)."""
        return cls(d, epsilon, norm_bound, calibration, _LOG_SQRT_HALF_PI - sm.log_tanh_half(epsilon))

    @property
    def bias(self) -> float:
        """b = tanh(ε/2) = E[S·sign⟨Z, U⟩]."""
        return math.exp(sm.log_tanh_half(self.epsilon))

    @property
    def gaussian_scale(self) -> float:
        """s = L·√(π/2)/b, the factor of S·Z in the output."""
        return self.norm_bound * math.exp(self.log_scale)

    @property
    def epsilon_exact(self) -> float:
        """log((1 + b)/(1 − b)) = 2 artanh(tanh(ε/2)): exactly ε."""
        return self.epsilon

    @property
    def expected_error(self) -> float:
        """s²d − L² for ‖x‖ = L."""
        return self.norm_bound**2 * (self.d * math.exp(2.0 * self.log_scale) - 1.0)

    @property
    def expected_error_max(self) -> float:
        """s²d, attained at x = 0."""
        return self.d * self.gaussian_scale**2

    def second_moments(self) -> tuple[float, float]:
        """(s², s²): E[WWᵀ] = s²·E[ZZᵀ] = s²·I since S² = 1."""
        each = self.gaussian_scale**2
        return each, (each if self.d > 1 else 0.0)

    def parameters(self) -> dict[str, Any]:
        """b = tanh(ε/2), p = e^ε/(1 + e^ε) (the probability that S keeps sign⟨Z, U⟩) and s."""
        return {"b": self.bias, "p": math.exp(logspace.log_expit(self.epsilon)), "s": self.gaussian_scale}

    def audit_epsilon(self) -> tuple[float, str]:
        """ε as the worst-case ratio of the output law, with the half-space mass integrated numerically.

        Given the rounded direction u, the density of W/s relative to φ is p/P on {⟨v, u⟩ > 0} and
        (1 − p)/(1 − P) on the other half, P = P(⟨Z, u⟩ > 0) for Z ~ N(0, I), p the probability the
        sampler keeps the sign (from its logit ε). Inputs ±L·u put the two halves the other way
        round, so the ratio p(1 − P)/((1 − p)P) is attained. P = ½ by symmetry; here it is
        integrated from the normal density (Gauss–Kronrod), not assumed.
        """
        from scipy import integrate

        def phi(t: float) -> float:
            return math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)

        upper = integrate.quad(phi, 0.0, math.inf, epsabs=0.0, epsrel=1e-13)[0]
        lower = integrate.quad(phi, -math.inf, 0.0, epsabs=0.0, epsrel=1e-13)[0]
        log_p = -math.log1p(math.exp(-self.epsilon))
        log_1mp = -self.epsilon + log_p
        return (
            log_p - log_1mp + math.log(lower) - math.log(upper),
            "worst-case ratio p(1 − P)/((1 − p)P) of the output law, half-space Gaussian mass P by quadrature",
        )

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """The exact law of W/s given x (module docstring), with u = x/‖x‖ (e₁ at x = 0):

        - sign⟨W, u⟩ = +1 with probability ½ + b·ρ/2, ρ = min(‖x‖/L, 1) (exact binomial);
        - |⟨W, u⟩|/s is half-normal (KS), independent of the sign;
        - for fixed unit w_k ⊥ u, ⟨W, w_k⟩/s ~ N(0, 1) (KS), and ‖W − ⟨W, u⟩u‖²/s² ~ χ²(d − 1) (KS).
        """
        from scipy import special, stats

        from ldpcli.math import _lawtests as lawtests

        u, rho = lawtests.rounding_weights(x, self.norm_bound)
        if u is None:  # x = 0: the law is rotation invariant, any fixed axis will do
            u = np.eye(self.d)[0]
        v = z / self.gaussian_scale
        along = v @ u
        k = int(np.count_nonzero(along > 0.0))
        tests = [
            lawtests.binomial_test("sign⟨W, u⟩ = +1 w.p. ½ + bρ/2", k, along.size, 0.5 + 0.5 * self.bias * rho),
            lawtests.ks_uniform("|⟨W, u⟩|/s half-normal", 2.0 * special.ndtr(np.abs(along)) - 1.0),
        ]
        if self.d >= 2:
            perp, norms = lawtests.orthogonal_parts(v, u)
            for i, w in enumerate(lawtests.fixed_directions(self.d, orthogonal_to=u)):
                tests.append(lawtests.ks_uniform(f"⟨W, w{i + 1}⟩/s ~ N(0, 1), w{i + 1} ⊥ u", special.ndtr(perp @ w)))
            tests.append(lawtests.ks_uniform("‖W⊥‖²/s² ~ χ²(d − 1)", stats.chi2.cdf(norms**2, self.d - 1)))
        return tests

    def kept_signs(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """S = sign⟨Z, U⟩ kept (True, probability e^ε/(1 + e^ε), exact in log space) or flipped, per row:
        the per-row draws after the rounding uniforms (the secure rendering draws them too)."""
        return logspace.bernoulli_logit(self.epsilon, rows, rng)

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """W = s·S·Z for each row of ``x`` (rows with ‖x‖ ≤ L).

        Draw order: the n rounding uniforms, the n kept signs (P = e^ε/(1 + e^ε)), then d normals
        per row. One read of x and one write of the output: chunk by chunk of rows
        (``spheremath.rounded_chunks``), or one compiled loop per row with numba
        (:mod:`ldpcli.math._kernels`), agreeing to rounding (their ⟨Z, U⟩ sum in different orders).
        A zero row's U is uniform and independent of Z, so sign⟨Z, U⟩ is a fair coin independent of
        Z: it is the row's unused rounding uniform < ½, and no direction is drawn.
        """
        n, d = x.shape
        flips: np.ndarray = rng.random((n,))
        keep = self.kept_signs(n, rng)
        scale = self.gaussian_scale
        out = np.empty((n, d))
        kernels = compiled(rng, given_draws=True)
        if kernels is not None:
            rows_in, bound = np.ascontiguousarray(x, dtype=np.float64), self.norm_bound
            for rows, source in normal_chunks(rng, out):
                kernels.gaussian_with_private_sign(
                    rows_in[rows], flips[rows], bound, keep[rows], scale, source, out[rows])
            return out
        with rowmath.row_buffers(d):
            for rows, u, zero in rowmath.rounded_chunks(x, flips, self.norm_bound):
                z = out[rows]
                rng.standard_normal(out=z)
                positive = np.where(zero, flips[rows] < 0.5, np.vecdot(z, u) >= 0.0)
                z *= np.where(positive == keep[rows], scale, -scale)[:, None]
        return out
