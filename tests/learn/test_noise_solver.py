"""The noise-multiplier solver behind ``ldp train --central-epsilon`` (learn.accounting.solve_noise_multiplier).

Its answer is certified (ε_PLD(z) ≤ the target was evaluated at the very z returned) and minimal to its
tolerance, and it costs few PLD evaluations: each z is evaluated once, the layer reuses the answer's ε
instead of evaluating it again, and the search is a safeguarded secant, not a bisection.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from ldpcli.learn import _accounting as accounting
from ldpcli.learn._accounting import MIN_NOISE_MULTIPLIER, _smallest, epsilon_pld, solve_noise_multiplier
from ldpcli.learn._central import CentralOptions

pytest.importorskip("dp_accounting")


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Replace the PLD accountant by one that records the z of each evaluation."""
    calls: list[float] = []
    real = accounting.epsilon_pld

    def counting(sampling_rate: float, noise_multiplier: float, steps: int, delta: float) -> float:
        calls.append(noise_multiplier)
        return real(sampling_rate, noise_multiplier, steps, delta)

    monkeypatch.setattr(accounting, "epsilon_pld", counting)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize(("target", "q", "steps", "delta"), [(2.0, 0.05, 100, 1e-6), (3.0, 0.25, 4, 1e-6)])
def test_the_solver_makes_few_pld_evaluations_and_its_answer_is_certified(
        monkeypatch: pytest.MonkeyPatch, target: float, q: float, steps: int, delta: float) -> None:
    """The bisection made 13 PLD evaluations on each of these; the search makes at most 7, none twice, the
    answer among them with its ε at most the target, and z·(1 − 1e-3) above the target (minimal)."""
    calls = _counted(monkeypatch)
    z = solve_noise_multiplier(target, q, steps, delta)
    assert len(calls) <= 7, calls
    assert len(set(calls)) == len(calls)
    assert z in calls
    assert epsilon_pld(q, z, steps, delta) <= target
    assert epsilon_pld(q, z * (1 - 1e-3), steps, delta) > target


@pytest.mark.slow
def test_the_layer_reuses_the_solvers_evaluation_at_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--central-epsilon`` accounts the solved z without evaluating the PLD there again, and states the ε the
    search evaluated at that z."""
    solo = _counted(monkeypatch)
    z = solve_noise_multiplier(2.0, 0.05, 100, 1e-6)
    alone = len(solo)
    solo.clear()
    layer = CentralOptions(central_radius=1.0, sampling_rate=0.05, central_epsilon=2.0, central_delta=1e-6).layer(100)
    assert len(solo) == alone
    assert layer.noise_multiplier == z
    assert layer.account.epsilon_pld == epsilon_pld(0.05, z, 100, 1e-6) <= 2.0


@pytest.mark.slow
def test_the_solver_stops_at_the_floor_when_the_floor_is_enough() -> None:
    assert solve_noise_multiplier(200.0, 1.0, 3, 1e-6) == MIN_NOISE_MULTIPLIER


@pytest.mark.parametrize("gap", [
    lambda u: 3.0 - u,  # a line: the secant is exact
    lambda u: math.copysign(1.0, 2.0 - u) * (1e-9 + abs(2.0 - u) ** 5),  # flat at the root: the secant crawls
    lambda u: 1.0 if u < 2.5 else -1.0,  # a step: no secant at all
])
def test_the_search_finds_the_smallest_point_to_its_tolerance_whatever_the_function(
        gap: Callable[[float], float]) -> None:
    """On [0, 10] with tolerance 1e-3 the answer b has gap(b) ≤ 0 and gap(b − 1e-3) > 0, and the safeguard
    keeps the probes within (3 + 1)× a bisection's ⌈log2(10/1e-3)⌉ = 14."""
    probes: list[float] = []

    def counted(u: float) -> float:
        probes.append(u)
        return gap(u)

    found = _smallest(counted, 0.0, 10.0, gap(10.0), 1e-3)
    assert gap(found) <= 0 < gap(found - 1e-3)
    assert len(probes) <= 4 * 14


def test_the_search_returns_the_low_end_when_it_is_enough() -> None:
    probes: list[float] = []

    def falling(u: float) -> float:
        probes.append(u)
        return -1.0 - u

    assert _smallest(falling, 0.5, 3.0, -4.0, 1e-3) == 0.5
    assert probes[-1] == 0.5
