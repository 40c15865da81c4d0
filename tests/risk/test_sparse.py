"""Sparse histograms under the Zipfian prior (Bhowmick et al. 2018, Sec. 2.3.2, Eq. 10, Lemma 2.3, Prop. 2).

The exact best guess is checked against brute force over every guess and every data vector (d ≤ 10),
against closed forms, and against itself without truncation; Lemma 2.3 (with its proof's constants)
is checked to hold above the exact values, and the printed constants are compared with the proof's.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from helpers import python_calls

from ldpcli.errors import UsageError
from ldpcli.risk import _sparse as sp

TINY = 1e-9  # a precision (or recall) threshold that every guess meets: S_in ≥ 1 holds surely (X_1 = 1)


def brute_force_by_size(m: int, d: int, p: float, r: float) -> np.ndarray:
    """max over all guesses v of size s of P(precision ≥ p, recall ≥ r), s = 1..d, by full enumeration.

    Every X ∈ {0,1}^d with its product-Bernoulli weight and every v ≠ 0; thresholds compared exactly
    with p and r read as their repr decimals (the module's convention).
    """
    pj = np.array([min(m / j, 1.0) for j in range(1, d + 1)])
    xs = np.array(list(itertools.product([0, 1], repeat=d)), dtype=np.int64)
    weights = np.prod(np.where(xs == 1, pj, 1.0 - pj), axis=1)
    guesses = xs[1:]
    hits = guesses @ xs.T
    size = guesses.sum(axis=1)
    used = xs.sum(axis=1)
    pf, rf = Fraction(repr(p)), Fraction(repr(r))
    ok = (hits * pf.denominator >= pf.numerator * size[:, None]) & (hits * rf.denominator >= rf.numerator * used[None, :])
    prob = ok.astype(float) @ weights
    return np.array([prob[size == s].max() for s in range(1, d + 1)])


def _cases(d: int) -> list[tuple[int, float, float]]:
    ms = sorted({1, 2, d // 2, d - 1} & set(range(1, d)))
    return [(m, p, r) for m in ms for p in (0.1, 0.5, 2 / 3, 1.0) for r in (0.25, 0.5, 0.7, 1.0)]


@pytest.mark.slow
@pytest.mark.parametrize("d", [2, 4, 7, 10])
def test_exact_matches_brute_force(d: int) -> None:
    """Per size (so the prefix {1..s} is the best guess of its size) and overall, to 1e-12 relative."""
    for m, p, r in _cases(d):
        brute = brute_force_by_size(m, d, p, r)
        mine = np.exp(sp.log_success_by_size(m, d, p, r))
        assert np.array_equal(mine > 0, brute > 0), (m, d, p, r)
        positive = brute > 0
        np.testing.assert_allclose(mine[positive], brute[positive], rtol=1e-12, atol=0)
        best = brute.max()
        for margin in (800.0, 0.5):  # 0.5 forces the cut-and-retry path
            log_p, s = sp.log_best_guess(m, d, p, r, margin=margin)
            assert math.exp(log_p) == pytest.approx(best, rel=1e-12), (m, d, p, r, margin)
            # the smallest size that (within rounding) attains the maximum; exact ties are common
            assert brute[s - 1] >= best * (1 - 1e-11) and np.all(brute[: s - 1] < best * (1 - 1e-13))


@pytest.mark.parametrize("m, d, p, r", [(20, 300, 0.5, 0.5), (20, 300, 0.9, 0.9), (50, 500, 0.8, 0.6), (5, 200, 0.3, 0.3),
                                        (100, 400, 0.95, 0.95)])
def test_truncated_route_equals_the_uncut_one(m: int, d: int, p: float, r: float) -> None:
    exact = sp.log_success_by_size(m, d, p, r)  # margin ∞: nothing cut
    for margin in (2.0, 800.0):
        log_p, s = sp.log_best_guess(m, d, p, r, margin=margin)
        assert log_p == pytest.approx(float(exact.max()), rel=1e-12, abs=1e-15)
        assert s == int(np.argmax(exact)) + 1


def test_d2000_m20_work_grows_linearly_and_agrees_with_the_uncut_route() -> None:
    """The work grows about linearly in d (measured: 12× from d = 200 to 2000; a quadratic route 100×)."""
    small = python_calls(lambda: sp.log_best_guess(20, 200, 0.5, 0.5))
    assert python_calls(lambda: sp.log_best_guess(20, 2000, 0.5, 0.5)) <= 20 * small
    log_p, s = sp.log_best_guess(20, 2000, 0.5, 0.5)
    exact = sp.log_success_by_size(20, 2000, 0.5, 0.5)
    assert log_p == pytest.approx(float(exact.max()), rel=1e-12) and s == int(np.argmax(exact)) + 1
    assert -5.0 < log_p < 0.0


def test_underflow_below_1e300_stays_finite_and_matches_the_closed_form() -> None:
    """Precision = recall = 1 means X = v: P = Π_{j≤s} p_j Π_{j>s} (1 − p_j), best at s = 2m − 1 (tie at 2m)."""
    m, d = 400, 4000
    log_p, s = sp.log_best_guess(m, d, 1.0, 1.0)
    pj = [min(m / j, 1.0) for j in range(1, d + 1)]

    def closed(size: int) -> float:
        return math.fsum(math.log(q) for q in pj[:size]) + math.fsum(math.log1p(-q) for q in pj[size:])

    # word j > m is worth including iff m/j ≥ 1 − m/j, i.e. j ≤ 2m (j = 2m: a tie)
    assert closed(2 * m - 1) == pytest.approx(closed(2 * m), rel=1e-13)
    assert closed(2 * m - 1) > max(closed(2 * m - 2), closed(2 * m + 1))
    assert math.isfinite(log_p) and log_p < math.log(1e-300)
    assert log_p == pytest.approx(closed(2 * m - 1), rel=1e-12)
    assert s == 2 * m - 1
    # a case with wide laws (precision and recall below 1) far below 1e-300
    deep, size = sp.log_best_guess(600, 3000, 0.99, 0.99)
    assert math.isfinite(deep) and deep < math.log(1e-300) and 1 <= size <= 3000
    cut, _ = sp.log_best_guess(600, 3000, 0.99, 0.99, margin=3.0)
    assert cut == pytest.approx(deep, rel=1e-12)


@pytest.mark.slow
def test_exact_never_above_the_lemma_bound() -> None:
    """sup_v P(success) ≤ max(B_prec(γ), B_rec(γ)) at the γ lemma23_bound picks (the proof's constants)."""
    nontrivial = 0
    for m, d in [(1, 50), (1, 1000), (2, 200), (5, 100), (5, 1000), (10, 1000), (20, 400)]:
        for p in (0.3, 0.6, 0.9):
            for r in (0.3, 0.5, 0.8):
                exact, _ = sp.log_best_guess(m, d, p, r)
                bound, gamma = sp.lemma23_bound(m, d, p, r)
                assert gamma >= 2.0
                assert exact <= bound + 1e-12, (m, d, p, r, exact, bound, gamma)
                nontrivial += bound < 0.0
    assert nontrivial >= 20


PRECISION_GRID_M = [1, 2, 3, 5, 8, 13, 20]
GAMMAS = [2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 5.0, 6.5, 8.0, 10.0]


@pytest.mark.slow
def test_precision_half_of_lemma_23_holds_and_the_printed_constant_is_not_contradicted() -> None:
    """sup_{|v| ≥ γm} P(precision ≥ p) against the proof's bound (must hold) and the printed one (observed).

    The printed 2 log γ is unproven (Bernstein gives 4 log γ), but no case here shows it false: the
    exact probability stays below it too (Bernstein is loose by a wide margin at these sizes).
    """
    nontrivial = printed_tighter = 0
    for m in PRECISION_GRID_M:
        d = 400
        for p in np.round(np.arange(0.1, 1.0001, 0.1), 1):
            per_size = sp.log_success_by_size(m, d, float(p), TINY)
            for gamma in GAMMAS:
                first = math.ceil(gamma * m)
                exact = float(per_size[first - 1:].max())
                proven = sp.log_lemma23_precision(float(p), m=m, gamma=gamma)
                printed = sp.log_lemma23_precision_printed(float(p), m=m, gamma=gamma)
                assert exact <= proven + 1e-12, (m, p, gamma, exact, proven)
                assert exact <= printed + 1e-12, (m, p, gamma, exact, printed)
                assert printed <= proven
                nontrivial += proven < 0.0
                printed_tighter += printed < proven
    assert nontrivial >= 100 and printed_tighter >= 50


def test_printed_precision_constant_is_strictly_tighter_than_the_proof_gives() -> None:
    """Where the quadratic term is active, the printed exponent is exactly twice the proven one: not what Bernstein gives."""
    for m in (1, 5, 20, 100):
        for gamma in (2.0, 3.0, 5.0, 10.0):
            for p in (0.6, 0.8, 1.0):
                t = p * gamma - 1.0 - math.log(gamma)
                if t <= 0.0:
                    continue
                proven = sp.log_lemma23_precision(p, m=m, gamma=gamma)
                printed = sp.log_lemma23_precision_printed(p, m=m, gamma=gamma)
                if t * t / (4.0 * math.log(gamma)) < 0.75 * t:  # the proof's quadratic term is the minimum
                    assert printed < proven
                    assert proven == pytest.approx(-t * t * m / (4.0 * math.log(gamma)), rel=1e-14)
                    assert printed == pytest.approx(max(2.0 * proven, -0.75 * t * m), rel=1e-14)
                else:
                    assert printed == proven == pytest.approx(-0.75 * t * m, rel=1e-14)


RECALL_GRID = [(1, 10), (1, 100), (1, 1000), (2, 20), (2, 400), (3, 300), (5, 50), (5, 1000), (8, 800), (20, 1000)]


@pytest.mark.slow
def test_recall_half_of_lemma_23_holds_for_guesses_of_at_most_gamma_m_words() -> None:
    nontrivial = 0
    for m, d in RECALL_GRID:
        for r in (0.1, 0.3, 0.5, 0.7, 1.0):
            per_size = sp.log_success_by_size(m, d, TINY, r)
            for gamma in GAMMAS:
                last = min(math.floor(gamma * m), d)
                exact = float(per_size[:last].max())
                bound = sp.log_lemma23_recall(r, m=m, d=d, gamma=gamma)
                assert exact <= bound + 1e-12, (m, d, r, gamma, exact, bound)
                nontrivial += bound < 0.0
                if r <= 0.5:  # the printed 4(1 − r²) is valid but looser than the proof's 4(1 − r)²
                    assert sp.log_lemma23_recall_printed(r, m=m, d=d, gamma=gamma) >= bound
    assert nontrivial >= 30
    assert sp.log_lemma23_recall(0.8, m=5, d=1000, gamma=2.0) == sp.log_lemma23_recall(0.5, m=5, d=1000, gamma=2.0)


def test_printed_recall_hypothesis_is_the_wrong_way_round() -> None:
    """The statement bounds recall for |v| ≥ γm, but the guess of all d words has recall 1 surely."""
    m, d, r, gamma = 20, 2000, 0.5, 2.0
    printed = sp.log_lemma23_recall_printed(r, m=m, d=d, gamma=gamma)
    assert printed < -1.5  # claims P(recall ≥ 1/2) < e^{-1.5} for every v with |v| ≥ 40
    all_words = sp.log_success_by_size(m, d, TINY, r)[d - 1]
    assert all_words == pytest.approx(0.0, abs=1e-12)  # yet |v| = d ≥ γm has P(recall ≥ 1/2) = 1


def test_lemma23_bound_picks_a_near_optimal_gamma() -> None:
    for m, d, p, r in [(20, 2000, 0.5, 0.5), (10, 10**6, 0.8, 0.3), (100, 10**5, 0.9, 0.9), (5, 8, 0.5, 0.5),
                       (1, 3, 1.0, 1.0)]:
        bound, gamma = sp.lemma23_bound(m, d, p, r)
        assert 2.0 <= gamma <= max(2.0, d / m)
        rec = sp.log_lemma23_recall(r, m=m, d=d, gamma=gamma)
        expected = rec if gamma * m >= d else max(sp.log_lemma23_precision(p, m=m, gamma=gamma), rec)
        assert bound == expected
        grid = np.exp(np.linspace(math.log(2.0), math.log(max(2.0, d / m)), 2001))
        best_on_grid = min(
            sp.log_lemma23_recall(r, m=m, d=d, gamma=g) if g * m >= d
            else max(sp.log_lemma23_precision(p, m=m, gamma=g), sp.log_lemma23_recall(r, m=m, d=d, gamma=g))
            for g in grid
        )
        assert bound <= best_on_grid + 1e-9 * max(1.0, abs(best_on_grid))


def test_sparse_risk_fields_and_json() -> None:
    risk = sp.sparse_risk(2.0, m=20, d=2000, precision=0.9, recall=0.9)
    assert risk.log_prior_exact is not None and risk.best_size is not None and risk.exact_reason is None
    assert risk.log_prior_exact <= risk.log_prior_lemma
    assert risk.log_bound_exact == min(0.0, 2.0 + risk.log_prior_exact)
    assert risk.log_bound_lemma == min(0.0, 2.0 + risk.log_prior_lemma)
    assert risk.log_bound == risk.log_bound_exact and risk.guarantee and risk.guarantee_exact
    info = risk.to_dict()
    json.dumps(info, allow_nan=False)
    assert info["best_size"] == risk.best_size and info["gamma"] == risk.gamma
    # ε large: no guarantee either way, the bounds clip at 1
    loose = sp.sparse_risk(1e4, m=20, d=2000, precision=0.9, recall=0.9)
    assert not loose.guarantee and loose.log_bound == 0.0 and loose.to_dict()["probability_bound"] == 1.0


def test_sparse_risk_above_the_exact_limit_keeps_the_lemma() -> None:
    risk = sp.sparse_risk(1.0, m=50, d=sp.EXACT_MAX_D + 1, precision=0.5, recall=0.5)
    assert risk.log_prior_exact is None and risk.best_size is None and risk.guarantee_exact is None
    assert risk.exact_reason is not None and str(sp.EXACT_MAX_D) in risk.exact_reason
    assert risk.log_bound_exact is None and risk.log_bound == risk.log_bound_lemma
    info = risk.to_dict()
    assert info["log_prior_exact"] is None
    json.dumps(info, allow_nan=False)
    with pytest.raises(UsageError, match="^d "):
        sp.log_best_guess(50, sp.EXACT_MAX_D + 1, 0.5, 0.5)


@pytest.mark.parametrize(
    "call, flag",
    [
        (lambda: sp.sparse_risk(1.0, m=0, d=10, precision=0.5, recall=0.5), "m"),
        (lambda: sp.sparse_risk(1.0, m=1.5, d=10, precision=0.5, recall=0.5), "m"),
        (lambda: sp.sparse_risk(1.0, m=5, d=5, precision=0.5, recall=0.5), "d"),
        (lambda: sp.sparse_risk(1.0, m=5, d=3, precision=0.5, recall=0.5), "d"),
        (lambda: sp.sparse_risk(1.0, m=5, d=10.0, precision=0.5, recall=0.5), "d"),
        (lambda: sp.sparse_risk(1.0, m=5, d=10, precision=0.0, recall=0.5), "precision"),
        (lambda: sp.sparse_risk(1.0, m=5, d=10, precision=1.5, recall=0.5), "precision"),
        (lambda: sp.sparse_risk(1.0, m=5, d=10, precision=math.nan, recall=0.5), "precision"),
        (lambda: sp.sparse_risk(1.0, m=5, d=10, precision=0.5, recall=0.0), "recall"),
        (lambda: sp.sparse_risk(1.0, m=5, d=10, precision=0.5, recall=-1.0), "recall"),
        (lambda: sp.sparse_risk(-1.0, m=5, d=10, precision=0.5, recall=0.5), "epsilon"),
        (lambda: sp.sparse_risk(math.inf, m=5, d=10, precision=0.5, recall=0.5), "epsilon"),
        (lambda: sp.log_lemma23_precision(0.5, m=5, gamma=1.5), "gamma"),
    ],
)
def test_bad_arguments_raise_usage_error_naming_the_flag(call: Callable[[], object], flag: str) -> None:
    with pytest.raises(UsageError) as info:
        call()
    message = str(info.value)
    assert message.startswith(flag + " ") and "\n" not in message


def test_thresholds_are_read_as_decimals() -> None:
    """precision ≥ 0.1 with 10 guessed words means ≥ 1 hit (0.1 is 1/10, not the float just above it)."""
    # m = 1, d = 11, guess size 10: a hit is certain (X_1 = 1), so P(precision ≥ 0.1) = 1 for s = 10.
    per_size = sp.log_success_by_size(1, 11, 0.1, TINY)
    assert per_size[9] == pytest.approx(0.0, abs=1e-15)
    # 0.3 with 10 words: ≥ 3 hits; compare with brute force at d = 10
    brute = brute_force_by_size(1, 10, 0.3, 0.25)
    np.testing.assert_allclose(np.exp(sp.log_success_by_size(1, 10, 0.3, 0.25)), brute, rtol=1e-12)
