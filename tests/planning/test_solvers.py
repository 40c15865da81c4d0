"""ldpcli.planning._solvers: the smallest ε whose guaranteed error of the mean meets a target."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from helpers import python_calls

from ldpcli.errors import UsageError
from ldpcli.mechanisms import MechanismSpec, get_mechanism
from ldpcli.mechanisms._baselines import Laplace
from ldpcli.planning._solvers import RELATIVE_TOLERANCE, EpsilonForError, epsilon_for_error, epsilons_for_error
from ldpcli.release._safety import EPSILON_MAX, EPSILON_MIN


def error_mean(name: str, epsilon: float, d: int, n: int, norm_bound: float = 1.0, **options: Any) -> float:
    return MechanismSpec(name, epsilon, None, norm_bound, options).calibrate(d).expected_error_mean(n)


@pytest.mark.parametrize("name", ["privunit2", "duchi-l2", "separated", "privunitg"])
@pytest.mark.parametrize("d", [3, 50, 500])
@pytest.mark.parametrize("eps0", [0.3, 2.0, 6.0])
def test_round_trip_meets_the_target_and_slightly_less_does_not(name: str, d: int, eps0: float) -> None:
    n = 1000
    target = error_mean(name, eps0, d, n)  # attainable by construction
    r = epsilon_for_error(name, d=d, n=n, target_error=target)
    assert r.epsilon is not None and r.reason is None and not r.at_minimum
    assert error_mean(name, r.epsilon, d, n) <= target
    assert r.error_mean == error_mean(name, r.epsilon, d, n) <= target
    assert error_mean(name, r.epsilon * (1 - 1e-9), d, n) > target
    assert r.epsilon_exact == MechanismSpec(name, r.epsilon, None, 1.0, {}).calibrate(d).epsilon_exact
    assert r.epsilon_exact <= r.epsilon
    if r.monotone:  # then the smallest: ε0 meets the target, so the answer is at most ε0 (to the tolerance)
        assert r.epsilon <= eps0 * (1 + 1e-12)
        assert r.epsilon == pytest.approx(eps0, rel=1e-6)
    else:
        assert name == "separated"
    json.dumps(r.to_dict(), allow_nan=False)


@pytest.mark.parametrize("nt", [1.5, 10.0, 1e4, 1e5])
@pytest.mark.parametrize("n", [10, 1000])
def test_privunit2_d3_closed_form(nt: float, n: int) -> None:
    """d = 3: γ* = tanh(ε/4) = m, so expected_error_max = L²/m² = coth²(ε/4) (docs/errata.md §1; its
    boundary error is 1/sinh²(ε/4) = coth² − 1). The guarantee for n rows is coth²(ε/4)/n, so the ε
    for a target T is 4·artanh(1/√(nT)) when nT > 1 (the binding form is artanh, not asinh: the worst
    case is x = 0, where rounding the norm costs L² per row whatever ε is)."""
    mech = MechanismSpec("privunit2", 2.0, None, 1.0, {}).calibrate(3)
    assert mech.expected_error_max == pytest.approx(1 / math.tanh(0.5) ** 2, rel=1e-12)
    assert mech.expected_error == pytest.approx(1 / math.sinh(0.5) ** 2, rel=1e-12)
    target = nt / n
    expected = 4 * math.atanh(1 / math.sqrt(nt))
    r = epsilon_for_error("privunit2", d=3, n=n, target_error=target)
    assert r.epsilon == pytest.approx(expected, rel=1e-9)
    assert r.error_mean is not None and r.error_mean <= target


def test_privunit2_d3_target_below_the_floor_is_unattainable() -> None:
    """coth²(ε/4) > 1 for every ε: a target below L²/n is met by no ε."""
    r = epsilon_for_error("privunit2", d=3, n=100, target_error=0.9 / 100)
    assert r.epsilon is None and r.epsilon_exact is None and r.error_mean is None
    assert r.reason is not None and "even ε = 10000" in r.reason
    assert r.min_error_mean == pytest.approx(1 / 100, rel=1e-12)


@pytest.mark.parametrize("d", [3, 500])
def test_laplace_closed_form_and_norm_bound_scaling(d: int) -> None:
    """Laplace: expected_error_max = 8d²L²/ε², so ε = dL·√(8/(nT)); the error scales with L²."""
    n, target = 200, 0.5
    expected = d * math.sqrt(8 / (n * target))
    assert epsilon_for_error("laplace", d=d, n=n, target_error=target).epsilon == pytest.approx(expected, rel=1e-9)
    scaled = epsilon_for_error("laplace", d=d, n=n, target_error=4 * target, norm_bound=2.0)
    assert scaled.epsilon == pytest.approx(expected, rel=1e-9)
    assert scaled.norm_bound == 2.0


def test_tiny_target_is_unattainable_with_a_reason() -> None:
    r = epsilon_for_error("privunit2", d=50, n=1000, target_error=1e-12)
    assert r.epsilon is None and not r.at_minimum
    assert r.reason is not None and "even ε = 10000" in r.reason and "> target" in r.reason
    assert r.min_error_mean == pytest.approx(error_mean("privunit2", EPSILON_MAX, 50, 1000))
    assert json.loads(json.dumps(r.to_dict(), allow_nan=False))["epsilon"] is None


@pytest.mark.parametrize("name", ["privunit2", "separated", "duchi-l2"])
def test_huge_target_is_met_at_the_minimum(name: str) -> None:
    r = epsilon_for_error(name, d=50, n=1000, target_error=1e12)
    assert r.at_minimum and r.epsilon == EPSILON_MIN and r.reason is None
    assert r.error_mean == error_mean(name, EPSILON_MIN, 50, 1000) <= 1e12
    assert r.rmse == pytest.approx(math.sqrt(r.error_mean))


@pytest.mark.parametrize("fails_above", [False, True])
def test_calibration_failures_count_as_not_attainable(monkeypatch: pytest.MonkeyPatch, fails_above: bool) -> None:
    """A mechanism that cannot be calibrated at some ε does not meet the target there."""
    original = Laplace._calibrate.__func__  # type: ignore[attr-defined]

    def fails_outside(cls: type, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any) -> Any:
        if epsilon < 1.0 or (fails_above and epsilon > 100.0):
            raise UsageError(f"test: no calibration at ε = {epsilon:g}")
        return original(cls, d, epsilon, norm_bound, calibration, **options)

    monkeypatch.setattr(Laplace, "_calibrate", classmethod(fails_outside))
    n, d = 200, 3
    target = 8 * d**2 / (n * 5.0**2)  # met from ε = 5 on
    r = epsilon_for_error("laplace", d=d, n=n, target_error=target)
    if not fails_above:  # failing below ε = 1 is part of the "does not meet" side: the root is still found
        assert r.epsilon == pytest.approx(5.0, rel=1e-9) and r.reason is None
    else:  # failing at ε = 10⁴: no ε in range is known to meet it, and the reason says why
        assert r.epsilon is None and r.reason is not None
        assert "cannot be calibrated at ε = 10000" in r.reason and "test: no calibration" in r.reason


def test_all_mechanisms_sorted_by_epsilon_with_the_gaussian_delta() -> None:
    results = epsilons_for_error(d=50, n=10_000, target_error=0.05)
    names = [r.mechanism for r in results]
    vector = [name for name in names if get_mechanism(name).vector]
    assert names == vector and "privunit2" in names and "gaussian" in names
    found = [r.epsilon for r in results if r.epsilon is not None]
    assert found == sorted(found)
    assert all(r.epsilon is None for r in results[len(found):])
    gaussian = next(r for r in results if r.mechanism == "gaussian")
    assert gaussian.options == {"delta": 1e-6} and gaussian.baseline
    assert next(r for r in results if r.mechanism == "gaussian").epsilon is not None
    other = epsilons_for_error(d=50, n=10_000, target_error=0.05, delta=1e-9)
    assert next(r for r in other if r.mechanism == "gaussian").options == {"delta": 1e-9}
    best = results[0]
    assert best.mechanism in ("privunit2", "privunitg")  # optimal PrivUnit2 or its Gaussian twin
    json.dumps([r.to_dict() for r in results], allow_nan=False)


def test_result_is_json_ready_and_rebuilds_its_spec() -> None:
    r = epsilon_for_error("gaussian", d=20, n=500, target_error=0.1, options={"delta": 1e-7})
    assert isinstance(r, EpsilonForError)
    data = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert data["options"] == {"delta": 1e-7} and data["relative_tolerance"] == RELATIVE_TOLERANCE
    assert data["target_rmse"] == pytest.approx(math.sqrt(0.1))
    assert r.spec is not None and r.spec.calibrate(20).expected_error_mean(500) == r.error_mean


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"target_error": 0.0}, r"^target_error\b"),
        ({"target_error": -1.0}, r"^target_error\b"),
        ({"target_error": math.nan}, r"^target_error\b"),
        ({"target_error": math.inf}, r"^target_error\b"),
        ({"target_error": True}, r"^target_error\b"),
        ({"target_error": "0.1"}, r"^target_error\b"),
        ({"target_error": -1.0, "target_name": "target_rmse"}, r"^target_rmse\b"),
        ({"d": 0}, r"^d\b"),
        ({"d": 2.5}, r"^d\b"),
        ({"n": 0}, r"^n\b"),
        ({"n": True}, r"^n\b"),
        ({"norm_bound": -1.0}, r"^norm_bound\b"),
        ({"mechanism": "nope"}, "unknown mechanism"),
        ({"calibration": "nope"}, "calibration"),
        ({"options": {"delta": 0.5}}, "takes no option delta"),
    ],
)
def test_bad_inputs_are_usage_errors(kwargs: dict[str, Any], needle: str) -> None:
    call: dict[str, Any] = {"mechanism": "privunit2", "d": 10, "n": 100, "target_error": 0.1} | kwargs
    mechanism = call.pop("mechanism")
    with pytest.raises(UsageError, match=needle):
        epsilon_for_error(mechanism, **call)


def test_bad_inputs_of_the_comparison_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="^target_rmse must"):
        epsilons_for_error(d=10, n=100, target_error=0.0, target_name="target_rmse")
    with pytest.raises(UsageError, match="^n must"):
        epsilons_for_error(d=10, n=0, target_error=0.1)


@pytest.mark.slow
def test_the_solver_s_work_does_not_grow_with_d() -> None:
    """The solve costs the same work at d = 500 as at d = 50 (measured: 2.26 and 2.16 million calls,
    about 0.3 s for separated at d = 500), so it stays fast as d grows."""
    results: list[EpsilonForError] = []

    def solve(d: int) -> None:
        results.append(epsilon_for_error("separated", d=d, n=10_000, target_error=0.01))

    small = python_calls(lambda: solve(50))
    assert python_calls(lambda: solve(500)) <= 2 * small
    assert all(r.epsilon is not None for r in results)
