"""PrivUnit∞ and the Duchi et al. ℓ∞ mechanism: exact enumeration, errata, optimality, Monte Carlo."""

from __future__ import annotations

import itertools
import json
import math
import tracemalloc
import zlib
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from helpers import bonferroni_z, python_calls
from scipy import special, stats

from ldpcli.errors import UsageError
from ldpcli.math._binomial import invert_survival, log_binomial_pmf, sample_agreements, standard_exponential_exact
from ldpcli.mechanisms import get_mechanism, mechanism_names
from ldpcli.mechanisms._hypercube import DuchiLinf, PrivUnitInf
from ldpcli.mechanisms._threshold_channel import agree_min_from_kappa, kappa_from_agree_min

mp.mp.dps = 50

MECHANISMS = [PrivUnitInf, DuchiLinf]
ENUM_EPS = [0.1, 1.0, 3.0, 8.0]


# --- independent references ----------------------------------------------------------------------


def cube(d: int) -> np.ndarray:
    """All 2^d vertices of {±1}^d, shape (2^d, d)."""
    return np.array(list(itertools.product((-1, 1), repeat=d)), dtype=np.int64)


def exact_c(d: int, eps: float, agree_min: int) -> mp.mpf:
    """c = E[z_j s_j] of the tight threshold channel, from exact integer counts (Lemma 5.8 form):
    q ∝ e^ε on {A ≥ a₀}, 1 elsewhere; c = (e^ε − 1)·C(d − 1, a₀ − 1)/((e^ε − 1)·N_in + 2^d)."""
    em1 = mp.expm1(mp.mpf(eps))
    n_in = sum(math.comb(d, a) for a in range(agree_min, d + 1))
    return em1 * math.comb(d - 1, agree_min - 1) / (em1 * n_in + 2**d)


def all_exact_c(d: int, eps: float) -> dict[int, mp.mpf]:
    """c for every admissible a₀ ∈ {⌊d/2⌋ + 1, …, d} (κ ∈ {0, …, d − 1}), exact tail sums."""
    em1 = mp.expm1(mp.mpf(eps))
    tails = [0] * (d + 2)
    for a in range(d, -1, -1):
        tails[a] = tails[a + 1] + math.comb(d, a)
    return {a0: em1 * math.comb(d - 1, a0 - 1) / (em1 * tails[a0] + 2**d) for a0 in range(d // 2 + 1, d + 1)}


def pmf_from_parameters(mech, s: np.ndarray, z: np.ndarray) -> np.ndarray:
    """q(z | s) for every row z, from the mechanism's public κ and p only (N_in, N_out counted)."""
    inner = z @ s
    in_cap = inner > mech.kappa
    n_in = int(np.count_nonzero(in_cap))
    n_out = z.shape[0] - n_in
    p = special.expit(mech.logit_p)
    one_minus_p = special.expit(-mech.logit_p)  # 1 − p without cancellation
    return np.where(in_cap, p / n_in, one_minus_p / n_out)


# --- registry and interface ----------------------------------------------------------------------


def test_registry_and_class_attributes() -> None:
    for cls, calibrations in ((PrivUnitInf, ("optimal",)), (DuchiLinf, ("classic",))):
        assert cls.name in mechanism_names()
        assert get_mechanism(cls.name) is cls
        assert cls.calibrations == calibrations
        assert cls.domain == "linf-box"
        assert cls.options == {}
        assert cls.vector is True and cls.baseline is False
        assert cls.title


@pytest.mark.parametrize("cls", MECHANISMS)
def test_describe_is_json_and_recreates_the_mechanism(cls) -> None:
    mech = cls.calibrate(500, 4.0, norm_bound=2.5)
    info = json.loads(json.dumps(mech.describe()))
    for key in ("kappa", "p", "p_logit", "B", "side_probability", "log_side_probability"):
        assert key in info
    again = cls.calibrate(info["d"], info["epsilon"], norm_bound=info["norm_bound"], calibration=info["calibration"])
    assert again == mech
    assert info["scale"] == pytest.approx(info["B"] * math.sqrt(500), rel=1e-14)


@pytest.mark.parametrize("cls", MECHANISMS)
@pytest.mark.parametrize(
    "bad",
    [
        {"d": 0, "epsilon": 1.0},
        {"d": 2.5, "epsilon": 1.0},
        {"d": 3, "epsilon": 0.0},
        {"d": 3, "epsilon": math.inf},
        {"d": 3, "epsilon": 1.0, "norm_bound": -1.0},
        {"d": 3, "epsilon": 1.0, "calibration": "nope"},
        {"d": 3, "epsilon": 1.0, "delta": 1e-6},
    ],
)
def test_impossible_parameters_are_usage_errors(cls, bad: dict) -> None:
    with pytest.raises(UsageError):
        cls.calibrate(**bad)


# --- log-space binomials ---------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3, 7, 16, 17, 40, 341, 1000, 10**5])
def test_log_binomial_pmf_matches_exact_values(d: int) -> None:
    lp = log_binomial_pmf(d)
    idx = sorted({0, 1, d // 3, d // 2, (d + 1) // 2, d // 2 + 1, (2 * d) // 3, (9 * d) // 10, d - 1, d})
    for a in idx:
        ref = mp.log(mp.binomial(d, a)) - d * mp.log(2)
        assert abs(float(ref - lp[a])) <= 1e-15 * max(1.0, abs(float(ref))), (d, a)
    if d <= 1000:  # the pmf sums to 1
        assert float(mp.log(mp.fsum(mp.exp(mp.mpf(v)) for v in lp))) == pytest.approx(0.0, abs=1e-13)


def test_kappa_and_agreement_threshold() -> None:
    """⟨z, s⟩ > κ iff A ≥ ⌈(d + κ + 1)/2⌉ (ERRATA 8), for every d ≤ 12 and κ."""
    for d in range(1, 13):
        for kappa in range(d):
            a0 = agree_min_from_kappa(d, kappa)
            assert a0 == math.ceil((d + kappa + 1) / 2)
            for a in range(d + 1):
                assert (2 * a - d > kappa) == (a >= a0)
            k = kappa_from_agree_min(d, a0)
            assert 0 <= k <= kappa and agree_min_from_kappa(d, k) == a0


# --- exact enumeration of the output pmf ------------------------------------------------------------


@pytest.mark.parametrize("cls", MECHANISMS)
@pytest.mark.parametrize("d", list(range(1, 13)))
def test_exact_enumeration_of_the_pmf(cls, d: int) -> None:
    """Sum to 1, unbiased, worst-case likelihood ratio = e^{ε_exact} and ε_exact = ε (tight)."""
    z = cube(d)
    rng = np.random.default_rng(d)
    inputs = [np.ones(d, dtype=np.int64), -np.ones(d, dtype=np.int64)]
    inputs += [z[i] for i in rng.choice(len(z), size=min(len(z), 6), replace=False)]
    if d <= 6:
        inputs = list(z)  # every input
    for eps in ENUM_EPS:
        mech = cls.calibrate(d, eps, norm_bound=1.7)
        L = mech.norm_bound
        assert mech.epsilon_exact <= eps * (1 + 1e-12)
        assert mech.epsilon_exact <= eps  # exactly, not even an ulp above (issue 13)
        assert mech.epsilon_exact == pytest.approx(eps, rel=1e-12)
        pmfs = []
        for s in inputs:
            q = pmf_from_parameters(mech, s, z)
            assert math.fsum(q) == pytest.approx(1.0, rel=1e-13)
            # Σ_z q(z|s)·L·B·z = L·s, coordinate by coordinate with exact summation.
            mean = np.array([math.fsum(q * z[:, j]) for j in range(d)]) * L * mech.B
            np.testing.assert_allclose(mean, L * s, rtol=1e-12, atol=1e-12 * L)
            pmfs.append(q)
        pmfs = np.array(pmfs)
        worst = np.max(np.log(pmfs.max(axis=0)) - np.log(pmfs.min(axis=0)))
        assert worst == pytest.approx(mech.epsilon_exact, rel=1e-12, abs=1e-13)
        # The same channel written the Lemma 5.8 way: q ∝ e^ε on the cap, 1 off it.
        s = inputs[0]
        in_cap = z @ s > mech.kappa
        norm = math.exp(eps) * np.count_nonzero(in_cap) + np.count_nonzero(~in_cap)
        np.testing.assert_allclose(pmfs[0], np.where(in_cap, math.exp(eps), 1.0) / norm, rtol=1e-12)
        # The mechanism's side probability and B against exact counts.
        n_in = int(np.count_nonzero(in_cap))
        assert mech.log_side == pytest.approx(math.log(n_in) - d * math.log(2), rel=1e-14, abs=1e-15)
        assert mech.B == pytest.approx(float(1 / exact_c(d, eps, mech.agree_min)), rel=1e-13)
        # Error formulas from the pmf: E‖Z − x‖² at the vertex x = L·s and at x = 0.
        B = mech.B
        err_vertex = math.fsum(pmfs[0] * np.sum((L * B * z - L * s) ** 2, axis=1))
        assert mech.expected_error == pytest.approx(err_vertex, rel=1e-11)
        assert mech.expected_error_max == pytest.approx(d * L**2 * B**2, rel=1e-13)
        assert mech.scale == pytest.approx(B * math.sqrt(d), rel=1e-14)


def test_all_pairs_of_inputs_for_small_d() -> None:
    """d ≤ 8: the full 2^d × 2^d channel matrix, both mechanisms, several ε."""
    for d in range(1, 9):
        z = cube(d)
        for cls in MECHANISMS:
            for eps in (0.3, 2.0, 6.0):
                mech = cls.calibrate(d, eps)
                matrix = np.array([pmf_from_parameters(mech, s, z) for s in z])  # rows: inputs
                np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-13)
                ratio = np.log(matrix.max(axis=0)) - np.log(matrix.min(axis=0))
                assert ratio.max() == pytest.approx(mech.epsilon_exact, rel=1e-12)
                np.testing.assert_allclose(ratio, ratio.max(), rtol=1e-12)  # every output is worst case
                np.testing.assert_allclose((matrix @ z) * mech.B, z, atol=1e-12)


# --- the sampler against the pmf ------------------------------------------------------------------


def chi_square_p_value(observed: np.ndarray, expected_prob: np.ndarray) -> float:
    """Pearson's test; cells with expected count < 5 are pooled into one (which must then be empty
    if its expected count is below 1e−3: probabilities that small must essentially never occur)."""
    n = observed.sum()
    expected = expected_prob * n
    big = expected >= 5
    obs = list(observed[big])
    exp = list(expected[big])
    if (~big).any():
        obs.append(observed[~big].sum())
        exp.append(expected[~big].sum())
        if exp[-1] < 1e-3:
            assert obs[-1] == 0
            obs.pop(), exp.pop()
    if len(obs) < 2:
        return 1.0  # a single cell: nothing to test beyond the support
    exp_arr = np.array(exp)
    exp_arr *= n / exp_arr.sum()
    return float(stats.chisquare(np.array(obs), exp_arr).pvalue)


@pytest.mark.parametrize("cls", MECHANISMS)
@pytest.mark.parametrize(
    "d, eps", [(1, 1.0), (2, 0.5), (2, 3.0), (3, 4.0), (6, 1.0), (8, 3.0), (11, 8.0), (12, 2.0), (12, 8.0)]
)
def test_sampler_matches_the_enumerated_pmf(cls, d: int, eps: float) -> None:
    """The distribution of ⟨z, s⟩ from privatize() against the pmf (chi-square, seeded)."""
    mech = cls.calibrate(d, eps)
    rng = np.random.default_rng(1000 * d + int(10 * eps))
    s = np.where(rng.random(d) < 0.5, -1, 1)
    n = 200_000
    out = mech.privatize(np.tile(s.astype(float), (n, 1)), rng)
    zz = np.rint(out / (mech.norm_bound * mech.B)).astype(np.int64)
    assert np.all(np.abs(zz) == 1)
    inner = zz @ s
    z = cube(d)
    q = pmf_from_parameters(mech, s, z)
    levels = np.arange(-d, d + 1, 2)
    zinner = z @ s
    prob = np.array([q[zinner == v].sum() for v in levels])
    observed = np.array([np.count_nonzero(inner == v) for v in levels])
    assert chi_square_p_value(observed, prob) > 1e-6


@pytest.mark.parametrize("d, a0", [(30, 16), (30, 22), (31, 16), (31, 29), (200, 101), (200, 130), (1, 1), (2, 2)])
def test_agreement_sampler_both_sides(d: int, a0: int) -> None:
    """A ~ Binomial(d, ½) restricted to the cap {A ≥ a₀} or to its complement, exactly."""
    rng = np.random.default_rng(d + 7 * a0)
    n = 200_000
    pmf = np.array([math.comb(d, a) for a in range(d + 1)], dtype=float)
    for in_cap in (True, False):
        draws = sample_agreements(d, a0, np.full(n, in_cap), rng)
        side = np.arange(d + 1) >= a0 if in_cap else np.arange(d + 1) < a0
        assert np.all(side[draws])
        prob = np.where(side, pmf, 0.0)
        prob /= prob.sum()
        observed = np.bincount(draws, minlength=d + 1)
        assert chi_square_p_value(observed[side], prob[side]) > 1e-6


def test_exact_exponential_and_survival_inversion() -> None:
    rng = np.random.default_rng(5)
    e = standard_exponential_exact(400_000, rng)
    assert stats.kstest(e, "expon").pvalue > 1e-6
    assert stats.kstest(e[e >= 3.0] - 3.0, "expon").pvalue > 1e-6  # memorylessness across blocks
    # Inversion: E just below −log S_k gives k − 1, at or above gives k — also in the far tail,
    # which −log(U) could never reach (d = 2000: S at a = d is 2^−2000/P).
    d, lo = 2000, 1001
    from ldpcli.math._binomial import _neg_log_survival

    nls = _neg_log_survival(d, lo, d)
    assert nls[0] == 0.0 and np.all(np.diff(nls) > 0)
    ref_last = -(mp.log(1) - mp.log(sum(math.comb(d, a) for a in range(lo, d + 1))))
    assert nls[-1] == pytest.approx(float(ref_last), rel=1e-14)
    ks = np.array([1, 10, 500, d - lo])
    got = invert_survival(nls, np.concatenate([nls[ks], np.nextafter(nls[ks], -np.inf)]))
    np.testing.assert_array_equal(got, np.concatenate([ks, ks - 1]))
    # −log S_k for a middle k against exact integers.
    k = 300
    num = sum(math.comb(d, a) for a in range(lo + k, d + 1))
    den = sum(math.comb(d, a) for a in range(lo, d + 1))
    assert nls[k] == pytest.approx(float(-mp.log(mp.mpf(num) / den)), rel=1e-14)


# --- the Duchi et al. erratum (ERRATA 12) -------------------------------------------------------------


def printed_49(d: int, eps: float) -> tuple[np.ndarray, float, np.ndarray]:
    """(49) as printed: p = e^ε/(1 + e^ε) on {⟨z, s⟩ > 0}, and the odd-d constant
    B = (e^ε + 1)/(e^ε − 1)·2^{d−1}/C(d − 1, ⌈d/2⌉ − 1) (proof of Cor. 3.9). pmf at s = 1."""
    z = cube(d)
    s = np.ones(d, dtype=np.int64)
    in_cap = z @ s > 0
    p = special.expit(eps)
    q = np.where(in_cap, p / np.count_nonzero(in_cap), (1 - p) / np.count_nonzero(~in_cap))
    b = (math.exp(eps) + 1) / math.expm1(eps) * 2 ** (d - 1) / math.comb(d - 1, math.ceil(d / 2) - 1)
    return q, b, z


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0, 8.0])
def test_printed_even_d_scheme_is_not_private_and_biased(eps: float) -> None:
    """At d = 2 the printed scheme leaks ε + log 3; for even d its B is biased. Odd d is fine."""
    q, b, z = printed_49(2, eps)
    # z = (1, 1) is the only cap point for s = (1, 1) and outside the cap of s = (−1, −1).
    loss = math.log(q[z.tolist().index([1, 1])]) - math.log(q[z.tolist().index([-1, -1])])
    assert loss == pytest.approx(eps + math.log(3), rel=1e-13)
    assert loss > eps
    for d in (2, 4, 6, 10):
        q, b, z = printed_49(d, eps)
        mean = q @ z * b
        assert not np.allclose(mean, 1.0, rtol=1e-3)  # E[Z] ≠ s under the printed constant
        n_in = math.fsum(1 for v in z @ np.ones(d) if v > 0)
        worst = math.log(special.expit(eps) / n_in) - math.log(special.expit(-eps) / (2**d - n_in))
        assert worst == pytest.approx(eps + math.log((2**d - n_in) / n_in), rel=1e-12)
        fixed = DuchiLinf.calibrate(d, eps)
        assert fixed.epsilon_exact == pytest.approx(eps, rel=1e-12)
        np.testing.assert_allclose(pmf_from_parameters(fixed, np.ones(d), z) @ z * fixed.B, 1.0, rtol=1e-12)
    for d in (1, 3, 5, 11):
        q, b, z = printed_49(d, eps)
        mech = DuchiLinf.calibrate(d, eps)
        assert mech.p == pytest.approx(special.expit(eps), rel=1e-15)
        assert mech.B == pytest.approx(b, rel=1e-13)
        np.testing.assert_allclose(q @ z * b, 1.0, rtol=1e-12)


# --- κ = 0, d = 1, optimality --------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3, 4, 9, 10, 500, 501, 10**4])
@pytest.mark.parametrize("eps", [0.01, 1.0, 4.0, 8.0, 100.0])
def test_privunit_inf_at_kappa_0_is_duchi(d: int, eps: float) -> None:
    forced = PrivUnitInf._build(d, eps, 1.0, "optimal", agree_min_from_kappa(d, 0))
    duchi = DuchiLinf.calibrate(d, eps)
    assert forced.kappa == duchi.kappa == 0
    assert forced.agree_min == duchi.agree_min == d // 2 + 1
    for field in ("logit_p", "log_side", "log_side_c", "log_c", "log_one_minus_c"):
        assert getattr(forced, field) == getattr(duchi, field)
    assert forced.B == duchi.B and forced.p == duchi.p
    assert forced.expected_error == duchi.expected_error
    if d <= 10:
        z = cube(d)
        s = np.ones(d, dtype=np.int64)
        np.testing.assert_array_equal(pmf_from_parameters(forced, s, z), pmf_from_parameters(duchi, s, z))


@pytest.mark.parametrize("cls", MECHANISMS)
@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 4.0, 8.0, 30.0, 700.0, 10_000.0])
def test_d1_is_randomized_response(cls, eps: float) -> None:
    mech = cls.calibrate(1, eps)
    assert mech.kappa == 0
    assert mech.p == pytest.approx(special.expit(eps), rel=1e-15)
    assert mech.logit_p == pytest.approx(eps, rel=1e-14)
    assert mech.B == pytest.approx(float(1 / mp.tanh(mp.mpf(eps) / 2)), rel=1e-14)
    assert mech.expected_error == pytest.approx(float(1 / mp.sinh(mp.mpf(eps) / 2) ** 2), rel=1e-12, abs=1e-300)
    rng = np.random.default_rng(int(eps * 100))
    out = mech.privatize(np.ones((1000, 1)), rng)
    assert set(np.unique(out)) <= {mech.B, -mech.B}


@pytest.mark.parametrize("d", [100, 500, 1000, 10**4])
@pytest.mark.parametrize("eps", [1.0, 2.0, 4.0, 8.0])
def test_optimal_kappa_beats_kappa_0(d: int, eps: float) -> None:
    """ERRATA 13: for ε ≳ 1 and large d the best threshold has a far smaller error than κ = 0."""
    best = PrivUnitInf.calibrate(d, eps)
    duchi = DuchiLinf.calibrate(d, eps)
    assert best.kappa > 0
    assert best.expected_error < duchi.expected_error
    if eps >= 4.0:
        assert best.expected_error < 0.3 * duchi.expected_error


@pytest.mark.parametrize("d", list(range(1, 41)) + [64, 101, 500])
def test_optimal_kappa_is_the_true_minimum(d: int) -> None:
    """Brute force over every admissible κ with exact integer tail sums."""
    for eps in (0.01, 0.5, 1.0, 2.0, 4.0, 8.0, 20.0, 100.0):
        mech = PrivUnitInf.calibrate(d, eps)
        cs = all_exact_c(d, eps)
        best = max(cs.values())
        assert cs[mech.agree_min] >= best * (1 - 1e-13), (d, eps)
        assert math.exp(mech.log_c) == pytest.approx(float(cs[mech.agree_min]), rel=1e-13)
        err = d * (1 / cs[mech.agree_min] ** 2 - 1)
        assert mech.expected_error == pytest.approx(float(err), rel=1e-12)
        duchi = DuchiLinf.calibrate(d, eps)
        assert math.exp(duchi.log_c) == pytest.approx(float(cs[d // 2 + 1]), rel=1e-13)


@pytest.mark.parametrize(
    "cls, eps, kappa, error",
    [
        (PrivUnitInf, 4.0, 32, "108467.254557163548"),
        (PrivUnitInf, 8.0, 60, "32782.3918344050125"),
        (DuchiLinf, 4.0, 0, "393890.309848424694"),
        (DuchiLinf, 8.0, 0, "365562.011253534002"),
    ],
)
def test_reference_values_at_d_500(cls, eps: float, kappa: int, error: str) -> None:
    """E‖Z − x‖² at a vertex, L = 1, d = 500: the values are d(1/c² − 1) with c from exact integers."""
    mech = cls.calibrate(500, eps)
    assert mech.kappa == kappa
    ref = 500 * (1 / exact_c(500, eps, mech.agree_min) ** 2 - 1)
    assert float(ref) == pytest.approx(float(error), rel=1e-15)
    assert mech.expected_error == pytest.approx(float(ref), rel=1e-13)


# --- whole range: finite, exact, monotone, fast ----------------------------------------------------


@pytest.mark.parametrize("cls", MECHANISMS)
@pytest.mark.parametrize("d", [1, 2, 3, 10, 1000, 10**6])
def test_finite_exact_and_monotone_over_the_whole_range(cls, d: int) -> None:
    errors, maxima = [], []
    for eps in (0.01, 0.1, 1.0, 4.0, 8.0, 100.0, 10_000.0):
        mech = cls.calibrate(d, eps)
        assert mech.epsilon_exact <= eps * (1 + 1e-12)
        assert mech.epsilon_exact <= eps  # exactly, not even an ulp above (issue 13)
        assert mech.epsilon_exact == pytest.approx(eps, rel=1e-12)
        values = [mech.expected_error, mech.expected_error_max, mech.B, mech.scale, mech.p, mech.logit_p, mech.log_side]
        assert all(math.isfinite(v) for v in values)
        assert mech.expected_error >= 0.0 and mech.B >= 1.0
        assert 0 <= mech.kappa <= d - 1
        errors.append(mech.expected_error)
        maxima.append(mech.expected_error_max)
    assert all(b <= a for a, b in zip(errors, errors[1:]))
    assert all(b <= a for a, b in zip(maxima, maxima[1:]))


def test_calibrate_at_one_million_is_vectorised_and_linear_in_memory() -> None:
    """Calibration at d = 10⁶ makes as many Python calls as at d = 12 or 10³ (measured: 224), so its
    O(d) work is all in numpy, and holds at most 64 bytes per dimension (measured: 45)."""
    for eps in (1.0, 10_000.0):
        small = max(python_calls(lambda d=d, eps=eps: PrivUnitInf.calibrate(d, eps)) for d in (12, 1000))
        assert python_calls(lambda eps=eps: PrivUnitInf.calibrate(10**6, eps)) <= 2 * small
        tracemalloc.start()
        try:
            PrivUnitInf.calibrate(10**6, eps)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= 64 * 10**6


# --- Monte Carlo -------------------------------------------------------------------------------------


def check_monte_carlo(mech, x: np.ndarray, reps: int, seed: int) -> None:
    """Unbiasedness (Bonferroni z-scores over d, family α = 1e−6), E‖Z − x‖² within 6 SE, and
    constant output norm L·scale."""
    d = mech.d
    L = mech.norm_bound
    rng = np.random.default_rng(seed)
    out = mech.privatize(np.tile(x, (reps, 1)), rng)
    norms = np.sqrt(np.einsum("ij,ij->i", out, out))
    np.testing.assert_allclose(norms, L * mech.scale, rtol=1e-13)
    var = (L * mech.B) ** 2 - x**2  # Var(Z_j) = E[Z_j²] − x_j², E[Z_j²] = L²B²
    zscores = (out.mean(axis=0) - x) / np.sqrt(var / reps)
    assert np.max(np.abs(zscores)) < bonferroni_z(1e-6, d)
    sq = np.einsum("ij,ij->i", out - x, out - x)
    predicted = d * (L * mech.B) ** 2 - float(x @ x)
    if np.all(x == 0):
        np.testing.assert_allclose(sq, predicted, rtol=1e-12)
    else:
        se = sq.std(ddof=1) / math.sqrt(reps)
        assert abs(sq.mean() - predicted) < 6 * se
    if np.all(np.abs(x) == L):
        assert predicted == pytest.approx(mech.expected_error, rel=1e-12)
    if np.all(x == 0):
        assert predicted == pytest.approx(mech.expected_error_max, rel=1e-12)


@pytest.mark.parametrize("cls", MECHANISMS)
@pytest.mark.parametrize(
    "d, eps, reps", [(3, 1.0, 100_000), (3, 6.0, 100_000), (8, 3.0, 100_000), (500, 4.0, 6000), (500, 8.0, 6000)]
)
@pytest.mark.parametrize("where", ["vertex", "inside", "zero"])
def test_monte_carlo_unbiased_with_predicted_error(cls, d: int, eps: float, reps: int, where: str) -> None:
    L = 2.0
    mech = cls.calibrate(d, eps, norm_bound=L)
    rng = np.random.default_rng(d)
    if where == "vertex":
        x = L * np.where(rng.random(d) < 0.5, -1.0, 1.0)
    elif where == "inside":
        x = L * rng.uniform(-1, 1, d)
        x[0] = L  # one coordinate on the boundary, one at 0
        x[-1] = 0.0 if d > 1 else x[-1]
    else:
        x = np.zeros(d)
    check_monte_carlo(mech, x, reps, seed=zlib.crc32(f"{cls.name}/{d}/{eps}/{where}".encode()))


def test_monte_carlo_at_d_1e5() -> None:
    d = 10**5
    mech = PrivUnitInf.calibrate(d, 8.0)
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, d)
    reps = 40
    out = mech.privatize(np.tile(x, (reps, 1)), rng)
    np.testing.assert_allclose(np.sqrt(np.einsum("ij,ij->i", out, out)), mech.scale, rtol=1e-12)
    # ⟨Z, x⟩ has mean ‖x‖² (the coordinates of Z are correlated through the channel: empirical SE).
    inner = out @ x
    assert abs(inner.mean() - float(x @ x)) < 6 * inner.std(ddof=1) / math.sqrt(reps)
    sq = np.einsum("ij,ij->i", out - x, out - x)
    se = sq.std(ddof=1) / math.sqrt(reps)
    assert abs(sq.mean() - (d * mech.B**2 - float(x @ x))) < 6 * se


def test_huge_epsilon_outputs_the_rounded_vertex() -> None:
    """ε = 10^4 at d = 1000: κ = d − 1, p = 1 − e^{−ε}·…, so z = s (and B = 1) in practice."""
    mech = PrivUnitInf.calibrate(1000, 10_000.0)
    assert mech.agree_min == 1000 and mech.B == 1.0
    rng = np.random.default_rng(3)
    x = np.where(rng.random((50, 1000)) < 0.5, -1.0, 1.0)
    np.testing.assert_array_equal(mech.privatize(x.copy(), rng), x)


def test_seeded_privatization_is_reproducible() -> None:
    mech = PrivUnitInf.calibrate(40, 3.0)
    x = np.random.default_rng(0).uniform(-1, 1, (300, 40))
    a = mech.privatize(x, np.random.default_rng(42))
    b = mech.privatize(x, np.random.default_rng(42))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, mech.privatize(x, np.random.default_rng(43)))


def test_kappa_0_on_even_d_excludes_ties() -> None:
    """Ties ⟨z, s⟩ = κ go to the complement: for d = 4 at κ = 0 the cap has 5 points, not 11."""
    mech = DuchiLinf.calibrate(4, 1.0)
    assert math.exp(mech.log_side) * 16 == pytest.approx(5.0, rel=1e-14)
    assert Fraction(5, 16) == Fraction(sum(math.comb(4, a) for a in range(3, 5)), 16)


def test_stirling_remainder_table() -> None:
    from ldpcli.math._binomial import _stirlerr

    k = np.arange(0, 40, dtype=float)
    got = _stirlerr(k)
    for kk, g in zip(range(1, 40), got[1:]):
        n = mp.mpf(kk)
        ref = mp.loggamma(n + 1) - (n + mp.mpf(1) / 2) * mp.log(n) + n - mp.log(2 * mp.pi) / 2
        assert g == pytest.approx(float(ref), rel=5e-16, abs=1e-19)
