"""ldpcli.accounting: typed events that make the round trip through their dicts, and one ``compose`` whose numbers
are the theorems' closed forms (basic composition, Kairouz–Oh–Viswanath, Dwork–Rothblum–Vadhan), the shuffle
bound's and dp-accounting's own accountants'."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ldpcli.accounting import (
    ADD_OR_REMOVE_ONE,
    REPLACE_ONE,
    CentralClaim,
    Composed,
    LocalRelease,
    ShuffledRelease,
    SubsampledGaussian,
    compose,
    event_from_dict,
    shuffle_bound,
)
from ldpcli.accounting._theorems import BASIC, DRV, KOV_HETEROGENEOUS, KOV_OPTIMAL
from ldpcli.errors import UsageError

PACKAGE = Path(__file__).resolve().parents[2] / "ldpcli"

EVENTS = [
    LocalRelease(0.5),
    LocalRelease(1.25, delta=1e-9, copies=3, epochs=2),
    ShuffledRelease(2.0, 10_000, 1e-8),
    SubsampledGaussian(1.1, 0.05, 200),
    CentralClaim(0.7, 1e-7, ADD_OR_REMOVE_ONE, "a recorded theorem"),
    Composed((LocalRelease(0.1), Composed((LocalRelease(0.2, copies=2),)))),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda event: event.kind)
def test_each_event_makes_the_round_trip_through_its_dict(event: Any) -> None:
    data = event.to_dict()
    assert data["kind"] == event.kind
    assert type(event).from_dict(data) == event
    assert event_from_dict(data) == event


@pytest.mark.parametrize(("data", "says"), [
    ({"kind": "local"}, "local"),
    ({"kind": "local", "epsilon": -1.0}, "epsilon"),
    ({"kind": "local", "epsilon": 1.0, "copies": 0}, "copies"),
    ({"kind": "local", "epsilon": 1.0, "colour": "red"}, "colour"),
    ({"kind": "shuffled", "epsilon0": 1.0, "n": 0, "delta": 1e-6}, "n"),
    ({"kind": "subsampled_gaussian", "noise_multiplier": 1.0, "sampling_rate": 1.5, "steps": 3}, "sampling_rate"),
    ({"kind": "claim", "epsilon": 1.0, "delta": 0.0, "neighbouring": "replace one user", "theorem": "t"},
     "neighbouring"),
    ({"kind": "composed", "events": []}, "events"),
    ({"kind": "gaussian"}, "kind"),
])
def test_a_malformed_event_dict_is_a_value_error_naming_the_field(data: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        event_from_dict(data)


def kov_corner(epsilon: float, k: int, i: int) -> float:
    """δ_i of Kairouz, Oh & Viswanath (2015), Thm 3.3: the k-fold composition is ((k − 2i)ε, δ_i)-DP, exactly."""
    return sum(math.comb(k, ell) * (math.exp((k - ell) * epsilon) - math.exp((k - 2 * i + ell) * epsilon))
               for ell in range(i)) / (1 + math.exp(epsilon)) ** k


def test_k_identical_local_releases_compose_to_k_epsilon_without_a_delta() -> None:
    composed = compose([LocalRelease(0.3, delta=1e-8)] * 7)
    assert composed.guarantee == composed.basic
    assert composed.basic is not None and composed.basic.theorem == BASIC
    assert composed.basic.epsilon == pytest.approx(7 * 0.3, rel=1e-15)
    assert composed.basic.delta == pytest.approx(7e-8, rel=1e-15)


@pytest.mark.parametrize(("epsilon", "k", "i"), [(0.5, 10, 2), (0.1, 100, 20), (1.0, 12, 3)])
def test_k_identical_local_releases_at_a_corner_delta_give_kov_s_closed_form(epsilon: float, k: int, i: int) -> None:
    """At δ_i the optimal theorem's ε is (k − 2i)ε, below kε: compose says it, and names the theorem."""
    delta = kov_corner(epsilon, k, i)
    composed = compose([LocalRelease(epsilon)] * k, delta)
    assert composed.guarantee is not None and composed.guarantee.theorem == KOV_OPTIMAL
    assert composed.guarantee.epsilon == pytest.approx((k - 2 * i) * epsilon, rel=1e-9)
    assert composed.basic is not None and composed.guarantee.epsilon < composed.basic.epsilon
    # copies of one release are uses of its mechanism: the same composition
    assert compose([LocalRelease(epsilon, copies=k)], delta) == composed
    assert compose([Composed((LocalRelease(epsilon, copies=2), *[LocalRelease(epsilon)] * (k - 2)))], delta) == composed


def test_where_no_theorem_beats_the_sum_basic_composition_is_said() -> None:
    """10 releases at ε = 4: KOV's exact ε at δ = 1e-6 is the sum (docs/composition.md's table)."""
    composed = compose([LocalRelease(4.0)] * 10, 1e-6)
    assert composed.guarantee == composed.basic
    assert composed.guarantee is not None and composed.guarantee.epsilon == 40.0


def test_different_epsilons_get_the_smallest_of_kov_drv_and_the_pld() -> None:
    pytest.importorskip("dp_accounting")
    epsilons, delta = [0.1] * 50 + [0.5] * 10 + [1.0] * 2, 1e-6
    composed = compose([LocalRelease(eps) for eps in epsilons], delta)
    bounds = {bound.theorem: bound.epsilon for bound in composed.bounds}
    squares = sum(e * e for e in epsilons)
    drift = sum(e * (math.exp(e) - 1) for e in epsilons)
    assert bounds[DRV] == pytest.approx(math.sqrt(2 * math.log(1 / delta) * squares) + drift, rel=1e-12)
    tanh = sum(e * (math.exp(e) - 1) / (math.exp(e) + 1) for e in epsilons)
    kov = min(sum(epsilons), tanh + math.sqrt(2 * squares * math.log(math.e + math.sqrt(squares) / delta)),
              tanh + math.sqrt(2 * squares * math.log(1 / delta)))
    assert bounds[KOV_HETEROGENEOUS] == pytest.approx(kov, rel=1e-12)
    assert composed.guarantee is not None
    assert composed.guarantee.epsilon == min(bounds.values()) < sum(epsilons)


def test_a_shuffled_release_composes_to_the_shuffle_bound() -> None:
    bound = shuffle_bound(2.0, 10_000, 1e-8)
    composed = compose([ShuffledRelease(2.0, 10_000, 1e-8)])
    assert composed.shuffles == (bound,)
    assert composed.guarantee is not None
    assert (composed.guarantee.epsilon, composed.guarantee.delta) == (bound.epsilon_upper, 1e-8)
    assert "Feldman, McMillan & Talwar 2021" in composed.guarantee.theorem


def test_a_training_run_s_add_remove_pair_is_restated_for_replace_one_among_shuffled_releases() -> None:
    pytest.importorskip("dp_accounting")
    run = CentralClaim(0.5, 1e-7, ADD_OR_REMOVE_ONE, "run")
    shuffled = CentralClaim(0.3, 1e-8, REPLACE_ONE, "shuffle")
    composed = compose([run, shuffled])
    assert composed.basic is not None
    assert composed.basic.epsilon == pytest.approx(2 * 0.5 + 0.3)
    assert composed.basic.delta == pytest.approx((1 + math.exp(0.5)) * 1e-7 + 1e-8)


def test_the_subsampled_gaussian_is_dp_accountings_own_result() -> None:
    dp = pytest.importorskip("dp_accounting")
    import dp_accounting.pld
    import dp_accounting.rdp  # noqa: F401

    z, q, steps, delta = 1.1, 0.05, 200, 1e-6
    event = dp.SelfComposedDpEvent(dp.PoissonSampledDpEvent(q, dp.GaussianDpEvent(z)), steps)
    pld = dp.pld.PLDAccountant()
    pld.compose(event)
    rdp = dp.rdp.RdpAccountant()
    rdp.compose(event)
    composed = compose([SubsampledGaussian(z, q, steps)], delta)
    (account,) = composed.gaussians
    # the claim reads the PLD at (1 − 1e-3)·δ (PLD_DELTA_MARGIN: its floating point is not exactly pessimistic)
    assert composed.guarantee is not None
    assert composed.guarantee.epsilon == account.epsilon_pld == pld.get_epsilon(delta * (1 - 1e-3))
    assert pld.get_epsilon(delta) <= account.epsilon_pld <= pld.get_epsilon(delta) * (1 + 1e-3)
    assert (account.epsilon_rdp, account.rdp_order) == rdp.get_epsilon_and_optimal_order(delta)
    assert account.epsilon_pld < account.epsilon_rdp


@pytest.mark.parametrize(("events", "delta", "says"), [
    ([], None, "empty"),
    ([LocalRelease(1.0), CentralClaim(0.5, 1e-7, REPLACE_ONE, "t")], None, "mixes local releases"),
    ([SubsampledGaussian(1.0, 0.1, 10)], None, "delta"),
    ([SubsampledGaussian(1.0, 0.1, 10), CentralClaim(0.5, 1e-7, REPLACE_ONE, "t")], 1e-6, "CentralClaim"),
    ([LocalRelease(1.0), LocalRelease(2.0)], 1.5, "delta"),
])
def test_what_compose_cannot_state_is_a_usage_error(events: list[Any], delta: float | None, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        compose(events, delta)


def test_the_old_import_paths_name_the_same_objects() -> None:
    """The README's and docs' paths keep working, re-exported from the one home (no second definition)."""
    import ldpcli.accounting as accounting
    from ldpcli.learn import _accounting as learn
    from ldpcli.math import _shuffling as shuffling
    from ldpcli.release import _accounting as ledger

    assert ledger.optimal_homogeneous_epsilon is accounting.optimal_homogeneous_epsilon
    assert ledger.pld_epsilon is accounting.pld_epsilon and ledger.drv_epsilon is accounting.drv_epsilon
    assert ledger.Guarantee is accounting.Guarantee
    assert shuffling.shuffle_bound is accounting.shuffle_bound
    assert learn.epsilon_pld is accounting.epsilon_pld and learn.CentralEpsilon is accounting.CentralEpsilon
    assert set(accounting.__all__) <= set(dir(accounting))


def test_accounting_imports_only_math_errors_and_mechanisms_and_no_pyarrow() -> None:
    """The package stands on the mechanisms floor: nothing from release/, learn/, planning/, analysis/ or cli/."""
    allowed = ("ldpcli.accounting", "ldpcli.math", "ldpcli.errors", "ldpcli._lazy", "ldpcli.mechanisms")
    for path in (PACKAGE / "accounting").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                assert not name.startswith("ldpcli") or name.startswith(allowed), (path.name, name)
    code = "import sys, ldpcli.accounting; sys.exit('pyarrow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
