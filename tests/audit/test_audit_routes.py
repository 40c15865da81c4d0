"""Second routes to ε (each mechanism's ``audit_epsilon``) for every mechanism but PrivUnit2.

Each route must agree with ``epsilon_exact`` within the audit's tolerance over a (d, ε) grid, must
disagree (or make ``ldp audit`` fail) on a deliberately broken calibration, and the full audit must
pass on the honest mechanisms.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest
from helpers import AUDIT_D_GRID, AUDIT_EPS_GRID

from ldpcli.audit._claims import EPSILON_TOLERANCE, audit
from ldpcli.mechanisms import (
    DuchiL2,
    Gaussian,
    Laplace,
    Mechanism,
    PrivUnitG,
    ScalarDP,
    ScalarRelDP,
    Separated,
    get_mechanism,
)
from ldpcli.mechanisms import _scalar as scalar_module
from ldpcli.mechanisms._baselines import classic_gaussian_sigma, gaussian_log_delta, gaussian_log_delta_by_quadrature
from ldpcli.mechanisms._privunitg import normal_tail_log_by_quadrature
from ldpcli.mechanisms._scalar import enumerated_rr_epsilon

VECTOR = ["privunitg", "duchi-l2", "separated", "laplace", "gaussian"]
SCALAR = ["scalar", "scalar-rel"]


def calibrate(name: str, d: int, eps: float, **options: object) -> Mechanism:
    if name == "gaussian":
        options.setdefault("delta", 1e-6)
    return get_mechanism(name).calibrate(d, eps, **options)


def tolerance(mech: Mechanism) -> float:
    return EPSILON_TOLERANCE * max(1.0, mech.epsilon)


def assert_agrees(mech: Mechanism) -> None:
    eps2, route = mech.audit_epsilon()
    assert route and "\n" not in route
    assert math.isfinite(eps2)
    assert abs(eps2 - mech.epsilon_exact) <= tolerance(mech), (mech.name, mech.d, mech.epsilon, eps2, route)


def assert_disagrees(mech: Mechanism) -> None:
    eps2, route = mech.audit_epsilon()
    assert abs(eps2 - mech.epsilon_exact) > tolerance(mech), (mech.name, eps2, mech.epsilon_exact, route)
    assert not audit(mech, trials=100, seed=0).privacy_ok


# --- agreement over the grid -----------------------------------------------------------------


@pytest.mark.parametrize("eps", AUDIT_EPS_GRID)
@pytest.mark.parametrize("d", AUDIT_D_GRID)
@pytest.mark.parametrize("name", VECTOR)
def test_vector_routes_agree(name: str, d: int, eps: float) -> None:
    assert_agrees(calibrate(name, d, eps))


@pytest.mark.parametrize("eps", AUDIT_EPS_GRID)
@pytest.mark.parametrize("name", SCALAR)
def test_scalar_routes_agree(name: str, eps: float) -> None:
    assert_agrees(calibrate(name, 1, eps))


@pytest.mark.parametrize("name", VECTOR)
@pytest.mark.parametrize("d, eps", [(10**7, 0.01), (10**7, 1e4), (3, 1e4)])
def test_vector_routes_agree_at_the_extremes(name: str, d: int, eps: float) -> None:
    assert_agrees(calibrate(name, d, eps))


@pytest.mark.parametrize("eps", [0.01, 3.0, 30.0, 800.0])
@pytest.mark.parametrize("k", [1, 2, 63, 64, 500, 5000, 2**40])
def test_scalar_route_every_enumeration_tier(k: int, eps: float) -> None:
    """Exact Fractions (k + 1 ≤ 64, e^ℓ finite), the dense log table, and the symbolic classes."""
    assert_agrees(ScalarDP.calibrate(1, eps, k=k))


@pytest.mark.parametrize(
    "eps, options",
    [
        (2.0, {"alpha": 0.7}),  # v_1 = αν > r_max: only 0 and r_max, exact level below ε
        (0.5, {"alpha": 0.9, "nu": 3.0, "k": 3}),  # the same, with grid points above r_max
        (800.0, {"alpha": 2.0, "nu": 1.5}),  # the same at large ε (log-space tier)
        (8.0, {"alpha": 0.3, "nu": 1.5, "norm_bound": 3.7}),  # r_max inside the top cell
        (8.0, {"alpha": 0.001, "nu": 1.01, "norm_bound": 3.7}),  # dense tier, r_max inside a cell
        (30.0, {}),
        (1e4, {}),  # k = 2^20: symbolic tier
    ],
)
def test_scalar_rel_route_with_r_max_off_the_grid(eps: float, options: dict) -> None:
    mech = ScalarRelDP.calibrate(1, eps, **options)
    assert_agrees(mech)


def test_scalar_rel_route_sees_the_reduced_level() -> None:
    mech = ScalarRelDP.calibrate(1, 2.0, alpha=0.7)
    assert mech.epsilon_exact < 2.0 - 0.05
    assert mech.audit_epsilon()[0] == pytest.approx(mech.epsilon_exact, rel=1e-12)


@pytest.mark.parametrize("n_grid, expected", [
    (4, lambda e: math.log(e)),  # two grid inputs for column 0 already give the full ratio e^ε
    (1, lambda e: max(math.log(e / (0.75 * e + 0.25)), math.log(0.25 * e + 0.75))),  # only 0 and r_max
])
def test_enumeration_tiers_agree_with_each_other(monkeypatch: pytest.MonkeyPatch, n_grid: int, expected) -> None:
    """One channel (k = 5, r_max inside a cell) through the exact, the dense and the symbolic enumeration."""
    extra = (n_grid - 1, 0.25)
    exact = enumerated_rr_epsilon(5, 0.3, n_grid, extra, (n_grid - 1, Fraction(1, 4)))
    assert exact[1].startswith("exact rational")
    assert exact[0] == pytest.approx(expected(5 * math.exp(0.3)), rel=1e-14)
    assert enumerated_rr_epsilon(5, 0.3, n_grid, extra) == exact
    monkeypatch.setattr(scalar_module, "_EXACT_OUTPUTS", 0)
    dense = enumerated_rr_epsilon(5, 0.3, n_grid, extra)
    assert dense[1].startswith("log-space") and dense[0] == pytest.approx(exact[0], rel=1e-14)
    monkeypatch.setattr(scalar_module, "_DENSE_ENTRIES", 0)
    symbolic = enumerated_rr_epsilon(5, 0.3, n_grid, extra)
    assert symbolic[1].startswith("symbolic") and symbolic[0] == pytest.approx(exact[0], rel=1e-14)


def test_quadrature_helpers_against_closed_forms() -> None:
    from scipy import special

    for c in [0.0, 0.4, 3.0, 37.0, 140.0]:
        assert normal_tail_log_by_quadrature(c) == pytest.approx(float(special.log_ndtr(-c)), rel=1e-12)
    for ratio, eps in [(0.5, 0.1), (2.0, 2.0), (10.0, 8.0), (150.0, 1e4)]:
        assert gaussian_log_delta_by_quadrature(ratio, eps) == pytest.approx(gaussian_log_delta(ratio, eps), rel=1e-10)


# --- broken calibrations -----------------------------------------------------------------------


@pytest.mark.parametrize("c", [-3.0, -0.5, 0.0, 0.5])
def test_privunitg_route_on_either_side_of_the_median(c: float) -> None:
    """Splits with c ≤ 0 (q ≤ ½) are tight too; the route integrates the smaller side either way."""
    from ldpcli.mechanisms._privunitg import split_at_threshold

    s = split_at_threshold(c, 1.0)
    mech = dataclasses.replace(
        PrivUnitG.calibrate(9, 1.0), threshold=s.threshold, logit_p=s.logit_p, log_q=s.log_q,
        log_one_minus_q=s.log_1mq, log_mu=s.log_mu, var_z=s.var_z,
    )
    assert_agrees(mech)


def test_privunitg_threshold_not_matching_its_split() -> None:
    honest = PrivUnitG.calibrate(9, 2.0)
    assert_disagrees(dataclasses.replace(honest, threshold=honest.threshold + 0.05))


def test_privunitg_p_too_large_fails_the_audit() -> None:
    broken = dataclasses.replace(PrivUnitG.calibrate(9, 2.0), logit_p=PrivUnitG.calibrate(9, 2.0).logit_p + 0.1)
    assert_agrees(broken)  # the level is computed right, but it exceeds the ε asked for
    assert not audit(broken, trials=100, seed=0).privacy_ok


def test_duchi_l2_printed_radius_fails_the_audit() -> None:
    honest = DuchiL2.calibrate(9, 2.0)
    broken = dataclasses.replace(honest, log_scale=honest.log_scale + math.log(2.0))  # ERRATA 11
    assert_agrees(broken)  # the radius plays no part in the privacy level ...
    result = audit(broken, trials=3000, seed=5)
    assert result.privacy_ok and not result.passed  # ... but E[Z] = 2x


class BinaryTruthScalarDP(ScalarDP):
    """k-ary randomized response told the binary probability of the truth, e^ε/(1 + e^ε)."""

    @property
    def truth_logit(self) -> float:  # type: ignore[override]
        return self.epsilon


class BinaryTruthScalarRelDP(ScalarRelDP):
    @property
    def truth_logit(self) -> float:  # type: ignore[override]
        return self.epsilon


@pytest.mark.parametrize("eps, k", [(2.0, 5), (8.0, None), (20.0, None), (100.0, None)])
def test_scalar_truth_probability_not_matching_k(eps: float, k: int | None) -> None:
    honest = ScalarDP.calibrate(1, eps, k=k)
    assert_disagrees(BinaryTruthScalarDP(**{f.name: getattr(honest, f.name) for f in dataclasses.fields(honest)}))


@pytest.mark.parametrize("eps", [8.0, 100.0])
def test_scalar_rel_truth_probability_not_matching_k(eps: float) -> None:
    honest = ScalarRelDP.calibrate(1, eps)
    assert_disagrees(BinaryTruthScalarRelDP(**{f.name: getattr(honest, f.name) for f in dataclasses.fields(honest)}))


def test_scalar_another_k_is_still_eps_dp() -> None:
    """k is not a privacy parameter: randomized response at logit ε − log k is ε-DP for every k."""
    honest = ScalarDP.calibrate(1, 8.0)
    assert_agrees(dataclasses.replace(honest, k=3 * honest.k))


@pytest.mark.parametrize("d, eps", [(9, 2.0), (500, 8.0)])
def test_separated_direction_with_a_stale_cap_probability(d: int, eps: float) -> None:
    honest = Separated.calibrate(d, eps)
    direction = dataclasses.replace(honest.direction, log_cap_probability=honest.direction.log_cap_probability + 0.01)
    assert_disagrees(dataclasses.replace(honest, direction=direction))


def test_separated_magnitude_with_a_binary_truth_probability() -> None:
    honest = Separated.calibrate(9, 8.0)
    magnitude = BinaryTruthScalarDP(**{f.name: getattr(honest.magnitude, f.name) for f in dataclasses.fields(honest.magnitude)})
    if magnitude.k == 1:  # pragma: no cover - k = 1 is binary randomized response, nothing to break
        pytest.skip("k = 1")
    assert_disagrees(dataclasses.replace(honest, magnitude=magnitude))


class L2SensitivityLaplace(Laplace):
    """The classic slip: the ℓ2 sensitivity 2L used where the ℓ1 sensitivity 2L√d belongs."""

    @property
    def l1_sensitivity(self) -> float:  # type: ignore[override]
        return 2.0 * self.norm_bound


@pytest.mark.slow
@pytest.mark.parametrize("d", [9, 500])
def test_laplace_calibrated_to_the_l2_sensitivity(d: int) -> None:
    broken = L2SensitivityLaplace(d, 2.0, 1.0, "classic", 2.0 / 2.0)  # b = 2L/ε
    assert broken.epsilon_exact == pytest.approx(2.0)
    assert broken.audit_epsilon()[0] == pytest.approx(2.0 * math.sqrt(d))
    assert_disagrees(broken)


def test_laplace_b_too_small_fails_the_audit() -> None:
    honest = Laplace.calibrate(9, 2.0)
    broken = dataclasses.replace(honest, b=0.9 * honest.b)
    assert_agrees(broken)  # ε_exact = Δ₁/b is right, and larger than ε
    assert not audit(broken, trials=100, seed=0).privacy_ok


@pytest.mark.parametrize("factor", [0.999999, 0.9])
def test_gaussian_sigma_too_small(factor: float) -> None:
    honest = Gaussian.calibrate(9, 2.0, delta=1e-6)
    broken = dataclasses.replace(honest, sigma=factor * honest.sigma)
    eps2, route = broken.audit_epsilon()
    assert "EXCEEDS" in route and eps2 > 2.0 + tolerance(broken)
    assert_disagrees(broken)


@pytest.mark.parametrize("eps", [20.0, 100.0])
def test_gaussian_classic_sigma_is_not_private_at_large_eps(eps: float) -> None:
    """σ = Δ√(2 log(1.25/δ))/ε is below the analytic σ from ε ≈ 9 on (δ = 1e−6): not (ε, δ)-DP."""
    honest = Gaussian.calibrate(500, eps, delta=1e-6)
    broken = dataclasses.replace(honest, sigma=classic_gaussian_sigma(eps, 1e-6, 2.0))
    assert broken.sigma < honest.sigma
    assert_disagrees(broken)


# --- the whole audit ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("d, eps", [(9, 2.0), (500, 8.0)])
@pytest.mark.parametrize("name", VECTOR + SCALAR)
def test_audit_passes(name: str, d: int, eps: float) -> None:
    mech = calibrate(name, 1 if name in SCALAR else d, eps)
    result = audit(mech, trials=3000, seed=11)
    assert result.privacy_ok and result.passed, result.to_dict()
    assert result.epsilon_second_route is not None
    assert abs(result.epsilon_second_route - mech.epsilon_exact) <= tolerance(mech)
