"""Choosing ε from an error target: the smallest ε whose guaranteed error of the mean meets it.

A release of n rows privatized by an unbiased mechanism estimates their mean with the worst-case
expected squared error E‖x̄̂ − x̄‖² ≤ ``expected_error_max / n`` (``Mechanism.expected_error_mean``:
the rows are privatized independently, so the per-row errors add and the mean divides them by n²).
That guarantee is a computed function of (mechanism, d, ε, L), so the ε that meets a target T is
*solved for*, not looked up on a grid: with err(ε) = ``expected_error_mean(n)`` of the mechanism
calibrated at ε,

    g(u) = log err(e^u) − log T = 0,   u = log ε ∈ [log EPSILON_MIN, log EPSILON_MAX],

is solved with Brent's method (``scipy.optimize.brentq``) once the end points say that a root lies
between them ([EPSILON_MIN, EPSILON_MAX] = [0.01, 10⁴] is the range of ``ldpcli.release._safety``, where
every quantity is computed and tested). The result is then checked in ε itself and, if needed,
moved: up by relative steps of 2⁻⁴⁰ (doubling) until it meets the target, down in the same way
until a failing point is found just below it, and the pair is bisected to a relative width of
2⁻⁴⁰ (``RELATIVE_TOLERANCE``). So in every case

- the returned ε **meets** the target (its error, recomputed, is ≤ T), and
- ε·(1 − 2⁻⁴⁰) does **not** (its error is > T, or the mechanism cannot be calibrated there).

When err is non-increasing in ε (every mechanism here but ``separated``, checked on a fine grid
of ε over the whole range at d ∈ {3, 50, 500}), every ε below the returned one by more than that
tolerance fails too, so the returned ε is the smallest one that meets the target, to 2⁻⁴⁰
relative. Mechanisms with an integer parameter have jumps in err; Brent's method then converges
to the jump, and the finishing steps above put the answer on its meeting side. ``separated``
(optimal calibration) is not monotone: its split ε₁/ε is chosen by a grid-and-Brent search and its
magnitude grid k = ⌈e^{ε₂/3}⌉ is an integer, and the calibrated err(ε) jumps *up* by up to a few
per cent at a few ε between about 7 and 30. For it the returned ε is a crossing with the two
properties above (the bracket is kept with a failing lower end, so it is the threshold of the
interval it lies in), but a smaller isolated ε may also meet the target; ``monotone`` says so.

A mechanism that cannot be calibrated at some ε (a :class:`~ldpcli.errors.LdpError`) or whose
error is not finite there counts as not meeting the target at that ε; if that happens at
EPSILON_MAX, the report's ``reason`` gives the mechanism's message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ldpcli.errors import LdpError, UsageError
from ldpcli.mechanisms import MechanismSpec, get_mechanism, mechanism_names
from ldpcli.mechanisms._base import Mechanism, check_common, check_count
from ldpcli.planning._compare import comparison_options
from ldpcli.release._safety import EPSILON_MAX, EPSILON_MIN

#: The relative width of the final bracket [ε·(1 − tol), ε]: ε meets the target, the lower end does not.
RELATIVE_TOLERANCE = 2.0**-40
#: Absolute tolerance of Brent's method on log ε (about 1e−13 relative in ε).
_LOG_XTOL = 1e-13
#: Mechanisms whose calibrated error is not monotone in ε (see the module docstring).
NON_MONOTONE = frozenset({"separated"})
#: g(u) where the mechanism cannot be calibrated or its error is not finite: "fails", and finite for Brent.
_FAIL = 1e3


@dataclass(frozen=True)
class EpsilonForError:
    """The smallest ε in [EPSILON_MIN, EPSILON_MAX] at which a mechanism's guaranteed error of the mean meets a target.

    ``target_error`` is the target for E‖x̄̂ − x̄‖² (the squared error of the estimated mean of n rows);
    ``error_mean`` is the guarantee ``expected_error_max / n`` of the mechanism calibrated at
    ``epsilon`` (≤ target), and ``epsilon_exact`` its exact privacy level. ``epsilon`` is None when
    no ε in the range meets the target; ``reason`` then says why (the error even at ε = 10⁴, or the
    calibration's failure), and ``min_error_mean`` is the error at ε = 10⁴ when it can be computed
    (the best the range offers, when the error is monotone). ``at_minimum``: the target is met at
    EPSILON_MIN already, so 0.01 is reported, and smaller ε (outside the supported range) may meet
    it too. ``monotone``: False for a mechanism whose error is not monotone in ε (``separated``):
    the returned ε then meets the target and ε·(1 − 2⁻⁴⁰) does not, but a smaller isolated ε might.
    """

    mechanism: str
    d: int
    n: int
    norm_bound: float
    target_error: float
    epsilon: float | None
    epsilon_exact: float | None
    error_mean: float | None
    reason: str | None
    at_minimum: bool
    calibration: str
    options: Mapping[str, Any] = field(default_factory=dict)
    baseline: bool = False
    monotone: bool = True
    min_error_mean: float | None = None

    @property
    def target_rmse(self) -> float:
        """√target_error: the target for the root-mean-square error of the mean."""
        return math.sqrt(self.target_error)

    @property
    def rmse(self) -> float | None:
        """√error_mean at the returned ε (None when there is none)."""
        return None if self.error_mean is None else math.sqrt(self.error_mean)

    @property
    def spec(self) -> MechanismSpec | None:
        """The public choices that privatize at the returned ε (None when there is none)."""
        if self.epsilon is None:
            return None
        return MechanismSpec(self.mechanism, self.epsilon, self.calibration, self.norm_bound, dict(self.options))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (finite numbers or null), with the RMS forms beside the squared ones."""
        return {
            "mechanism": self.mechanism,
            "calibration": self.calibration,
            "options": dict(self.options),
            "baseline": self.baseline,
            "d": self.d,
            "n": self.n,
            "norm_bound": self.norm_bound,
            "target_error": self.target_error,
            "target_rmse": self.target_rmse,
            "epsilon": self.epsilon,
            "epsilon_exact": self.epsilon_exact,
            "error_mean": self.error_mean,
            "rmse": self.rmse,
            "at_minimum": self.at_minimum,
            "monotone": self.monotone,
            "min_error_mean": self.min_error_mean,
            "relative_tolerance": RELATIVE_TOLERANCE,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class _Point:
    """The mechanism at one ε: its error of the mean, or why there is none."""

    epsilon: float
    mechanism: Mechanism | None
    error: float | None
    failure: str | None

    def meets(self, target: float) -> bool:
        return self.error is not None and self.error <= target


class _Errors:
    """err(ε) of one mechanism, memoised (each calibration is computed once)."""

    def __init__(
        self, name: str, d: int, n: int, norm_bound: float, calibration: str, options: Mapping[str, Any]
    ) -> None:
        self.name, self.d, self.n, self.norm_bound = name, d, n, norm_bound
        self.calibration, self.options = calibration, dict(options)
        self._seen: dict[float, _Point] = {}

    def __call__(self, epsilon: float) -> _Point:
        point = self._seen.get(epsilon)
        if point is None:
            point = self._compute(epsilon)
            self._seen[epsilon] = point
        return point

    def _compute(self, epsilon: float) -> _Point:
        spec = MechanismSpec(self.name, epsilon, self.calibration, self.norm_bound, self.options)
        try:
            mech = spec.calibrate(self.d)
            error = mech.expected_error_mean(self.n)
        except LdpError as exc:
            return _Point(epsilon, None, None, str(exc))
        except (ArithmeticError, ValueError) as exc:  # an overflow in the mechanism's own numbers
            return _Point(epsilon, None, None, f"{type(exc).__name__}: {exc}")
        if not (isinstance(error, float) and math.isfinite(error)):
            return _Point(epsilon, mech, None, f"its error at ε = {epsilon:g} is not a finite number")
        return _Point(epsilon, mech, float(error), None)

    @property
    def evaluations(self) -> int:
        """How many calibrations were computed."""
        return len(self._seen)


def check_target(target_error: Any, name: str = "target_error") -> float:
    """``target_error`` as a float if it is a finite number > 0, else a UsageError naming ``name``, the
    caller's keyword for it."""
    if isinstance(target_error, bool) or not isinstance(target_error, (int, float)) or not (
        math.isfinite(target_error) and target_error > 0
    ):
        shown = f", got {target_error!r}" if name == "target_error" else ""
        raise UsageError(f"`{name}` must be a finite number > 0{shown}")
    return float(target_error)


def epsilon_for_error(
    mechanism: str,
    *,
    d: int,
    n: int,
    target_error: float,
    norm_bound: float = 1.0,
    calibration: str | None = None,
    options: Mapping[str, Any] | None = None,
    target_name: str = "target_error",
) -> EpsilonForError:
    """The smallest ε at which ``mechanism``'s guaranteed E‖x̄̂ − x̄‖² for n rows of dimension d is ≤ ``target_error``.

    Solves log(expected_error_max(ε)/n) = log target on log ε with ``scipy.optimize.brentq`` after
    checking the ends of [EPSILON_MIN, EPSILON_MAX], then finishes as the module docstring says: the
    returned ε meets the target and ε·(1 − 2⁻⁴⁰) does not; for a mechanism whose error is
    non-increasing in ε, no ε smaller by more than that tolerance does. ``calibration`` and
    ``options`` are the mechanism's (e.g. ``{"delta": 1e-6}`` for the Gaussian baseline). ``target_name``
    names the target in messages (``target_rmse`` when the caller squared an RMS target).

    UsageError for an unknown mechanism, calibration or option, d or n not an integer ≥ 1, a bad
    norm bound, or a target that is not a finite number > 0.
    """
    from scipy import optimize  # imported here: starting the CLI should not pay for it

    target = check_target(target_error, target_name)
    cls = get_mechanism(mechanism)
    d = check_count(d, "d")
    n = check_count(n, "n")
    check_common(d, EPSILON_MIN, norm_bound, max_d=cls.max_d)
    spec = MechanismSpec(mechanism, EPSILON_MIN, calibration, float(norm_bound), dict(options or {})).validated()
    errors = _Errors(mechanism, d, n, spec.norm_bound, spec.calibration or cls.calibrations[0], spec.options)
    monotone = mechanism not in NON_MONOTONE

    def report(point: _Point | None, *, reason: str | None = None, at_minimum: bool = False,
               floor: _Point | None = None) -> EpsilonForError:
        mech = None if point is None else point.mechanism
        return EpsilonForError(
            mechanism=mechanism, d=d, n=n, norm_bound=spec.norm_bound, target_error=target,
            epsilon=None if point is None else point.epsilon,
            epsilon_exact=None if mech is None else float(mech.epsilon_exact),
            error_mean=None if point is None else point.error,
            reason=reason, at_minimum=at_minimum, calibration=errors.calibration, options=dict(spec.options),
            baseline=bool(cls.baseline), monotone=monotone,
            min_error_mean=None if floor is None else floor.error,
        )

    top = errors(EPSILON_MAX)
    if not top.meets(target):
        if top.error is None:
            reason = f"{mechanism} cannot be calibrated at ε = {EPSILON_MAX:g} ({top.failure})"
        else:
            reason = (
                f"even ε = {EPSILON_MAX:g} gives an error of the mean of {top.error:.3g} > target {target:.3g} "
                f"(RMS {math.sqrt(top.error):.3g} > {math.sqrt(target):.3g}); more rows or a larger target are needed"
            )
        return report(None, reason=reason, floor=top)
    bottom = errors(EPSILON_MIN)
    if bottom.meets(target):
        return report(bottom, at_minimum=True, floor=top)

    log_target = math.log(target)

    def g(u: float) -> float:
        point = errors(min(max(math.exp(u), EPSILON_MIN), EPSILON_MAX))
        if point.error is None:
            return _FAIL
        if point.error == 0.0:
            return -_FAIL
        return max(min(math.log(point.error) - log_target, _FAIL), -_FAIL)

    root = optimize.brentq(g, math.log(EPSILON_MIN), math.log(EPSILON_MAX), xtol=_LOG_XTOL, maxiter=500)
    guess = min(max(math.exp(root), EPSILON_MIN), EPSILON_MAX)
    lo, hi = _bracket(errors, target, guess)
    while hi - lo > RELATIVE_TOLERANCE * hi:
        mid = lo + (hi - lo) / 2.0
        if mid <= lo or mid >= hi:  # adjacent doubles
            break
        if errors(mid).meets(target):
            hi = mid
        else:
            lo = mid
    return report(errors(hi), floor=top)


def _bracket(errors: _Errors, target: float, guess: float) -> tuple[float, float]:
    """(lo, hi) around ``guess`` with lo failing, hi meeting the target, found by relative steps of 2⁻⁴⁰ (doubling).

    Needs EPSILON_MIN to fail and EPSILON_MAX to meet the target (checked by the caller), so the
    steps stop there at the latest.
    """
    step = RELATIVE_TOLERANCE
    if errors(guess).meets(target):
        lo = hi = guess
        while errors(lo).meets(target):
            hi = lo
            lo = max(hi * (1.0 - step), EPSILON_MIN)
            step = min(2.0 * step, 0.5)
        return lo, hi
    lo = hi = guess
    while not errors(hi).meets(target):
        lo = hi
        hi = min(lo * (1.0 + step), EPSILON_MAX)
        step *= 2.0
    return lo, hi


def epsilons_for_error(
    *,
    d: int,
    n: int,
    target_error: float,
    norm_bound: float = 1.0,
    delta: float | None = None,
    target_name: str = "target_error",
) -> list[EpsilonForError]:
    """:func:`epsilon_for_error` for every registered vector mechanism at its default calibration, sorted by ε.

    As in :func:`ldpcli.planning._compare.compare_mechanisms`, the Gaussian baseline (the one mechanism with a
    ``delta`` option) gets ``delta`` (default :data:`ldpcli.planning._compare.DEFAULT_DELTA`); it is
    (ε, δ)-DP, not ε-LDP, and its entry says it is a baseline. Mechanisms with no ε in range come
    last (by name order of registration), each with its reason.
    """
    target = check_target(target_error, target_name)
    d = check_count(d, "d")
    n = check_count(n, "n")
    results: list[EpsilonForError] = []
    for name in mechanism_names():
        cls = get_mechanism(name)
        if not (cls.vector and cls.compared):
            continue
        options = comparison_options(cls, delta)
        results.append(
            epsilon_for_error(name, d=d, n=n, target_error=target, norm_bound=norm_bound, options=options, target_name=target_name)
        )
    results.sort(key=lambda r: (r.epsilon is None, r.epsilon if r.epsilon is not None else 0.0))
    return results
