"""The separated mechanism (Bhowmick et al. Eq. 22/23): unbiasedness and exact error by Monte Carlo,
exact enumeration at d = 1, the worst case, the optimal split, Table 1 and the interface."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import bonferroni_z
from scipy import special

from ldpcli.errors import UsageError
from ldpcli.mechanisms import get_mechanism, mechanism_names
from ldpcli.mechanisms._privunit import PrivUnit2
from ldpcli.mechanisms._scalar import K_MAX, ScalarDP
from ldpcli.mechanisms._separated import Separated, optimal_direction_share

# --- Monte Carlo: unbiased, with the exact error --------------------------------------------


@pytest.mark.parametrize(
    "d, eps, radius, r_max, n",
    [
        (3, 4.0, 1.0, 1.0, 200_000),
        (3, 4.0, 0.37, 2.0, 200_000),
        (3, 4.0, 0.0, 1.0, 200_000),
        (1, 2.0, 0.6, 1.0, 200_000),
        (1, 2.0, 0.0, 1.0, 200_000),
        (500, 8.0, 1.0, 1.0, 16_000),
        (500, 8.0, 0.3, 3.0, 16_000),
        (500, 8.0, 0.0, 1.0, 16_000),
        (40, 60.0, 0.8, 1.0, 50_000),
    ],
)
def test_monte_carlo_unbiased_with_the_exact_error(d: int, eps: float, radius: float, r_max: float, n: int) -> None:
    """E[Z] = w (Bonferroni z over the d coordinates, family α = 1e−6) and E‖Z − w‖² = the exact
    V(r)/m² + r²(1/m² − 1) within 6 standard errors, for ‖w‖ = r_max, inside, and w = 0."""
    rng = np.random.default_rng(4000 + d)
    mech = Separated.calibrate(d, eps, norm_bound=r_max)
    direction = rng.standard_normal(d)
    w = radius * r_max * direction / np.linalg.norm(direction)
    z = mech.privatize(np.tile(w, (n, 1)), rng)
    m = math.exp(mech.direction.log_m)
    norms = np.linalg.norm(z, axis=1) * m
    support = np.abs(mech.magnitude.support()) if mech.k < 10**6 else None
    if support is not None:  # ‖Z‖ = |R̂|/m with R̂ one of ScalarDP's k + 1 outputs
        assert np.all(np.min(np.abs(norms[:, None] - support[None, :]), axis=1) <= 1e-9 * r_max * support.max())
    se = z.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(z.mean(axis=0) - w) <= bonferroni_z(1e-6, d) * se)
    sq = np.sum((z - w) ** 2, axis=1)
    predicted = float(mech.error_at(radius * r_max))
    assert abs(sq.mean() - predicted) <= 6 * sq.std(ddof=1) / math.sqrt(n) + 1e-12 * predicted
    if radius == 1.0:
        assert predicted == pytest.approx(mech.expected_error, rel=1e-14)
    assert predicted <= mech.expected_error_max * (1 + 1e-12)


def test_magnitude_and_direction_are_the_two_parts() -> None:
    """The parts are PrivUnit2 (unit ball) at ε₁ and ScalarDP (r_max) at ε₂ with ε₁ + ε₂ = ε."""
    mech = Separated.calibrate(50, 6.0, norm_bound=2.5, eps_split=0.7)
    assert mech.direction == PrivUnit2.calibrate(50, 0.7 * 6.0)
    assert mech.magnitude == ScalarDP.calibrate(1, 6.0 - 0.7 * 6.0, norm_bound=2.5)
    assert mech.epsilon1 + mech.epsilon2 == pytest.approx(6.0, rel=1e-15)


# --- exact enumeration at d = 1: a product of two randomized responses ------------------------


@pytest.mark.parametrize("eps, split, k", [(2.0, 0.6, 1), (3.0, 0.5, 3), (6.0, 0.3, None)])
def test_d1_exact_enumeration(eps: float, split: float, k: int | None) -> None:
    """d = 1: Û = ±1/m (sign kept w.p. p = e^{ε₁}/(1 + e^{ε₁}), the sign of a zero row uniform),
    R̂ = ScalarDP. Enumerating all outputs Z = ±R̂/m: pmf sums to 1, E[Z] = w, E(Z − w)² exact,
    and the worst likelihood ratio is e^{ε₁ + ε₂}."""
    r_max = 1.5
    mech = Separated.calibrate(1, eps, norm_bound=r_max, eps_split=split, k=k)
    mag = mech.magnitude
    p = special.expit(mech.epsilon1)
    m = math.tanh(mech.epsilon1 / 2)
    assert mech.direction.p == pytest.approx(p, rel=1e-14)
    assert math.exp(mech.direction.log_m) == pytest.approx(m, rel=1e-13)
    grid = np.arange(mag.k + 1) * r_max / mag.k
    w = np.concatenate([-grid[::-1], grid[1:], [0.37, -1.1, 1e-9]])
    rows = []  # P(Z = ±sign(w)·support/m) for each input, sign kept first
    for value in w:
        pmf_r = mag.pmf(abs(value))[0]
        keep = 0.5 if value == 0 else p
        rows.append(np.concatenate([pmf_r * keep, pmf_r * (1 - keep)]))
    support = mag.support() / m
    z_values = np.concatenate([support, -support])
    for value, row in zip(w, rows):
        sign = 1.0 if value >= 0 else -1.0
        z = sign * z_values
        assert row.sum() == pytest.approx(1.0, abs=1e-14)
        assert float(row @ z) == pytest.approx(value, abs=1e-12)
        assert float(row @ (z - value) ** 2) == pytest.approx(float(mech.error_at(abs(value))), rel=1e-10)
    # likelihood ratio over all inputs for each output value (outputs of w < 0 are sign flips)
    table = np.array([row if value >= 0 else np.concatenate([row[mag.k + 1:], row[: mag.k + 1]])
                      for value, row in zip(w, rows)])
    assert len(np.unique(np.round(z_values, 12))) == z_values.size  # (R̂, Û) ↦ Z is one-to-one
    log_ratio = np.max(np.log(table.max(axis=0)) - np.log(table.min(axis=0)))
    if mag.k >= 2:
        assert log_ratio == pytest.approx(mech.epsilon_exact, rel=1e-12)
    else:  # k = 1: the sup is approached as ‖w‖ → 0 (the 1e-9 row), not attained
        assert log_ratio <= mech.epsilon_exact and log_ratio == pytest.approx(mech.epsilon_exact, rel=1e-8)
    assert mech.epsilon_exact == pytest.approx(eps, rel=1e-14)


# --- the worst case --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d, eps, split, k",
    [(1, 30.0, 0.8, None), (1, 12.0, 0.9, 2), (2, 8.0, 0.5, 5), (3, 4.0, 0.6, 1), (500, 8.0, 0.76, None),
     (10, 40.0, 0.75, None), (10**6, 20.0, 0.9, 9)],
)
def test_worst_case_is_the_exact_sup(d: int, eps: float, split: float, k: int | None) -> None:
    """expected_error_max = sup over ‖w‖ ≤ r_max of the exact error, by brute force on a fine grid."""
    r_max = 2.0
    mech = Separated.calibrate(d, eps, norm_bound=r_max, eps_split=split, k=k)
    assert mech.k <= 100
    r = np.linspace(0.0, r_max, 400_001)  # every cell of the magnitude grid, densely
    brute = float(np.max(mech.error_at(r)))
    assert brute <= mech.expected_error_max * (1 + 1e-12)
    assert mech.expected_error_max <= brute * (1 + 1e-6)
    assert mech.expected_error <= mech.expected_error_max
    assert float(mech.error_at(0.0)) <= mech.expected_error_max


# --- privacy ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 3, 500, 10**7])
@pytest.mark.parametrize("eps", [0.01, 1.0, 8.0, 100.0, 10_000.0])
def test_epsilon_exact_is_the_sum_of_the_parts(d: int, eps: float) -> None:
    mech = Separated.calibrate(d, eps)
    assert mech.epsilon_exact == mech.direction.epsilon_exact + mech.magnitude.epsilon_exact
    assert mech.magnitude.epsilon_exact == mech.epsilon2
    assert mech.epsilon_exact <= eps * (1 + 1e-12)
    assert mech.epsilon_exact <= eps and mech.epsilon1 + mech.epsilon2 <= eps  # exactly, not even an ulp above (issue 13)
    info = mech.describe()
    json.dumps(info, allow_nan=False)
    assert all(math.isfinite(info[key]) for key in ("expected_error", "expected_error_max", "epsilon_exact"))
    assert 0.0 <= info["expected_error"] <= info["expected_error_max"]
    assert 0.0 < info["eps_split"] < 1.0 and 1 <= info["k"] <= K_MAX


def test_bhowmick_is_private_below_its_budget() -> None:
    mech = Separated.calibrate(1000, 20.0, calibration="bhowmick", eps_split=0.75)
    assert mech.direction.epsilon_exact < mech.epsilon1
    assert mech.epsilon_exact < 20.0


# --- the optimal split -----------------------------------------------------------------------


@pytest.mark.parametrize("d, eps", [(1, 2.0), (3, 4.0), (500, 4.0), (500, 8.0), (10**5, 16.0), (10, 100.0), (2, 0.1)])
def test_optimal_split_beats_a_grid_of_splits(d: int, eps: float) -> None:
    best = Separated.calibrate(d, eps)
    splits = np.concatenate([np.linspace(0.02, 0.98, 49), special.expit(np.linspace(-9, 9, 37))])
    for split in splits:
        other = Separated.calibrate(d, eps, eps_split=float(split))
        assert best.expected_error_max <= other.expected_error_max * (1 + 1e-9), split
    assert best.eps_split == optimal_direction_share(d, eps)


def test_optimal_split_with_a_fixed_k() -> None:
    best = Separated.calibrate(100, 6.0, k=7)
    assert best.k == 7
    for split in np.linspace(0.05, 0.95, 19):
        other = Separated.calibrate(100, 6.0, k=7, eps_split=float(split))
        assert best.expected_error_max <= other.expected_error_max * (1 + 1e-9)


# --- the paper -------------------------------------------------------------------------------


def test_bhowmick_table_1_cifar_row() -> None:
    """Table 1 (CIFAR10, d = 1,068,298): ε1 = 100, ε2 = 10 → γ = 0.01331, p = 0.731, k = 29."""
    mech = Separated.calibrate(1_068_298, 110.0, calibration="bhowmick", eps_split=100 / 110)
    params = mech.parameters()
    assert params["epsilon1"] == pytest.approx(100.0, rel=1e-14)
    assert params["epsilon2"] == pytest.approx(10.0, rel=1e-12)
    assert round(params["gamma"], 5) == 0.01331
    assert round(params["p"], 3) == 0.731
    assert params["k"] == 29 == math.ceil(math.exp(10 / 3))  # ERRATA 7: not ⌈e^{20/3}⌉ = 786
    assert mech.direction == PrivUnit2.calibrate(1_068_298, params["epsilon1"], calibration="bhowmick")


def test_bhowmick_needs_the_split() -> None:
    """ERRATA 9: the paper's rule takes the split from the user; it is never chosen silently."""
    with pytest.raises(UsageError, match=r"needs eps_split \("):
        Separated.calibrate(100, 10.0, calibration="bhowmick")
    with pytest.raises(UsageError, match="d >= 3"):
        Separated.calibrate(2, 10.0, calibration="bhowmick", eps_split=0.5)


# --- interface -------------------------------------------------------------------------------


def test_registry_and_flags() -> None:
    assert "separated" in mechanism_names() and get_mechanism("separated") is Separated
    assert Separated.domain == "l2-ball" and Separated.vector is True
    assert Separated.calibrations == ("optimal", "bhowmick")
    assert set(Separated.options) == {"eps_split", "k"}


@pytest.mark.parametrize(
    "options, match",
    [
        ({"eps_split": 0.0}, r"^eps_split\b"),
        ({"eps_split": 1.0}, r"^eps_split\b"),
        ({"eps_split": 1.5}, r"^eps_split\b"),
        ({"eps_split": "half"}, r"^eps_split\b"),
        ({"k": 0}, r"^k\b"),
        ({"k": K_MAX + 1}, r"^k\b"),
        ({"alpha": 0.1}, "takes no option alpha"),
    ],
)
def test_bad_options_are_usage_errors(options: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        Separated.calibrate(10, 2.0, **options)


@pytest.mark.parametrize(
    "args",
    [
        (20, 5.0, {}),
        (20, 5.0, {"norm_bound": 3.0, "k": 4}),
        (1_000, 50.0, {"calibration": "bhowmick", "eps_split": 0.9}),
        (1, 0.5, {}),
    ],
)
def test_describe_recreates_the_mechanism(args) -> None:
    """What a sidecar does: calibrate(d, ε, norm_bound, calibration, **recorded options)."""
    d, eps, kwargs = args
    mech = Separated.calibrate(d, eps, **kwargs)
    info = json.loads(json.dumps(mech.describe(), allow_nan=False))
    for key in ("epsilon1", "epsilon2", "eps_split", "gamma", "p", "k", "magnitude_grid_step"):
        assert key in info
    assert info["scale"] is None
    again = Separated.calibrate(
        info["d"], info["epsilon"], norm_bound=info["norm_bound"], calibration=info["calibration"],
        **{name: info[name] for name in Separated.options},
    )
    assert again == mech and again.describe() == mech.describe()


def test_privatize_shapes_seeds_and_zero_rows() -> None:
    mech = Separated.calibrate(30, 5.0, norm_bound=2.0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 30))
    x[::4] = 0.0
    x, _ = mech.project(x * 0.3)
    a = mech.privatize(x, np.random.default_rng(1))
    b = mech.privatize(x, np.random.default_rng(1))
    assert a.shape == x.shape and np.array_equal(a, b) and np.all(np.isfinite(a))
    # zero rows: ‖Z‖ = |R̂|/m with R̂ a ScalarDP output, in uniformly random directions
    norms = np.linalg.norm(a[::4], axis=1) * math.exp(mech.direction.log_m)
    support = np.abs(mech.magnitude.support())
    assert np.all(np.min(np.abs(norms[:, None] - support[None, :]), axis=1) <= 1e-12 * support.max())
    cosines = (a[::4] / np.linalg.norm(a[::4], axis=1)[:, None]) @ (a[4] / np.linalg.norm(a[4]))
    assert np.sum(np.abs(cosines) > 0.999) == 1
    first = mech.privatize(x[:10], np.random.default_rng(2))
    assert first.shape == (10, 30)


@pytest.mark.parametrize("d, eps", [(1, 10_000.0), (2, 10_000.0), (10**7, 0.01), (10**7, 10_000.0), (2, 0.01)])
def test_extremes_are_finite(d: int, eps: float) -> None:
    mech = Separated.calibrate(d, eps)
    assert math.isfinite(mech.expected_error_max) and mech.expected_error_max > 0
    assert mech.epsilon_exact <= eps * (1 + 1e-12)
    assert mech.epsilon_exact <= eps  # exactly, not even an ulp above (issue 13)
    if d <= 2:
        z = mech.privatize(np.array([[0.6] + [0.0] * (d - 1), [0.0] * d]), np.random.default_rng(0))
        assert np.all(np.isfinite(z))
