"""duchi-l2 (the hemisphere mechanism): corrected radius (ERRATA 11), PrivUnit2 at γ = 0, Monte Carlo."""

from __future__ import annotations

import dataclasses
import json
import math

import mpmath as mp
import numpy as np
import pytest
from helpers import D_GRID, EPS_GRID, bonferroni_z
from scipy import integrate, special, stats

from ldpcli.errors import UsageError
from ldpcli.math import _logspace as logspace
from ldpcli.math._sphere import log_gamma_half_ratio
from ldpcli.mechanisms import PrivUnit2, get_mechanism
from ldpcli.mechanisms._hemisphere import DuchiL2
from ldpcli.mechanisms._privunit import _log_m, _log_one_minus_m

mp.mp.dps = 50


def mp_radius(d: int, eps: float, norm_bound: float = 1.0) -> mp.mpf:
    """B = L·coth(ε/2)·√π·Γ((d + 1)/2)/Γ(d/2) in 50 digits (ERRATA 11)."""
    half = mp.mpf(eps) / 2
    return norm_bound * mp.cosh(half) / mp.sinh(half) * mp.sqrt(mp.pi) * mp.gamma(mp.mpf(d + 1) / 2) / mp.gamma(
        mp.mpf(d) / 2)


def privunit2_at_gamma_zero(d: int, eps: float, norm_bound: float = 1.0) -> PrivUnit2:
    """PrivUnit2 with γ = 0 and p = e^ε/(1 + e^ε), built from its own formulas (Bhowmick Eq. 15)."""
    if d == 1:
        return PrivUnit2.calibrate(1, eps, norm_bound=norm_bound)  # randomized response, logit p = ε
    return PrivUnit2(d=d, epsilon=eps, norm_bound=norm_bound, calibration="optimal", cap_logit=0.0, logit_p=eps,
                     log_cap_probability=-logspace.LOG2, log_m=_log_m(d, 0.0, eps, -logspace.LOG2),
                     log_one_minus_m=_log_one_minus_m(d, 0.0, eps, -logspace.LOG2))


# --- registry and interface --------------------------------------------------------------------


def test_registered_with_its_interface() -> None:
    assert get_mechanism("duchi-l2") is DuchiL2
    assert DuchiL2.calibrations == ("classic",) and DuchiL2.domain == "l2-ball" and not DuchiL2.baseline
    mech = DuchiL2.calibrate(20, 1.5, norm_bound=2.0)
    info = json.loads(json.dumps(mech.describe()))
    assert info["scale"] == pytest.approx(info["B"] / 2.0, rel=1e-15)
    assert info["epsilon_exact"] == 1.5 and info["gamma"] == 0.0
    again = DuchiL2.calibrate(info["d"], info["epsilon"], norm_bound=info["norm_bound"],
                              calibration=info["calibration"], **mech.option_values())
    assert again == mech


@pytest.mark.parametrize("bad", [dict(d=0, epsilon=1.0), dict(d=3, epsilon=-1.0), dict(d=3, epsilon=math.nan),
                                 dict(d=3, epsilon=1.0, norm_bound=math.inf),
                                 dict(d=3, epsilon=1.0, calibration="paper"), dict(d=3, epsilon=1.0, delta=0.1)])
def test_impossible_parameters_are_usage_errors(bad: dict) -> None:
    with pytest.raises(UsageError):
        DuchiL2.calibrate(**bad)


# --- the radius ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3, 4, 7, 50, 99, 100, 101, 150, 1000, 12_345, 10**5, 10**7, 10**9])
def test_gamma_ratio_matches_mpmath(d: int) -> None:
    ref = mp.log(mp.gamma(mp.mpf(d + 1) / 2) / mp.gamma(mp.mpf(d) / 2))
    assert log_gamma_half_ratio(d) == pytest.approx(float(ref), rel=1e-15, abs=1e-16)


@pytest.mark.parametrize("d", [1, 2, 3, 10, 500, 10**7])
@pytest.mark.parametrize("eps", [0.01, 1.0, 8.0, 100.0, 10_000.0])
def test_radius_matches_mpmath(d: int, eps: float) -> None:
    mech = DuchiL2.calibrate(d, eps, norm_bound=0.5)
    ref = mp_radius(d, eps, 0.5)
    assert mech.radius == pytest.approx(float(ref), rel=1e-14)
    assert mech.expected_error == pytest.approx(float(ref**2 - mp.mpf(0.25)), rel=1e-13)
    assert mech.expected_error_max == pytest.approx(float(ref**2), rel=1e-14)


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 4.0, 30.0, 100.0, 700.0, 10_000.0])
def test_closed_forms_d1_d2_d3(eps: float) -> None:
    """d = 1: randomized response, B = L·coth(ε/2), error 1/sinh²(ε/2); d = 2: B = L·coth(ε/2)·π/2;
    d = 3: B = 2L·coth(ε/2)."""
    coth = float(1 / mp.tanh(mp.mpf(eps) / 2))
    assert DuchiL2.calibrate(1, eps).scale == pytest.approx(coth, rel=1e-15)
    assert DuchiL2.calibrate(1, eps, norm_bound=3.0).radius == pytest.approx(3 * coth, rel=1e-15)
    assert DuchiL2.calibrate(1, eps).expected_error == pytest.approx(float(1 / mp.sinh(mp.mpf(eps) / 2) ** 2),
                                                                     rel=1e-13)
    assert DuchiL2.calibrate(2, eps).scale == pytest.approx(coth * math.pi / 2, rel=1e-15)
    assert DuchiL2.calibrate(3, eps).scale == pytest.approx(2 * coth, rel=1e-15)


def test_printed_radius_is_twice_the_corrected_one() -> None:
    """ERRATA 11: App. C.2 prints B = L·(e^ε+1)/(e^ε−1)·√π·d·Γ((d−1)/2 + 1)/Γ(d/2 + 1) = 2 × ours."""
    for d in (1, 2, 3, 10, 1000):
        eps = 1.3
        printed = mp.coth(mp.mpf(eps) / 2) * mp.sqrt(mp.pi) * d * mp.gamma(mp.mpf(d - 1) / 2 + 1) / mp.gamma(
            mp.mpf(d) / 2 + 1)
        assert float(printed) == pytest.approx(2 * DuchiL2.calibrate(d, eps).radius, rel=1e-13)


@pytest.mark.parametrize("d, n", [(1, 200_000), (3, 200_000), (20, 100_000)])
def test_printed_radius_gives_twice_the_mean(d: int, n: int) -> None:
    """With the printed (factor-2) B the mechanism's mean is 2x: an unbiasedness test fails on it."""
    mech = DuchiL2.calibrate(d, 2.0)
    printed = dataclasses.replace(mech, log_scale=mech.log_scale + math.log(2.0))
    rng = np.random.default_rng(40 + d)
    x = np.zeros(d)
    x[0] = 0.8
    for m, target in ((mech, x), (printed, 2 * x)):
        z = m.privatize(np.tile(x, (n, 1)), rng)
        se = z.std(axis=0, ddof=1) / math.sqrt(n)
        assert np.all(np.abs(z.mean(axis=0) - target) <= bonferroni_z(1e-6, d) * se)
        assert abs(z.mean(axis=0)[0] - (3 * x[0] - target[0])) > 10 * se[0]  # and far from the other


# --- PrivUnit2 at γ = 0 ---------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3, 5, 10, 64, 500])
@pytest.mark.parametrize("eps", [0.01, 1.0, 8.0, 100.0])
def test_equals_privunit2_at_gamma_zero(d: int, eps: float) -> None:
    """Same scale, same ε_exact, same error; with the same seed the very same outputs."""
    mech = DuchiL2.calibrate(d, eps, norm_bound=1.5)
    pu = privunit2_at_gamma_zero(d, eps, norm_bound=1.5)
    rel = 1e-13 if d <= 100 else 1e-12  # privunit2's 2^{d−2}·B(α, α) route loses digits with d
    assert mech.scale == pytest.approx(pu.scale, rel=rel)
    assert mech.epsilon_exact == pytest.approx(pu.epsilon_exact, rel=1e-15)
    assert mech.expected_error == pytest.approx(pu.expected_error, rel=10 * rel)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((200, d))
    x *= (rng.random(200) * 1.5 / np.linalg.norm(x, axis=1))[:, None]
    ours = mech.privatize(x, np.random.default_rng(99))
    theirs = pu.privatize(x, np.random.default_rng(99))
    assert np.max(np.abs(ours - theirs)) <= 10 * rel * mech.radius


@pytest.mark.parametrize("d", [2, 3, 5, 30])
def test_cosine_law_is_the_hemisphere_law(d: int) -> None:
    """⟨Z, u⟩/B: with probability π_ε the cosine law of W uniform on S^{d−1} conditioned on ≥ 0,
    otherwise on < 0 (KS test against the incomplete beta / d = 2 arcsine / d = 3 uniform law)."""
    eps = 1.0
    mech = DuchiL2.calibrate(d, eps)
    rng = np.random.default_rng(d)
    n = 40_000
    u = np.zeros(d)
    u[-1] = 1.0
    t = mech.privatize(np.tile(u, (n, 1)), rng) @ u / mech.radius
    p = mech.p
    if d == 2:
        sphere_cdf = lambda s: 1 - np.arccos(np.clip(s, -1, 1)) / np.pi
    else:
        a = (d - 1) / 2
        sphere_cdf = lambda s: special.betainc(a, a, np.clip((1 + s) / 2, 0, 1))
    cdf = lambda s: np.where(s < 0, (1 - p) * 2 * sphere_cdf(s), (1 - p) + p * (2 * sphere_cdf(s) - 1))
    assert stats.kstest(t, cdf).pvalue > 1e-4
    assert abs(np.mean(t >= 0) - p) <= 6 * math.sqrt(p * (1 - p) / n)


# --- exact privacy --------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3, 4, 9, 30])
@pytest.mark.parametrize("eps", [0.1, 2.0, 6.0])
def test_epsilon_exact_by_quadrature(d: int, eps: float) -> None:
    """The worst-case density ratio p(1 − P)/((1 − p)P), P = P(⟨W, u⟩ ≥ 0) integrated from the
    cosine density (1 − t²)^{(d−3)/2}: exactly e^ε."""
    mech = DuchiL2.calibrate(d, eps)
    dens = lambda t: (1.0 - t * t) ** ((d - 3) / 2.0)
    total = integrate.quad(dens, -1, 1, epsrel=1e-13, limit=200)[0]
    p_cap = integrate.quad(dens, 0, 1, epsrel=1e-13, limit=200)[0] / total
    ratio = math.log(mech.p * (1 - p_cap) / ((1 - mech.p) * p_cap))
    assert ratio == pytest.approx(eps, rel=1e-9)
    assert mech.epsilon_exact == eps


def test_d1_is_randomized_response_with_ratio_e_eps() -> None:
    """d = 1: outputs ±B only; P(Z = +B | x = L)/P(Z = +B | x = −L) = p/(1 − p) = e^ε."""
    mech = DuchiL2.calibrate(1, 1.5)
    rng = np.random.default_rng(0)
    n = 400_000
    plus = mech.privatize(np.full((n, 1), 1.0), rng)
    minus = mech.privatize(np.full((n, 1), -1.0), rng)
    assert set(np.unique(plus)) == {-mech.radius, mech.radius}
    f_plus, f_minus = np.mean(plus > 0), np.mean(minus > 0)
    assert abs(f_plus - mech.p) < 6 * math.sqrt(mech.p * (1 - mech.p) / n)
    assert abs(f_minus - (1 - mech.p)) < 6 * math.sqrt(mech.p * (1 - mech.p) / n)
    assert mech.p / (1 - mech.p) == pytest.approx(math.exp(1.5), rel=1e-14)


# --- the whole range ---------------------------------------------------------------------------


@pytest.mark.parametrize("d", D_GRID)
def test_finite_exact_and_monotone_over_the_whole_range(d: int) -> None:
    errors = []
    for eps in EPS_GRID:
        mech = DuchiL2.calibrate(d, eps)
        info = mech.describe()
        for key in ("epsilon_exact", "p", "B", "scale", "expected_error", "expected_error_max"):
            assert math.isfinite(info[key]), (d, eps, key, info[key])
        assert mech.epsilon_exact == eps
        assert mech.expected_error >= 0 and mech.expected_error_max >= 1
        errors.append(mech.expected_error)
    for eps_a, a, b in zip(EPS_GRID, errors, errors[1:]):
        # strictly decreasing while representable: coth(ε/2) rounds to 1 from ε ≈ 38 on
        assert b < a or (a == b and math.tanh(eps_a / 2) == 1.0)
    if d >= 2:
        assert errors[-1] == pytest.approx(math.pi * math.exp(2 * log_gamma_half_ratio(d)) - 1, rel=1e-12)


# --- Monte Carlo -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d, eps, radius, norm_bound, n",
    [
        (1, 0.5, 1.0, 1.0, 400_000),
        (1, 3.0, 0.3, 2.0, 400_000),
        (2, 1.0, 1.0, 1.0, 300_000),
        (3, 2.0, 0.0, 1.0, 200_000),
        (5, 0.1, 0.7, 3.0, 200_000),
        (50, 4.0, 1.0, 1.0, 60_000),
        (500, 8.0, 0.5, 2.0, 16_000),
        (2000, 1.0, 0.0, 1.0, 4_000),
    ],
)
def test_monte_carlo_unbiased_with_predicted_error(d: int, eps: float, radius: float, norm_bound: float,
                                                   n: int) -> None:
    """E[Z] = x (Bonferroni z over d coordinates) and E‖Z − x‖² = B² − ‖x‖² (6 SE); ‖Z‖ = B."""
    rng = np.random.default_rng(30_000 + d)
    mech = DuchiL2.calibrate(d, eps, norm_bound=norm_bound)
    direction = rng.standard_normal(d)
    x = radius * norm_bound * direction / np.linalg.norm(direction)
    z = mech.privatize(np.tile(x, (n, 1)), rng)
    assert np.allclose(np.linalg.norm(z, axis=1), mech.radius, rtol=1e-12)
    se = z.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(z.mean(axis=0) - x) <= bonferroni_z(1e-6, d) * se)
    sq = np.sum((z - x) ** 2, axis=1)
    predicted = mech.expected_error_max - float(x @ x)
    assert abs(sq.mean() - predicted) <= 6 * sq.std(ddof=1) / math.sqrt(n) + 1e-12 * predicted
