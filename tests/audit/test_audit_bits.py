"""``ldp audit --bits``: the lower bound's events on the raw bits of the outputs find the
floating-point leak of the default rendering, raise no false alarm on outputs that are functions
of discrete choices, and keep the bound's confidence when the choice of event ranges over them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import ldp
from scipy import stats

from ldpcli.audit._bits import LabelSet, best_label_set, bit_label_names, bit_labels
from ldpcli.audit._claims import LOWER_BOUND_BETA, audit
from ldpcli.audit._lower_bound import log_ratio_bound, privacy_lower_bound
from ldpcli.mechanisms import MechanismSpec, PrivUnit2


def test_bits_find_the_rendering_leak_of_privunit2_at_d_2() -> None:
    """README, "Floating point": the computed ‖z‖'s last bits depend on the direction of x. Without
    bits the rounded events stay below ε; with them ε_lb is several times ε (1.56–2.23 over seeds 0–7)."""
    mech = PrivUnit2.calibrate(2, 0.5)
    plain = privacy_lower_bound(mech, trials=20_000, beta=LOWER_BOUND_BETA, rng=np.random.default_rng(0))
    bits = privacy_lower_bound(mech, trials=20_000, beta=LOWER_BOUND_BETA, rng=np.random.default_rng(0), bits=True)
    assert plain.epsilon <= mech.epsilon_exact and not plain.bits
    assert bits.epsilon > 3.0 * mech.epsilon_exact, bits.event
    assert bits.bits and "‖z‖ as a double" in bits.event and "raw bits" in bits.event
    # the whole audit fails on it, and only on the lower bound
    result = audit(mech, trials=1000, seed=0, lower_bound_trials=20_000, bits=True)
    assert result.privacy_ok and result.law_ok and all(check.ok for check in result.inputs)
    assert not result.lower_bound_ok and not result.passed


@pytest.mark.parametrize("name, d, eps", [
    ("duchi-linf", 3, 2.0), ("privunit-inf", 16, 0.5), ("privunit-inf", 2, 8.0), ("scalar", 1, 0.5),
    ("scalar-rel", 1, 8.0), ("gaussian-sign", 2, 0.5),
])
def test_no_false_alarm_where_outputs_are_discrete_choices(name: str, d: int, eps: float) -> None:
    """Scaled vertices and grid values: the doubles are a function of the discrete choices, so their
    bits say nothing the choices do not, and ε_lb stays below ε. gaussian-sign releases ±s·Z, the
    input choosing only the sign, which flips the sign bit and nothing else."""
    mech = MechanismSpec(name, eps).calibrate(d)
    bound = privacy_lower_bound(mech, trials=10_000, beta=LOWER_BOUND_BETA, rng=np.random.default_rng(1), bits=True)
    assert bound.bits and bound.epsilon <= mech.epsilon_exact, bound.event


@pytest.mark.slow
def test_the_choice_among_bit_events_keeps_the_confidence() -> None:
    """A simulated null: every input is rendered as u's output, so the inputs have one law (true
    privacy loss 0) and any ε_lb > 0 is a false alarm, which the bound allows with probability at most
    β. The bits of PrivUnit2's outputs at d = 2 (last significand bits spread over 256 values, a few
    norms) give the choice of event the most room to fit noise. At β = 0.2 over 20 seeds, more than
    the 1e−4 upper quantile of Binomial(20, 0.2) false alarms would break the stated confidence."""
    mech = PrivUnit2.calibrate(2, 0.5)
    u = np.zeros(2)
    u[0] = 1.0

    def as_if_u(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return mech.privatize(np.tile(u, (x.shape[0], 1)), rng)

    beta, runs = 0.2, 20
    alarms = sum(
        privacy_lower_bound(mech, trials=2000, beta=beta, rng=np.random.default_rng(seed), bits=True,
                            privatize=as_if_u).epsilon > 0.0
        for seed in range(runs)
    )
    assert alarms <= stats.binom.ppf(1.0 - 1e-4, runs, beta)


@pytest.mark.parametrize("seed", range(5))
def test_label_sets_are_ordered_on_one_part_and_scored_on_the_other(seed: int) -> None:
    """Labels of one law for both inputs (256 values, 4000 rows each): the best set's score claims no
    separation. Had the sets been scored on the rows that ordered their cells, the best would score
    0.16 to 0.22 on these seeds, a fit to noise that would win the choice against honest events."""
    rng = np.random.default_rng(seed)
    lx, ly = rng.integers(0, 256, 4000), rng.integers(0, 256, 4000)

    def score(k_x: np.ndarray, n_x: int, k_y: np.ndarray, n_y: int, tried: int) -> np.ndarray:
        return log_ratio_bound(k_x, n_x, k_y, n_y, 1e-3 / tried, 0.0)

    best, _ = best_label_set(lx, ly, score)
    assert best <= 0.0


def test_bit_labels_of_known_doubles() -> None:
    one_ulp = np.nextafter(1.0, 2.0)
    z = np.array([[1.0, 0.0], [3.0, 4.0], [one_ulp, 0.0], [1.0, 0.0]])
    names = bit_label_names(2)
    labels = bit_labels(z)
    assert labels.shape == (4, len(names))
    col = {name: labels[:, i] for i, name in enumerate(names)}
    assert list(col["‖z‖ as a double"][:3]) == [np.float64(v).view(np.int64) for v in (1.0, 5.0, one_ulp)]
    assert list(col["the last 8 bits of ‖z‖'s significand"][:3]) == [0, 0, 1]
    assert list(col["the trailing zero bits of ‖z‖'s significand"][:3]) == [52, 50, 0]  # 5 = 1.25·2²
    assert list(col["‖z‖'s exponent"][:3]) == [1023, 1025, 1023]
    assert list(col["the number of coordinates exactly 0"]) == [1, 0, 1, 1]
    assert list(col["the fewest trailing zero bits of a coordinate's significand"][:3]) == [52, 51, 0]  # 3 = 1.5·2
    row = col["z, its doubles bit for bit"]
    assert row[0] == row[3] and len({row[0], row[1], row[2]}) == 3
    assert list(col["z[1]'s sign and exponent"]) == [0, 1025, 0, 0]
    assert np.float64(-0.0).view(np.int64) >> 52 != 0  # −0.0's sign bit shows in that label, though −0.0 == 0
    chosen = LabelSet(np.array([5]), np.array([5, 7]), other=True)
    assert list(chosen.contains(np.array([5, 7, 9]))) == [True, False, True]


def test_cli_bits_in_help_json_and_text() -> None:
    res = ldp("audit", "--help")
    assert res.exit_code == 0 and "--bits" in res.stdout and "raw bits" in res.stdout
    res = ldp("audit", "-m", "privunit2", "--d", "2", "--eps", "0.5", "--trials", "500", "--seed", "0", "--bits",
              "--json")
    assert res.exit_code == 1, res.stderr
    info = json.loads(res.stdout)
    assert info["lower_bound"]["bits"] is True and info["lower_bound_ok"] is False
    assert info["epsilon_lower_bound"] > info["epsilon_exact"] and "raw bits" in info["lower_bound_event"]
    res = ldp("audit", "-m", "duchi-linf", "--d", "3", "--eps", "2", "--trials", "2000", "--seed", "0", "--bits")
    assert res.exit_code == 0, res.stdout
    assert "events read the raw bits of the outputs" in res.stdout
    res = ldp("audit", "-m", "duchi-linf", "--d", "3", "--eps", "2", "--trials", "500", "--seed", "0", "--json")
    assert json.loads(res.stdout)["lower_bound"]["bits"] is False
