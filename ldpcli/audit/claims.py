"""`ldp audit`: check every claim a calibrated mechanism makes, by routes independent of its code.

1. Exact privacy. The mechanism's ``audit_epsilon()`` (:mod:`ldpcli.mechanisms.hooks`) recomputes
   the worst-case privacy loss by a second route (numerical integration instead of the incomplete
   beta, full enumeration of the output pmf for hypercube and scalar mechanisms, …). It must agree
   with ``epsilon_exact``, and ``epsilon_exact`` must not exceed the ε asked for. A mechanism
   without one is reported as having none, and fails this check.
2. Statistics. N privatized copies of three fixed inputs (a boundary point of the domain, an
   interior point, and zero) are checked for unbiasedness: per-coordinate z-scores, with a
   Bonferroni correction over all coordinates of all inputs at family level α. Their squared
   error is checked against the reported numbers: on the boundary E‖Z − x‖² must equal
   ``expected_error`` (two-sided), elsewhere it must not exceed ``expected_error_max``
   (one-sided). Both use z-tests on the sample mean with its estimated standard error.
3. The law of the output. The same privatized rows (up to ``_LAW_VALUES`` values per input) are
   tested against the exact law of the output by the mechanism's own ``law_tests`` (cosines,
   orthogonal directions, agreement counts, grid values, standardised noise: see each mechanism
   and :mod:`ldpcli.math.lawtests`), with a Bonferroni correction over every test of every input. A
   mechanism without ``law_tests`` (a plug-in) is reported as having none and is not failed for it.
4. A privacy lower bound from samples (:mod:`ldpcli.audit.lower_bound`): pairs of inputs privatized
   ``lower_bound_trials`` times each; an event chosen on the first half, its probabilities bounded
   by Clopper–Pearson on the second; ε_lb = log(p_lo(E | x)/p_up(E | x′)) is a (1 − β) lower
   confidence bound on the true privacy loss, and the audit fails if it exceeds ``epsilon_exact``.

False failures. An honest mechanism fails the whole audit with probability at most
``TOTAL_ALPHA`` = 1e−3, by a union bound over the three statistical parts:

    statistics (mean and error z-tests)    FAMILY_ALPHA      = 1e−4
    law tests (all tests of all inputs)    LAW_ALPHA         = 8e−4
    privacy lower bound (β)                LOWER_BOUND_BETA  = 1e−4

(the exact-privacy check is deterministic). Each part is Bonferroni-corrected within itself. The
split is reported in the JSON output as ``family_alpha``. The bound is exact for the parts whose
p-values are exact (KS and binomial law tests, Clopper–Pearson) and holds up to the usual
approximation for the rest: the z-tests of part 2 are normal approximations (they are not valid
when a rare branch is seen only a handful of times, e.g. randomized response at d = 1, ε = 8 with
a few thousand trials: a row count of 10⁵ or more is needed there), and the χ² law tests are
asymptotic (cells are pooled to an expected count ≥ 5, rare cells tested apart exactly).

The audit is seeded (``--seed``) for reproducibility and otherwise draws OS entropy. Rows are
privatized in chunks, so memory stays bounded whatever d.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpcli.audit.lower_bound import LowerBound, privacy_lower_bound
from ldpcli.estimators.moments import RunningMoments
from ldpcli.math.lazy import special
from ldpcli.mechanisms import LawTest, Mechanism, hooks
from ldpcli.mechanisms.base import check_count

#: |ε_second_route − ε_exact| must be below this, relative to max(1, ε).
EPSILON_TOLERANCE = 1e-7
#: The whole audit's false-failure probability on an honest mechanism: the sum of the three below.
TOTAL_ALPHA = 1e-3
#: Family-wise false-alarm probability of the statistical tests (mean and error).
FAMILY_ALPHA = 1e-4
#: Family-wise false-alarm probability of the law tests (all tests of all inputs, Bonferroni).
LAW_ALPHA = 8e-4
#: β of the privacy lower bound: ε_lb exceeds the true level with probability at most β.
LOWER_BOUND_BETA = 1e-4
#: Privatized copies of each input of the privacy lower bound, by default (fewer for large d:
#: at most ``LOWER_BOUND_VALUES`` values per input, and never fewer than ``MIN_TRIALS`` rows).
LOWER_BOUND_TRIALS = 20_000
LOWER_BOUND_VALUES = 50_000_000
#: At most this many values (rows × d) per input are kept for the law tests (the first rows).
_LAW_VALUES = 16_000_000
#: The fewest trials whose sample variances make the z-tests meaningful.
MIN_TRIALS = 100
#: Values privatized per chunk (rows × d), bounding the audit's memory.
_CHUNK_VALUES = 4_000_000


@dataclass
class InputCheck:
    """The statistical checks on one fixed input."""

    name: str
    trials: int
    max_abs_z: float
    z_threshold: float
    unbiased: bool
    mean_squared_error: float
    predicted: float
    comparison: str  # "equal" (boundary) or "at most" (elsewhere)
    error_z: float
    error_ok: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LawCheck:
    """One law test of one input, with its Bonferroni threshold and verdict."""

    input: str
    test: str
    statistic: float
    p_value: float
    threshold: float
    passed: bool
    skipped: bool
    note: str
    trials: int

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if not math.isfinite(out["statistic"]):
            out["statistic"] = None
        return out


@dataclass
class AuditResult:
    """Everything ``ldp audit`` reports."""

    mechanism: Mechanism
    privacy_route: str
    epsilon_second_route: float | None
    privacy_ok: bool
    inputs: list[InputCheck] = field(default_factory=list)
    law: list[LawCheck] = field(default_factory=list)
    #: None when the mechanism has law tests; else why not (it is then not failed for it).
    law_unavailable: str | None = None
    lower_bound: LowerBound | None = None

    @property
    def law_ok(self) -> bool:
        return all(check.passed for check in self.law)

    @property
    def lower_bound_ok(self) -> bool:
        """ε_lb ≤ ε_exact (with a relative 1e−12 for rounding)."""
        if self.lower_bound is None:
            return True
        return self.lower_bound.epsilon <= self.mechanism.epsilon_exact * (1.0 + 1e-12)

    @property
    def passed(self) -> bool:
        return (
            self.privacy_ok
            and all(check.unbiased and check.error_ok for check in self.inputs)
            and self.law_ok
            and self.lower_bound_ok
        )

    def to_dict(self) -> dict[str, Any]:
        mech = self.mechanism
        return {
            "mechanism": mech.name,
            "calibration": mech.calibration,
            "d": mech.d,
            "epsilon": mech.epsilon,
            "epsilon_exact": mech.epsilon_exact,
            "epsilon_second_route": self.epsilon_second_route,
            "privacy_route": self.privacy_route,
            "privacy_ok": self.privacy_ok,
            "family_alpha": {
                "total": TOTAL_ALPHA,
                "statistics": FAMILY_ALPHA,
                "law_tests": LAW_ALPHA,
                "lower_bound": LOWER_BOUND_BETA,
            },
            "statistics": [check.to_dict() for check in self.inputs],
            "law_tests": [check.to_dict() for check in self.law],
            "law_tests_available": self.law_unavailable is None,
            "law_tests_unavailable": self.law_unavailable,
            "law_ok": self.law_ok,
            "epsilon_lower_bound": None if self.lower_bound is None else self.lower_bound.epsilon,
            "lower_bound_event": None if self.lower_bound is None else self.lower_bound.event,
            "lower_bound_confidence": None if self.lower_bound is None else self.lower_bound.confidence,
            "lower_bound": None if self.lower_bound is None else self.lower_bound.to_dict(),
            "lower_bound_ok": self.lower_bound_ok,
            "passed": self.passed,
        }


def _check_input(
    mech: Mechanism, name: str, x: np.ndarray, boundary: bool, trials: int, z_star: float, rng: np.random.Generator,
    kept: list[np.ndarray], keep_rows: int,
) -> InputCheck:
    """The z-tests of one input; the first ``keep_rows`` outputs are appended to ``kept``."""
    moments = RunningMoments(mech.d)
    sq_sum = sq_sq_sum = 0.0
    chunk = max(1, _CHUNK_VALUES // mech.d)
    done = 0
    while done < trials:
        rows = min(chunk, trials - done)
        z = mech.privatize(np.tile(x, (rows, 1)), rng)
        if done < keep_rows:
            kept.append(z[: keep_rows - done].copy())
        moments.add(z)
        sq = np.einsum("ij,ij->i", z - x, z - x)
        sq_sum += float(sq.sum())
        sq_sq_sum += float(np.dot(sq, sq))
        done += rows
    n = moments.n
    sd = np.sqrt(moments.m2 / (n - 1))
    diff = moments.mean - x
    with np.errstate(divide="ignore", invalid="ignore"):
        zs = np.where(sd > 0, diff / (sd / math.sqrt(n)), np.where(np.abs(diff) > 1e-12 * (1 + np.abs(x)), np.inf, 0.0))
    max_abs_z = float(np.max(np.abs(zs)))
    mse = sq_sum / n
    se = math.sqrt(max(sq_sq_sum / n - mse * mse, 0.0) * n / (n - 1) / n)
    if boundary:
        predicted, comparison = mech.expected_error, "equal"
        error_z = (mse - predicted) / se if se > 0 else (0.0 if math.isclose(mse, predicted, rel_tol=1e-9) else math.inf)
        error_ok = abs(error_z) <= z_star
    else:
        predicted, comparison = mech.expected_error_max, "at most"
        error_z = (mse - predicted) / se if se > 0 else (0.0 if mse <= predicted * (1 + 1e-9) else math.inf)
        error_ok = error_z <= z_star
    return InputCheck(name, n, max_abs_z, z_star, max_abs_z <= z_star, mse, predicted, comparison,
                      float(error_z), bool(error_ok))


def _law_checks(mech: Mechanism, outputs: list[tuple[str, np.ndarray, np.ndarray]]) -> tuple[list[LawCheck], str | None]:
    """Every law test of every input, Bonferroni over those that ran at family level ``LAW_ALPHA``."""
    found: list[tuple[str, int, LawTest]] = []
    for name, x, z in outputs:
        try:
            tests = hooks.law_tests(mech, x, z)
        except NotImplementedError as exc:
            return [], str(exc)
        found += [(name, z.shape[0], test) for test in tests]
    counted = sum(1 for _, _, test in found if not test.skipped)
    threshold = LAW_ALPHA / max(counted, 1)
    checks = [
        LawCheck(name, test.name, float(test.statistic),
                 float(test.p_value), threshold, bool(test.skipped or test.p_value > threshold), bool(test.skipped),
                 test.note, rows)
        for name, rows, test in found
    ]
    return checks, None


def default_lower_bound_trials(d: int) -> int:
    """20000, or fewer for large d (at most ``LOWER_BOUND_VALUES`` values per input), at least 100."""
    return max(MIN_TRIALS, min(LOWER_BOUND_TRIALS, LOWER_BOUND_VALUES // max(d, 1)))


def audit(
    mech: Mechanism, *, trials: int = 20_000, seed: int | None = None, lower_bound_trials: int | None = None
) -> AuditResult:
    """Audit a calibrated mechanism: its privacy level by a second route, its statistics, the law of
    its output and a privacy lower bound from samples.

    ``trials`` (at least 100) privatized copies of each fixed input; ``lower_bound_trials`` (at
    least 100; default ``default_lower_bound_trials(d)``) copies of each input of the lower bound;
    ``seed`` None draws OS entropy.
    """
    trials = check_count(trials, "trials", minimum=MIN_TRIALS)
    if lower_bound_trials is None:
        lower_bound_trials = default_lower_bound_trials(mech.d)
    lower_bound_trials = check_count(lower_bound_trials, "lower_bound_trials", minimum=MIN_TRIALS)
    rng = np.random.default_rng(seed)
    try:
        eps2, route = hooks.audit_epsilon(mech)
        privacy_ok = (
            abs(eps2 - mech.epsilon_exact) <= EPSILON_TOLERANCE * max(1.0, mech.epsilon)
            and mech.epsilon_exact <= mech.epsilon * (1.0 + 1e-12)
        )
    except NotImplementedError as exc:
        eps2, route, privacy_ok = None, str(exc), False
    result = AuditResult(mech, route, eps2, bool(privacy_ok))
    inputs = mech.domain.test_points(mech.d, mech.norm_bound, rng)
    # Bonferroni over every coordinate test and every error test of every input.
    tests = len(inputs) * (mech.d + 1)
    z_star = float(special.ndtri(1.0 - FAMILY_ALPHA / (2.0 * tests)))
    keep_rows = min(trials, max(1, _LAW_VALUES // mech.d))
    outputs = []
    for name, x, boundary in inputs:
        kept: list[np.ndarray] = []
        result.inputs.append(_check_input(mech, name, x, boundary, trials, z_star, rng, kept, keep_rows))
        outputs.append((name, x, np.concatenate(kept)))
    result.law, result.law_unavailable = _law_checks(mech, outputs)
    del outputs
    result.lower_bound = privacy_lower_bound(mech, trials=lower_bound_trials, beta=LOWER_BOUND_BETA, rng=rng)
    return result
