"""PrivUnit2: the optimal unbiased ε-LDP randomizer for vectors in the ℓ2 ball.

Algorithm (Bhowmick et al. 2018, Alg. 1, Eq. 14–15; Asi et al. 2022, Alg. 1 with docs/errata.md §1):
round the input x (‖x‖ ≤ L) without bias to a unit vector u = ±x/‖x‖, draw V uniform on the cap
{v ∈ S^{d−1}: ⟨v, u⟩ ≥ γ} with probability p and uniform on its complement otherwise, and release
Z = L·V/m, where

    m = c(γ)·[p/P − (1 − p)/(1 − P)],  c(γ) = (1 − γ²)^α / (2^{d−2}(d − 1)·B(α, α)),

α = (d − 1)/2 and P = P(⟨W, u⟩ ≥ γ) for W uniform on the sphere (Eq. 15, sign as corrected in
docs/errata.md §1). Then E[Z | x] = x and ‖Z‖ = L/m, so E‖Z − x‖² = L²/m² − ‖x‖².

Exact privacy (Asi et al. Thm 1; docs/errata.md §5): with p ≥ 1/2 and P ≤ 1/2 the worst-case likelihood
ratio is p(1 − P)/((1 − p)P), i.e. ε_exact = logit(p) − logit(P). Writing ε₁ = logit(1 − P),
this identity gives p − P = (e^{ε_exact} − 1)(1 − p)P, hence the log-space form used here:

    log m = log c(γ) + log(e^{ε_exact} − 1) + log(1 − p) − log(1 − P).

The expected error L²(1/m² − 1) = L²(1 − m)(1 + m)/m² needs 1 − m with full relative precision
when m → 1 (small d, large ε), where log m is a cancellation of terms of size ε. So 1 − m is
computed separately as a sum of positive terms, 1 − m = E[1 − ⟨V, u⟩] =
p·J/P + (1 − p)(1 − J)/(1 − P) with J = I_{s_γ}(α + 1, α) (``spheremath.log_cap_gap_fraction``).

Calibrations:
- ``optimal`` (Asi et al. Thm 1–2): maximise m subject to ε_exact = ε. The stationarity
  condition of log m in the cap threshold is exactly m = γ (Asi et al. Sec. 3), which is solved
  here by a bracketing root-finder on the cap logit y = 2·artanh(γ); the split ε₁ = logit(1 − P),
  logit(p) = ε − ε₁ follows (moved down by an ulp or two of ε where the recomputed ε_exact would
  round above ε: ``logit_p_at_most``). d = 3 gives γ = tanh(ε/4) and error 1/sinh²(ε/4).
- ``bhowmick`` (Bhowmick et al. Thm 1 and Eq. 23): γ the largest value satisfying (16a) or (16b)
  at 0.99ε, p = e^{0.01ε}/(1 + e^{0.01ε}); sufficient, not tight, so ε_exact < ε. Reproduces
  Table 1 (docs/errata.md §6 for its two misprints).

d = 1 is randomized response: u = ±1, keep the sign with probability p, m = 2p − 1 = tanh(ε/2)
at the optimum (error 1/sinh²(ε/2)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math import _logspace as logspace
from ldpcli.math import _sphere as sm
from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms._base import Mechanism, register
from ldpcli.mechanisms._hooks import OutputBranch

_RTOL = 4 * np.finfo(float).eps
_Y_HALF = 2.0 * math.atanh(0.5)  # the cap logit of γ = 1/2


def _log_m(d: int, y: float, logit_p: float, log_p_cap: float) -> float:
    """log m for PrivUnit2(γ = tanh(y/2), p = expit(logit_p)), d ≥ 2, in log space (Eq. 15)."""
    eps_exact = logit_p + logspace.log1mexp(log_p_cap) - log_p_cap
    return (
        sm.log_cap_normaliser(y, d)
        + logspace.log_expm1(eps_exact)
        + logspace.log_expit(-logit_p)
        - logspace.log1mexp(log_p_cap)
    )


def _log_one_minus_m(d: int, y: float, logit_p: float, log_p_cap: float) -> float:
    """log(1 − m) = log(p·J/P + (1 − p)(1 − J)/(1 − P)), d ≥ 2 (see the module docstring)."""
    log_j = sm.log_cap_gap_fraction(y, d)
    return float(
        np.logaddexp(
            logspace.log_expit(logit_p) + log_j - log_p_cap,
            logspace.log_expit(-logit_p) + logspace.log1mexp(log_j) - logspace.log1mexp(log_p_cap),
        )
    )


def exact_level(d: int, logit_p: float, log_p_cap: float) -> float:
    """ε_exact = logit(p) − logit(P) = logit(p) + log(1 − P) − log P (Asi et al. Thm 1; docs/errata.md §5).

    The one expression behind ``PrivUnit2.epsilon_exact`` and the calibration's check of it, summed
    in this order ((logit p + log(1 − P)) − log P), so that the value the calibration keeps ≤ ε is,
    to the last bit, the value the mechanism reports. d = 1 (randomized response): logit(p).
    """
    if d == 1:
        return logit_p
    return logit_p + logspace.log1mexp(log_p_cap) - log_p_cap


def logit_p_at_most(d: int, logit_p: float, log_p_cap: float, epsilon: float) -> float:
    """logit p moved down by the least amount that makes ``exact_level`` ≤ ε in floating point.

    A tight calibration solves logit p = ε − logit(1 − P), and the recomputed level can round an
    ulp or two above ε (e.g. ε_exact = 0.0010000000000000009 at d = 384, ε = 0.001). The
    level has slope 1 in logit p, so each step takes off the excess it still has, and at least one
    ulp of logit p; the result is below the solved value by about an ulp of ε, which changes the
    error by a relative ~1e−16. Returned unchanged when the level is already ≤ ε.
    """
    excess = exact_level(d, logit_p, log_p_cap) - epsilon
    while excess > 0.0:
        logit_p = min(math.nextafter(logit_p, -math.inf), logit_p - excess)
        excess = exact_level(d, logit_p, log_p_cap) - epsilon
    return logit_p


def cap_cosines(
    d: int, logit_p: float, cap_logit: float, log_p_cap: float, rows: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(t, r = √(1 − t²)): the per-row scalar draws of PrivUnit2 (Bhowmick et al. 2018, Alg. 1).

    The cap event, True with probability p = expit(``logit_p``) (exact in log space:
    ``bernoulli_logit``), then the cosine T = ⟨V, u⟩ of a point uniform on the cap {⟨v, u⟩ ≥ γ}
    (γ = tanh(``cap_logit``/2)) or on its complement (``sample_cap_cosines``), in that draw order.
    d = 1 (randomized response): t = +1 on the cap event and −1 otherwise, r = 0. The hemisphere
    mechanism is the case γ = 0, P = 1/2.
    """
    in_cap = logspace.bernoulli_logit(logit_p, rows, rng)
    if d == 1:
        return np.where(in_cap, 1.0, -1.0), np.zeros(rows)
    return sm.sample_cap_cosines(in_cap, cap_logit, log_p_cap, d, rng)


def _cap_epsilon(y: float, d: int) -> float:
    """ε₁ = logit(1 − P) = log((1 − P)/P): the privacy loss spent by the cap threshold alone."""
    log_p_cap = sm.log_cap_probability(y, d)
    return logspace.log1mexp(log_p_cap) - log_p_cap


def _grow_bracket(f: Any, start: float = 1.0) -> float:
    """Smallest start·2^k with f(start·2^k) ≥ 0 for an increasing f."""
    hi = start
    while f(hi) < 0.0:
        hi *= 2.0
    return hi


def optimal_cap_logit(d: int, epsilon: float) -> float:
    """The cap logit y* = 2·artanh(γ*) of the error-minimising PrivUnit2 at exact level ε, d ≥ 2.

    Along the tight constraint ε_exact = ε, d log m / d ε₁ = (P(1 − P)/c)(m − γ), so the optimum is
    the root of m − γ (Asi et al. Thm 2: at the optimum the normaliser m equals γ), found by
    bisection-safe Brent iteration on the sign of m − γ.
    """
    from scipy import optimize  # imported here: starting the CLI should not pay for it
    y_max = optimize.brentq(
        lambda y: _cap_epsilon(y, d) - epsilon, 0.0, _grow_bracket(lambda y: _cap_epsilon(y, d) - epsilon),
        xtol=1e-300, rtol=_RTOL, maxiter=500,
    )  # p = 1/2 here: a larger cap threshold would need p < 1/2

    def gap(y: float) -> float:
        # sign(m − γ), measured where it is well conditioned: log m − log γ for small γ, and
        # log(1 − γ) − log(1 − m) near γ = 1, where both m and γ round to 1 (1 − γ = 2·expit(−y)).
        log_p_cap = sm.log_cap_probability(y, d)
        logit_p = epsilon - (logspace.log1mexp(log_p_cap) - log_p_cap)
        if y < _Y_HALF:
            return _log_m(d, y, logit_p, log_p_cap) - sm.log_tanh_half(y)
        return logspace.LOG2 + logspace.log_expit(-y) - _log_one_minus_m(d, y, logit_p, log_p_cap)

    if gap(y_max) >= 0.0:
        return y_max
    lo = y_max
    while gap(lo) <= 0.0:  # log γ → −∞ as y → 0, so the gap becomes positive
        lo /= 2.0
    return float(optimize.brentq(gap, lo, y_max, xtol=1e-300, rtol=_RTOL, maxiter=500))


def bhowmick_cap_logit(d: int, epsilon_cap: float) -> float:
    """The largest cap logit allowed by Bhowmick et al. Thm 1, (16a) or (16b), at level ε', d ≥ 3.

    (16a): γ ≤ (e^{ε'} − 1)/(e^{ε'} + 1)·√(π/(2(d − 1))).
    (16b): ε' ≥ ½ log d + log 6 − ((d − 1)/2)·log(1 − γ²) + log γ and γ ≥ √(2/d); the right-hand
    side is increasing in γ, so its feasible set is an interval [√(2/d), γ_b].
    """
    from scipy import optimize
    gamma_a = math.tanh(epsilon_cap / 2.0) * math.sqrt(math.pi / (2.0 * (d - 1)))
    y_a = sm.cap_logit_from_gamma(gamma_a)
    alpha = sm.sphere_alpha(d)

    def excess_16b(y: float) -> float:
        return (
            0.5 * math.log(d) + math.log(6.0) + 2.0 * alpha * logspace.log_cosh(y / 2.0) + sm.log_tanh_half(y)
            - epsilon_cap
        )

    y_min = sm.cap_logit_from_gamma(math.sqrt(2.0 / d))
    if excess_16b(y_min) > 0.0:
        return y_a
    y_b = optimize.brentq(excess_16b, y_min, _grow_bracket(excess_16b, 2.0 * y_min), xtol=1e-300, rtol=_RTOL)
    return max(y_a, float(y_b))


@register(
    name="privunit2",
    title="PrivUnit2 (Bhowmick et al. 2018; optimal parameters of Asi et al. 2022)",
    calibrations=("optimal", "bhowmick"),
)
@dataclass(frozen=True)
class PrivUnit2(Mechanism):
    """PrivUnit2 on the ℓ2 ball of radius L (see the module docstring for the formulas)."""

    cap_logit: float  # y = 2·artanh(γ)
    logit_p: float  # logit of p, the probability of sampling the cap
    log_cap_probability: float  # log P(⟨W, u⟩ ≥ γ)
    log_m: float  # log of the normaliser m; the output norm is L/m
    log_one_minus_m: float  # log(1 − m), computed without cancellation

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> PrivUnit2:
        """PrivUnit2 at level ε in dimension d; ``calibration`` is ``optimal`` (default) or ``bhowmick``."""
        if d == 1:
            # Randomized response on {−1, +1}: P = 1/2 whatever γ, m = 2p − 1 = tanh(logit(p)/2).
            logit_p = epsilon if calibration == "optimal" else 0.01 * epsilon
            return cls.from_parameters(d, epsilon, norm_bound, calibration, 0.0, logit_p)
        if calibration == "optimal":
            y = optimal_cap_logit(d, epsilon)
            log_p_cap = sm.log_cap_probability(y, d)
            logit_p = epsilon - (logspace.log1mexp(log_p_cap) - log_p_cap)  # tight: ε_exact = ε
        else:
            if d < 3:
                raise UsageError(
                    "the bhowmick calibration needs d >= 3 (Thm 1's bounds say nothing below); "
                    "use `calibration` optimal"
                )
            y = bhowmick_cap_logit(d, 0.99 * epsilon)
            log_p_cap = sm.log_cap_probability(y, d)
            logit_p = 0.01 * epsilon
        # Rounding must never claim more than ε: the reported ε_exact is checked, bit for bit.
        logit_p = logit_p_at_most(d, logit_p, log_p_cap, epsilon)
        return cls.from_parameters(d, epsilon, norm_bound, calibration, y, logit_p, log_p_cap)

    @classmethod
    def from_parameters(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, cap_logit: float, logit_p: float,
        log_p_cap: float | None = None,
    ) -> PrivUnit2:
        """PrivUnit2 with the given cap logit y = 2·artanh(γ) and logit p, its normaliser computed.

        No calibration happens here: ``epsilon`` is only recorded, and ε_exact is whatever (y, p)
        give (``calibrate`` chooses them so that it is ≤ ε). ``log_p_cap`` is log P(⟨W, u⟩ ≥ γ) if
        already computed. d = 1 is randomized response (y plays no role; P = 1/2).
        """
        if d == 1:
            log_m = math.log(-math.expm1(-logit_p)) - math.log1p(math.exp(-logit_p))
            log_1mm = logspace.LOG2 + logspace.log_expit(-logit_p)  # 1 − m = 2(1 − p)
            return cls(d, epsilon, norm_bound, calibration, 0.0, logit_p, -logspace.LOG2, log_m, log_1mm)
        if log_p_cap is None:
            log_p_cap = sm.log_cap_probability(cap_logit, d)
        log_m = _log_m(d, cap_logit, logit_p, log_p_cap)
        log_1mm = _log_one_minus_m(d, cap_logit, logit_p, log_p_cap)
        if log_1mm < -logspace.LOG2:  # m > 1/2: m = 1 − (1 − m) is the better-conditioned route
            log_m = logspace.log1mexp(log_1mm)
        return cls(d, epsilon, norm_bound, calibration, cap_logit, logit_p, log_p_cap, log_m, log_1mm)

    @property
    def gamma(self) -> float:
        """The cap threshold γ = tanh(y/2) (0 for d = 1, where it plays no role)."""
        return math.tanh(self.cap_logit / 2.0)

    @property
    def p(self) -> float:
        """The probability of drawing from the cap."""
        return math.exp(logspace.log_expit(self.logit_p))

    @property
    def cap_probability(self) -> float:
        """P(⟨V, u⟩ ≥ γ) for V uniform on the sphere (may underflow to 0; see the log)."""
        return math.exp(self.log_cap_probability)

    @property
    def epsilon_exact(self) -> float:
        """logit(p) − logit(P) (Asi et al. Thm 1; docs/errata.md §5); logit(p) for d = 1."""
        return exact_level(self.d, self.logit_p, self.log_cap_probability)

    @property
    def scale(self) -> float:
        """1/m: the output's ℓ2 norm for L = 1."""
        return math.exp(-self.log_m)

    @property
    def expected_error(self) -> float:
        """L²(1/m² − 1) = L²(1 − m)(1 + m)/m² = E‖Z − x‖² for ‖x‖ = L (the papers' convention); inf where
        that exceeds the double range (d = 1 at ε < 1e−154: bcdp's budget search goes there for tiny q)."""
        m = math.exp(self.log_m)
        return self.norm_bound**2 * logspace.exp_or_inf(self.log_one_minus_m + math.log1p(m) - 2.0 * self.log_m)

    @property
    def expected_error_max(self) -> float:
        """L²/m², attained at x = 0 (inf beyond the double range, as ``expected_error``)."""
        return self.norm_bound**2 * logspace.exp_or_inf(-2.0 * self.log_m)

    def second_moments(self) -> tuple[float, float]:
        """(L²/m²)·((1 + (d − 1)γm)/d, (1 − γm)/d): E⟨Z, u⟩² and E⟨Z, w⟩² for w ⊥ u.

        Z = (L/m)·V with t = ⟨V, u⟩ of density ∝ (1 − t²)^{(d−3)/2} on the cap or its complement.
        Integrating by parts, ∫ t²(1 − t²)^{(d−3)/2} = [−t(1 − t²)^{(d−1)/2}]/(d − 1) + ∫ (1 − t²)^{(d−1)/2}/(d − 1)
        over either side of γ gives E[t² | side] = (1 + (d − 1)·γ·E[t | side])/d; averaging the sides
        with p, E[t] = m (the normaliser, Bhowmick et al. Alg. 1), so E[t²] = (1 + (d − 1)γm)/d,
        and the rest of E‖V‖² = 1 is shared by the d − 1 orthogonal directions.
        """
        total = self.expected_error_max  # E‖Z‖² = L²/m²
        if self.d == 1:
            return total, 0.0
        gamma, m = self.gamma, math.exp(self.log_m)
        one_minus_gm = 2.0 * math.exp(logspace.log_expit(-self.cap_logit)) + gamma * math.exp(self.log_one_minus_m)
        return total * (1.0 + (self.d - 1) * gamma * m) / self.d, total * one_minus_gm / self.d

    def parameters(self) -> dict[str, Any]:
        """γ, p and the cap probability, with their logs/logits for values that round to 0 or 1."""
        return {
            "gamma": self.gamma,
            "p": self.p,
            "p_logit": self.logit_p,
            "cap_probability": self.cap_probability,
            "log_cap_probability": self.log_cap_probability,
            "m": math.exp(self.log_m),
        }

    def audit_epsilon(self) -> tuple[float, str]:
        """ε from the cap probability integrated numerically from the cosine density (no incomplete beta).

        P = ∫_γ^1 (1 − t²)^{α−1} dt / ∫_{−1}^1 (1 − t²)^{α−1} dt, each integral evaluated in log
        space (the integrand scaled by its largest value) so that P ~ e^{−10⁴} stays representable.
        d = 1: both outputs enumerated (P = 1/2).
        """
        if self.d == 1:
            return self.logit_p, "randomized response: the two outputs enumerated"
        log_p_cap = sm.log_cap_probability_by_quadrature(self.cap_logit, self.d)
        cap_epsilon = logspace.log1mexp(log_p_cap) - log_p_cap
        return self.logit_p + cap_epsilon, "cap probability by adaptive quadrature of the cosine density"

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """‖Z‖ = L/m for every row; the cosine to u against the exact cap/complement mixture (× the
        rounding ±u inside the ball), the direction orthogonal to u uniform on S^{d−2} (KS with
        exact p-values); x = 0: the direction uniform on S^{d−1}; d = 1: an exact binomial test
        (``lawtests.sphere_tests``)."""
        from ldpcli.math import _lawtests as lawtests

        return lawtests.sphere_tests(
            x, z, norm_bound=self.norm_bound, radius=self.norm_bound * self.scale,
            s_gamma=math.exp(logspace.log_expit(-self.cap_logit)), log_p_cap=self.log_cap_probability,
            logit_p=self.logit_p,
        )

    def cap_cosines(self, rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The cap events and cosines (t, r) of ``rows`` rows (:func:`cap_cosines`): the host's
        part of the sampler, which the device path (:mod:`ldpcli.math._devices`) sends to the device."""
        return cap_cosines(self.d, self.logit_p, self.cap_logit, self.log_cap_probability, rows, rng)

    def output_branches(self, x: np.ndarray) -> list[OutputBranch]:
        """The output as three regions of the sphere, cap, band and opposite cap (d = 1: the two
        outputs), with their exact probabilities, means and errors (``lawtests.sphere_output_branches``)."""
        from ldpcli.math import _lawtests as lawtests

        return [OutputBranch(*b) for b in lawtests.sphere_output_branches(
            x, norm_bound=self.norm_bound, d=self.d, cap_logit=self.cap_logit, log_p_cap=self.log_cap_probability,
            logit_p=self.logit_p, log_m=self.log_m, log_one_minus_m=self.log_one_minus_m)]

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The region of each row (``lawtests.sphere_branch_labels``)."""
        from ldpcli.math import _lawtests as lawtests

        return lawtests.sphere_branch_labels(x, z, self.cap_logit)

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """PrivUnit2 on each row of ``x`` (rows with ‖x‖ ≤ L); returns L·V/m row by row."""
        n = x.shape[0]
        out_scale = self.norm_bound * self.scale
        if self.d == 1:
            u = sm.round_to_sphere(x, self.norm_bound, rng)
            return self.cap_cosines(n, rng)[0][:, None] * u * out_scale
        return sm.rounded_cap_directions(x, self.norm_bound, lambda rows: self.cap_cosines(rows, rng), out_scale, rng)
