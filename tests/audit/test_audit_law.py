"""`ldp audit` sees the law of the output: law tests and a privacy lower bound from samples.

Broken samplers that keep the mean and E‖Z − x‖² (the fixed-circle direction, per-coordinate flips)
pass the statistics and must fail here; every honest registered mechanism must pass the whole audit.

Every audit here is seeded, so the tests are deterministic. By construction (audit.py's docstring)
an honest mechanism fails one audit with probability at most TOTAL_ALPHA = 1e-3 over the seed:
statistics 1e-4 + law tests 8e-4 (Bonferroni over all tests of all inputs) + lower bound β = 1e-4
(Clopper–Pearson, Bonferroni over the ordered pairs). The statistics' z-tests are normal
approximations; see ``HONEST`` for the one regime where that matters.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import ldp
from scipy import stats

from ldpcli.audit._claims import FAMILY_ALPHA, LAW_ALPHA, LOWER_BOUND_BETA, TOTAL_ALPHA, audit
from ldpcli.audit._lower_bound import cp_lower, cp_upper
from ldpcli.errors import UsageError
from ldpcli.math import _lawtests as lawtests
from ldpcli.math import _logspace as logspace
from ldpcli.math import _sphere as sm
from ldpcli.mechanisms import (
    DuchiL2,
    Laplace,
    Mechanism,
    PrivUnit2,
    PrivUnitG,
    PrivUnitInf,
    ScalarDP,
    Separated,
    get_mechanism,
    mechanism_names,
    register,
    unregister,
)
from ldpcli.mechanisms._threshold_channel import agreement_with_sign_pmf

# --------------------------------------------------------------------------- broken samplers


class FixedCircle(PrivUnit2):
    """PrivUnit2 whose direction orthogonal to u is ± one fixed vector, not uniform on S^{d−2}.

    The cosine ⟨V, u⟩ keeps its exact law, so E[Z] = x and ‖Z‖ = L/m: the statistics cannot see it.
    But every output of an input lies on one circle (span{u, w}), so two inputs have disjoint
    supports: the density ratio is infinite.
    """

    name = "test-fixed-circle"

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, d = x.shape
        u = sm.round_to_sphere(x, self.norm_bound, rng)
        in_cap = logspace.bernoulli_logit(self.logit_p, n, rng)
        t, r = sm.sample_cap_cosines(in_cap, self.cap_logit, self.log_cap_probability, d, rng)
        fixed = np.random.default_rng(12345).standard_normal(d)
        w = fixed[None, :] - (u @ fixed)[:, None] * u
        w /= np.linalg.norm(w, axis=1, keepdims=True)
        sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        return (t[:, None] * u + (sign * r)[:, None] * w) * (self.norm_bound * self.scale)


class PerCoordinateFlip(PrivUnitInf):
    """PrivUnit∞ replaced by independent per-coordinate randomized response with the same marginal.

    Each coordinate keeps the rounded sign with probability (1 + c)/2, c = 1/B: the mean, B and
    ‖Z‖ are those of the channel, but the agreement count is Binomial(d, (1 + c)/2).
    """

    name = "test-per-coordinate-flip"

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        s = np.where(rng.random(x.shape) < (1.0 + x / self.norm_bound) / 2.0, 1.0, -1.0)
        keep = rng.random(x.shape) < (1.0 + math.exp(self.log_c)) / 2.0
        return np.where(keep, s, -s) * (self.norm_bound * self.B)


class AlwaysCap(PrivUnit2):
    """PrivUnit2 that ignores the complement branch (p := 1), normaliser unchanged."""

    name = "test-always-cap"

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, d = x.shape
        u = sm.round_to_sphere(x, self.norm_bound, rng)
        t, r = sm.sample_cap_cosines(np.ones(n, dtype=bool), self.cap_logit, self.log_cap_probability, d, rng)
        return sm.directions_with_cosines(u, t, r, self.norm_bound * self.scale, rng)


class AlwaysUpperG(PrivUnitG):
    """PrivUnitG that always draws α from the upper half-line (p := 1), normaliser unchanged."""

    name = "test-always-upper-g"

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return PrivUnitG.privatize(dataclasses.replace(self, logit_p=800.0), x, rng)


class AlwaysCapInf(PrivUnitInf):
    """PrivUnit∞ that always draws from the cap {A ≥ a₀} (p := 1), B unchanged."""

    name = "test-always-cap-inf"

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return PrivUnitInf.privatize(dataclasses.replace(self, logit_p=800.0), x, rng)


def scaled(cls: type[Mechanism]) -> type[Mechanism]:
    """``cls`` with every output multiplied by 1.1 (its reported parameters unchanged)."""

    class Scaled(cls):  # type: ignore[valid-type, misc]
        name = f"test-scaled-{cls.name}"

        def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return 1.1 * super().privatize(x, rng)

    return Scaled


SCALED = {name: scaled(get_mechanism(name)) for name in ("privunit2", "privunitg", "duchi-l2", "privunit-inf",
                                                          "separated", "scalar", "scalar-rel", "laplace", "gaussian")}
BROKEN: list[type[Mechanism]] = [FixedCircle, PerCoordinateFlip, AlwaysCap, AlwaysUpperG, AlwaysCapInf,
                                 *SCALED.values()]


@pytest.fixture(scope="module", autouse=True)
def broken_registered() -> Iterator[None]:
    """The broken samplers under throwaway names, so that the command line can audit them too."""
    for cls in BROKEN:
        register(cls)
    try:
        yield
    finally:
        for cls in BROKEN:
            unregister(cls.name)


def failed_law(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{check.input}: {check.test}" for check in result.law if not check.passed]


def statistics_ok(result) -> bool:  # type: ignore[no-untyped-def]
    return all(check.unbiased and check.error_ok for check in result.inputs)


# --------------------------------------------------------------------------- the example


def test_fixed_circle_fails_the_law_and_the_lower_bound() -> None:
    """privunit2 at d = 16, ε = 2, 20000 trials: the old audit passed it; now both new parts fail it."""
    mech = FixedCircle.calibrate(16, 2.0)
    result = audit(mech, trials=20_000, seed=1, lower_bound_trials=20_000)
    assert result.privacy_ok and statistics_ok(result)  # what the audit used to check: all fine
    assert not result.passed
    assert any("V⊥ direction uniform" in name for name in failed_law(result)), failed_law(result)
    assert result.lower_bound is not None and result.lower_bound.epsilon > mech.epsilon_exact + 3.0
    assert "span" in result.lower_bound.event


def test_fixed_circle_through_the_command_line() -> None:
    res = ldp("audit", "-m", "test-fixed-circle", "--d", "16", "--eps", "2", "--trials", "20000", "--seed", "1",
              "--lower-bound-trials", "20000", "--json")
    assert res.exit_code == 1, res.output
    info = json.loads(res.stdout)
    assert info["passed"] is False and info["law_ok"] is False and info["lower_bound_ok"] is False
    assert info["epsilon_lower_bound"] > info["epsilon_exact"] and "span" in info["lower_bound_event"]
    assert info["family_alpha"] == {"total": 1e-3, "statistics": 1e-4, "law_tests": 8e-4, "lower_bound": 1e-4}
    assert all(check["unbiased"] and check["error_ok"] for check in info["statistics"])
    bad = [check for check in info["law_tests"] if not check["passed"]]
    assert bad and all(check["p_value"] <= check["threshold"] for check in bad)


# --------------------------------------------------------------------------- the other classes of bug


@pytest.mark.parametrize("d, eps", [(16, 2.0), (3, 0.5)])
def test_per_coordinate_flip_fails_the_agreement_law(d: int, eps: float) -> None:
    result = audit(PerCoordinateFlip.calibrate(d, eps), trials=20_000, seed=2, lower_bound_trials=10_000)
    assert result.privacy_ok and statistics_ok(result)
    assert not result.passed
    assert any("agreements with x/L ~ channel pmf" in name for name in failed_law(result)), failed_law(result)


@pytest.mark.parametrize("name", sorted(SCALED))
def test_outputs_scaled_by_a_constant_fail(name: str) -> None:
    cls = SCALED[name]
    options = {"delta": 1e-6} if name == "gaussian" else {}
    mech = cls.calibrate(1 if not cls.vector else 9, 2.0, **options)
    result = audit(mech, trials=4000, seed=3, lower_bound_trials=2000)
    assert not result.passed
    assert failed_law(result), name  # the law sees it too, not only the error check


@pytest.mark.parametrize("cls", [AlwaysCap, AlwaysUpperG, AlwaysCapInf])
def test_a_sampler_that_ignores_a_branch_fails(cls: type[Mechanism]) -> None:
    mech = cls.calibrate(16, 2.0)
    result = audit(mech, trials=4000, seed=4, lower_bound_trials=10_000)
    assert not result.passed and failed_law(result)
    assert result.lower_bound is not None and result.lower_bound.epsilon > mech.epsilon_exact


def test_printed_errata_still_fail() -> None:
    """Asi et al.'s printed normaliser sign and Duchi et al.'s printed factor-2 radius (tests/audit/test_audit.py)."""
    honest = PrivUnit2.calibrate(10, 1.0)
    c = math.exp(sm.log_cap_normaliser(honest.cap_logit, 10))
    m_printed = c * (honest.p / honest.cap_probability + (1 - honest.p) / (1 - honest.cap_probability))
    printed = dataclasses.replace(honest, log_m=math.log(m_printed), log_one_minus_m=math.log1p(-m_printed))
    result = audit(printed, trials=20_000, seed=1, lower_bound_trials=10_000)
    assert result.privacy_ok and not result.passed and not result.inputs[0].unbiased
    radius = DuchiL2.calibrate(5, 2.0)
    result = audit(dataclasses.replace(radius, log_scale=radius.log_scale + math.log(2.0)), trials=20_000, seed=2,
                   lower_bound_trials=10_000)
    assert not result.passed and not result.inputs[0].unbiased


# --------------------------------------------------------------------------- honest mechanisms pass


def _honest_cases() -> list[tuple[str, str, int, float]]:
    cases = []
    for name in mechanism_names():
        cls = get_mechanism(name)
        for calibration, d, eps in itertools.product(cls.calibrations, [1, 2, 3, 16] if cls.vector else [1],
                                                     [0.5, 2.0, 8.0]):
            try:
                _calibrate(name, calibration, d, eps)
            except UsageError:  # e.g. the bhowmick calibrations need d >= 3
                continue
            cases.append((name, calibration, d, eps))
    return cases


def _calibrate(name: str, calibration: str, d: int, eps: float) -> Mechanism:
    options: dict[str, float] = {}
    if name == "gaussian":
        options["delta"] = 1e-6
    if name == "separated" and calibration == "bhowmick":
        options["eps_split"] = 0.7
    if name == "bcdp":  # one release (every level ε): the base's law (several releases: test_bcdp.py)
        options["q"] = 0.1
    return get_mechanism(name).calibrate(d, eps, calibration=calibration, **options)


HONEST = _honest_cases()


@pytest.mark.slow
@pytest.mark.parametrize("name, calibration, d, eps", HONEST)
def test_honest_mechanisms_pass_the_whole_audit(name: str, calibration: str, d: int, eps: float) -> None:
    """Every registered mechanism and calibration, law tests and lower bound included.

    At d = 1, ε = 8 randomized response flips a sign with probability e^{−8}/(1 + e^{−8}) ≈ 3e−4:
    with a few thousand rows the existing mean and error z-tests (normal approximations) see a
    handful of flips and are not valid there, so those cases use 200000 rows (cheap at d = 1).
    """
    mech = _calibrate(name, calibration, d, eps)
    trials = 200_000 if (d == 1 and eps >= 8.0) else 4000
    result = audit(mech, trials=trials, seed=7, lower_bound_trials=10_000)
    assert result.passed, (result.to_dict()["statistics"], failed_law(result), result.lower_bound)
    assert result.law_unavailable is None and result.law
    assert result.lower_bound is not None and result.lower_bound.epsilon <= mech.epsilon_exact


def test_the_grid_covers_every_registered_mechanism_and_calibration() -> None:
    covered = {(name, calibration) for name, calibration, _, _ in HONEST}
    for name in mechanism_names():
        if name.startswith("test-"):
            continue
        for calibration in get_mechanism(name).calibrations:
            assert (name, calibration) in covered


# --------------------------------------------------------------------------- the seam and the report


def test_the_budget_adds_up() -> None:
    assert FAMILY_ALPHA + LAW_ALPHA + LOWER_BOUND_BETA == pytest.approx(TOTAL_ALPHA)
    assert TOTAL_ALPHA <= 1e-3


def test_a_mechanism_without_law_tests_is_reported_not_failed() -> None:
    class NoLaw(PrivUnit2):
        law_tests = None  # a plug-in without law tests: the audit's LawTested protocol sees no method

    honest = PrivUnit2.calibrate(5, 2.0)
    result = audit(NoLaw(**{f.name: getattr(honest, f.name) for f in dataclasses.fields(honest)}), trials=1000,
                   seed=5, lower_bound_trials=2000)
    assert result.passed and result.law == [] and "no tests of its output's law" in (result.law_unavailable or "")
    assert result.to_dict()["law_tests_available"] is False


def test_cli_shows_the_law_table_and_the_lower_bound() -> None:
    res = ldp("audit", "-m", "privunit-inf", "--d", "9", "--eps", "2", "--trials", "3000", "--seed", "1",
              "--lower-bound-trials", "4000", terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "Law of the output" in res.stdout and "channel" in res.stdout  # the table wraps at 80 columns
    assert "Privacy lower bound: ε_lb = " in res.stdout and "confidence 0.9999" in res.stdout
    res = ldp("audit", "-m", "scalar", "--d", "1", "--eps", "2", "--trials", "3000", "--seed", "1", "--json")
    info = json.loads(res.stdout)
    for key in ("law_tests", "epsilon_lower_bound", "lower_bound_event", "lower_bound_confidence", "family_alpha"):
        assert key in info
    assert info["epsilon_lower_bound"] <= info["epsilon_exact"]
    res = ldp("audit", "-m", "scalar", "--d", "1", "--eps", "2", "--lower-bound-trials", "5")
    assert res.exit_code == 2 and "--lower-bound-trials" in res.stderr


# --------------------------------------------------------------------------- the pieces


def test_counts_test_keeps_rare_cells_apart() -> None:
    probs = np.array([1e-9, 1e-9, 1.0 - 3e-9, 1e-9])
    assert lawtests.counts_test("t", np.array([0, 0, 20_000, 0]), probs).p_value == 1.0
    # half the rows in cells of probability 1e−9 cannot hide in the big cell
    assert lawtests.counts_test("t", np.array([0, 10_000, 10_000, 0]), probs).p_value < 1e-100
    assert lawtests.counts_test("t", np.array([1, 0]), np.array([0.0, 1.0])).p_value == 0.0
    assert lawtests.counts_test("t", np.array([5000, 5000, 10_000]), np.array([0.25, 0.25, 0.5])).p_value == 1.0


def test_agreement_law_inside_the_box_by_brute_force() -> None:
    d, q = 4, np.array([0.9, 0.6, 0.7, 0.55])
    agreement = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    brute = np.zeros(d + 1)
    for a in range(d + 1):
        for chosen in itertools.combinations(range(d), a):
            for same in itertools.product([False, True], repeat=d):  # s_j = r_j
                p = np.prod([q[j] if same[j] else 1 - q[j] for j in range(d)])
                k = sum(same[j] == (j in chosen) for j in range(d))
                brute[k] += agreement[a] / math.comb(d, a) * p
    assert np.allclose(agreement_with_sign_pmf(agreement, q), brute, atol=1e-15)


def test_clopper_pearson_bounds() -> None:
    for k, n, a in [(0, 100, 1e-3), (7, 100, 1e-5), (100, 100, 1e-3), (5000, 10_000, 1e-6)]:
        lo, up = float(cp_lower(k, n, a)), float(cp_upper(k, n, a))
        assert lo == (0.0 if k == 0 else pytest.approx(stats.beta.ppf(a, k, n - k + 1), rel=1e-9))
        assert up == (1.0 if k == n else pytest.approx(stats.beta.ppf(1 - a, k + 1, n - k), rel=1e-9))


def test_law_tests_see_a_wrong_cap_probability() -> None:
    """Outputs of PrivUnit2 drawn at a smaller p than it claims: the cosine mixture test rejects."""
    honest = PrivUnit2.calibrate(9, 2.0)
    x = np.zeros(9)
    x[0] = 1.0
    broken = dataclasses.replace(honest, logit_p=honest.logit_p - 0.3)  # same γ and normaliser, smaller p
    z = broken.privatize(np.tile(x, (20_000, 1)), np.random.default_rng(0))
    cosine = [t for t in honest.law_tests(x, z) if "cap mixture" in t.name]
    assert cosine and cosine[0].p_value < 1e-8


def test_separated_parts_are_tested_apart() -> None:
    mech = Separated.calibrate(5, 4.0)
    x = np.full(5, 0.3)
    z = mech.privatize(np.tile(x, (5000, 1)), np.random.default_rng(1))
    names = [t.name for t in mech.law_tests(x, z)]
    assert any(n.startswith("magnitude: grid counts") for n in names)
    assert any(n.startswith("direction: ⟨Z, u⟩/‖Z‖ ~ cap mixture") for n in names)


def test_scalar_with_a_huge_grid_uses_the_truthful_share() -> None:
    mech = ScalarDP.calibrate(1, 60.0)
    z = mech.privatize(np.full((2000, 1), 0.37), np.random.default_rng(2))
    (test,) = mech.law_tests(np.array([0.37]), z)
    assert "rounding's grid points" in test.name and test.p_value > 1e-3


def test_laplace_law_sees_shared_noise() -> None:
    """One Laplace draw added to every coordinate: each coordinate's marginal is right, the row sum's law is not."""
    mech = Laplace.calibrate(16, 2.0)
    rng = np.random.default_rng(3)
    z = rng.laplace(0.0, mech.b, size=(20_000, 1)) * np.ones((1, 16))
    assert stats.kstest(z[:, 0] / mech.b, "laplace").pvalue > 1e-3
    tests = mech.law_tests(np.zeros(16), z)
    assert tests[1].name.startswith("Σ|Z_j − x_j|/b") and tests[1].p_value < 1e-50
