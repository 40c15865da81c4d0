"""The cost of a release in one place (ldpcli.mechanisms._composition): basic composition of k uses."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import unit_rows, write_list

from ldpcli.errors import UsageError
from ldpcli.mechanisms import MechanismSpec, RiskEpsilon
from ldpcli.mechanisms._composition import ReleaseCost, composed_levels, release_cost, total_cost
from ldpcli.release._file import write_file_release
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, ReleaseOptions
from ldpcli.release._sidecar import load_sidecar


def test_k_uses_of_an_epsilon_mechanism_cost_k_epsilon() -> None:
    mech = MechanismSpec("privunit2", 2.0).calibrate(8)
    assert release_cost(mech) == ReleaseCost(mech.epsilon, mech.epsilon_exact, 0.0)
    three = release_cost(mech, copies=3)
    assert three.epsilon == 3 * mech.epsilon and three.epsilon_exact == 3 * mech.epsilon_exact and three.delta == 0.0
    assert release_cost(mech, epochs=3) == three
    assert release_cost(mech, copies=2, epochs=3).epsilon_exact == 6 * mech.epsilon_exact


def test_delta_adds_like_epsilon() -> None:
    mech = MechanismSpec("gaussian", 1.0, options={"delta": 1e-6}).calibrate(4)
    assert mech.delta_exact > 0
    assert release_cost(mech, copies=4).delta == 4 * mech.delta_exact


@pytest.mark.parametrize("copies, epochs", [(0, 1), (1, 0), (1.5, 1), (True, 1)])
def test_a_count_below_one_or_not_an_integer_is_refused(copies: object, epochs: object) -> None:
    mech = MechanismSpec("privunit2", 1.0).calibrate(4)
    with pytest.raises(UsageError):
        release_cost(mech, copies=copies, epochs=epochs)  # type: ignore[arg-type]


def test_releases_one_after_the_other_add_up_in_any_order() -> None:
    costs = [ReleaseCost(0.1, 0.1), ReleaseCost(0.1, 0.1), ReleaseCost(0.1, 0.1, 1e-7)]
    total = total_cost(costs)
    assert total == total_cost(reversed(costs))
    assert total.epsilon_exact == math.fsum([0.1, 0.1, 0.1]) and total.delta == 1e-7


def test_reconstruction_levels_of_k_copies() -> None:
    levels = [RiskEpsilon("worst", 1.5, "always", True), RiskEpsilon("none", None, "(ε, δ)", False)]
    assert composed_levels(levels, 1) == levels
    worst, none = composed_levels(levels, 3)
    assert worst.epsilon == 4.5 and "times 3 copies" in worst.applies and worst.conservative
    assert none.epsilon is None


def test_a_release_of_copies_states_one_cost_in_sidecar_ledger_and_result(tmp_path: Path) -> None:
    src = write_list(tmp_path / "x.parquet", unit_rows(200, 4))
    ledger = Ledger.open(tmp_path / "ledger.json")
    result = write_file_release(src, tmp_path / "o.parquet", mechanism=MechanismSpec("gaussian", 2.0, options={"delta": 1e-6}),
                            options=ReleaseOptions(copies=2, seed=1, budget=Budget(ledger)))
    cost = release_cost(result.mechanism, copies=2)
    assert result.cost == cost
    assert load_sidecar(result.sidecar).content["release"]["epsilon_total"] == cost.epsilon_exact
    (entry,) = Ledger.open(tmp_path / "ledger.json").entries
    assert (entry.epsilon, entry.epsilon_exact, entry.delta) == (cost.epsilon, cost.epsilon_exact, cost.delta)
    assert entry.delta == 2 * result.mechanism.delta_exact
