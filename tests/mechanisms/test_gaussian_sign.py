"""gaussian-sign: Błasiok et al. 2019 Def. 5.5 with the corrected scale and bias (docs/errata.md §17)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special

from ldpcli.mechanisms import GaussianSign, get_mechanism

EPS = (0.01, 0.1, 0.5, 1.0, 1.5, 3.0, 8.0, 100.0, 10_000.0)
DIMS = (1, 2, 3, 10, 112, 1000, 10**6)


@pytest.mark.parametrize("eps", EPS)
def test_exact_epsilon_by_the_output_density(eps: float) -> None:
    """The density of W/s relative to φ is 1 + b·ρ·sign⟨v, u⟩ (module docstring): enumerate the
    ratio over inputs ρu (ρ ∈ [−1, 1]) on both half-spaces; its maximum is e^ε, attained at ±u."""
    mech = GaussianSign.calibrate(5, eps)
    rho = np.linspace(-1.0, 1.0, 201)
    # 1 ± b·ρ ∝ (1 ± ρ)·e^{ε/2} + (1 ∓ ρ)·e^{−ε/2} with b = tanh(ε/2), in logs so that ε = 10⁴ stays finite
    with np.errstate(divide="ignore"):
        up, down = np.log1p(rho), np.log1p(-rho)
    half = 0.5 * mech.epsilon
    log_density = np.concatenate([np.logaddexp(up + half, down - half), np.logaddexp(down + half, up - half)])
    by_input = log_density.reshape(2, -1)
    worst = float(np.max(by_input[:, :, None] - by_input[:, None, :]))
    assert worst == pytest.approx(eps, rel=1e-12)
    assert mech.epsilon_exact == eps
    route, _ = mech.audit_epsilon()
    assert route == pytest.approx(eps, rel=1e-10, abs=1e-13)


@pytest.mark.parametrize("eps", (0.3, 1.0, 4.0))
@pytest.mark.parametrize("x", (-1.0, -0.4, 0.0, 0.7, 1.0))
def test_d1_closed_form_mean_and_second_moment(eps: float, x: float) -> None:
    """d = 1: W has density φ(w/s)/s·(1 + b·(x/L)·sign w); integrate it (no sampling)."""
    mech = GaussianSign.calibrate(1, eps, norm_bound=2.0)
    s, b, lx = mech.gaussian_scale, mech.bias, 2.0 * x

    def density(w: float) -> float:
        return math.exp(-0.5 * (w / s) ** 2) / (s * math.sqrt(2 * math.pi)) * (1.0 + b * x * math.copysign(1.0, w))

    total = sum(integrate.quad(density, lo, hi)[0] for lo, hi in ((-math.inf, 0.0), (0.0, math.inf)))
    mean = sum(integrate.quad(lambda w: w * density(w), lo, hi)[0] for lo, hi in ((-math.inf, 0.0), (0.0, math.inf)))
    second = sum(integrate.quad(lambda w: (w - lx) ** 2 * density(w), lo, hi)[0]
                 for lo, hi in ((-math.inf, 0.0), (0.0, math.inf)))
    assert total == pytest.approx(1.0, rel=1e-10)
    assert mean == pytest.approx(lx, rel=1e-9, abs=1e-12)
    assert second == pytest.approx(mech.expected_error_max - lx * lx, rel=1e-9)
    if abs(x) == 1.0:
        assert second == pytest.approx(mech.expected_error, rel=1e-9)


@pytest.mark.parametrize("d, eps", [(1, 0.5), (3, 1.0), (16, 4.0), (200, 0.2), (50, 50.0)])
def test_unbiased_and_error_by_monte_carlo(d: int, eps: float) -> None:
    """Seeded Monte Carlo: each coordinate of the mean within 5 standard errors, E‖W − x‖² within
    5 standard errors of s²d − ‖x‖², at x on the sphere, inside and at 0."""
    mech = GaussianSign.calibrate(d, eps, norm_bound=3.0)
    rng = np.random.default_rng([17, d])
    n = 40_000
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    for x in (3.0 * direction, 1.2 * direction, np.zeros(d)):
        z = mech.privatize(np.tile(x, (n, 1)), rng)
        mean, se = z.mean(axis=0), z.std(axis=0, ddof=1) / math.sqrt(n)
        assert np.all(np.abs(mean - x) <= 5.0 * se + 1e-12)
        err = np.einsum("ij,ij->i", z - x, z - x)
        expected = mech.expected_error_max - float(x @ x)
        assert abs(err.mean() - expected) <= 5.0 * err.std(ddof=1) / math.sqrt(n)
    assert mech.expected_error == pytest.approx(mech.expected_error_max - 9.0, rel=1e-12)


def _printed_randomizer(x: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Def. 5.5 as printed: E[S | Z, U] = (ε/3)·sign⟨Z, U⟩ and W = 3/(√π·ε)·Z·S (unit ball)."""
    n, d = x.shape
    norms = np.linalg.norm(x, axis=1)
    u = x / norms[:, None] * np.where(rng.random(n) < (1 + norms) / 2, 1.0, -1.0)[:, None]
    z = rng.standard_normal((n, d))
    sign = np.where(np.einsum("ij,ij->i", z, u) >= 0, 1.0, -1.0)
    s = np.where(rng.random(n) < (1 + eps / 3) / 2, sign, -sign)
    return 3.0 / (math.sqrt(math.pi) * eps) * z * s[:, None]


def test_the_printed_scale_is_biased_and_ours_is_not() -> None:
    """Erratum 17: the printed construction gives E[W] = (√2/π)·x ≈ 0.45·x. Ours satisfies
    s·b·E|N(0, 1)| = L exactly, and its Monte Carlo mean is x where the printed one's is 0.45·x."""
    eps, d, n = 1.0, 5, 200_000
    x = np.zeros(d)
    x[0] = 1.0
    rng = np.random.default_rng(5)
    printed = _printed_randomizer(np.tile(x, (n, 1)), eps, rng)[:, 0]
    assert abs(printed.mean() - math.sqrt(2) / math.pi) <= 5.0 * printed.std() / math.sqrt(n)
    assert abs(printed.mean() - 1.0) > 50.0 * printed.std() / math.sqrt(n)
    mech = GaussianSign.calibrate(d, eps)
    assert mech.gaussian_scale * mech.bias * math.sqrt(2.0 / math.pi) == pytest.approx(1.0, rel=1e-14)
    ours = mech.privatize(np.tile(x, (n, 1)), rng)[:, 0]
    assert abs(ours.mean() - 1.0) <= 5.0 * ours.std() / math.sqrt(n)
    # the printed scale with our bias is still biased: it is the scale, not only the bias, that is wrong
    assert 3.0 / (math.sqrt(math.pi) * eps) * mech.bias * math.sqrt(2.0 / math.pi) != pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("eps", EPS)
def test_it_loses_to_privunit2_and_to_the_hemisphere(d: int, eps: float) -> None:
    """Worst-case error ≥ PrivUnit2's at every (d, ε) (strictly above d = 1 … ), and exactly
    d·B(d/2, 1/2)²/(2π) times the hemisphere mechanism's (π/2 at d = 1, → 1 as d grows)."""
    mech = GaussianSign.calibrate(d, eps)
    privunit2 = get_mechanism("privunit2").calibrate(d, eps)
    hemisphere = get_mechanism("duchi-l2").calibrate(d, eps)
    assert mech.expected_error_max > privunit2.expected_error_max
    log_ratio = math.log(d) + 2.0 * special.betaln(d / 2.0, 0.5) - math.log(2.0 * math.pi)
    assert mech.expected_error_max / hemisphere.expected_error_max == pytest.approx(math.exp(log_ratio), rel=1e-9)
    assert math.isfinite(mech.expected_error_max) and math.isfinite(mech.expected_error)


def test_second_moments_by_monte_carlo() -> None:
    mech = GaussianSign.calibrate(6, 2.0, norm_bound=1.5)
    rng = np.random.default_rng(9)
    u = np.zeros(6)
    u[2] = 1.0
    z = mech.privatize(np.tile(0.4 * u, (100_000, 1)), rng)
    along, across = z[:, 2] ** 2, z[:, 4] ** 2
    a, b = mech.second_moments()
    for values, expected in ((along, a), (across, b)):
        assert abs(values.mean() - expected) <= 5.0 * values.std() / math.sqrt(values.size)


def test_law_tests_pass_on_its_own_output_and_fail_on_the_printed_one() -> None:
    """The law tests accept the mechanism's rows and reject the printed Def. 5.5's (wrong scale)."""
    mech = GaussianSign.calibrate(4, 1.0)
    rng = np.random.default_rng(3)
    x = np.array([0.6, 0.0, 0.0, 0.0])
    ours = mech.law_tests(x, mech.privatize(np.tile(x, (20_000, 1)), rng))
    assert min(t.p_value for t in ours) > 1e-4
    printed = mech.law_tests(x, _printed_randomizer(np.tile(x, (20_000, 1)), 1.0, rng))
    assert min(t.p_value for t in printed) < 1e-10
