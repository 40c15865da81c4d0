"""PrivUnit2: exact privacy, closed forms, optimality, the papers' tables and errata, Monte Carlo."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from helpers import PRIVUNIT2_D_GRID, PRIVUNIT2_EPS_GRID, bonferroni_z
from scipy import integrate, optimize, special

from ldpcli.errors import UsageError
from ldpcli.math import _logspace as logspace
from ldpcli.math import _sphere as sm
from ldpcli.mechanisms import PrivUnit2, get_mechanism, mechanism_names
from ldpcli.mechanisms._privunit import _log_m


def test_registry() -> None:
    assert "privunit2" in mechanism_names()
    assert get_mechanism("privunit2") is PrivUnit2
    with pytest.raises(UsageError, match="unknown mechanism 'nope'; choose one of: privunit2"):
        get_mechanism("nope")


# --- closed forms ------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 4.0, 8.0, 30.0, 100.0, 400.0, 1000.0])
def test_d3_optimum_is_the_closed_form(eps: float) -> None:
    """d = 3: γ* = tanh(ε/4), error 1/sinh²(ε/4) (uniform cosine law, Archimedes)."""
    mech = PrivUnit2.calibrate(3, eps)
    expected = float(1 / mp.sinh(mp.mpf(eps) / 4) ** 2)
    assert mech.expected_error == pytest.approx(expected, rel=1e-9)
    assert mech.gamma == pytest.approx(math.tanh(eps / 4), rel=1e-12)
    assert mech.epsilon_exact == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 4.0, 8.0, 30.0, 100.0, 700.0])
def test_d1_is_randomized_response(eps: float) -> None:
    mech = PrivUnit2.calibrate(1, eps)
    assert mech.p == pytest.approx(special.expit(eps), rel=1e-15)
    assert mech.expected_error == pytest.approx(float(1 / mp.sinh(mp.mpf(eps) / 2) ** 2), rel=1e-12)
    assert mech.epsilon_exact == eps
    assert mech.scale == pytest.approx(1 / math.tanh(eps / 2), rel=1e-14)


def test_d1_outputs_and_sign_probability() -> None:
    mech = PrivUnit2.calibrate(1, 1.5)
    rng = np.random.default_rng(0)
    n = 400_000
    z = mech.privatize(np.full((n, 1), 1.0), rng)
    assert set(np.unique(z)) == {-mech.scale, mech.scale}
    kept = np.mean(z > 0)
    assert abs(kept - mech.p) < 6 * math.sqrt(mech.p * (1 - mech.p) / n)


# --- the optimum -----------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3, 4, 10, 100, 500, 10**4, 10**7])
@pytest.mark.parametrize("eps", [0.01, 1.0, 4.0, 8.0, 100.0, 10_000.0])
def test_optimum_is_tight_and_m_equals_gamma(d: int, eps: float) -> None:
    """Asi et al. Thm 1–2: ε_exact = ε at the optimum, and there the normaliser m equals γ."""
    mech = PrivUnit2.calibrate(d, eps)
    assert mech.epsilon_exact == pytest.approx(eps, rel=1e-12)
    assert mech.epsilon_exact <= eps  # exactly, not even an ulp above (issue 13)
    m = math.exp(mech.log_m)
    assert m == pytest.approx(mech.gamma, rel=1e-8)


@pytest.mark.parametrize("d, eps", [(2, 1.0), (4, 2.0), (10, 4.0), (500, 4.0), (500, 8.0), (10**5, 16.0)])
def test_optimum_beats_every_other_split(d: int, eps: float) -> None:
    """Scanning the split ε₁ + logit(p) = ε finds nothing with a larger m (smaller error)."""
    mech = PrivUnit2.calibrate(d, eps)

    def log_m_at(y: float) -> float:
        log_p_cap = sm.log_cap_probability(y, d)
        logit_p = eps - (logspace.log1mexp(log_p_cap) - log_p_cap)
        return _log_m(d, y, logit_p, log_p_cap) if logit_p >= 0 else -1e300

    for factor in np.linspace(0.2, 3.0, 57):
        assert log_m_at(mech.cap_logit * factor) <= mech.log_m + 1e-12
    best = optimize.minimize_scalar(lambda y: -log_m_at(y), bounds=(1e-9, 3 * mech.cap_logit), method="bounded",
                                    options={"xatol": 1e-12})
    assert -best.fun <= mech.log_m + 1e-10


# --- exact privacy by a second route ---------------------------------------------------------------


@pytest.mark.parametrize(
    "d, eps, calibration",
    [(d, eps, cal) for d in (2, 4, 9, 30) for eps in (0.5, 2.0, 6.0) for cal in ("optimal", "bhowmick")
     if not (cal == "bhowmick" and d < 3)],  # bhowmick needs d >= 3: test_bhowmick_needs_d_at_least_3
)
def test_epsilon_exact_by_quadrature(d: int, eps: float, calibration: str) -> None:
    """The worst-case density ratio p(1 − P)/((1 − p)P), with P integrated from the 1-D density."""
    mech = PrivUnit2.calibrate(d, eps, calibration=calibration)
    dens = lambda t: (1.0 - t * t) ** ((d - 3) / 2.0)
    total = integrate.quad(dens, -1, 1, epsrel=1e-13, limit=200)[0]
    p_cap = integrate.quad(dens, mech.gamma, 1, epsrel=1e-13, limit=200)[0] / total
    ratio = math.log(mech.p * (1 - p_cap) / ((1 - mech.p) * p_cap))
    assert mech.epsilon_exact == pytest.approx(ratio, rel=1e-7)
    assert mech.epsilon_exact <= eps * (1 + 1e-12)
    assert mech.epsilon_exact <= eps  # exactly, not even an ulp above (issue 13)


@pytest.mark.parametrize("d", [3, 10, 100])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_normaliser_sign_erratum(d: int, eps: float) -> None:
    """ERRATA 1: m = c·[p/P − (1 − p)/(1 − P)] (Bhowmick Eq. 15), not Asi Alg. 1's printed '+'.

    m is checked against E⟨V, u⟩ integrated from the cosine density; the printed sign differs
    from it by more than 10% at ε ≤ 2 (so a test of m would fail on it).
    """
    mech = PrivUnit2.calibrate(d, eps)
    g, p = mech.gamma, mech.p
    dens = lambda t: (1.0 - t * t) ** ((d - 3) / 2.0)
    total = integrate.quad(dens, -1, 1, epsrel=1e-13)[0]
    cap = integrate.quad(dens, g, 1, epsrel=1e-13)[0] / total
    e_cap = integrate.quad(lambda t: t * dens(t), g, 1, epsrel=1e-13)[0] / total / cap
    e_out = integrate.quad(lambda t: t * dens(t), -1, g, epsrel=1e-13)[0] / total / (1 - cap)
    m_true = p * e_cap + (1 - p) * e_out
    m = math.exp(mech.log_m)
    assert m == pytest.approx(m_true, rel=1e-8)
    c = math.exp(sm.log_cap_normaliser(mech.cap_logit, d))
    m_printed = c * (p / cap + (1 - p) / (1 - cap))
    assert abs(m_printed / m_true - 1) > 0.1


# --- Bhowmick's rule and Table 1 ---------------------------------------------------------------

TABLE_1 = [
    # (d, ε1, γ(0.99ε1) to 5 decimals as printed, p as printed) — ERRATA 6 for the two misprints
    (3_274_634, 500, 0.01729, 0.993),  # printed p = 1.0; e^5/(1 + e^5) = 0.993
    (3_274_634, 250, 0.01217, 0.924),
    (3_274_634, 100, 0.00760, 0.731),
    (3_274_634, 50, 0.0052688, 0.622),  # printed γ = 0.00526; the (16b) root is 0.0052688
    (1_068_298, 5000, 0.09598, 1.0),
    (1_068_298, 1000, 0.04291, 1.0),
    (1_068_298, 500, 0.03027, 0.993),
    (1_068_298, 100, 0.01331, 0.731),
]


@pytest.mark.parametrize("d, eps, gamma, p", TABLE_1)
def test_bhowmick_table_1(d: int, eps: float, gamma: float, p: float) -> None:
    mech = PrivUnit2.calibrate(d, eps, calibration="bhowmick")
    digits = len(str(gamma).split(".")[1])
    assert round(mech.gamma, digits) == gamma
    assert round(mech.p, 3) == p
    assert mech.epsilon_exact < eps  # Thm 1 is sufficient, not tight (ERRATA 5)


def test_table_1_misprints_are_misprints() -> None:
    """The printed γ = 0.00526 (MNIST, ε1 = 50) and p = 1.0 (MNIST, ε1 = 500) are not the rule's."""
    assert round(PrivUnit2.calibrate(3_274_634, 50, calibration="bhowmick").gamma, 5) != 0.00526
    assert round(PrivUnit2.calibrate(3_274_634, 500, calibration="bhowmick").p, 3) != 1.0


@pytest.mark.parametrize("d", [3, 10, 500, 10**5, 10**7])
@pytest.mark.parametrize("eps", [0.1, 1.0, 8.0, 100.0, 5000.0])
def test_bhowmick_is_private_and_never_better_than_optimal(d: int, eps: float) -> None:
    paper = PrivUnit2.calibrate(d, eps, calibration="bhowmick")
    best = PrivUnit2.calibrate(d, eps)
    assert 0 < paper.epsilon_exact < eps
    assert paper.expected_error >= best.expected_error * (1 - 1e-12)
    assert paper.p == pytest.approx(special.expit(0.01 * eps))


def test_bhowmick_needs_d_at_least_3() -> None:
    with pytest.raises(UsageError, match="needs d >= 3"):
        PrivUnit2.calibrate(2, 4.0, calibration="bhowmick")


# --- the whole range ---------------------------------------------------------------------------


@pytest.mark.parametrize("d", PRIVUNIT2_D_GRID)
def test_finite_exact_and_monotone_over_the_whole_range(d: int) -> None:
    errors = []
    for eps in PRIVUNIT2_EPS_GRID:
        mech = PrivUnit2.calibrate(d, eps)
        info = mech.describe()
        for key in ("epsilon_exact", "gamma", "p", "cap_probability", "scale", "expected_error", "expected_error_max"):
            assert math.isfinite(info[key]), (d, eps, key, info[key])
        assert mech.epsilon_exact == pytest.approx(eps, rel=1e-12)
        assert mech.epsilon_exact <= eps  # exactly, not even an ulp above (issue 13)
        assert 0 <= mech.gamma < 1 or (mech.gamma == 1.0 and eps >= 100)
        assert mech.expected_error >= 0 and mech.expected_error_max >= 1
        errors.append(mech.expected_error)
    # strictly decreasing while representable, never increasing
    for a, b in zip(errors, errors[1:]):
        assert b < a or a == b == 0.0


def test_d_1e7_strictly_decreasing_in_eps() -> None:
    errors = [PrivUnit2.calibrate(10**7, eps).expected_error for eps in np.geomspace(0.01, 1e4, 60)]
    assert all(math.isfinite(e) for e in errors)
    assert all(b < a for a, b in zip(errors, errors[1:]))


@pytest.mark.parametrize("bad", [dict(d=0, epsilon=1.0), dict(d=3, epsilon=0.0), dict(d=3, epsilon=-1.0),
                                 dict(d=3, epsilon=math.inf), dict(d=3, epsilon=math.nan), dict(d=2.5, epsilon=1.0),
                                 dict(d=3, epsilon=1.0, norm_bound=0.0), dict(d=3, epsilon=1.0, calibration="best")])
def test_impossible_parameters_are_usage_errors(bad: dict) -> None:
    with pytest.raises(UsageError):
        PrivUnit2.calibrate(**bad)


# --- Monte Carlo -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d, eps, calibration, radius, norm_bound, n",
    [
        (2, 1.0, "optimal", 1.0, 1.0, 200_000),
        (3, 2.0, "optimal", 0.5, 1.0, 200_000),
        (5, 1.0, "optimal", 1.0, 3.0, 200_000),
        (64, 4.0, "optimal", 0.3, 1.0, 60_000),
        (64, 4.0, "bhowmick", 1.0, 1.0, 60_000),
        (500, 8.0, "optimal", 1.0, 2.0, 20_000),
        (500, 8.0, "optimal", 0.0, 1.0, 20_000),
        (10, 1000.0, "optimal", 0.7, 1.0, 50_000),  # cap probability e^-966: far-tail sampler
    ],
)
def test_monte_carlo_unbiased_with_predicted_error(
    d: int, eps: float, calibration: str, radius: float, norm_bound: float, n: int
) -> None:
    """E[Z] = x and E‖Z − x‖² = L²/m² − ‖x‖², for inputs on and inside the ball (seeded).

    Tolerances come from the sampling error: Bonferroni z over the d coordinates for the mean,
    and 6 standard errors of the mean squared error.
    """
    rng = np.random.default_rng(20_000 + d)
    mech = PrivUnit2.calibrate(d, eps, calibration=calibration, norm_bound=norm_bound)
    direction = rng.standard_normal(d)
    x = radius * norm_bound * direction / np.linalg.norm(direction)
    z = mech.privatize(np.tile(x, (n, 1)), rng)
    assert np.allclose(np.linalg.norm(z, axis=1), norm_bound * mech.scale, rtol=1e-12)
    se = z.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(z.mean(axis=0) - x) <= bonferroni_z(1e-6, d) * se)
    sq = np.sum((z - x) ** 2, axis=1)
    predicted = mech.expected_error_max - float(x @ x)
    assert abs(sq.mean() - predicted) <= 6 * sq.std(ddof=1) / math.sqrt(n) + 1e-12 * predicted


def test_printed_sign_would_be_caught_by_monte_carlo() -> None:
    """At ε = 1 the printed '+' of Asi Alg. 1 shrinks outputs by ≈ tanh(ε/2): the mean is biased."""
    d, eps, n = 10, 1.0, 200_000
    mech = PrivUnit2.calibrate(d, eps)
    p_cap = mech.cap_probability
    c = math.exp(sm.log_cap_normaliser(mech.cap_logit, d))
    m_printed = c * (mech.p / p_cap + (1 - mech.p) / (1 - p_cap))
    rng = np.random.default_rng(99)
    x = np.zeros(d)
    x[0] = 1.0
    z = mech.privatize(np.tile(x, (n, 1)), rng) * (math.exp(mech.log_m) / m_printed)
    se = z[:, 0].std(ddof=1) / math.sqrt(n)
    assert abs(z[:, 0].mean() - 1.0) > 10 * se


def test_seeded_privatization_is_reproducible_and_rows_independent() -> None:
    mech = PrivUnit2.calibrate(20, 4.0)
    x = np.eye(20)[:5]
    a = mech.privatize(x.copy(), np.random.default_rng(1))
    b = mech.privatize(x.copy(), np.random.default_rng(1))
    c = mech.privatize(x.copy(), np.random.default_rng(2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
