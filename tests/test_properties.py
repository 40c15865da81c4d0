"""Property-based tests (hypothesis) of every registered mechanism: calibration and sampling.

Every mechanism in ``mechanism_names()`` (a newly registered one included) is checked over random
(d, ε, L) and its options:

- the calibration is finite and public: every number in ``describe()`` is finite and the whole is
  JSON without NaN; ``epsilon_exact`` ≤ ε (and ``delta_exact`` ≤ δ for the Gaussian); the errors
  are ≥ 0 with ``expected_error_max`` ≥ ``expected_error``; the mechanism re-created from its
  (JSON round-tripped) description, as ``load_sidecar`` does, is equal to the original;
- the errors scale as L²;
- the expected errors do not increase with ε;
- a seeded Monte Carlo run agrees with ``expected_error`` and is unbiased.

Every test is derandomized (``derandomize=True``): CI runs the same examples each time and cannot
flake. Calibrations that are not monotone in ε by design of the paper's rule they follow are
listed in KNOWN_NON_MONOTONE with the reason (monotonicity is then checked with their integer
parameters held fixed), calibrations chosen by a search certified to a tolerance get that slack
(SEARCH_SLACK), and a test at the end asserts each documented jump; regression tests pin the bugs
this file found.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from helpers import bonferroni_z
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldpcli.errors import UsageError
from ldpcli.mechanisms import Mechanism, get_mechanism, mechanism_names
from ldpcli.mechanisms._bcdp_budget import RTOL as BCDP_SEARCH_RTOL

# ---------------------------------------------------------------------------------------------
# What is drawn
# ---------------------------------------------------------------------------------------------

CASES = [(name, calibration) for name in mechanism_names() for calibration in get_mechanism(name).calibrations]
CASE_IDS = [f"{name}-{calibration}" for name, calibration in CASES]

#: The smallest d a (mechanism, calibration) accepts (Bhowmick et al.'s Thm 1 bounds need d ≥ 3; projunit's k < d, d ≥ 2).
MIN_D = {("privunit2", "bhowmick"): 3, ("separated", "bhowmick"): 3, ("projunit", "optimal"): 2}

D_MAX = 10**6
EPS_MIN, EPS_MAX = 0.01, 1e4
L_MIN, L_MAX = 1e-3, 1e3
#: Relative agreement asked of two computations of the same exact number.
REL = 1e-9

PROPERTY_SETTINGS = settings(
    derandomize=True, deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow]
)


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats spread evenly in log between lo and hi (both included)."""
    return st.floats(math.log(lo), math.log(hi)).map(lambda t: min(hi, max(lo, math.exp(t))))


def dimensions(name: str, calibration: str, high: int = D_MAX) -> st.SearchStrategy[int]:
    """d log-uniform in [MIN_D, high]; d = 1 for a mechanism of one scalar column."""
    if not get_mechanism(name).vector:
        return st.just(1)
    low = MIN_D.get((name, calibration), 1)
    return st.floats(math.log(low), math.log(high)).map(lambda t: min(high, max(low, round(math.exp(t)))))


def option_values(name: str, calibration: str) -> st.SearchStrategy[dict[str, Any]]:
    """The options a mechanism needs (gaussian: δ; separated with bhowmick: the split)."""
    if name == "gaussian":
        return st.fixed_dictionaries({"delta": log_uniform(1e-12, 0.5)})
    if name == "separated" and calibration == "bhowmick":
        return st.fixed_dictionaries({"eps_split": st.floats(0.05, 0.95)})
    if name == "bcdp":  # the first feature more sensitive than the rest (two releases when d ≥ 2); Thm 2's ζ rule
        # with a sensitive feature is not monotone in ε by design (test_bcdp_zeta_rule_is_not_monotone_in_epsilon)
        levels = ["", "0=0.05"] if calibration == "optimal" else [""]
        return st.fixed_dictionaries({"q": st.floats(0.0, 1.0), "feature_eps": st.sampled_from(levels)})
    return st.just({})


def calibrate(name: str, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any) -> Mechanism:
    return get_mechanism(name).calibrate(d, epsilon, norm_bound=norm_bound, calibration=calibration, **options)


# ---------------------------------------------------------------------------------------------
# Known deviations by design (each one asserted by a test at the end of this file)
# ---------------------------------------------------------------------------------------------

#: Default calibrations whose error is not monotone in ε, by design of the paper rule they follow.
#: For these, monotonicity is checked with those parameters held fixed (the ε' mechanism gets the
#: ε mechanism's values of FIXED_PARAMETERS), where it must hold.
KNOWN_NON_MONOTONE = {
    ("scalar", "bhowmick", "expected_error"): "k = ⌈e^{ε/3}⌉ (Bhowmick Lemma 4.4) jumps: +28% at ε = 3·ln 2",
    ("scalar", "bhowmick", "expected_error_max"): "k = ⌈e^{ε/3}⌉ jumps: +16% at ε = 3·ln 2",
    ("scalar-rel", "bhowmick", "expected_error"): "the App. B.2 grid (α, ν, k) is a relative-error heuristic",
    ("scalar-rel", "bhowmick", "expected_error_max"): "App. B.2 grid: +11% from ε = 68.3 to 73.2 (k capped at 2^20)",
    ("separated", "optimal", "expected_error"): "the split minimises expected_error_max, not the boundary error",
    ("separated", "bhowmick", "expected_error"): "the user's split: k = ⌈e^{ε₂/3}⌉ jumps (+5% at ε₂ = 3·ln 2)",
    ("separated", "bhowmick", "expected_error_max"): "the user's split: k = ⌈e^{ε₂/3}⌉ jumps (+5% at ε₂ = 3·ln 2)",
}
FIXED_PARAMETERS = {"scalar": ("k",), "scalar-rel": ("alpha", "nu", "k"), "separated": ("eps_split", "k")}

#: Calibrations whose parameter is the result of a search certified only to a relative tolerance rtol, for
#: the error that search minimises (the error found is at most (1 − rtol)⁻¹ times the infimum over the admissible set): where that
#: infimum does not increase with ε, E(ε') ≤ inf(ε')/(1 − rtol) ≤ inf(ε)/(1 − rtol) ≤ E(ε)/(1 − rtol), and
#: no better, since the search's cells (laid on (0, c_max], c_max growing with ε) end on other points.
#: The monotonicity check allows that slack (test_documented_non_monotone_bcdp_search).
SEARCH_SLACK = {
    ("bcdp", "optimal", "expected_error"): 1.0 / (1.0 - BCDP_SEARCH_RTOL) - 1.0,  # best_c_d's certificate
}


def finite_numbers(value: Any, where: str = "describe()") -> None:
    """Every float inside ``value`` is finite; every leaf is JSON-able."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str), where
            finite_numbers(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            finite_numbers(item, f"{where}[{i}]")
    elif isinstance(value, float):
        assert math.isfinite(value), f"{where} = {value!r}"
    else:
        assert value is None or isinstance(value, (str, int)), f"{where} is a {type(value).__name__}"


def same_number(a: float, b: float, rel: float = REL) -> bool:
    return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


# ---------------------------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name, calibration", CASES, ids=CASE_IDS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_calibration_is_finite_private_and_reproducible(name: str, calibration: str, data: st.DataObject) -> None:
    cls = get_mechanism(name)
    d = data.draw(dimensions(name, calibration), label="d")
    epsilon = data.draw(log_uniform(EPS_MIN, EPS_MAX), label="epsilon")
    norm_bound = data.draw(log_uniform(L_MIN, L_MAX), label="L")
    options = data.draw(option_values(name, calibration), label="options")
    mech = calibrate(name, d, epsilon, norm_bound, calibration, **options)

    info = mech.describe()
    finite_numbers(info)
    text = json.dumps(info, allow_nan=False)
    assert info["mechanism"] == name and info["calibration"] == calibration and info["d"] == d
    assert info["epsilon"] == epsilon and info["norm_bound"] == norm_bound

    assert 0.0 < mech.epsilon_exact <= epsilon * (1.0 + 1e-12), (mech.epsilon_exact, epsilon)
    assert mech.epsilon_exact <= epsilon, (mech.epsilon_exact, epsilon)  # exactly, not even an ulp above (issue 13)
    assert info["epsilon_exact"] == mech.epsilon_exact
    if "delta" in cls.options:
        assert 0.0 <= info["delta_exact"] <= options["delta"], (info["delta_exact"], options["delta"])

    assert mech.expected_error >= 0.0
    assert mech.expected_error_max >= mech.expected_error
    assert math.isfinite(mech.expected_error_max)

    # What load_sidecar does: the mechanism from its JSON description is the same mechanism.
    stored = json.loads(text)
    again = cls.calibrate(
        stored["d"], stored["epsilon"], norm_bound=stored["norm_bound"], calibration=stored["calibration"],
        **{key: stored[key] for key in cls.options},
    )
    assert again == mech
    assert again.describe() == info


@pytest.mark.slow
@pytest.mark.parametrize("name, calibration", CASES, ids=CASE_IDS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_errors_scale_as_norm_bound_squared(name: str, calibration: str, data: st.DataObject) -> None:
    d = data.draw(dimensions(name, calibration), label="d")
    epsilon = data.draw(log_uniform(EPS_MIN, EPS_MAX), label="epsilon")
    norm_bound = data.draw(log_uniform(L_MIN, L_MAX), label="L")
    options = data.draw(option_values(name, calibration), label="options")
    unit = calibrate(name, d, epsilon, 1.0, calibration, **options)
    scaled = calibrate(name, d, epsilon, norm_bound, calibration, **options)
    assert scaled.epsilon_exact == unit.epsilon_exact or same_number(scaled.epsilon_exact, unit.epsilon_exact, 1e-12)
    for quantity in ("expected_error", "expected_error_max"):
        expected = norm_bound**2 * getattr(unit, quantity)
        got = getattr(scaled, quantity)
        if expected < 1e-290 and got < 1e-290:
            continue  # both at the edge of the double range (subnormal): no relative precision left
        assert same_number(got, expected), (quantity, got, expected, got / expected - 1 if expected else None)


@pytest.mark.slow
@pytest.mark.parametrize("name, calibration", CASES, ids=CASE_IDS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_expected_errors_do_not_increase_with_epsilon(name: str, calibration: str, data: st.DataObject) -> None:
    d = data.draw(dimensions(name, calibration), label="d")
    epsilon = data.draw(log_uniform(EPS_MIN, EPS_MAX / 2), label="epsilon")
    # Mostly a real step up in ε, sometimes the next float or so (where an exact tie is possible).
    factor = data.draw(st.one_of(log_uniform(1.0 + 1e-6, 100.0), st.floats(1.0, 1.0 + 1e-12)), label="factor")
    larger = min(EPS_MAX, epsilon * factor)
    norm_bound = data.draw(log_uniform(L_MIN, L_MAX), label="L")
    options = data.draw(option_values(name, calibration), label="options")
    low = calibrate(name, d, epsilon, norm_bound, calibration, **options)
    high = calibrate(name, d, larger, norm_bound, calibration, **options)
    tie_possible = larger <= epsilon * (1.0 + 1e-9)
    for quantity in ("expected_error", "expected_error_max"):
        if (name, calibration, quantity) in KNOWN_NON_MONOTONE:
            fixed = {key: getattr(low, key) for key in FIXED_PARAMETERS[name]}
            compare = calibrate(name, d, larger, norm_bound, calibration, **{**options, **fixed})
        else:
            compare = high
        before, after = getattr(low, quantity), getattr(compare, quantity)
        slack = max(REL if tie_possible else 0.0, SEARCH_SLACK.get((name, calibration, quantity), 0.0))
        assert after <= before * (1.0 + slack), (quantity, epsilon, larger, before, after, after / before - 1)


# ---------------------------------------------------------------------------------------------
# Sampling: a small seeded Monte Carlo run against the exact error, and unbiasedness
# ---------------------------------------------------------------------------------------------

MC_ROWS = 4000
#: Family-wise false-alarm rate of the mean test of one example (Bonferroni over coordinates).
MC_ALPHA = 1e-6


def boundary_input(mech: Mechanism, rng: np.random.Generator) -> np.ndarray:
    """A fixed input on the boundary of the mechanism's domain, where ``expected_error`` holds."""
    L = mech.norm_bound
    if mech.domain == "l2-ball":
        u = rng.standard_normal(mech.d)
        return L * u / np.linalg.norm(u)
    if mech.domain == "linf-box":
        return L * rng.choice([-1.0, 1.0], size=mech.d)
    if mech.domain == "interval":
        return np.array([L])
    raise AssertionError(f"no boundary input for domain {mech.domain!r}")


@pytest.mark.parametrize("name, calibration", CASES, ids=CASE_IDS)
@settings(derandomize=True, deadline=None, max_examples=12, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_monte_carlo_error_and_mean(name: str, calibration: str, data: st.DataObject) -> None:
    d = data.draw(dimensions(name, calibration, high=8), label="d")
    epsilon = data.draw(log_uniform(0.5, 8.0), label="epsilon")
    norm_bound = data.draw(log_uniform(L_MIN, L_MAX), label="L")
    options = data.draw(option_values(name, calibration), label="options")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    mech = calibrate(name, d, epsilon, norm_bound, calibration, **options)
    rng = np.random.default_rng(seed)
    x = boundary_input(mech, rng)
    rows = np.tile(x, (MC_ROWS, 1))
    clipped, moved = mech.project(rows.copy())
    assert moved == 0 and np.array_equal(clipped, rows)  # on the boundary: within the domain
    z = mech.privatize(rows.copy(), rng)
    assert z.shape == (MC_ROWS, d) and z.dtype == np.float64 and np.isfinite(z).all()

    # E‖Z − x‖² = expected_error, within 6 standard errors of the sample mean.
    sq = np.einsum("ij,ij->i", z - x, z - x)
    se = sq.std(ddof=1) / math.sqrt(MC_ROWS)
    assert abs(sq.mean() - mech.expected_error) <= 6.0 * se + 1e-12 * mech.expected_error, (
        sq.mean(), mech.expected_error, se)

    # E[Z] = x, every coordinate, Bonferroni over the d coordinates.
    z_crit = bonferroni_z(MC_ALPHA, d)
    spread = z.std(axis=0, ddof=1) / math.sqrt(MC_ROWS)
    assert (spread > 0).all()
    score = np.abs(z.mean(axis=0) - x) / spread
    assert score.max() <= z_crit, (score, z_crit)


# ---------------------------------------------------------------------------------------------
# Regression tests for the bugs found here, and the documented non-monotone cases
# ---------------------------------------------------------------------------------------------


def test_regression_scalar_error_keeps_l2_scaling_near_underflow() -> None:
    eps, L = 690.2096308174657, 0.026931792251442727
    unit, scaled = calibrate("scalar", 1, eps, 1.0, "bhowmick"), calibrate("scalar", 1, eps, L, "bhowmick")
    assert same_number(scaled.expected_error, L**2 * unit.expected_error)


def test_regression_scalar_rel_top_grid_point_is_r_max() -> None:
    eps, L = 63.83170433047907, 37.524723159601
    scaled = calibrate("scalar-rel", 1, eps, L, "bhowmick")
    assert scaled.grid[-1] == L  # the docstring: "the top grid point is r_max itself"


def test_regression_separated_default_split_does_not_depend_on_the_norm_bound() -> None:
    d, eps, L = 18, 673.2250500712365, 752.7705759752173
    assert calibrate("separated", d, eps, L, "optimal").eps_split == calibrate("separated", d, eps, 1.0, "optimal").eps_split


def test_regression_separated_worst_case_error_scales_at_huge_k() -> None:
    d, eps, L = 13, 761.3067159661897, 0.008424975758288808
    unit, scaled = calibrate("separated", d, eps, 1.0, "optimal"), calibrate("separated", d, eps, L, "optimal")
    assert unit.k == scaled.k == 2**52
    assert same_number(scaled.expected_error_max, L**2 * unit.expected_error_max)


def test_regression_separated_worst_case_error_does_not_rise_with_epsilon_at_huge_k() -> None:
    """k ≈ 3.3e13: the sup was read at the rounded norm r_max − s*·g, jittering by a relative 1e−5, so the
    split search landed on a worse split at the next ε (+5e−8; found at tests/mechanisms/ node ids)."""
    low = calibrate("separated", 1, 157.98498549518746, 1.0, "optimal")
    high = calibrate("separated", 1, 157.9849854952292, 1.0, "optimal")
    assert low.k > 10**13
    assert high.expected_error_max <= low.expected_error_max
    # The sup itself, against a fine scan of the top cell at the same split (error_at at each norm).
    g = low.magnitude.grid_step
    scan = low.error_at(1.0 - g * np.linspace(0.0, 1.0, 2001)).max()
    assert low.expected_error_max >= scan * (1.0 - 1e-12)


def test_regression_separated_split_search_does_not_stop_on_a_worse_tooth() -> None:
    """k = ⌈e^{ε₂/3}⌉ ≈ 42 700 makes the objective a saw-tooth in the split; Brent's method stopped on
    different teeth at two ε one part in 1e12 apart, and the worst-case error rose by 9e−9 (a seeded scan)."""
    low = calibrate("separated", 186, 1698.512403575758, 1.0, "optimal")
    high = calibrate("separated", 186, 1698.512403577971, 1.0, "optimal")
    assert high.expected_error_max <= low.expected_error_max


def test_regression_bcdp_budget_search_survives_errors_beyond_the_double_range() -> None:
    """q = 2.2e−309 (a draw at tests/mechanisms/ node ids): bcdp's c_d search gave the one-feature release a
    budget below 1e−154, where PrivUnit2's (and Duchi's) 1/m² exceeds 1.8e308 and math.exp raised."""
    for base in ("privunit2", "duchi-l2"):
        mech = calibrate("bcdp", 2, 1.0, 1.0, "optimal", q=2.225073858507203e-309, feature_eps="0=0.05", base=base)
        finite_numbers(mech.describe())
        assert 0.0 < mech.epsilon_exact <= 1.0
    for base in ("privunit2", "duchi-l2"):  # the error there is beyond the double range: inf, its rounding
        tiny = get_mechanism(base).calibrate(1, 1e-200, norm_bound=1.0)
        assert tiny.expected_error == tiny.expected_error_max == math.inf


def test_documented_non_monotone_scalar() -> None:
    """By design of the paper's rule: k = ⌈e^{ε/3}⌉ jumps, so a little more ε can give more error."""
    eps = 3.0 * math.log(2.0)
    low, high = calibrate("scalar", 1, eps, 1.0, "bhowmick"), calibrate("scalar", 1, eps * (1 + 1e-9), 1.0, "bhowmick")
    assert (low.k, high.k) == (2, 3)
    assert high.expected_error > low.expected_error and high.expected_error_max > low.expected_error_max


def test_documented_non_monotone_scalar_rel() -> None:
    """By design of App. B.2's relative-error grid (k capped at 2^20): more ε, more worst-case error."""
    low, high = calibrate("scalar-rel", 1, 68.3261, 1.0, "bhowmick"), calibrate("scalar-rel", 1, 73.2254, 1.0, "bhowmick")
    assert high.expected_error_max > low.expected_error_max


def test_documented_non_monotone_separated_boundary_error() -> None:
    """The optimal split minimises the worst case, so the boundary error may rise with ε."""
    # (The pair before the split's tooth search, d = 5 at ε = 119.65617…/119.65628…, no longer rises.)
    low = calibrate("separated", 51, 933.2797802751754, 1.0, "optimal")
    high = calibrate("separated", 51, 933.2797815915931, 1.0, "optimal")
    assert high.expected_error > low.expected_error
    assert high.expected_error_max <= low.expected_error_max


def test_documented_non_monotone_separated_with_a_given_split() -> None:
    """With the user's split, k = ⌈e^{ε₂/3}⌉ jumps as in ScalarDP."""
    eps = 2.0 * 3.0 * math.log(2.0)  # ε₂ = 3·ln 2 at the split 1/2
    low = calibrate("separated", 3, eps, 1.0, "bhowmick", eps_split=0.5)
    high = calibrate("separated", 3, eps * (1 + 1e-9), 1.0, "bhowmick", eps_split=0.5)
    assert (low.k, high.k) == (2, 3)
    assert high.expected_error_max > low.expected_error_max


def test_documented_non_monotone_bcdp_search() -> None:
    """bcdp's c_d is certified to a relative RTOL, not found exactly: at ε = 1 and e the optimum (0.2257) is
    inside both admissible sets, but the searches (cells on (0, 1] and (0, 1.45]) stop 5e−9 apart, and
    the error, flat there, rises by a relative 1e−15 (a --hypothesis-seed=11 draw), within SEARCH_SLACK."""
    options = {"q": 0.015625, "feature_eps": "0=0.05"}
    low, high = (calibrate("bcdp", 3, eps, 1.0, "optimal", **options) for eps in (1.0, math.e))
    assert low.c_total != high.c_total and abs(low.c_total - high.c_total) < 1e-7 * low.c_total
    assert low.expected_error < high.expected_error <= low.expected_error * (1.0 + SEARCH_SLACK[("bcdp", "optimal", "expected_error")])


def test_known_exemptions_name_registered_mechanisms() -> None:
    """The exemption tables must not go stale silently."""
    names = set(mechanism_names())
    assert set(KNOWN_NON_MONOTONE) <= {(name, calibration, q) for name, calibration in CASES
                                       for q in ("expected_error", "expected_error_max")}
    assert set(FIXED_PARAMETERS) <= names
    assert set(SEARCH_SLACK) <= {(name, calibration, "expected_error") for name, calibration in CASES}
    with pytest.raises(UsageError):
        calibrate("privunit2", 2, 1.0, 1.0, "bhowmick")  # MIN_D is a real constraint


def test_bcdp_zeta_rule_is_not_monotone_in_epsilon() -> None:
    """Thm 2 (16) with a sensitive feature: a larger ε raises c_d = min(log((e^{ζδ̃₁} + q − 1)/q), ε) and so
    lowers c₁ = δ̃₁ − log(1 + q·e^{c_d} − q): the first feature's error, and here the total, grows (+115%).
    The default calibration (c_d optimised over a feasible set that grows with ε) has no such jump."""
    options = {"q": 0.0078125, "feature_eps": "0=0.05"}
    low, high = (calibrate("bcdp", 3, eps, 1.0, "zeta", **options) for eps in (1.0, math.e))
    assert high.expected_error > 2.0 * low.expected_error
    best_low, best_high = (calibrate("bcdp", 3, eps, 1.0, "optimal", **options) for eps in (1.0, math.e))
    assert best_high.expected_error <= best_low.expected_error * (1 + 1e-9)  # the same c_d, up to the search

