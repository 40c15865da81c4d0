"""PrivUnitG: the Gaussian variant of PrivUnit (Asi, Feldman, Talwar 2022, Sec. 4).

Algorithm (Asi et al. Alg. 2): round the input x (‖x‖ ≤ L) without bias to a unit vector
u = ±x/‖x‖ (the rule of ``privunit2``: ``spheremath.round_to_sphere``). With σ = 1/√d and the
threshold γ = σ·c, c = Φ^{-1}(q), draw

    α ~ N(0, σ²) truncated to [γ, ∞) with probability p, to (−∞, γ) otherwise,
    V⊥ ~ N(0, σ²(I − uuᵀ)),   V = α·u + V⊥,

and release Z = L·V/m, where m = E[α] = σφ(c)·(p/(1 − q) − (1 − p)/q) (Alg. 2 line 10 and the
proof of Prop. 4, Lemma B.1: E[U·1{U ≥ γ}] = σφ(γ/σ)). Then E[Z | x] = x.

Privacy (Prop. 4; Thm 1 for the PrivUnit analogue, docs/errata.md §2): the output density is
p·f_U/(1 − q) on the half-space {⟨·, u⟩ ≥ γ} and (1 − p)·f_U/q off it, so the worst-case ratio is
exactly pq/((1 − p)(1 − q)): ε_exact = logit(p) + logit(q) (both half-spaces and their
differences have positive mass for every pair u ≠ u', so it is attained). Mixing over the random
rounding keeps the bound. Parameters are carried as logits (docs/errata.md "Numerics"): the split
ε₁ = logit(q) and logit(p) = ε − ε₁ (tight), never q itself, which rounds to 1 for ε₁ ≳ 37 (the
float artefact behind the paper's "C* ≈ 0.614", docs/errata.md §4). The threshold is
c = −Φ^{-1}(1 − q) with log(1 − q) = log expit(−ε₁), inverted by ``scipy.special.ndtri_exp``
(valid for 1 − q far below e^{−5000}); the split actually used is recomputed from the stored c,
ε₁ = log Φ(c) − log Φ(−c) (``log_ndtr``), and logit(p) = ε − ε₁, so ε_exact = ε for the
threshold the sampler really uses.

Error (Prop. 4, the exact form; docs/errata.md §3: App. B.3 and the proof of Thm 3 drop terms):

    Err = (E[α²] + (d − 1)/d)/m² − 1 = (Var z + d − 1)/μ²,   z = α/σ,  μ = E[z] = m/σ,

computed as a sum of positive terms, without the cancellation of E[α²] − m²:

    μ = p·λ₊ − (1 − p)·λ₋ = φ(c)·(e^ε − 1)·(1 − p)/q,
    Var z = p·v(c) + (1 − p)·v(−c) + p(1 − p)·(λ₊ + λ₋)²,

with λ₊ = φ(c)/(1 − Φ(c)) and λ₋ = φ(c)/Φ(c) (the two conditional means are λ₊ and −λ₋, taken
from ``erfcx`` to full precision) and v(c) = Var(N(0,1) | ≥ c) (``truncated_normal_variance``).
The product form of μ (from p/(1 − q) − (1 − p)/q = (p + q − 1)/(q(1 − q)) and
p + q − 1 = (e^ε − 1)(1 − p)(1 − q) when logit p + logit q = ε) is used where the difference
would cancel (small ε); the difference elsewhere, since there the product form would inherit the
absolute rounding (≈ 1e−12 at ε = 10⁴) of ε₁ = log Φ(c) − log Φ(−c). For ‖x‖ = L the error is
L²·Err; at x = 0 it is L²(Err + 1) (``expected_error_max``); in between L²(Err + 1) − ‖x‖².

Calibration ``optimal``: minimise Err over the split ε₁ ∈ [−ε − 1, ε + 1] by bounded Brent
iteration on log Err, a continuous 1-D optimisation (Err grows without bound towards both ends;
dense scans in the tests find one minimum, inside (0, ε)). ε₁ is located to ≈ 1e−8 relative,
which costs nothing measurable since Err is stationary there; log Err itself is evaluated to
≈ 1e−14 (terms of size ε cancel in it). ε·Err/d = C_{ε,d} (Sec. 4.1) decreases towards 1/2 as
ε → ∞ (docs/errata.md §4).

Sampling is exact: the Bernoulli(p) choice uses ``bernoulli_logit`` (exact for p or 1 − p below
2^−53), and z is drawn from the truncated normal by the inverse CDF in log space,
z = −Φ^{-1}((1 − Φ(c))·U) or Φ^{-1}(Φ(c)·U), with log U = −E, E ~ Exp(1) (no resolution floor
in the tail), each inverse taken on the side where the probability is small.

d = 1: Alg. 2 applies verbatim (V⊥ = 0, Z = L·z·u/μ with u = ±1 a continuous scalar law). It is
exactly ε-DP and unbiased, but randomized response (``privunit2`` at d = 1) is optimal there and
far better at large ε (error 1/sinh²(ε/2) against ≈ 1/(4ε²) for large ε); it exists for its large-d
behaviour and is kept literal at d = 1 rather than silently replaced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.math import _logspace as logspace
from ldpcli.math import _rows as rowmath
from ldpcli.math._kernels import compiled, normal_chunks
from ldpcli.math._lawtests import LawTest
from ldpcli.math._lazy import special
from ldpcli.mechanisms._base import Mechanism, register
from ldpcli.mechanisms._hooks import OutputBranch

#: The audit's branches (``output_branches``) are read at inputs whose rounding keeps +u but with this probability.
_FLIP_NEGLIGIBLE = 2e-12
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF_PI = math.sqrt(math.pi / 2.0)


def _log_phi(c: float) -> float:
    """log φ(c), the standard normal log-density."""
    return -0.5 * c * c - _LOG_SQRT_2PI


def truncated_normal_variance(c: float) -> float:
    """v(c) = Var(Z | Z ≥ c) for Z ~ N(0, 1), to full relative precision for every real c.

    v = 1 + cλ − λ² with λ = φ(c)/(1 − Φ(c)) cancels catastrophically for c ≫ 1 (v ≈ 1/c²). For
    c ≥ 1 Laplace's continued fraction of the Mills ratio, 1/R(c) = c + t₁, t_k = k/(c + t_{k+1}),
    gives λ − c = t₁ = 1/(c + t₂) without cancellation, and then
    v = 1 − (c + t₁)t₁ = (t₂ − t₁)/(c + t₂), a difference of quantities ≈ 2/c and 1/c. The fraction
    is evaluated backwards from a depth at which it has converged to double precision.
    """
    if c < 1.0:
        lam = math.exp(_log_phi(c) - float(special.log_ndtr(-c)))
        return 1.0 + c * lam - lam * lam
    depth = 1000 if c < 2.0 else (200 if c < 5.0 else 60)
    t = 0.0
    t2 = 0.0
    for k in range(depth, 0, -1):
        t = k / (c + t)
        if k == 2:
            t2 = t
    return (t2 - t) / (c + t2)


def threshold_from_split(eps1: float) -> float:
    """c = Φ^{-1}(q) for logit(q) = ε₁, inverting on the side where the probability is small."""
    if eps1 >= 0.0:
        return -float(special.ndtri_exp(logspace.log_expit(-eps1)))
    return float(special.ndtri_exp(logspace.log_expit(eps1)))


def _ndtri_log(log_y: np.ndarray) -> np.ndarray:
    """Φ^{-1}(e^{log_y}) elementwise, accurate on both sides (ndtri_exp loses accuracy near log_y = 0)."""
    out = np.empty_like(log_y)
    small = log_y <= -logspace.LOG2
    out[small] = special.ndtri_exp(log_y[small])
    big = log_y[~small]
    with np.errstate(divide="ignore"):
        out[~small] = -special.ndtri_exp(np.log(-np.expm1(big)))  # 1 − y ≤ 1/2, exact from log y
    return out


@dataclass(frozen=True)
class _Split:
    """Everything the error and the sampler need at one threshold c (standard-normal units)."""

    threshold: float  # c = γ/σ
    logit_p: float
    log_q: float  # log Φ(c)
    log_1mq: float  # log(1 − Φ(c))
    log_mu: float  # log E[z], z = α/σ
    var_z: float  # Var z


def inverse_mills(c: float) -> float:
    """λ(c) = φ(c)/(1 − Φ(c)) = E[Z | Z ≥ c], to full relative precision (erfcx for c ≥ 0)."""
    if c >= 0.0:
        return 1.0 / (_SQRT_HALF_PI * float(special.erfcx(c / math.sqrt(2.0))))
    return math.exp(_log_phi(c)) / float(special.ndtr(-c))


def split_at_threshold(c: float, epsilon: float) -> _Split:
    """The tight split at threshold c: logit(p) = ε − logit Φ(c), with μ and Var z (module docstring)."""
    log_q = float(special.log_ndtr(c))
    log_1mq = float(special.log_ndtr(-c))
    eps1 = log_q - log_1mq
    logit_p = epsilon - eps1
    while logit_p + eps1 > epsilon:  # never claim more than ε through a rounding of the sum
        logit_p = math.nextafter(logit_p, -math.inf)
    log_p, log_1mp = logspace.log_expit(logit_p), logspace.log_expit(-logit_p)
    lam_up, lam_low = inverse_mills(c), inverse_mills(-c)  # E[z | upper] = λ₊, E[z | lower] = −λ₋
    up, low = math.exp(log_p) * lam_up, math.exp(log_1mp) * lam_low
    if up > 0.0 and low <= 0.5 * up:
        # μ = p·λ₊ − (1 − p)·λ₋ loses at most one bit here, and is exact for the law sampled even
        # where ε₁ = log Φ(c) − log Φ(−c) carries an absolute rounding of 1e−12 (ε₁ ≈ 10⁴).
        log_mu = math.log(up - low)
    else:
        # small ε: the product form μ = φ(c)(e^ε − 1)(1 − p)/q has no cancellation
        log_mu = _log_phi(c) + logspace.log_expm1(logit_p + eps1) + log_1mp - log_q
    var_z = (
        math.exp(log_p) * truncated_normal_variance(c)
        + math.exp(log_1mp) * truncated_normal_variance(-c)
        + math.exp(log_p + log_1mp) * (lam_up + lam_low) ** 2
    )
    return _Split(c, logit_p, log_q, log_1mq, log_mu, var_z)


def log_error(d: int, split: _Split) -> float:
    """log Err, Err = (Var z + d − 1)/μ² (Asi et al. Prop. 4, exact form; docs/errata.md §3), for L = 1."""
    return math.log((d - 1) + split.var_z) - 2.0 * split.log_mu


def optimal_split(d: int, epsilon: float) -> _Split:
    """The error-minimising tight split: bounded Brent iteration on log Err over ε₁."""
    from scipy import optimize  # imported here: starting the CLI should not pay for it

    def objective(eps1: float) -> float:
        return log_error(d, split_at_threshold(threshold_from_split(eps1), epsilon))

    res = optimize.minimize_scalar(
        objective, bounds=(-epsilon - 1.0, epsilon + 1.0), method="bounded",
        options={"xatol": 1e-12, "maxiter": 2000},
    )
    return split_at_threshold(threshold_from_split(float(res.x)), epsilon)


def sample_split_normal(
    upper: np.ndarray, c: float, log_q: float, log_1mq: float, rng: np.random.Generator
) -> np.ndarray:
    """z ~ N(0, 1) truncated to [c, ∞) where ``upper``, to (−∞, c) elsewhere; exact inverse CDF.

    Upper: 1 − Φ(z) = (1 − Φ(c))·U; lower: Φ(z) = Φ(c)·U; log U = −E with E ~ Exp(1), so the
    tails are resolved to any depth. Values that rounding puts across c are set to c.
    """
    log_u = -rng.standard_exponential(upper.shape[0])
    w = _ndtri_log(np.where(upper, log_1mq, log_q) + log_u)
    z = np.where(upper, -w, w)
    return np.where(upper, np.maximum(z, c), np.minimum(z, c))


def normal_tail_log_by_quadrature(c: float) -> float:
    """log(1 − Φ(c)) for c ≥ 0 by adaptive quadrature of the normal density (audits only).

    Independent of ``special.log_ndtr``: 1 − Φ(c) = ∫_c^∞ φ(t) dt = φ(c)·∫_0^∞ e^{−cs − s²/2} ds
    (t = c + s), so log φ(c) = −c²/2 − ½ log 2π is carried in log space and the integrand is at
    most 1 (at s = 0). It is negligible (< e^{−800}) beyond s_max = √(c² + 1600) − c; break points
    form a geometric ladder above s = 0 at the integrand's length scale 1/max(c, 1). Good to
    ~1e−13 relative from c = 0 to c in the hundreds (tails far below 1e−300).
    """
    import warnings

    from scipy import integrate  # only audits need it

    if c < 0.0:
        raise ValueError(f"the tail by quadrature needs c >= 0, got {c!r}")
    s_max = 1600.0 / (math.sqrt(c * c + 1600.0) + c)  # = √(c² + 1600) − c without cancellation
    scale = 1.0 / max(c, 1.0)
    points = [scale * 2.0**j for j in range(-8, 64) if scale * 2.0**j < s_max]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        value = integrate.quad(
            lambda s: math.exp(-s * (c + 0.5 * s)), 0.0, s_max, points=points or None, limit=1000,
            epsabs=0.0, epsrel=1e-13,
        )[0]
    return -0.5 * c * c - 0.5 * math.log(2.0 * math.pi) + math.log(value)


@register(
    name="privunitg",
    title="PrivUnitG (Asi, Feldman, Talwar 2022, Alg. 2; optimal split)",
    calibrations=("optimal",),
)
@dataclass(frozen=True)
class PrivUnitG(Mechanism):
    """PrivUnitG on the ℓ2 ball of radius L (see the module docstring for the formulas)."""

    threshold: float  # c = γ/σ = Φ^{-1}(q)
    logit_p: float  # logit of p, the probability of the upper half-space
    log_q: float  # log q = log Φ(c)
    log_one_minus_q: float  # log(1 − q) = log Φ(−c)
    log_mu: float  # log μ, μ = E[α]/σ = m√d
    var_z: float  # Var(α/σ)

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> PrivUnitG:
        """PrivUnitG at level ε in dimension d with the error-minimising tight split (``optimal``)."""
        s = optimal_split(d, epsilon)
        return cls(d, epsilon, norm_bound, calibration, s.threshold, s.logit_p, s.log_q, s.log_1mq, s.log_mu,
                   s.var_z)

    @property
    def q_logit(self) -> float:
        """ε₁ = logit(q) = log Φ(c) − log Φ(−c): the share of ε spent by the threshold."""
        return self.log_q - self.log_one_minus_q

    @property
    def sigma(self) -> float:
        """σ = 1/√d."""
        return 1.0 / math.sqrt(self.d)

    @property
    def gamma(self) -> float:
        """γ = σ·c = σ·Φ^{-1}(q)."""
        return self.threshold * self.sigma

    @property
    def p(self) -> float:
        """The probability of drawing α above γ."""
        return math.exp(logspace.log_expit(self.logit_p))

    @property
    def m(self) -> float:
        """The normaliser m = E[α] = σφ(γ/σ)(p/(1 − q) − (1 − p)/q) (Alg. 2 line 10)."""
        return math.exp(self.log_mu) * self.sigma

    @property
    def epsilon_exact(self) -> float:
        """logit(p) + logit(q) (Asi et al. Prop. 4: the worst-case density ratio pq/((1 − p)(1 − q)))."""
        return self.logit_p + self.q_logit

    @property
    def expected_error(self) -> float:
        """L²·(Var z + d − 1)/μ² = L²·((E[α²] + (d − 1)/d)/m² − 1) for ‖x‖ = L (Prop. 4)."""
        return self.norm_bound**2 * math.exp(math.log((self.d - 1) + self.var_z) - 2.0 * self.log_mu)

    @property
    def expected_error_max(self) -> float:
        """L²·(E[α²] + (d − 1)/d)/m² = expected_error + L², attained at x = 0."""
        return self.expected_error + self.norm_bound**2

    @property
    def output_scale(self) -> float:
        """s = L/μ, the public factor of the output Z = s·(z·u + g⊥) (Alg. 2: L·V/m with V = σ(z·u + g⊥), m = σμ)."""
        return self.norm_bound * math.exp(-self.log_mu)

    @property
    def radial_second_moment(self) -> float:
        """E[z²] = Var z + μ², z = α/σ the truncated-normal mixture along u."""
        return self.var_z + math.exp(2.0 * self.log_mu)

    def split_normals(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """The per-row z = α/σ (Alg. 2 lines 4–8): the half-space choices, then the truncated normals."""
        upper = logspace.bernoulli_logit(self.logit_p, rows, rng)
        return sample_split_normal(upper, self.threshold, self.log_q, self.log_one_minus_q, rng)

    def radial_cdf(self, v: np.ndarray) -> np.ndarray:
        """P(z ≤ v) for z = α/σ, the truncated-normal mixture p·N(0, 1)|[c, ∞) + (1 − p)·N(0, 1)|(−∞, c)
        (Alg. 2 lines 4–8), elementwise, from ``log_ndtr`` on the side where it is small."""
        c, p, q = self.threshold, math.exp(logspace.log_expit(self.logit_p)), math.exp(logspace.log_expit(-self.logit_p))
        up = v >= c
        out = np.empty_like(v)
        out[up] = 1.0 - p * np.exp(special.log_ndtr(-v[up]) - self.log_one_minus_q)
        out[~up] = q * np.exp(special.log_ndtr(v[~up]) - self.log_q)
        return out

    def second_moments(self) -> tuple[float, float]:
        """(L²·(Var z/μ² + 1), L²/μ²): Z = (L/μ)·(z·u + g⊥) with E[z] = μ and g⊥ ~ N(0, I − uuᵀ) (Alg. 2)."""
        across = self.norm_bound**2 * math.exp(-2.0 * self.log_mu)
        return self.norm_bound**2 + self.var_z * across, (across if self.d > 1 else 0.0)

    def parameters(self) -> dict[str, Any]:
        """p, the split logits, γ, σ and m (the output norm is not constant: ``scale`` is None)."""
        return {
            "p": self.p,
            "p_logit": self.logit_p,
            "q_logit": self.q_logit,
            "log_one_minus_q": self.log_one_minus_q,
            "gamma": self.gamma,
            "sigma": self.sigma,
            "m": self.m,
        }

    def audit_epsilon(self) -> tuple[float, str]:
        """ε from the sampler's threshold c and logit(p), with Φ(c) by quadrature of the normal density.

        A second route, sharing no code with ``log_ndtr``/``ndtri_exp``: the smaller side of the
        split, Φ(−|c|), is φ(|c|)·∫_0^∞ e^{−|c|s − s²/2} ds (``normal_tail_log_by_quadrature``), the
        larger side is 1 minus it, and ε = logit(p) + log Φ(c) − log Φ(−c) (Prop. 4: the density
        ratio p·q/((1 − p)(1 − q)) between the two half-spaces). A stored ``log_q`` that does not
        belong to ``threshold`` shows up here as a disagreement.
        """
        c = self.threshold
        log_small = normal_tail_log_by_quadrature(abs(c))  # log Φ(−|c|) ≤ log ½
        log_large = math.log1p(-math.exp(log_small))
        log_q, log_1mq = (log_large, log_small) if c >= 0.0 else (log_small, log_large)
        return (
            self.logit_p + log_q - log_1mq,
            "Φ(c) by adaptive quadrature of the normal density in log space (no log_ndtr), ε = logit p + logit Φ(c)",
        )

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """The exact law of Z = (L/μ)·(z·u_s + g⊥) (Alg. 2), u_s = ±u the rounding of x.

        x ≠ 0 (or d = 1): t = ⟨Z, u⟩·μ/L against the mixture, over the rounding sign, of the
        truncated-normal mixture p·N(0, 1)|[c, ∞) + (1 − p)·N(0, 1)|(−∞, c) (KS, exact p-value; the
        CDF from ``log_ndtr`` on the side where it is small); the orthogonal part Z⊥·μ/L is
        N(0, I − uuᵀ) independently: ‖Z⊥‖²μ²/L² ~ χ²_{d−1} and ⟨Z⊥, w_k⟩μ/L ~ N(0, 1) for fixed
        unit w_k ⊥ u (KS each). x = 0, d ≥ 2: the law is rotation invariant, so the direction
        Z/‖Z‖ is uniform on the sphere (KS of its cosine with fixed directions).
        """
        from scipy import stats

        from ldpcli.math import _lawtests as lawtests

        n, d = z.shape
        u, rho = lawtests.rounding_weights(x, self.norm_bound)
        if u is None:
            if d >= 2:
                return lawtests.uniform_direction_tests(lawtests.unit_rows(z)[0], d)
            u = np.ones(1)
        scaled = z * (math.exp(self.log_mu) / self.norm_bound)
        t = scaled @ u
        cdf = self.radial_cdf
        mixture = (1.0 + rho) / 2.0 * cdf(t) + (1.0 - rho) / 2.0 * (1.0 - cdf(-t))
        sign = "" if rho >= 1.0 - 1e-12 else " × rounding ±u"
        tests = [lawtests.ks_uniform(f"⟨Z, u⟩μ/L ~ truncated-normal mixture{sign}", mixture)]
        if d == 1:
            return tests
        perp, norms = lawtests.orthogonal_parts(scaled, u)
        tests.append(lawtests.ks_uniform("‖Z⊥‖²μ²/L² ~ χ²(d − 1)", stats.chi2.cdf(norms**2, d - 1)))
        for i, w in enumerate(lawtests.fixed_directions(d, orthogonal_to=u)):
            tests.append(lawtests.ks_uniform(f"⟨Z⊥, w{i + 1}⟩μ/L ~ N(0, 1), w{i + 1} ⊥ u",
                                              special.ndtr(perp @ w)))
        return tests

    def _cap_axis(self, x: np.ndarray) -> np.ndarray:
        """u = x/‖x‖ where the rounding keeps it, u_s = −u having probability (1 − ‖x‖/L)/2 ≤ 1e−12 (‖x‖ = L
        up to rounding: a row drawn with u_s = −u, so rare, is read as the other branch); NotImplementedError
        elsewhere, where the hidden sign of u_s = ±u mixes the cap event with its complement."""
        norm = float(np.sqrt(np.dot(x, x)))
        if norm == 0.0 or 1.0 - norm / self.norm_bound > _FLIP_NEGLIGIBLE:
            raise NotImplementedError(
                "privunitg's cap event is read from the output only where the rounding keeps u = x/‖x‖ (‖x‖ = L): "
                "inside the ball a row of the cap about −u and one off the cap about +u give the same outputs"
            )
        return x / norm

    def output_branches(self, x: np.ndarray) -> list[OutputBranch]:
        """The cap event of Alg. 2 (α ≥ γ, probability p) and its complement, for ‖x‖ = L.

        Z = (L/μ)·(z·u + g⊥) with z the truncated normal of the branch, independent of g⊥ ~ N(0, I − uuᵀ):
        E[z | cap] = λ₊, E[z | off] = −λ₋ (Lemma B.1), Var(z | cap) = v(c), Var(z | off) = v(−c). So the
        means are (L/μ)·λ₊·u and −(L/μ)·λ₋·u, and E[‖Z − x‖² | branch] = (L/μ)²·((E[z | b] − μ)² + Var(z | b) + d − 1),
        with λ₊ − μ = (1 − p)(λ₊ + λ₋) and −λ₋ − μ = −p(λ₊ + λ₋), sums of positive terms. Their mixture
        gives back E[Z] = x and ``expected_error`` (Prop. 4). Inside the ball: NotImplementedError (``_cap_axis``).
        """
        u = self._cap_axis(x)
        c, scale = self.threshold, self.output_scale
        p, not_p = math.exp(logspace.log_expit(self.logit_p)), math.exp(logspace.log_expit(-self.logit_p))
        lam_up, lam_low = inverse_mills(c), inverse_mills(-c)
        spread = lam_up + lam_low
        across = self.d - 1
        return [
            OutputBranch("cap: α ≥ γ", p, scale * lam_up * u,
                         scale**2 * ((not_p * spread) ** 2 + truncated_normal_variance(c) + across)),
            OutputBranch("off the cap: α < γ", not_p, -scale * lam_low * u,
                         scale**2 * ((p * spread) ** 2 + truncated_normal_variance(-c) + across)),
        ]

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """0 where ⟨Z, u⟩·μ/L = z ≥ c (the cap event), 1 elsewhere, for ‖x‖ = L (``output_branches``).

        The sampler puts z on its side of c exactly (``sample_split_normal``); only a row with z within
        the output's rounding (≈ 1e−16·(|z| + ‖g‖)) of c can read as the other branch.
        """
        u = self._cap_axis(x)
        return (z @ u * math.exp(self.log_mu) / self.norm_bound < self.threshold).astype(np.int64)

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """PrivUnitG on each row of ``x`` (rows with ‖x‖ ≤ L): L·(α·u + V⊥)/m row by row.

        Draw order: the n rounding uniforms, the n half-space choices and the n truncated normals z,
        then d normals per row (:func:`fused_rows`).
        """
        n = x.shape[0]
        flips: np.ndarray = rng.random((n,))
        z = self.split_normals(n, rng)
        return fused_rows(x, self.norm_bound, flips, z, self.output_scale, rng)


def fused_rows(
    x: np.ndarray, radius: float, flips: np.ndarray, z: np.ndarray, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """scale·(z_i·u + g⊥) per row (Asi et al. Alg. 2, V = α·u + V⊥ with V⊥/σ = g − ⟨g, u⟩u), u = ±x/‖x‖
    the rounding of each row by its uniform ``flips[i]`` (``spheremath.round_to_sphere``).

    One read of x and one write of the output: chunk by chunk of rows (``spheremath.rounded_chunks``),
    or one compiled loop per row with numba (:mod:`ldpcli.math._kernels`); both draw the d normals
    of each row in row order, so they agree to rounding whatever the chunk. A zero row, whose u is
    uniform, is finished by :func:`finish_zero_rows` from its own normals.
    """
    n, d = x.shape
    out = np.empty((n, d))
    zero = np.zeros(n, dtype=bool)
    kernels = compiled(rng, given_draws=True)
    if kernels is not None:
        rows_in = np.ascontiguousarray(x, dtype=np.float64)
        for rows, source in normal_chunks(rng, out):
            kernels.gaussian_about_cosines(
                rows_in[rows], flips[rows], radius, z[rows], scale, source, out[rows], zero[rows])
    else:
        with rowmath.row_buffers(d):
            for rows, u, zero_rows in rowmath.rounded_chunks(x, flips, radius):
                zero[rows] = zero_rows
                g = out[rows]
                rng.standard_normal(out=g)
                u *= (z[rows] - np.vecdot(g, u))[:, None]
                g += u
                g *= scale
    if zero.any():
        finish_zero_rows(out, zero, flips, z, scale)
    return out


def finish_zero_rows(out: np.ndarray, zero: np.ndarray, flips: np.ndarray, z: np.ndarray, scale: float) -> None:
    """Rows of x = 0: ``out[zero]`` holds multiples of their normals g; make them scale·ρ·g/‖g‖.

    With u uniform, V = z·u + g⊥ is rotation invariant, so its direction is uniform (g/‖g‖) and
    independent of its norm ρ = √(z² + ‖g⊥‖²), with ‖g⊥‖² ~ χ²(d − 1) independent of z. That χ² is
    drawn by inverting its CDF at the row's rounding uniform, unused for a zero row:
    2·P⁻¹((d − 1)/2, flip), P the regularized lower incomplete gamma (0 at d = 1).
    """
    d = out.shape[1]
    g = out[zero]
    chi2 = 2.0 * special.gammaincinv((d - 1) / 2.0, flips[zero]) if d > 1 else np.zeros(g.shape[0])
    g *= (scale * np.sqrt(z[zero] ** 2 + chi2) / rowmath.row_norms(g))[:, None]
    out[zero] = g
