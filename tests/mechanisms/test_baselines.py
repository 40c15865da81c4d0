"""The Laplace and analytic-Gaussian baselines: exact privacy by second routes, errors, Monte Carlo."""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest
from helpers import D_GRID, EPS_GRID, bonferroni_z
from scipy import optimize, stats

from ldpcli.errors import UsageError
from ldpcli.mechanisms import get_mechanism
from ldpcli.mechanisms._baselines import (
    Gaussian,
    Laplace,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    gaussian_log_delta,
)

mp.mp.dps = 50


def check_monte_carlo(mech, x: np.ndarray, n: int, rng: np.random.Generator, mean: np.ndarray | None = None) -> None:
    """E[Z] = x (Bonferroni z) and E‖Z − x‖² = expected_error (6 SE): the noise ignores x."""
    d = x.shape[0]
    z = mech.privatize(np.tile(x, (n, 1)), rng)
    target = x if mean is None else mean
    se = z.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(z.mean(axis=0) - target) <= bonferroni_z(1e-6, d) * se)
    sq = np.sum((z - target) ** 2, axis=1)
    assert abs(sq.mean() - mech.expected_error) <= 6 * sq.std(ddof=1) / math.sqrt(n)
    assert mech.expected_error_max == mech.expected_error


def mp_delta(ratio: float, eps: float) -> mp.mpf:
    """δ = ∫ (φ(t) − e^ε φ(t − r))₊ dt, r = Δ/σ, by quadrature of the two densities (50 digits).

    The integrand is positive exactly for t < r/2 − ε/r, found here numerically, not from Thm 8."""
    r, e = mp.mpf(ratio), mp.mpf(eps)
    diff = lambda t: mp.npdf(t) - mp.exp(e) * mp.npdf(t - r)
    cross = mp.findroot(lambda t: mp.log(mp.npdf(t)) - e - mp.log(mp.npdf(t - r)), r / 2)
    return mp.quad(diff, [-mp.inf, cross - 10, cross - 1, cross])


# --- registry and options ----------------------------------------------------------------------


def test_registered_as_baselines() -> None:
    assert get_mechanism("laplace") is Laplace and get_mechanism("gaussian") is Gaussian
    for cls in (Laplace, Gaussian):
        assert cls.baseline and cls.domain == "l2-ball" and "baseline" in cls.title.lower()
    assert Laplace.calibrations == ("classic",) and Gaussian.calibrations == ("analytic",)
    assert Laplace.options == {} and list(Gaussian.options) == ["delta"]


def test_descriptions_recreate_the_mechanisms() -> None:
    for mech in (Laplace.calibrate(7, 2.0, norm_bound=3.0), Gaussian.calibrate(7, 2.0, norm_bound=3.0, delta=1e-7)):
        info = json.loads(json.dumps(mech.describe()))
        again = type(mech).calibrate(info["d"], info["epsilon"], norm_bound=info["norm_bound"],
                                     calibration=info["calibration"], **{k: info[k] for k in mech.options})
        assert again == mech
    info = Gaussian.calibrate(7, 2.0, delta=1e-7).describe()
    assert info["delta"] == 1e-7 and 0 < info["delta_exact"] <= 1e-7 and info["scale"] is None


@pytest.mark.parametrize("delta", [None, 0.0, 1.0, -1e-6, 2.0, math.nan, math.inf, "1e-6", True])
def test_gaussian_needs_a_valid_delta(delta) -> None:
    with pytest.raises(UsageError, match="delta"):
        Gaussian.calibrate(5, 1.0, delta=delta)
    with pytest.raises(UsageError, match="delta"):
        Gaussian.calibrate(5, 1.0)


@pytest.mark.parametrize("cls, bad", [
    (Laplace, dict(d=0, epsilon=1.0)), (Laplace, dict(d=3, epsilon=0.0)), (Laplace, dict(d=3, epsilon=1.0, delta=0.1)),
    (Laplace, dict(d=3, epsilon=1.0, calibration="analytic")), (Gaussian, dict(d=3, epsilon=-2.0, delta=0.1)),
    (Gaussian, dict(d=3, epsilon=1.0, delta=0.1, calibration="classic")),
    (Gaussian, dict(d=3, epsilon=1.0, delta=0.1, sigma=2.0)),
    (Gaussian, dict(d=3, epsilon=1.0, delta=0.1, norm_bound=0)),
])
def test_impossible_parameters_are_usage_errors(cls, bad: dict) -> None:
    with pytest.raises(UsageError):
        cls.calibrate(**bad)


# --- Laplace --------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 10, 1000])
@pytest.mark.parametrize("eps", [0.01, 1.0, 100.0])
def test_laplace_privacy_is_exactly_eps(d: int, eps: float) -> None:
    """Second route: the largest ‖x − x'‖₁ over the ℓ2 ball (numerical maximisation of ‖x‖₁ on the
    sphere, doubled) over b, and the log density ratio of the two output laws at a far corner."""
    L = 1.7
    mech = Laplace.calibrate(d, eps, norm_bound=L)
    assert mech.epsilon_exact == pytest.approx(eps, rel=1e-15) and mech.epsilon_exact <= eps
    if d <= 10:
        rng = np.random.default_rng(d)
        best = max(-optimize.minimize(lambda v: -np.abs(v).sum() * L / np.linalg.norm(v),
                                      rng.standard_normal(d) + 0.1, method="Nelder-Mead",
                                      options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 20_000}).fun
                   for _ in range(3))
        assert 2 * best / mech.b == pytest.approx(eps, rel=1e-9)
    x = np.full(d, L / math.sqrt(d))
    corner = x.copy()  # at or beyond x (hence beyond −x) in every coordinate: the worst output
    log_ratio = (stats.laplace.logpdf(corner, loc=x, scale=mech.b)
                 - stats.laplace.logpdf(corner, loc=-x, scale=mech.b)).sum()
    assert log_ratio == pytest.approx(eps, rel=1e-9)
    rng = np.random.default_rng(7)
    for _ in range(20):  # no other pair of inputs in the ball does worse
        a, b_ = rng.standard_normal((2, d))
        a *= L * rng.random() / np.linalg.norm(a)
        b_ *= L * rng.random() / np.linalg.norm(b_)
        assert np.abs(a - b_).sum() / mech.b <= eps * (1 + 1e-12)


@pytest.mark.parametrize("eps", [0.01, 1.0, 8.0, 10_000.0])
def test_laplace_closed_form_d1(eps: float) -> None:
    mech = Laplace.calibrate(1, eps, norm_bound=2.0)
    assert mech.b == pytest.approx(4.0 / eps, rel=1e-15)
    assert mech.expected_error == pytest.approx(2 * 16.0 / eps**2, rel=1e-14)
    assert Laplace.calibrate(500, 4.0).expected_error == pytest.approx(8 * 500**2 / 16, rel=1e-14)


@pytest.mark.parametrize("d, eps, radius, n", [(1, 1.0, 1.0, 400_000), (3, 0.5, 0.0, 200_000),
                                               (20, 4.0, 0.6, 100_000), (500, 8.0, 1.0, 16_000)])
def test_laplace_monte_carlo(d: int, eps: float, radius: float, n: int) -> None:
    rng = np.random.default_rng(50 + d)
    mech = Laplace.calibrate(d, eps, norm_bound=2.0)
    direction = rng.standard_normal(d)
    check_monte_carlo(mech, 2.0 * radius * direction / np.linalg.norm(direction), n, rng)


# --- analytic Gaussian ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 1.0, 4.0, 8.0])
@pytest.mark.parametrize("delta", [1e-2, 1e-6, 1e-12])
def test_gaussian_delta_by_quadrature(eps: float, delta: float) -> None:
    """δ_exact (Balle–Wang Thm 8, log space) equals ∫(φ(t) − e^ε φ(t − Δ/σ))₊ dt, and δ_exact ≤ δ
    with equality to 1e−9 relative."""
    mech = Gaussian.calibrate(3, eps, norm_bound=1.5, delta=delta)
    ref = mp_delta(mech.l2_sensitivity / mech.sigma, eps)
    assert mech.delta_exact == pytest.approx(float(ref), rel=1e-9)
    assert mech.delta_exact <= delta
    assert mech.delta_exact == pytest.approx(delta, rel=1e-9)
    assert mech.epsilon_exact == eps


@pytest.mark.parametrize("eps", EPS_GRID)
@pytest.mark.parametrize("delta", [1e-300, 1e-30, 1e-6, 0.1, 0.9])
def test_gaussian_delta_is_attained_over_the_whole_range(eps: float, delta: float) -> None:
    mech = Gaussian.calibrate(10, eps, delta=delta)
    assert mech.delta_exact <= delta
    assert mech.delta_exact == pytest.approx(delta, rel=1e-9)
    # δ(σ) is decreasing in σ: 1 ppm less noise breaks the guarantee
    assert math.exp(gaussian_log_delta(2.0 / (mech.sigma * (1 - 1e-6)), eps)) > delta


@pytest.mark.parametrize("ratio, eps", [(0.05, 0.01), (1.0, 1.0), (3.0, 4.0), (5.0, 0.5), (20.0, 8.0), (141.0, 1e4),
                                        (200.0, 1e4)])
def test_gaussian_delta_formula_in_both_branches(ratio: float, eps: float) -> None:
    """Thm 8 in 50 digits; both numerical branches (a ≤ 0 with Mills ratios, a > 0 direct)."""
    r, e = mp.mpf(ratio), mp.mpf(eps)
    ref = mp.ncdf(r / 2 - e / r) - mp.exp(e) * mp.ncdf(-r / 2 - e / r)
    assert gaussian_log_delta(ratio, eps) == pytest.approx(float(mp.log(ref)), rel=1e-12, abs=1e-13)


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_analytic_sigma_beats_the_classic_formula_below_one(eps: float, delta: float) -> None:
    """Where the classic σ = Δ√(2 log(1.25/δ))/ε is valid (ε < 1) the analytic σ is smaller."""
    classic = classic_gaussian_sigma(eps, delta, 2.0)
    assert analytic_gaussian_sigma(eps, delta, 2.0) < classic
    assert math.exp(gaussian_log_delta(2.0 / classic, eps)) < delta


@pytest.mark.parametrize("eps, delta", [(8.0, 1e-2), (16.0, 1e-6), (20.0, 1e-12), (100.0, 1e-6)])
def test_classic_formula_is_not_private_for_large_eps(eps: float, delta: float) -> None:
    """At ε ≥ 1 the classic σ can be too small: its exact δ (Thm 8, and by quadrature) exceeds δ."""
    classic = classic_gaussian_sigma(eps, delta, 2.0)
    delta_classic = math.exp(gaussian_log_delta(2.0 / classic, eps))
    assert delta_classic > 1.5 * delta
    assert classic < analytic_gaussian_sigma(eps, delta, 2.0)
    if eps <= 20:
        assert float(mp_delta(2.0 / classic, eps)) == pytest.approx(delta_classic, rel=1e-9)


@pytest.mark.parametrize("d, eps, radius, n", [(1, 1.0, 1.0, 400_000), (3, 0.5, 0.0, 200_000),
                                               (20, 4.0, 0.6, 100_000), (500, 8.0, 1.0, 16_000)])
def test_gaussian_monte_carlo(d: int, eps: float, radius: float, n: int) -> None:
    rng = np.random.default_rng(60 + d)
    mech = Gaussian.calibrate(d, eps, norm_bound=2.0, delta=1e-6)
    direction = rng.standard_normal(d)
    check_monte_carlo(mech, 2.0 * radius * direction / np.linalg.norm(direction), n, rng)


def test_rows_beyond_the_ball_are_projected_onto_it() -> None:
    """The sensitivity bound holds for every row: one of norm 2L is released as if it had norm L."""
    rng = np.random.default_rng(9)
    x = np.array([2.0, 0.0, 0.0])
    for mech in (Laplace.calibrate(3, 2.0), Gaussian.calibrate(3, 2.0, delta=1e-6)):
        original = np.tile(x, (100_000, 1))
        check_monte_carlo(mech, x, 100_000, rng, mean=np.array([1.0, 0.0, 0.0]))
        mech.privatize(original, rng)
        assert np.all(original == x)  # the caller's array is not modified


# --- the whole range ---------------------------------------------------------------------------


@pytest.mark.parametrize("d", D_GRID)
def test_finite_exact_and_monotone_over_the_whole_range(d: int) -> None:
    for cls, kw, closed in ((Laplace, {}, lambda eps: 8.0 * d * d / eps**2), (Gaussian, {"delta": 1e-6}, None)):
        errors = []
        for eps in EPS_GRID:
            mech = cls.calibrate(d, eps, **kw)
            info = mech.describe()
            for key in ("epsilon_exact", "expected_error", "expected_error_max", *mech.parameters()):
                assert math.isfinite(info[key]), (cls.name, d, eps, key, info[key])
            assert mech.epsilon_exact <= eps and mech.epsilon_exact == pytest.approx(eps, rel=1e-15)
            if closed is not None:
                assert mech.expected_error == pytest.approx(closed(eps), rel=1e-14)
            else:
                assert mech.expected_error == pytest.approx(d * mech.sigma**2, rel=1e-15)
                assert mech.delta_exact <= 1e-6
            errors.append(mech.expected_error)
        assert all(b < a for a, b in zip(errors, errors[1:]))


@pytest.mark.parametrize("chunk", [1, 37, 2**16])
def test_chunked_noise_is_one_draw_of_n_d(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The baselines add their noise chunk by chunk of rows (``sphere.row_chunks``): the result is x
    (projected) plus the same numbers as one draw of n·d, whatever the chunk, rows beyond L included."""
    from ldpcli.math import _rows as rowmath

    monkeypatch.setattr(rowmath, "FUSED_CHUNK_VALUES", chunk)
    x = np.random.default_rng(3).standard_normal((301, 7))
    x[::4] *= 0.05
    for name, options in (("laplace", {}), ("gaussian", {"delta": 1e-6})):
        mech = get_mechanism(name).calibrate(7, 2.0, **options)
        near = mech.domain.nearest(x, mech.norm_bound)
        noise = (np.random.default_rng(9).laplace(0.0, mech.b, size=x.shape) if name == "laplace"
                 else mech.sigma * np.random.default_rng(9).standard_normal(x.shape))
        assert np.array_equal(mech.privatize(x, np.random.default_rng(9)), near + noise), name
