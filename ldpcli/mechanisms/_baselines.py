"""Additive-noise baselines: the Laplace mechanism (pure ε-DP) and the analytic Gaussian ((ε, δ)-DP).

Both release Z = x + noise for x in the ℓ2 ball of radius L; they are kept for comparison with
the sphere mechanisms (``baseline = True``), which are far more accurate for d ≫ 1. Rows must
lie in the ball (``Mechanism.project`` moves the others onto it before privatizing); rows that the
domain's slack leaves slightly beyond L are scaled onto the sphere by the exact projection
``domain.nearest`` as part of the mechanism, so the sensitivity used in the calibration is never
exceeded.

Laplace (Dwork, McSherry, Nissim, Smith 2006): the ℓ1 sensitivity of x ↦ x on the ℓ2 ball is
sup ‖x − x'‖₁ = 2L√d (Cauchy–Schwarz, attained at x = −x' = L·(1, …, 1)/√d); i.i.d. Laplace(b)
noise with b = 2L√d/ε is ε-DP, attained exactly (ε_exact = ε). E‖Z − x‖² = d·2b² for every x.

Gaussian, calibrated by the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8 / Alg. 1):
x + N(0, σ²I) with ℓ2 sensitivity Δ = 2L is (ε, δ)-DP if and only if

    δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) ≤ δ,

and σ is the root of δ(σ) = δ (δ(σ) decreases in σ), found by Brent iteration on log σ and then
nudged up by ulps until δ(σ) ≤ δ holds. δ(σ) is evaluated in log space without overflow or
cancellation: with a = Δ/(2σ) − εσ/Δ and b = a − Δ/σ, φ(b)·e^ε = φ(a) exactly, so
δ = φ(a)·[R(−a) − R(−b)] with the Mills ratio R(t) = (1 − Φ(t))/φ(t) = √(π/2)·erfcx(t/√2)
when a ≤ 0 (both terms tiny); δ = Φ(a) − e^{ε + log Φ(b)} when a > 0 (then δ > 0.04 for ε ≥ 0.01).
This works for ε up to 10⁴ and δ down to 1e−300. The classic σ = Δ√(2 log(1.25/δ))/ε is valid
only for ε < 1 (it is not (ε, δ)-DP for larger ε) and is larger than the analytic σ below 1.
E‖Z − x‖² = dσ² for every x. ε_exact = ε; ``delta_exact`` = δ(σ) ≤ δ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.math import _rows as rowmath
from ldpcli.math._lawtests import LawTest
from ldpcli.math._lazy import special
from ldpcli.mechanisms._base import Mechanism, OptionSpec, declare, register
from ldpcli.mechanisms._hooks import RiskEpsilon

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_SQRT_HALF_PI = 0.5 * math.log(math.pi / 2.0)
#: The pooled per-coordinate law tests use at most this many values (the first rows').
_LAW_MAX_VALUES = 2_000_000


# ---------------------------------------------------------------------------------------------
# Laplace
# ---------------------------------------------------------------------------------------------


@register(
    name="laplace",
    title="Laplace baseline (per-coordinate, ℓ1 sensitivity 2L√d)",
    calibrations=("classic",),
    baseline=True,
)
@dataclass(frozen=True)
class Laplace(Mechanism):
    """Per-coordinate Laplace noise on the ℓ2 ball of radius L (module docstring)."""

    b: float  # the Laplace scale 2L√d/ε

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> Laplace:
        """Laplace(b) noise with b = 2L√d/ε (``classic``, the only calibration)."""
        sensitivity = 2.0 * norm_bound * math.sqrt(d)
        b = sensitivity / epsilon
        while sensitivity / b > epsilon:  # never claim less than the realised ratio through rounding
            b = math.nextafter(b, math.inf)
        return cls(d, epsilon, norm_bound, calibration, b)

    @property
    def l1_sensitivity(self) -> float:
        """sup ‖x − x'‖₁ over the ℓ2 ball of radius L: 2L√d."""
        return 2.0 * self.norm_bound * math.sqrt(self.d)

    @property
    def epsilon_exact(self) -> float:
        """Δ₁/b, the worst-case log density ratio (attained at x = −x' = L·1/√d)."""
        return self.l1_sensitivity / self.b

    @property
    def expected_error(self) -> float:
        """d·2b² (the noise does not depend on x)."""
        return 2.0 * self.d * self.b**2

    @property
    def expected_error_max(self) -> float:
        """d·2b², the same for every x."""
        return self.expected_error

    def parameters(self) -> dict[str, Any]:
        """The noise scale b and the ℓ1 sensitivity."""
        return {"b": self.b, "l1_sensitivity": self.l1_sensitivity}

    def audit_epsilon(self) -> tuple[float, str]:
        """The log density ratio of the output at a worst-case pair, evaluated coordinate by coordinate.

        Analytically, for x, x' in the ball and any output z, log f(z | x) − log f(z | x') =
        Σ_j (|z_j − x'_j| − |z_j − x_j|)/b ≤ ‖x − x'‖₁/b ≤ √d·‖x − x'‖₂/b ≤ 2L√d/b (triangle
        inequality, Cauchy–Schwarz), with equality at x = −x' = L·(1, …, 1)/√d and z = x. That
        ratio is evaluated here numerically from the sampler's b: the d per-coordinate Laplace density
        ratios of z under x and under x' (their common factor 1/(2b) cancelled), in logs and in chunks
        (d = 10⁷ costs no memory), summed.
        """
        d, b = self.d, self.b
        x_j = self.norm_bound / math.sqrt(d)
        total = 0.0
        chunk = 1 << 20
        for start in range(0, d, chunk):
            n = min(chunk, d - start)
            z = np.full(n, x_j)
            x, x_other = np.full(n, x_j), np.full(n, -x_j)
            # log[(e^{−|z−x|/b}/2b)/(e^{−|z−x'|/b}/2b)] per coordinate; the common 1/(2b) cancels
            total += float(np.sum((np.abs(z - x_other) - np.abs(z - x)) / b))
        analytic = 2.0 * self.norm_bound * math.sqrt(d) / b
        if total > analytic * (1.0 + 1e-12):  # pragma: no cover - the triangle inequality would fail
            raise ArithmeticError(f"log density ratio {total!r} above its supremum {analytic!r}")
        return total, "log density ratio at the worst-case pair x = −x' = L·1/√d, z = x, summed over the d coordinates"

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """(Z − x)/b against Laplace(0, 1), all coordinates of all rows pooled (they are i.i.d.; KS,
        exact p-value), and for d ≥ 2 the row sums Σ_j |Z_j − x_j|/b against Gamma(d, 1) (KS): a
        noise shared between coordinates, or a wrong scale, changes both."""
        from scipy import stats

        from ldpcli.math import _lawtests as lawtests

        y = (z - self.domain.nearest(x[None, :], self.norm_bound)) / self.b
        flat = y.ravel()[:_LAW_MAX_VALUES]
        cdf = np.where(flat < 0.0, 0.5 * np.exp(np.minimum(flat, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(flat, 0.0)))
        tests = [lawtests.ks_uniform("(Z − x)/b ~ Laplace(0, 1), pooled", cdf)]
        if self.d >= 2:
            tests.append(lawtests.ks_uniform("Σ|Z_j − x_j|/b ~ Gamma(d, 1)", stats.gamma.cdf(np.abs(y).sum(axis=1), self.d)))
        return tests

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """x + Laplace(b)^d row by row (rows beyond L, within the slack, first scaled onto the sphere).

        Chunk by chunk of rows (:func:`~ldpcli.math._sphere.row_chunks`), so the noise and the rows
        meet in cache; the noise is drawn in row order, the same numbers as one draw of n·d."""
        n, d = x.shape
        out = np.empty((n, d))
        for rows in rowmath.row_chunks(n, d):
            out[rows] = rng.laplace(0.0, self.b, size=out[rows].shape)
            out[rows] += self.domain.nearest(x[rows], self.norm_bound)
        return out


# ---------------------------------------------------------------------------------------------
# Analytic Gaussian
# ---------------------------------------------------------------------------------------------


def gaussian_log_delta(ratio: float, epsilon: float) -> float:
    """log δ for x + N(0, σ²I) at level ε, with ratio = Δ/σ (Balle & Wang 2018, Thm 8).

    δ = Φ(r/2 − ε/r) − e^ε Φ(−r/2 − ε/r), r = Δ/σ; see the module docstring for the stable forms.
    """
    a = ratio / 2.0 - epsilon / ratio
    b = -ratio / 2.0 - epsilon / ratio
    if a <= 0.0:
        s2 = math.sqrt(2.0)
        diff = float(special.erfcx(-a / s2)) - float(special.erfcx(-b / s2))
        if diff <= 0.0:  # r → 0 (σ → ∞): δ → 0 faster than the two Mills ratios separate
            return -math.inf
        return -0.5 * a * a - _LOG_SQRT_2PI + _LOG_SQRT_HALF_PI + math.log(diff)
    return math.log(float(special.ndtr(a)) - math.exp(epsilon + float(special.log_ndtr(b))))


def gaussian_log_delta_by_quadrature(ratio: float, epsilon: float) -> float:
    """log δ(ε) = log ∫ (φ(t) − e^ε φ(t − r))₊ dt, r = Δ/σ, by adaptive quadrature (audits only).

    Independent of ``gaussian_log_delta`` (no Φ, erfcx or log_ndtr). The integrand is positive
    exactly where the privacy loss log φ(t)/φ(t − r) = r²/2 − rt exceeds ε, i.e. for t < a with
    a = r/2 − ε/r, and there φ(t) − e^ε φ(t − r) = φ(t)·(1 − e^{−r(a − t)}). With t = a − s,

        δ = φ(a)·e^M ∫_0^∞ e^{as − s²/2 − M}·(1 − e^{−rs}) ds,   M = max_s (as − s²/2) = max(a, 0)²/2,

    so log φ(a) + M is carried in log space and the integrand is at most 1. It is cut where the
    Gaussian factor falls below e^{−800}; break points form geometric ladders at the length scales
    1/r (the loss factor) and 1/max(|a|, 1) (the Gaussian factor), and around the peak s = a.
    """
    import warnings

    from scipy import integrate  # only audits need it

    r = ratio
    a = r / 2.0 - epsilon / r
    peak = max(a, 0.0)
    big_m = 0.5 * peak * peak
    s_max = a + 40.0 if a > 0.0 else 1600.0 / (math.sqrt(a * a + 1600.0) - a)

    def h(s: float) -> float:
        return math.exp(a * s - 0.5 * s * s - big_m) * -math.expm1(-r * s)

    points: set[float] = set()
    for scale in (1.0 / r, 1.0 / max(abs(a), 1.0)):
        points.update(scale * 2.0**j for j in range(-6, 64) if scale * 2.0**j < s_max)
    if a > 0.0:
        points.update(p for j in range(-6, 6) for p in (a - 2.0**j, a, a + 2.0**j) if 0.0 < p < s_max)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        value = integrate.quad(h, 0.0, s_max, points=sorted(points) or None, limit=2000, epsabs=0.0,
                               epsrel=1e-13)[0]
    return -0.5 * a * a - _LOG_SQRT_2PI + big_m + math.log(value)


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The textbook σ = Δ·√(2 log(1.25/δ))/ε (Dwork & Roth Thm A.1; valid only for ε < 1)."""
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest σ (to an ulp) with δ(σ) ≤ δ (Balle & Wang 2018, Thm 8, Alg. 1 by root finding)."""
    from scipy import optimize  # imported here: starting the CLI should not pay for it

    target = math.log(delta)

    def excess(log_ratio: float) -> float:  # increasing in r = Δ/σ
        return gaussian_log_delta(math.exp(log_ratio), epsilon) - target

    lo = hi = math.log(epsilon / math.sqrt(2.0 * math.log(1.25 / delta)))  # the classic ratio
    step = 1.0
    while excess(lo) > 0.0:
        lo -= step
        step *= 2.0
    step = 1.0
    while excess(hi) < 0.0:
        hi += step
        step *= 2.0
    if lo == hi:
        root = lo
    else:
        root = optimize.brentq(excess, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
    sigma = sensitivity / math.exp(root)
    while math.exp(gaussian_log_delta(sensitivity / sigma, epsilon)) > delta:  # as ``delta_exact`` computes it
        sigma = math.nextafter(sigma, math.inf)
    return sigma


@register(
    name="gaussian",
    title="Gaussian baseline ((ε, δ)-DP, analytic calibration of Balle & Wang 2018, ℓ2 sensitivity 2L)",
    calibrations=("analytic",),
    baseline=True,
)
@dataclass(frozen=True)
class Gaussian(Mechanism):
    """x + N(0, σ²I), (ε, δ)-DP with σ from the analytic Gaussian mechanism (module docstring)."""

    delta: float
    sigma: float

    options = declare(
        OptionSpec("delta", float, "δ of (ε, δ)-DP, required, 0 < δ < 1: the probability mass allowed to exceed e^ε",
                   1e-6, low=0.0, high=1.0, low_open=True, high_open=True, required=True),
    )

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> Gaussian:
        """The analytic Gaussian mechanism at (ε, δ), δ = ``delta`` (required)."""
        delta = options["delta"]
        sigma = analytic_gaussian_sigma(epsilon, delta, 2.0 * norm_bound)
        return cls(d, epsilon, norm_bound, calibration, delta, sigma)

    @property
    def l2_sensitivity(self) -> float:
        """sup ‖x − x'‖₂ over the ℓ2 ball of radius L: 2L."""
        return 2.0 * self.norm_bound

    def risk_epsilons(self) -> list[RiskEpsilon]:
        """None: with δ > 0 some outputs reveal more than e^ε (Bhowmick et al. 2018 Sec. 4.4.1), so
        Def. 2.3's protection for every output z does not hold."""
        return [RiskEpsilon("release", None, f"no per-output guarantee: (ε, δ)-DP with δ = {self.delta_exact:.3g} > 0 "
                            "bounds reconstruction only outside an event of probability about δ "
                            "(Bhowmick et al. 2018 Sec. 4.4.1)", True)]

    @property
    def delta_exact(self) -> float:
        """δ(σ) of Balle & Wang Thm 8 at the calibrated σ (≤ ``delta``)."""
        return math.exp(gaussian_log_delta(self.l2_sensitivity / self.sigma, self.epsilon))

    @property
    def epsilon_exact(self) -> float:
        """ε (the guarantee is the pair (ε, delta_exact))."""
        return self.epsilon

    @property
    def expected_error(self) -> float:
        """dσ² (the noise does not depend on x)."""
        return self.d * self.sigma**2

    @property
    def expected_error_max(self) -> float:
        """dσ², the same for every x."""
        return self.expected_error

    def parameters(self) -> dict[str, Any]:
        """σ, the requested δ and the δ attained by σ, and the ℓ2 sensitivity."""
        return {
            "sigma": self.sigma,
            "delta": self.delta,
            "delta_exact": self.delta_exact,
            "l2_sensitivity": self.l2_sensitivity,
        }

    def audit_epsilon(self) -> tuple[float, str]:
        """ε, after checking δ(ε) ≤ δ with δ(ε) integrated numerically from the privacy loss.

        The audited quantity of an (ε, δ) mechanism is δ: at the worst-case pair (‖x − x'‖ = 2L,
        reduced to one dimension along x − x'), δ(ε) = ∫ (φ(t) − e^ε φ(t − Δ/σ))₊ dt, here by
        adaptive quadrature in log space (``gaussian_log_delta_by_quadrature``, no Φ). If it is at
        most δ·(1 + 1e−9), ε is returned. Otherwise σ is too small: the ε it does achieve at δ
        (root of the integrated δ(ε') = δ) is returned, at least ε + 1e−6·max(1, ε), so the audit
        fails, and the route says so.
        """
        ratio = self.l2_sensitivity / self.sigma
        log_delta = math.log(self.delta)
        log_int = gaussian_log_delta_by_quadrature(ratio, self.epsilon)
        route = "δ(ε) = ∫(φ(t) − e^ε φ(t − Δ/σ))₊ dt by adaptive quadrature in log space (no Φ)"
        if log_int <= log_delta + math.log1p(1e-9):
            return self.epsilon, f"{route}: {math.exp(log_int):.6g} ≤ δ = {self.delta:.6g}, so ε holds"
        from scipy import optimize  # only audits need it

        def excess(eps: float) -> float:
            return gaussian_log_delta_by_quadrature(ratio, eps) - log_delta

        hi = 2.0 * self.epsilon
        while excess(hi) > 0.0:
            hi *= 2.0
        achieved = float(optimize.brentq(excess, self.epsilon, hi, xtol=1e-12, rtol=1e-12))
        return (
            max(achieved, self.epsilon + 1e-6 * max(1.0, self.epsilon)),
            f"{route}: {math.exp(log_int):.6g} EXCEEDS δ = {self.delta:.6g}; returned: the ε that σ achieves at δ",
        )

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """(Z − x)/σ against N(0, 1), all coordinates of all rows pooled (i.i.d.; KS, exact
        p-value), and for d ≥ 2 ‖Z − x‖²/σ² against χ²(d) (KS)."""
        from scipy import stats

        from ldpcli.math import _lawtests as lawtests

        y = (z - self.domain.nearest(x[None, :], self.norm_bound)) / self.sigma
        tests = [lawtests.ks_uniform("(Z − x)/σ ~ N(0, 1), pooled", special.ndtr(y.ravel()[:_LAW_MAX_VALUES]))]
        if self.d >= 2:
            tests.append(lawtests.ks_uniform("‖Z − x‖²/σ² ~ χ²(d)", stats.chi2.cdf(np.einsum("ij,ij->i", y, y), self.d)))
        return tests

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """x + N(0, σ²I) row by row (rows beyond L, within the slack, first scaled onto the sphere).

        Chunk by chunk of rows, as the Laplace baseline: the same numbers as one draw of n·d normals."""
        n, d = x.shape
        out = np.empty((n, d))
        for rows in rowmath.row_chunks(n, d):
            block = out[rows]
            rng.standard_normal(out=block)
            block *= self.sigma
            block += self.domain.nearest(x[rows], self.norm_bound)
        return out
