"""Composition beyond the sum (ldpcli.release._accounting): Kairouz–Oh–Viswanath's optimal and heterogeneous
theorems, Dwork–Rothblum–Vadhan, dp-accounting's PLD, and the local and central guarantees of a ledger's releases."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution
from dp_accounting.pld.common import DifferentialPrivacyParameters

from ldpcli.errors import DataError, MissingDependency, UsageError
from ldpcli.release._accounting import (
    BASIC,
    DRV,
    KOV_HETEROGENEOUS,
    KOV_OPTIMAL,
    PLD_DELTA_MARGIN,
    RECORDED,
    compose_central,
    compose_local,
    drv_epsilon,
    kov_heterogeneous_epsilon,
    optimal_homogeneous_epsilon,
    pld_epsilon,
    pld_interval,
)
from ldpcli.release._ledger_file import LedgerEntry

DELTAS = [1e-9, 1e-6, 1e-3, 0.05, 0.3]


def hockey_stick(epsilon: float, k: int, at: float) -> float:
    """KOV (2015)'s defining sum, term by term: δ(ε') of k-fold ε randomized response, in plain floats."""
    total = 0.0
    for ell in range(k + 1):
        total += math.comb(k, ell) * max(0.0, math.exp((k - ell) * epsilon) - math.exp(at + ell * epsilon))
    return total / (1.0 + math.exp(epsilon)) ** k


def brute_epsilon(epsilon: float, k: int, delta: float) -> float:
    """The smallest ε' ≥ 0 with hockey_stick ≤ δ, by bisection on the defining sum (decreasing in ε')."""
    if hockey_stick(epsilon, k, 0.0) <= delta:
        return 0.0
    low, high = 0.0, k * epsilon
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (low, middle) if hockey_stick(epsilon, k, middle) <= delta else (middle, high)
    return high


def entry(epsilon: float, delta: float | None = None, shuffled: dict[str, Any] | None = None) -> LedgerEntry:
    """A ledger entry of one input at exact ε ``epsilon``."""
    return LedgerEntry(fingerprint="a" * 64, input="/data/people.parquet", rows=1000, d=3, columns=["x"],
                       output="/releases/out.parquet", mechanism="privunit2", epsilon=epsilon, epsilon_exact=epsilon,
                       delta=delta, created="2026-01-01T00:00:00+00:00", tag="t", reproducible=False, shuffled=shuffled)


def shuffled(epsilon: float, delta: float, n: int = 10_000) -> dict[str, Any]:
    """A shuffled release's central record, with every field ``privatize --shuffle`` writes."""
    return {"n": n, "delta": delta, "epsilon_local": 8.0, "epsilon_central_upper": epsilon,
            "epsilon_central_lower": epsilon / 2, "epsilon_central_closed_form": None, "theorem": "a theorem",
            "assumptions": ["an honest shuffler"]}


# --- KOV Thm 3.3 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("delta", DELTAS)
def test_optimal_composition_matches_its_defining_sum(epsilon: float, k: int, delta: float) -> None:
    exact = optimal_homogeneous_epsilon(epsilon, k, delta)
    assert exact == pytest.approx(brute_epsilon(epsilon, k, delta), rel=1e-9, abs=1e-12)
    assert hockey_stick(epsilon, k, exact) <= delta + 1e-15  # the sum's own rounding: ulps of its largest term


@pytest.mark.parametrize("epsilon,k", [(0.3, 6), (1.0, 7), (2.0, 4)])
def test_optimal_composition_hits_thm_3_3_corner_points(epsilon: float, k: int) -> None:
    """At δ = δ_i of Thm 3.3 the optimal ε is (k − 2i)ε exactly."""
    for i in range(1, k // 2 + 1):
        delta_i = sum(math.comb(k, ell) * (math.exp((k - ell) * epsilon) - math.exp((k - 2 * i + ell) * epsilon))
                      for ell in range(i)) / (1 + math.exp(epsilon)) ** k
        assert optimal_homogeneous_epsilon(epsilon, k, delta_i) == pytest.approx((k - 2 * i) * epsilon, rel=1e-9)


def test_optimal_composition_is_finite_in_log_space() -> None:
    # ε = 10⁴: (1 + e^ε)^k overflows any float; still kε less a hair (δ bought at the top loss)
    assert optimal_homogeneous_epsilon(1e4, 3, 1e-6) == pytest.approx(3e4 + math.log1p(-1e-6), rel=1e-11)
    many = optimal_homogeneous_epsilon(0.01, 100_000, 1e-6)
    assert 0 < many < 0.01 * 100_000 / 10  # far below the sum: about √k ε


@pytest.mark.parametrize("epsilon,k", [(0.1, 100), (0.5, 40), (1.0, 10), (0.2, 20_000)])
def test_optimal_composition_agrees_with_dp_accounting(epsilon: float, k: int) -> None:
    """The PLD of k-fold randomized response is the same law: pessimistic, it is above the exact ε by at most
    the rounding of each release's loss."""
    exact = optimal_homogeneous_epsilon(epsilon, k, 1e-6)
    pld = pld_epsilon([(epsilon, 0.0)] * k, 1e-6)
    # k = 20000: without PLD_DELTA_MARGIN dp-accounting's ε would be 2e-6 below the exact value
    assert exact <= pld
    assert pld - exact <= k * pld_interval([(epsilon, 0.0)] * k)


# --- heterogeneous bounds -------------------------------------------------------------------------------


def random_epsilons(seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in rng.choice([0.05, 0.1, 0.3, 0.5, 1.0, 2.0], size=int(rng.integers(2, 30)))]


@pytest.mark.parametrize("seed", range(6))
def test_heterogeneous_bounds_are_below_the_sum_and_above_the_exact_value(seed: int) -> None:
    epsilons = random_epsilons(seed)
    total = math.fsum(epsilons)
    for delta in DELTAS:
        kov = kov_heterogeneous_epsilon(epsilons, delta)
        pld = pld_epsilon([(e, 0.0) for e in epsilons], delta)
        assert kov <= total
        assert kov <= drv_epsilon(epsilons, delta)  # Thm 3.5 tightens DRV
        # a valid bound is never below the exact ε, which the pessimistic PLD exceeds by at most k·interval
        assert kov >= pld - len(epsilons) * pld_interval([(e, 0.0) for e in epsilons])
        local = compose_local([entry(e) for e in epsilons], delta)
        assert local.advanced is not None and local.advanced.epsilon <= local.basic.epsilon == pytest.approx(total)
        best = min(bound.epsilon for bound in local.bounds)
        assert local.advanced.epsilon == (best if best < total * (1 - 1e-6) else total)
        assert {bound.theorem.split(" (")[0] for bound in local.bounds} == {
            KOV_HETEROGENEOUS.split(" (")[0], DRV.split(" (")[0], "privacy loss distributions"}


def test_drv_matches_its_statement_for_equal_epsilons() -> None:
    """Thm III.3: ε' = √(2k ln(1/δ'))·ε + kε(e^ε − 1)."""
    assert drv_epsilon([0.1] * 50, 1e-5) == pytest.approx(
        math.sqrt(2 * 50 * math.log(1e5)) * 0.1 + 50 * 0.1 * math.expm1(0.1), rel=1e-12)


@pytest.mark.parametrize("epsilons", [[0.5] * 20, [0.1, 0.2, 0.3] * 10, [1.0, 2.0]])
def test_advanced_epsilon_is_monotone_in_delta(epsilons: list[float]) -> None:
    entries = [entry(e) for e in epsilons]
    values = []
    for delta in sorted(DELTAS):
        advanced = compose_local(entries, delta).advanced
        assert advanced is not None
        values.append(advanced.epsilon)
    assert all(later <= earlier + 1e-12 for earlier, later in zip(values, values[1:]))


def test_homogeneous_releases_use_the_optimal_theorem_and_no_delta_means_basic_only() -> None:
    entries = [entry(0.2)] * 30
    local = compose_local(entries, 1e-6)
    assert local.advanced is not None and local.advanced.theorem == KOV_OPTIMAL
    assert local.advanced.epsilon == optimal_homogeneous_epsilon(0.2, 30, 1e-6) < 6.0
    assert local.advanced.delta == pytest.approx(1e-6)
    plain = compose_local(entries, None)
    assert plain.advanced is None and plain.basic.epsilon == pytest.approx(6.0) and plain.basic.theorem == BASIC
    assert plain.basic.delta == 0.0


def test_large_epsilons_gain_nothing_over_the_sum() -> None:
    """At ε = 8 and 9, Thm 3.5 is the sum itself, and the exact composition is below it by about δ only, less than
    the PLD's discretisation."""
    local = compose_local([entry(8.0), entry(9.0)], 1e-6)
    assert local.bounds[0].theorem == KOV_HETEROGENEOUS and local.bounds[0].epsilon == 17.0
    assert abs(local.bounds[2].epsilon - 17.0) <= 2 * pld_interval([(8.0, 0.0), (9.0, 0.0)])
    # not below the sum by more than six digits show: the sum is said, at its own δ (0)
    assert local.advanced == local.basic


def test_releases_with_their_own_delta_add_it() -> None:
    """The Gaussian baseline's (ε_i, δ_i): every bound is stated at the user's δ plus at most Σδ_i."""
    entries = [entry(0.3, 1e-5), entry(0.5, 1e-5)] * 10
    local = compose_local(entries, 1e-6)
    assert local.basic.delta == pytest.approx(2e-4)
    for bound in local.bounds:
        assert 1e-6 < bound.delta <= 1e-6 + 2e-4 + 1e-18
    assert local.advanced is not None and local.advanced.epsilon < local.basic.epsilon


def test_pld_wrapper_is_dp_accounting_called_directly() -> None:
    pairs = [(0.5, 0.0), (1.0, 0.0), (1.0, 0.0), (0.2, 1e-7)]
    composed = None
    for eps, dlt in pairs:
        one = privacy_loss_distribution.from_privacy_parameters(DifferentialPrivacyParameters(eps, dlt))
        composed = one if composed is None else composed.compose(one)
    assert composed is not None
    direct = composed.get_epsilon_for_delta(1e-5 * (1 - PLD_DELTA_MARGIN))
    assert pld_epsilon(pairs, 1e-5) == pytest.approx(direct, rel=1e-9, abs=1e-9)
    assert direct <= composed.get_epsilon_for_delta(1e-5) + 1e-3  # the margin costs little


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-6, math.nan])
def test_delta_outside_zero_one_is_refused(delta: float) -> None:
    with pytest.raises(UsageError, match="delta must be a number in"):
        compose_local([entry(1.0)], delta)


# --- central -------------------------------------------------------------------------------------------------


def test_central_of_one_shuffled_release_is_what_it_recorded() -> None:
    guarantee, note = compose_central([entry(4.0, shuffled=shuffled(0.8, 1e-6, n=50_000))], 1e-6)
    assert guarantee is not None and (guarantee.epsilon, guarantee.delta, guarantee.theorem) == (0.8, 1e-6, RECORDED)
    assert "n = 50000" in note and "honest shuffler" in note


def test_central_of_several_shuffled_releases_is_the_smaller_of_pld_and_the_sum() -> None:
    entries = [entry(4.0, shuffled=shuffled(0.3, 1e-7))] * 12
    guarantee, _ = compose_central(entries, 1e-6)
    pld = pld_epsilon([(0.3, 1e-7)] * 12, 12e-7 + 1e-6)
    assert guarantee is not None and guarantee.epsilon == pld < 12 * 0.3
    assert guarantee.delta == pytest.approx(12e-7 + 1e-6) and "dp-accounting" in guarantee.theorem
    # two releases of a large central ε: the sum is at least as good, and keeps the smaller δ
    big, _ = compose_central([entry(8.0, shuffled=shuffled(6.0, 1e-7))] * 2, None)
    assert big is not None and big.epsilon == 12.0 and big.delta == pytest.approx(2e-7) and BASIC in big.theorem


def test_a_mix_of_shuffled_and_unshuffled_releases_has_no_central_guarantee() -> None:
    guarantee, note = compose_central([entry(1.0, shuffled=shuffled(0.1, 1e-6)), entry(1.0)], 1e-6)
    assert guarantee is None and "1 of its 2 releases was shuffled" in note
    assert compose_central([entry(1.0)], 1e-6) == (None, "")


def test_a_malformed_shuffled_record_is_a_data_error() -> None:
    broken = replace(entry(1.0), shuffled={"n": 10})
    with pytest.raises(DataError, match="epsilon_central_upper"):
        compose_central([broken], None)


# --- without the extra `central` --------------------------------------------------------------------------


@pytest.fixture()
def no_dp_accounting(monkeypatch: pytest.MonkeyPatch) -> None:
    """dp-accounting as if not installed: importing it raises ImportError."""
    for name in ("dp_accounting", "dp_accounting.pld", "dp_accounting.pld.privacy_loss_distribution"):
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.usefixtures("no_dp_accounting")
def test_without_dp_accounting_only_the_pld_needs_it() -> None:
    # releases of one ε: Thm 3.3 needs no extra; no δ: basic composition
    assert compose_local([entry(0.1)] * 50, 1e-6).advanced is not None
    assert compose_local([entry(0.1), entry(0.2)], None).advanced is None
    with pytest.raises(MissingDependency, match=r"pip install 'ldp\[central\]'"):
        compose_local([entry(0.1), entry(0.2)], 1e-6)
    # several shuffled releases: the sum, and the sentence says why
    guarantee, note = compose_central([entry(4.0, shuffled=shuffled(0.3, 1e-7))] * 3, None)
    assert guarantee is not None and guarantee.epsilon == pytest.approx(0.9) and BASIC in guarantee.theorem
    assert "the sum only" in note and "ldp[central]" in note


def test_kov_heterogeneous_matches_theorem_3_5_written_out() -> None:
    """Kairouz, Oh & Viswanath (2015), Thm 3.5 by hand, with (e^ε − 1)/(e^ε + 1) in place of tanh(ε/2): each of its
    three branches is the minimum somewhere, so dropping one fails here."""
    from ldpcli.release._accounting import kov_heterogeneous_epsilon

    def by_hand(eps: list[float], delta: float) -> float:
        drift = sum(e * (math.exp(e) - 1) / (math.exp(e) + 1) for e in eps)
        squares = sum(e * e for e in eps)
        return min(sum(eps), drift + math.sqrt(2 * squares * math.log(math.e + math.sqrt(squares) / delta)),
                   drift + math.sqrt(2 * squares * math.log(1 / delta)))

    cases = [([0.1, 0.5, 1.0], 1e-6), ([0.05] * 400, 1e-6), ([0.01] * 10, 0.5), ([2.0, 3.0], 1e-6)]
    for eps, delta in cases:
        assert kov_heterogeneous_epsilon(eps, delta) == pytest.approx(by_hand(eps, delta), rel=1e-12)
    # the log(e + √Σε²/δ) branch wins at a large δ, the log(1/δ) branch at a small one, the sum for a few large ε
    assert by_hand([0.01] * 10, 0.5) < sum([0.01] * 10)
    assert kov_heterogeneous_epsilon([2.0, 3.0], 1e-6) == pytest.approx(5.0)
