"""The log-space cap geometry and the samplers, checked against independent routes."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate, special, stats

from ldpcli.math import _logspace as logspace
from ldpcli.math import _sphere as sm

mp.mp.dps = 60


def mp_log_cap_probability(y: float, d: int) -> float:
    """log I_{s}(α, α), s = 1/(1 + e^y), in 60-digit arithmetic (a second, independent route)."""
    a = mp.mpf(d - 1) / 2
    s = 1 / (1 + mp.e ** mp.mpf(y))
    return float(mp.log(mp.betainc(a, a, 0, s, regularized=True)))


@pytest.mark.parametrize("d", [2, 3, 4, 5, 10, 64, 500])
@pytest.mark.parametrize("y", [1e-6, 0.01, 0.5, 2.0, 10.0, 50.0])
def test_log_cap_probability_matches_mpmath(d: int, y: float) -> None:
    ref = mp_log_cap_probability(y, d)
    assert sm.log_cap_probability(y, d) == pytest.approx(ref, rel=1e-11, abs=1e-13)


@pytest.mark.parametrize("d, y", [(4, 800.0), (10, 200.0), (100, 60.0), (500, 5.0), (2000, 2.0)])
def test_far_tail_continued_fraction_matches_mpmath(d: int, y: float) -> None:
    """Cap probabilities below 1e-300 (where 1 − betainc and betainc itself are 0)."""
    ref = mp_log_cap_probability(y, d)
    assert ref < -690.0
    assert sm.log_cap_probability(y, d) == pytest.approx(ref, rel=1e-12)


def test_cap_probability_by_quadrature_of_the_density() -> None:
    """A route without the incomplete beta: integrate (1 − t²)^{(d−3)/2} numerically."""
    for d in (4, 7, 30):
        for gamma in (0.05, 0.3, 0.7):
            dens = lambda t: (1.0 - t * t) ** ((d - 3) / 2.0)
            num = integrate.quad(dens, gamma, 1.0, epsabs=0, epsrel=1e-13)[0]
            den = integrate.quad(dens, -1.0, 1.0, epsabs=0, epsrel=1e-13)[0]
            y = sm.cap_logit_from_gamma(gamma)
            assert math.exp(sm.log_cap_probability(y, d)) == pytest.approx(num / den, rel=1e-9)


def test_closed_forms_d2_d3() -> None:
    for gamma in (0.0, 0.2, 0.9, 0.999):
        y = sm.cap_logit_from_gamma(gamma)
        assert math.exp(sm.log_cap_probability(y, 2)) == pytest.approx(math.acos(gamma) / math.pi, rel=1e-12)
        assert math.exp(sm.log_cap_probability(y, 3)) == pytest.approx((1 - gamma) / 2, rel=1e-12)


def test_cap_gap_fraction_matches_its_definition() -> None:
    """J = E[1 − T; T ≥ γ]/E[1 − T], by quadrature."""
    for d in (2, 3, 5, 40):
        for gamma in (0.1, 0.6):
            dens = lambda t: (1.0 - t * t) ** ((d - 3) / 2.0)
            num = integrate.quad(lambda t: (1 - t) * dens(t), gamma, 1.0, epsrel=1e-12)[0]
            den = integrate.quad(lambda t: (1 - t) * dens(t), -1.0, 1.0, epsrel=1e-12)[0]
            y = sm.cap_logit_from_gamma(gamma)
            assert math.exp(sm.log_cap_gap_fraction(y, d)) == pytest.approx(num / den, rel=1e-8)


def test_stable_helpers() -> None:
    assert logspace.log_expm1(1e-12) == pytest.approx(math.log(1e-12), rel=1e-10)
    assert logspace.log_expm1(5000.0) == 5000.0
    assert logspace.log1mexp(-1e-20) == pytest.approx(math.log(1e-20))
    assert logspace.log1mexp(-800.0) == pytest.approx(-math.exp(-800.0), rel=1e-12) or logspace.log1mexp(-800.0) == 0.0
    assert logspace.log_cosh(3000.0) == pytest.approx(3000.0 - math.log(2.0))
    assert sm.log_tanh_half(1e-8) == pytest.approx(math.log(5e-9), rel=1e-9)


def truncated_cdf(d: int, y: float, in_cap: bool):
    """CDF of T = ⟨V, u⟩ given the region, from the regularised incomplete beta."""
    a = (d - 1) / 2.0
    p_cap = math.exp(sm.log_cap_probability(y, d))
    gamma = math.tanh(y / 2)

    def cdf(t: np.ndarray) -> np.ndarray:
        s = (1 - np.asarray(t)) / 2
        if in_cap:  # 1 − P(T ≥ t)/P, from the upper tail (no cancellation when P is tiny)
            return np.clip(1 - special.betainc(a, a, s) / p_cap, 0, 1) * (np.asarray(t) >= gamma)
        return np.clip(special.betaincc(a, a, s) / (1 - p_cap), 0, 1)  # P(T ≤ t)/(1 − P)

    return cdf


@pytest.mark.parametrize(
    "d, path",
    [(2, "closed form"), (3, "closed form")] + [(d, path) for d in (4, 10, 500) for path in ("inverse CDF", "rejection")],
)
@pytest.mark.parametrize("gamma", [0.05, 0.5])
def test_cap_cosine_sampler_follows_the_truncated_law(
    d: int, path: str, gamma: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kolmogorov–Smirnov against the exact truncated law, both regions, each cap sampler, fixed seed."""
    if path == "inverse CDF":
        monkeypatch.setattr(sm, "_LOG_TANGENT_MIN_ACCEPTANCE", math.inf)
    elif path == "rejection":
        monkeypatch.setattr(sm, "_LOG_TANGENT_MIN_ACCEPTANCE", -math.inf)
    rng = np.random.default_rng(1234 + d)
    y = sm.cap_logit_from_gamma(gamma)
    log_p = sm.log_cap_probability(y, d)
    n = 20_000
    in_cap = np.arange(n) < n // 2
    t, r = sm.sample_cap_cosines(in_cap, y, log_p, d, rng)
    assert np.allclose(t * t + r * r, 1.0, atol=1e-12)
    assert np.all(t[in_cap] >= gamma - 1e-15) and np.all(t[~in_cap] <= gamma + 1e-15)
    for side in (True, False):
        res = stats.kstest(t[in_cap == side], truncated_cdf(d, y, side))
        assert res.pvalue > 1e-4, (d, gamma, side, res)


def test_far_tail_rejection_sampler_follows_the_truncated_law() -> None:
    """P = e^{−966}: S/s_γ on the cap has CDF I_{s_γ v}/I_{s_γ} — checked in log space."""
    d, y = 10, 220.0
    a = (d - 1) / 2.0
    log_p = sm.log_cap_probability(y, d)
    assert log_p < math.log(1e-280)
    rng = np.random.default_rng(7)
    n = 20_000
    t, r = sm.sample_cap_cosines(np.ones(n, dtype=bool), y, log_p, d, rng)
    log_s_gamma = logspace.log_expit(-y)
    # r = 2√(S(1 − S)) keeps the information that t = 1 − 2S has lost to rounding.
    v = np.exp(2 * np.log(r / 2) - log_s_gamma)  # S/s_γ (1 − S = 1 to double precision here)

    def cdf(x: np.ndarray) -> np.ndarray:
        x = np.clip(np.asarray(x, dtype=float), 1e-300, 1.0)
        s = np.exp(log_s_gamma + np.log(x))
        logs = np.array([sm.log_beta_cdf_small(si, log_s_gamma + math.log(xi), math.log1p(-si), a, a)
                         for si, xi in zip(s, x)])
        return np.exp(logs - log_p)

    sample = np.sort(v)[:: 20]  # thin for speed of the scalar CDF
    assert stats.kstest(sample, cdf).pvalue > 1e-4


def test_bernoulli_logit_tiny_probabilities_are_not_rounded_to_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chained path (used below 2^-20) has the right frequency; forced here at q ≈ 0.047."""
    monkeypatch.setattr(logspace, "_DIRECT_BERNOULLI_MIN", 1.0)
    rng = np.random.default_rng(3)
    n = 400_000
    for logit in (-3.0, -0.4, 2.5):
        q = special.expit(logit)
        hits = logspace.bernoulli_logit(logit, n, rng).sum()
        assert abs(hits - n * q) < 6 * math.sqrt(n * q * (1 - q))


def test_bernoulli_logit_draws_the_complement_of_p_near_one() -> None:
    """logit 12: 1 − p ≈ 6e−6, drawn through the chained path; a plain comparison would also work,
    but logit 50 must still give a complement with probability e^{−50} > 0 (checked structurally)."""
    rng = np.random.default_rng(5)
    n = 2_000_000
    q = special.expit(-12.0)
    misses = (~logspace.bernoulli_logit(12.0, n, rng)).sum()
    assert abs(misses - n * q) < 6 * math.sqrt(n * q)
    assert logspace.bernoulli_logit(-50.0, 10, rng).dtype == bool


def test_round_to_sphere_is_unbiased_and_unit() -> None:
    rng = np.random.default_rng(11)
    x = np.array([[0.6, -0.8, 0.0], [0.0, 0.0, 0.0], [1.2, 1.6, 0.0]])  # radius 2: ρ = 0.5, 0, 1
    n = 100_000
    u = sm.round_to_sphere(np.repeat(x, n, axis=0), 2.0, rng)
    assert np.allclose(np.linalg.norm(u, axis=1), 1.0)
    means = 2.0 * u.reshape(3, n, 3).mean(axis=1)
    assert np.all(np.abs(means - x) < 6 * 2 / math.sqrt(n))
    assert np.all(u[2 * n:] == x[2] / 2.0)  # on the sphere: never flipped


def test_directions_are_orthogonal_and_unit_even_when_nearly_parallel() -> None:
    rng = np.random.default_rng(2)
    n, d = 50_000, 2
    u = sm.random_unit_vectors(n, d, rng)
    t = np.full(n, 0.3)
    z = sm.directions_with_cosines(u, t, np.sqrt(1 - t * t), 2.0, rng)
    assert np.allclose(np.linalg.norm(z, axis=1), 2.0, rtol=1e-14, atol=0)
    assert np.allclose(np.einsum("ij,ij->i", z, u), 0.6, atol=1e-13)


@pytest.mark.parametrize("d", [2, 3, 10, 101, 500, 10**5, 10**7])
@pytest.mark.parametrize("y", [1e-6, 0.01, 1.0, 50.0])
def test_log_cap_normaliser_is_exact_at_every_dimension(d: int, y: float) -> None:
    """log c(γ) against 50-digit arithmetic: the betaln/2^{d−2} route lost 1e−8 relative at d = 10⁷."""
    a = mp.mpf(d - 1) / 2
    ref = -2 * a * mp.log(mp.cosh(mp.mpf(y) / 2)) - mp.log(d - 1) - (d - 2) * mp.log(2) - mp.log(mp.beta(a, a))
    assert sm.log_cap_normaliser(y, d) == pytest.approx(float(ref), rel=1e-15, abs=1e-15)


def test_log_cosh_small_and_large() -> None:
    for z in (1e-9, 1e-4, 0.3, 0.99, 1.0, 7.0, 800.0):
        assert logspace.log_cosh(z) == pytest.approx(float(mp.log(mp.cosh(mp.mpf(z)))), rel=1e-15)


@pytest.mark.parametrize("d, gamma", [(4, 0.3), (64, 0.2), (500, 0.02), (500, 0.2)])
def test_tangent_acceptance_formula(d: int, gamma: float) -> None:
    """The acceptance rate that picks the cap sampler equals the simulated one."""
    a, y = (d - 1) / 2, sm.cap_logit_from_gamma(gamma)
    log_p = sm.log_cap_probability(y, d)
    s_gamma = math.exp(logspace.log_expit(-y))
    lam = (a - 1) * (1 - 2 * s_gamma) / (1 - s_gamma)
    rng = np.random.default_rng(9)
    n = 200_000
    v = np.minimum(-np.log1p(rng.random(n) * math.expm1(-lam)) / lam, 1 - 1e-16)
    ratio = (a - 1) * (np.log1p(-v) + np.log(1 - s_gamma * (1 - v)) - math.log1p(-s_gamma)) + lam * v
    accepted = np.mean(np.log(rng.random(n)) < ratio)
    expected = math.exp(sm._log_tangent_acceptance(a, y, log_p))
    assert abs(accepted - expected) < 6 * math.sqrt(expected * (1 - expected) / n)
