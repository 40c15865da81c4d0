"""The bcdp mechanism (Aliakbarpour et al. 2024, Mechanism 1, Thm 2): privacy, exact errors, weights.

Monte Carlo tests are seeded and their tolerances come from the sampling error (a Bonferroni-
corrected normal quantile over the statistics compared), so they cannot flake.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import bonferroni_z

from ldpcli.errors import UsageError
from ldpcli.mechanisms import BCDP, MechanismSpec, get_mechanism
from ldpcli.mechanisms._composition import release_cost

#: The paper's experiment (App. C, errata §15): d = 10, δ = (0.2, 0.2, 2, …, 2), ε = 2.
PAPER = {"feature_eps": "0:1=0.2"}


def bcdp(d: int, epsilon: float, q: float, levels: str = "", calibration: str | None = None, **options: object) -> BCDP:
    mech = get_mechanism("bcdp").calibrate(d, epsilon, calibration=calibration, q=q, feature_eps=levels, **options)
    assert isinstance(mech, BCDP)
    return mech


@pytest.mark.parametrize("base", ["privunit2", "privunitg", "duchi-l2"])
@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 1.0])
def test_exact_privacy_is_the_sum_of_the_used_increments_and_every_level_holds(base: str, q: float) -> None:
    mech = bcdp(10, 2.0, q, "0:1=0.2,5=0.7", base=base)
    assert mech.epsilon_exact <= 2.0 * (1 + 1e-12)
    assert math.isclose(mech.epsilon_exact, mech.c_total, rel_tol=1e-12)
    assert math.isclose(mech.audit_epsilon()[0], mech.epsilon_exact, rel_tol=1e-9)
    granted = mech.feature_levels()
    asked = np.minimum(mech.levels, 2.0)
    assert np.all(granted <= asked * (1 + 1e-12)), (granted, asked)
    # zero increments are skipped (errata §14): one release per distinct budget, at most 3 here
    assert len(mech.parts) == len(np.unique(mech.budget)) <= 3
    assert all(part.epsilon_exact > 0 for part in mech.parts)


def test_all_levels_equal_is_the_base_mechanism_on_the_ball_that_holds_the_box() -> None:
    d, eps, L = 6, 3.0, 0.5
    mech = get_mechanism("bcdp").calibrate(d, eps, norm_bound=L, q=0.3)
    base = get_mechanism("privunit2").calibrate(d, eps, norm_bound=L * math.sqrt(d))
    assert len(mech.parts) == 1 and mech.parts[0] == base
    assert math.isclose(mech.expected_error, base.expected_error, rel_tol=1e-12)
    assert math.isclose(mech.expected_error_max, base.expected_error_max, rel_tol=1e-12)
    x = np.random.default_rng(0).uniform(-L, L, (50, d))
    assert np.array_equal(mech.privatize(x, np.random.default_rng(1)), base.privatize(x, np.random.default_rng(1)))


def test_printed_c1_zero_is_refused() -> None:
    """Errata §14: ζ = 1 with c_d < δ̃_d gives c_1 = 0 exactly; coordinate 1 would be 0/0."""
    with pytest.raises(UsageError):
        bcdp(10, 2.0, 0.5, PAPER["feature_eps"], calibration="zeta", zeta=1.0)


def test_optimised_c_d_never_loses_to_zeta_rules_or_min_delta_ldp() -> None:
    """Errata §15: the paper's ζ = (1 + q)/2 can lose to plain min(δ)-LDP; the optimised c_d never does."""
    lost = False
    for base in ("duchi-l2", "privunit2"):
        for q in (0.0, 0.01, 0.1, 0.5, 0.9):
            rows = {row["choice"]: row for row in bcdp(10, 2.0, q, PAPER["feature_eps"], base=base).alternatives()}
            best = rows["optimised c_d"]["expected_error"]
            for name in ("ζ = 1/2", "ζ = (1 + q)/2", "min(δ)-LDP"):
                if "expected_error" in rows[name]:
                    assert best <= rows[name]["expected_error"] * (1 + 1e-9), (base, q, name)
            paper = rows["ζ = (1 + q)/2"]
            lost |= "expected_error" in paper and paper["expected_error"] > rows["min(δ)-LDP"]["expected_error"]
    assert lost, "the printed ζ = (1 + q)/2 rule should lose to min(δ)-LDP somewhere (errata §15)"


def _monte_carlo(mech: BCDP, x: np.ndarray, reps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return mech.privatize(np.tile(x, (reps, 1)), rng)


@pytest.mark.parametrize("base", ["privunit2", "privunitg", "duchi-l2"])
def test_unbiased_and_exact_per_coordinate_variance_at_a_vertex(base: str) -> None:
    """At a vertex every suffix is isotropic, so each coordinate's variance is exactly 1/Σ w_k."""
    d, reps = 8, 40_000
    mech = bcdp(d, 2.0, 0.1, "1:2=0.3,6=0.8", base=base)
    assert len(mech.parts) >= 2
    x = np.where(np.arange(d) % 3 == 0, -1.0, 1.0)
    z = _monte_carlo(mech, x, reps, seed=11)
    var = mech.coordinate_variances()
    assert math.isclose(float(var.sum()), mech.expected_error, rel_tol=1e-12)
    z_crit = bonferroni_z(1e-3, 3 * d)
    mean_err = np.abs(z.mean(axis=0) - x)
    assert np.all(mean_err <= z_crit * np.sqrt(var / reps)), (mean_err, np.sqrt(var / reps))
    sq = (z - x) ** 2
    se = sq.std(axis=0, ddof=1) / math.sqrt(reps)
    assert np.all(np.abs(sq.mean(axis=0) - var) <= z_crit * se), (sq.mean(axis=0), var, se)


@pytest.mark.parametrize("base", ["privunit2", "duchi-l2", "privunitg"])
def test_expected_error_max_is_approached_as_x_shrinks_along_the_sorted_features(base: str) -> None:
    d, reps = 6, 60_000
    mech = bcdp(d, 3.0, 0.05, "0=0.4,3=1", base=base)
    order = mech.order
    along = [part.second_moments() for part in mech.parts]
    same_sign = len({np.sign(a - b) for a, b in along}) == 1
    t = 1e-3
    x = np.zeros(d)
    pattern = t ** np.arange(1, d + 1) if all(a >= b for a, b in along) else np.r_[np.zeros(d - 1), t]
    x[order] = pattern
    z = _monte_carlo(mech, x, reps, seed=5)
    total = ((z - x) ** 2).sum(axis=1)
    se = total.std(ddof=1) / math.sqrt(reps)
    z_crit = bonferroni_z(1e-3, 2)
    assert mech.expected_error <= mech.expected_error_max
    if same_sign:
        assert abs(total.mean() - mech.expected_error_max) <= z_crit * se + 1e-6 * mech.expected_error_max
    else:
        assert total.mean() <= mech.expected_error_max + z_crit * se


def test_sensitive_and_other_features_errors_are_reported_separately() -> None:
    """Corollary 1's setting: k sensitive features at δ, the rest at ε > 2δ; each group's error by MC."""
    d, k, reps = 12, 3, 30_000
    mech = bcdp(d, 4.0, 0.1, f"0:{k - 1}=0.5")
    groups = mech.feature_section()["groups"]
    assert [g["count"] for g in groups] == [k, d - k]
    sensitive, others = groups
    assert sensitive["delta"] == 0.5 and others["delta"] == 4.0
    assert sensitive["bcdp_level"] <= 0.5 * (1 + 1e-12)
    # the sensitive features are the noisier ones per feature
    assert sensitive["expected_error"] / k > others["expected_error"] / (d - k)
    x = np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    sq = (_monte_carlo(mech, x, reps, seed=3) - x) ** 2
    z_crit = bonferroni_z(1e-3, 2)
    for group, cols in ((sensitive, slice(0, k)), (others, slice(k, d))):
        per_row = sq[:, cols].sum(axis=1)
        assert abs(per_row.mean() - group["expected_error"]) <= z_crit * per_row.std(ddof=1) / math.sqrt(reps)


def test_copies_split_the_budget_and_keep_the_levels() -> None:
    spec = MechanismSpec("bcdp", 2.0, None, 1.0, {"q": 0.1, "feature_eps": "0:1=0.2"})
    one = spec.calibrate(10)
    each = spec.for_copies(2).calibrate(10)
    assert isinstance(one, BCDP) and isinstance(each, BCDP)
    assert each.split == 2
    assert math.isclose(2 * each.epsilon_exact, each.c_total, rel_tol=1e-12)
    assert np.all(each.feature_levels() <= np.minimum(each.levels, 2.0) * (1 + 1e-12))


def test_the_cost_of_copies_counts_the_asked_epsilon_once() -> None:
    """Issue 26 item 16: each bcdp copy keeps the asked ε (its split divides the budget), so two copies asked
    ε = 2 cost 2 asked, not 4; the exact ε is the copies' used increments, c_d, as before."""
    spec = MechanismSpec("bcdp", 2.0, None, 1.0, {"q": 0.1, "feature_eps": "0:1=0.2"})
    for copies in (1, 2, 3):
        each = spec.for_copies(copies).calibrate(10)
        assert isinstance(each, BCDP)
        cost = release_cost(each, copies=copies)
        assert math.isclose(cost.epsilon, 2.0, rel_tol=1e-12)
        assert math.isclose(cost.epsilon_exact, each.c_total, rel_tol=1e-12)
    assert release_cost(spec.calibrate(10), epochs=3).epsilon == pytest.approx(6.0)  # uses of one release add up


def test_bad_options() -> None:
    with pytest.raises(UsageError, match=r"needs q \("):
        get_mechanism("bcdp").calibrate(4, 1.0)
    with pytest.raises(UsageError, match=r"^q: "):
        get_mechanism("bcdp").calibrate(4, 1.0, q=1.5)
    with pytest.raises(UsageError):
        bcdp(4, 1.0, 0.1, "0=-1")
    with pytest.raises(UsageError):
        bcdp(4, 1.0, 0.1, "7=0.5")  # no coordinate 7 at d = 4
    with pytest.raises(UsageError, match=r"^base: "):
        bcdp(4, 1.0, 0.1, base="laplace")


def test_levels_above_epsilon_are_clipped_and_said() -> None:
    spec = MechanismSpec("bcdp", 1.0, None, 1.0, {"q": 0.1, "feature_eps": "a=5,b=0.5"})
    bound, notes = spec.bind_columns(["a", "b", "c"], 3)
    assert len(notes) == 1 and "clipped" in notes[0] and "a" in notes[0]
    mech = bound.calibrate(3)
    assert isinstance(mech, BCDP)
    assert list(mech.levels) == [1.0, 0.5, 1.0]
