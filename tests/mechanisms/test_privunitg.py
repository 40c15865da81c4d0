"""PrivUnitG: exact privacy, exact error (Prop. 4, ERRATA 3), optimal split, samplers, Monte Carlo."""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest
from helpers import D_GRID, EPS_GRID, bonferroni_z, python_calls
from scipy import optimize, special, stats

from ldpcli.errors import UsageError
from ldpcli.mechanisms import PrivUnit2, get_mechanism
from ldpcli.mechanisms import _privunitg as G
from ldpcli.mechanisms._privunitg import PrivUnitG

mp.mp.dps = 60


def mp_moments(mech: PrivUnitG) -> tuple[mp.mpf, mp.mpf]:
    """E[z], E[z²] of z = α/σ in 60-digit arithmetic from (p, c) alone (no cancellation-free algebra)."""
    c = mp.mpf(mech.threshold)
    p = 1 / (1 + mp.exp(-mp.mpf(mech.logit_p)))
    upper_tail, lower_tail, phi = mp.ncdf(-c), mp.ncdf(c), mp.npdf(c)
    lam_up, lam_low = phi / upper_tail, phi / lower_tail
    mean = p * lam_up - (1 - p) * lam_low
    second = p * (1 + c * lam_up) + (1 - p) * (1 - c * lam_low)
    return mean, second


# --- registry and interface --------------------------------------------------------------------


def test_registered_with_its_interface() -> None:
    assert get_mechanism("privunitg") is PrivUnitG
    assert PrivUnitG.calibrations == ("optimal",)
    assert PrivUnitG.domain == "l2-ball" and not PrivUnitG.baseline and PrivUnitG.options == {}
    mech = PrivUnitG.calibrate(50, 2.0, norm_bound=3.0)
    assert mech.scale is None  # the output norm is not constant
    info = json.loads(json.dumps(mech.describe()))
    for key in ("p", "p_logit", "q_logit", "gamma", "sigma", "m", "expected_error", "expected_error_max"):
        assert math.isfinite(info[key])
    # a sidecar re-creates the same mechanism from its public description
    again = PrivUnitG.calibrate(info["d"], info["epsilon"], norm_bound=info["norm_bound"],
                                calibration=info["calibration"], **mech.option_values())
    assert again == mech


@pytest.mark.parametrize("bad", [dict(d=0, epsilon=1.0), dict(d=3, epsilon=0.0), dict(d=3, epsilon=math.inf),
                                 dict(d=3, epsilon=1.0, norm_bound=-1.0), dict(d=3, epsilon=1.0, calibration="paper"),
                                 dict(d=3, epsilon=1.0, delta=1e-6)])
def test_impossible_parameters_are_usage_errors(bad: dict) -> None:
    with pytest.raises(UsageError):
        PrivUnitG.calibrate(**bad)


# --- numerics against independent high-precision routes ----------------------------------------


@pytest.mark.parametrize("c", [-200.0, -40.0, -5.0, -1.0, 0.0, 0.3, 0.99, 1.0, 1.5, 2.0, 3.0, 4.99, 5.0, 10.0,
                               40.0, 141.4, 1000.0])
def test_truncated_normal_variance_matches_mpmath(c: float) -> None:
    cm = mp.mpf(c)
    lam = mp.npdf(cm) / mp.ncdf(-cm)
    ref = float(1 + cm * lam - lam * lam)
    assert G.truncated_normal_variance(c) == pytest.approx(ref, rel=4e-15)


@pytest.mark.parametrize("eps1", [-700.0, -30.0, -1.0, -1e-9, 0.0, 1e-9, 0.5, 3.0, 36.0, 40.0, 745.0, 5000.0, 1e4])
def test_threshold_inverts_the_split_in_log_space(eps1: float) -> None:
    """c = Φ^{-1}(q), logit q = ε₁, solved where 1 − q is e^{−5000} or smaller (ERRATA 4)."""
    c = G.threshold_from_split(eps1)
    ref = mp.findroot(lambda t: mp.log(mp.ncdf(t)) - mp.log(mp.ncdf(-t)) - eps1, mp.mpf(c))
    assert c == pytest.approx(float(ref), rel=1e-12, abs=1e-15)
    assert float(special.log_ndtr(c) - special.log_ndtr(-c)) == pytest.approx(eps1, rel=1e-11, abs=1e-14)


# --- exact privacy ------------------------------------------------------------------------------


@pytest.mark.parametrize("d, eps", [(1, 0.5), (2, 1.0), (10, 4.0), (500, 8.0), (10**7, 8.0), (1, 100.0),
                                    (1000, 10_000.0)])
def test_epsilon_exact_by_integrating_the_gaussian_density(d: int, eps: float) -> None:
    """Prop. 4: the worst-case ratio is pq/((1 − p)(1 − q)); q and 1 − q integrated from N(0, 1/d)."""
    mech = PrivUnitG.calibrate(d, eps)
    s = mp.sqrt(d)
    dens = lambda t: s * mp.exp(-(s * t) ** 2 / 2) / mp.sqrt(2 * mp.pi)  # N(0, σ²), σ = 1/√d
    g = mp.mpf(mech.threshold) / s  # γ = σ·c
    k = s * max(1.0, mech.threshold)  # the upper tail decays like e^{−k(t − γ)}
    upper = mp.quad(lambda w: dens(g + w / k) / k, [0, 1, 10, 50, mp.inf])
    lower = mp.quad(dens, [-mp.inf, 0, g]) if g > 0 else mp.quad(dens, [-mp.inf, g])
    p = 1 / (1 + mp.exp(-mp.mpf(mech.logit_p)))
    ratio = float(mp.log(p / (1 - p) * lower / upper))
    assert ratio == pytest.approx(eps, rel=1e-10)
    assert mech.epsilon_exact == pytest.approx(eps, rel=1e-13)
    assert mech.epsilon_exact <= eps


# --- the exact error (Prop. 4) -------------------------------------------------------------------


@pytest.mark.parametrize("d, eps", [(1, 0.01), (1, 1.0), (1, 100.0), (1, 10_000.0), (2, 4.0), (3, 0.1), (10, 8.0),
                                    (500, 4.0), (500, 8.0), (10**7, 0.01), (10**7, 10_000.0)])
def test_error_is_props_4_exact_form(d: int, eps: float) -> None:
    """(E[α²] + (d − 1)/d)/m² − 1 with the moments in 60 digits: the cancellation-free form agrees
    to double precision even at d = 1, ε = 10⁴ (where E[α²]/m² − 1 ≈ 1e−9 cancels 13 digits)."""
    mech = PrivUnitG.calibrate(d, eps, norm_bound=2.5)
    mean, second = mp_moments(mech)
    sigma2 = mp.mpf(1) / d
    m = mp.sqrt(sigma2) * mean
    err = (sigma2 * second + mp.mpf(d - 1) / d) / m**2 - 1
    assert mech.expected_error == pytest.approx(float(6.25 * err), rel=1e-12)
    assert mech.expected_error_max == pytest.approx(float(6.25 * (err + 1)), rel=1e-13)
    assert mech.m == pytest.approx(float(m), rel=1e-12)
    # Alg. 2 line 10: m = σφ(γ/σ)(p/(1 − q) − (1 − p)/q)
    c = mp.mpf(mech.threshold)
    p = 1 / (1 + mp.exp(-mp.mpf(mech.logit_p)))
    alg2 = mp.sqrt(sigma2) * mp.npdf(c) * (p / mp.ncdf(-c) - (1 - p) / mp.ncdf(c))
    assert mech.m == pytest.approx(float(alg2), rel=1e-12)


@pytest.mark.parametrize("d", [1, 2, 7, 1000])
@pytest.mark.parametrize("eps", [0.01, 1.0, 8.0, 300.0])
def test_closed_form_at_the_median_threshold(d: int, eps: float) -> None:
    """At c = 0 (q = 1/2, p = e^ε/(1 + e^ε)): E[z²] = 1 and μ = √(2/π)·tanh(ε/2), so
    Err = πd/(2 tanh²(ε/2)) − 1 (the hemisphere mechanism's Gaussian twin)."""
    split = G.split_at_threshold(0.0, eps)
    assert split.logit_p == eps
    expected = float(mp.pi * d / (2 * mp.tanh(mp.mpf(eps) / 2) ** 2) - 1)
    assert math.exp(G.log_error(d, split)) == pytest.approx(expected, rel=1e-13)


def test_app_b3_and_thm3_forms_are_wrong_by_monte_carlo() -> None:
    """ERRATA 3: Prop. 4's (E[α²] + (d − 1)/d)/m² − 1 matches the simulated E‖Z − x‖²; App. B.3's
    (E[α²] + 1)/m² − 1 and the Thm 3 proof's (E[α²] − 1/d)/m² + 1/m² do not (d = 2, ε = 4)."""
    d, eps, n = 2, 4.0, 400_000
    mech = PrivUnitG.calibrate(d, eps)
    rng = np.random.default_rng(3)
    x = np.array([0.6, 0.8])
    z = mech.privatize(np.tile(x, (n, 1)), rng)
    sq = np.sum((z - x) ** 2, axis=1)
    se = sq.std(ddof=1) / math.sqrt(n)
    mean, second = mp_moments(mech)
    e_a2, m2 = float(second) / d, float(mean) ** 2 / d  # E[α²], m²
    prop4 = (e_a2 + (d - 1) / d) / m2 - 1
    app_b3 = (e_a2 + 1) / m2 - 1
    thm3 = (e_a2 - 1 / d) / m2 + 1 / m2
    assert prop4 == pytest.approx(mech.expected_error, rel=1e-12)
    assert abs(sq.mean() - prop4) <= 6 * se
    assert abs(sq.mean() - app_b3) > 50 * se
    assert abs(sq.mean() - thm3) > 50 * se


# --- the optimal split ---------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 10, 1000, 10**7])
@pytest.mark.parametrize("eps", [0.01, 1.0, 8.0, 100.0, 10_000.0])
def test_optimal_split_is_a_minimum(d: int, eps: float) -> None:
    """No split ε₁ on a dense scan of [−ε − 1, ε + 1], nor a local scan, does better; the optimum
    is interior with p ≥ 1/2 and q ≥ 1/2 (γ ≥ 0)."""
    mech = PrivUnitG.calibrate(d, eps)
    best = math.log(mech.expected_error)

    def objective(eps1: float) -> float:
        return G.log_error(d, G.split_at_threshold(G.threshold_from_split(eps1), eps))

    for eps1 in np.linspace(-eps - 1, eps + 1, 801):
        assert objective(float(eps1)) >= best - 1e-12
    for h in np.linspace(-1e-3, 1e-3, 41):  # log Err is evaluated to ≈ 1e−14 (terms of size ε cancel)
        assert objective(mech.q_logit * (1 + h)) >= best - 1e-12
    assert 0 < mech.q_logit < eps and mech.logit_p > 0 and mech.gamma > 0


def test_error_constant_keeps_decreasing_towards_one_half() -> None:
    """ERRATA 4: C_{ε,d} = ε·Err/d decreases in ε towards 1/2; 0.614 is no floor. With 1 − q
    floored at 2^−53 (q stored as a float) the best C_ε bottoms out near 0.61 instead."""
    d = 50_000
    consts = [eps * PrivUnitG.calibrate(d, eps).expected_error / d for eps in (8, 16, 35, 50, 100, 1000, 10_000)]
    assert all(b < a for a, b in zip(consts, consts[1:]))
    assert consts[-3] < 0.55 and consts[-1] < 0.501 and consts[-1] > 0.5

    def floored(eps: float) -> float:
        objective = lambda e1: G.log_error(d, G.split_at_threshold(G.threshold_from_split(e1), eps))
        res = optimize.minimize_scalar(objective, bounds=(-eps - 1, min(eps + 1, 53 * math.log(2))),
                                       method="bounded", options={"xatol": 1e-12})
        return eps * math.exp(res.fun) / d

    low = optimize.minimize_scalar(floored, bounds=(30, 60), method="bounded")
    assert 0.6 < low.fun < 0.62
    assert floored(100.0) > 1.0


@pytest.mark.parametrize("d", [1, 2, 3, 10, 100, 1000, 10**5, 10**7])
@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 4.0, 8.0, 100.0])
def test_never_below_privunit2_and_close_for_large_d(d: int, eps: float) -> None:
    """Asi et al. Thm 2: PrivUnit2 (optimal) is the best unbiased ε-LDP randomizer; Thm 3:
    PrivUnitG is within a factor 1 + O(√((ε + log d)/d)) of it."""
    g = PrivUnitG.calibrate(d, eps).expected_error
    best = PrivUnit2.calibrate(d, eps).expected_error
    assert g >= best * (1 - 1e-12)
    if d >= 1000 and eps <= 100:
        assert g <= best * (1 + math.sqrt((eps + math.log(d)) / d))
    if d == 10**7 and eps <= 8:
        assert g <= best * (1 + 1e-6)


# --- the whole range ---------------------------------------------------------------------------


@pytest.mark.parametrize("d", D_GRID)
def test_finite_exact_and_monotone_over_the_whole_range(d: int) -> None:
    errors = []
    for eps in EPS_GRID:
        mech = PrivUnitG.calibrate(d, eps)
        info = mech.describe()
        for key in ("epsilon_exact", "p", "p_logit", "q_logit", "log_one_minus_q", "gamma", "sigma", "m",
                    "expected_error", "expected_error_max"):
            assert math.isfinite(info[key]), (d, eps, key, info[key])
        assert mech.epsilon_exact <= eps and mech.epsilon_exact == pytest.approx(eps, rel=1e-13)
        assert mech.expected_error > 0 and mech.expected_error_max == pytest.approx(mech.expected_error + 1)
        errors.append(mech.expected_error)
    assert all(b < a for a, b in zip(errors, errors[1:]))


def test_calibrate_work_does_not_grow_with_d() -> None:
    """Calibration is a few scalar solves whatever d (measured: 13.7 and 16.7 thousand calls over the ε
    grid at d = 10⁵ and 10⁷, a few ms each), never work proportional to d."""

    def calibrate_grid(d: int) -> None:
        for eps in EPS_GRID:
            PrivUnitG.calibrate(d, eps)

    assert python_calls(lambda: calibrate_grid(10**7)) <= 2 * python_calls(lambda: calibrate_grid(10**5))


# --- samplers ------------------------------------------------------------------------------------


def split_cdf(z: np.ndarray, c: float, p: float, log_q: float, log_1mq: float) -> np.ndarray:
    """CDF of the p-mixture of N(0,1) truncated to [c, ∞) and (−∞, c), in log space."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        upper = np.where(z >= c, -np.expm1(special.log_ndtr(-z) - log_1mq), 0.0)
        lower = np.where(z < c, np.exp(special.log_ndtr(z) - log_q), 1.0)
    return p * upper + (1 - p) * lower


@pytest.mark.parametrize("c", [-141.4, -38.0, -3.0, 0.0, 0.7, 5.0, 38.0, 141.4])
@pytest.mark.parametrize("side", [True, False])
def test_truncated_normal_sampler_is_exact(c: float, side: bool) -> None:
    """KS test of each truncated side, down to tails of probability e^{−10⁴}."""
    rng = np.random.default_rng(int(abs(c) * 10) + side)
    n = 20_000
    log_q, log_1mq = float(special.log_ndtr(c)), float(special.log_ndtr(-c))
    z = G.sample_split_normal(np.full(n, side), c, log_q, log_1mq, rng)
    assert np.all(np.isfinite(z)) and (np.all(z >= c) if side else np.all(z <= c))
    result = stats.kstest(z, lambda t: split_cdf(t, c, 1.0 if side else 0.0, log_q, log_1mq))
    assert result.pvalue > 1e-4


@pytest.mark.parametrize("d, eps", [(1, 1.0), (3, 4.0), (1, 10_000.0), (40, 100.0)])
def test_cosine_law_of_the_output(d: int, eps: float) -> None:
    """⟨Z, u⟩·μ/L is the p-mixture of the two truncated normals (KS), and P(above γ) = p."""
    mech = PrivUnitG.calibrate(d, eps, norm_bound=2.0)
    rng = np.random.default_rng(d)
    n = 40_000
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    out = mech.privatize(np.tile(2.0 * u, (n, 1)), rng)
    z = out @ u * math.exp(mech.log_mu) / 2.0
    result = stats.kstest(z, lambda t: split_cdf(t, mech.threshold, mech.p, mech.log_q, mech.log_one_minus_q))
    assert result.pvalue > 1e-4
    above = np.mean(z >= mech.threshold)
    assert abs(above - mech.p) <= 6 * math.sqrt(mech.p * (1 - mech.p) / n) + 1e-12


# --- Monte Carlo -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d, eps, radius, norm_bound, n",
    [
        (1, 1.0, 1.0, 1.0, 400_000),
        (1, 8.0, 0.4, 2.0, 400_000),
        (2, 0.5, 1.0, 1.0, 300_000),
        (3, 2.0, 0.0, 1.0, 200_000),
        (5, 1.0, 0.6, 3.0, 200_000),
        (64, 4.0, 1.0, 1.0, 60_000),
        (64, 100.0, 0.3, 1.0, 60_000),
        (500, 4.0, 1.0, 1.0, 16_000),
        (500, 8.0, 0.5, 2.0, 16_000),
        (2000, 8.0, 0.0, 1.0, 4_000),
    ],
)
def test_monte_carlo_unbiased_with_predicted_error(d: int, eps: float, radius: float, norm_bound: float,
                                                   n: int) -> None:
    """E[Z] = x (Bonferroni z over the d coordinates) and E‖Z − x‖² = L²(Err + 1) − ‖x‖² (6 SE)."""
    rng = np.random.default_rng(10_000 + d)
    mech = PrivUnitG.calibrate(d, eps, norm_bound=norm_bound)
    direction = rng.standard_normal(d)
    x = radius * norm_bound * direction / np.linalg.norm(direction)
    z = mech.privatize(np.tile(x, (n, 1)), rng)
    assert z.shape == (n, d) and np.all(np.isfinite(z))
    se = z.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(z.mean(axis=0) - x) <= bonferroni_z(1e-6, d) * se)
    sq = np.sum((z - x) ** 2, axis=1)
    predicted = mech.expected_error_max - float(x @ x)
    assert abs(sq.mean() - predicted) <= 6 * sq.std(ddof=1) / math.sqrt(n)


def test_d1_is_alg2_verbatim_and_worse_than_randomized_response() -> None:
    """d = 1 (documented): V⊥ = 0, the output is a continuous scalar ±z·L/μ; it is unbiased and
    ε-DP, and randomized response (privunit2 at d = 1) has the smaller error."""
    mech = PrivUnitG.calibrate(1, 2.0)
    out = mech.privatize(np.full((1000, 1), 1.0), np.random.default_rng(1))
    assert len(np.unique(out)) == 1000
    for eps in (0.1, 1.0, 4.0, 30.0):
        assert PrivUnitG.calibrate(1, eps).expected_error > PrivUnit2.calibrate(1, eps).expected_error


def test_rows_are_independent_of_each_other() -> None:
    """Privatizing a batch equals privatizing the same rows with the same law: a row's output
    depends on its own input only (a zero row and a unit row side by side keep their means)."""
    mech = PrivUnitG.calibrate(4, 3.0)
    rng = np.random.default_rng(8)
    n = 100_000
    x = np.zeros((2 * n, 4))
    x[1::2, 0] = 1.0
    z = mech.privatize(x, rng)
    for rows, target in ((z[0::2], np.zeros(4)), (z[1::2], np.array([1.0, 0, 0, 0]))):
        se = rows.std(axis=0, ddof=1) / math.sqrt(n)
        assert np.all(np.abs(rows.mean(axis=0) - target) <= bonferroni_z(1e-6, 4) * se)
