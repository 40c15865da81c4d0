"""`ldp audit`: check every claim a calibrated mechanism makes, by routes independent of its code.

1. Exact privacy. The mechanism's ``audit_epsilon()`` (:mod:`ldpcli.mechanisms._hooks`) recomputes
   the worst-case privacy loss by a second route (numerical integration instead of the incomplete
   beta, full enumeration of the output pmf for hypercube and scalar mechanisms, …). It must agree
   with ``epsilon_exact``, and ``epsilon_exact`` must not exceed the ε asked for. A mechanism
   without one is reported as having none, and fails this check.
2. Statistics (:mod:`ldpcli.audit._statistics`). N privatized copies of three fixed inputs (a
   boundary point of the domain, an interior point, and zero) are checked for unbiasedness:
   per-coordinate z-scores, with a Bonferroni correction over all tests of all inputs at family
   level α. Their squared error is checked against the reported numbers: on the boundary
   E‖Z − x‖² must equal ``expected_error`` (two-sided), elsewhere it must not exceed
   ``expected_error_max`` (one-sided). A mechanism whose output is a mixture of branches
   (``output_branches``: PrivUnit2's cap and complement, randomized response's flips, a grid's
   values, PrivUnitG's cap event at the boundary, bcdp's base release when it makes one) is tested conditionally on how often each
   branch was seen, with the branch counts tested against their exact probabilities, so that a
   branch too rare to be seen cannot fail an honest mechanism. Each test also reports the
   deviation it detects with probability ``power`` (``mean_effect``, ``error_effect``).
3. The law of the output. The same privatized rows (up to ``_LAW_VALUES`` values per input) are
   tested against the exact law of the output by the mechanism's own ``law_tests`` (cosines,
   orthogonal directions, agreement counts, grid values, standardised noise: see each mechanism
   and :mod:`ldpcli.math._lawtests`), with a Bonferroni correction over every test of every input. A
   mechanism without ``law_tests`` (a plug-in) is reported as having none and is not failed for it.
4. A privacy lower bound from samples (:mod:`ldpcli.audit._lower_bound`): pairs of inputs privatized
   ``lower_bound_trials`` times each; an event chosen on the first half, its probabilities bounded
   by Clopper–Pearson on the second; ε_lb = log(p_lo(E | x)/p_up(E | x′)) is a (1 − β) lower
   confidence bound on the true privacy loss, and the audit fails if it exceeds ``epsilon_exact``.
   With ``bits`` its events may also read the raw bit patterns of the outputs
   (:mod:`ldpcli.audit._bits`): the audit is then of the doubles a release writes, not only of the
   mechanism's law, and fails where their low-order bits depend on the input.

False failures. An honest mechanism fails the whole audit with probability at most
``TOTAL_ALPHA`` = 1e−3, by a union bound over the three statistical parts:

    statistics (mean and error z-tests)    FAMILY_ALPHA      = 1e−4
    law tests (all tests of all inputs)    LAW_ALPHA         = 8e−4
    privacy lower bound (β)                LOWER_BOUND_BETA  = 1e−4

(the exact-privacy check is deterministic). Each part is Bonferroni-corrected within itself. The
split is reported in the JSON output as ``family_alpha``. The bound is exact for the parts whose
p-values are exact (KS and binomial law tests, Clopper–Pearson) and holds up to the usual
approximation for the rest: the z-tests of part 2 are normal approximations, made only on
branches seen at least ``statistics.MIN_BRANCH_ROWS`` times (rarer branches are bounded by
Chebyshev's and Markov's inequalities, which need no approximation), and the χ² law tests are
asymptotic (cells are pooled to an expected count ≥ 5, rare cells tested apart exactly).

Trials and power. ``trials`` copies of each input by default (20000). Given ``effect`` E, the audit
chooses instead the number of trials at which the boundary error test detects a relative deviation
E of E‖Z − x‖² with probability ``power``: n = ((z* + z_P)·σ/(E·μ))² (z* the test's threshold,
z_P = Φ⁻¹(power), μ = ``expected_error``, σ the standard deviation of ‖Z − x‖² (within branches, as the test sees it)
from a pilot run of ``PILOT_TRIALS`` rows, raised to its 90% upper confidence bound), capped at ``MAX_TRIALS`` rows (and
``MAX_VALUES`` values) per input with a note saying what the cap detects.

The audit is seeded (``seed``) for reproducibility and otherwise draws OS entropy. Rows are
privatized in chunks, so memory stays bounded whatever d.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpcli.audit._lower_bound import LowerBound, privacy_lower_bound
from ldpcli.audit._statistics import Accumulator, InputCheck, check_input, tests_per_input
from ldpcli.errors import UsageError
from ldpcli.math._lazy import special
from ldpcli.mechanisms import LawTest, Mechanism
from ldpcli.mechanisms import _hooks as hooks
from ldpcli.mechanisms._base import check_count

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
#: Trials per input by default.
DEFAULT_TRIALS = 20_000
#: The power at which detectable effects are reported, by default.
DEFAULT_POWER = 0.8
#: Rows of the pilot run that estimates σ/μ of the squared error when ``effect`` chooses the trials.
PILOT_TRIALS = 4000
#: The most trials, and values (trials × d), per input that ``effect`` may choose.
MAX_TRIALS = 10_000_000
MAX_VALUES = 1_000_000_000


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
    #: The power at which the detectable effects are reported, and how the trials were chosen.
    power: float = DEFAULT_POWER
    trials_note: str = ""

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
            and all(check.ok for check in self.inputs)
            and self.law_ok
            and self.lower_bound_ok
        )

    def to_dict(self) -> dict[str, Any]:
        """The audit as JSON; with ``reports`` (:mod:`ldpcli.audit._reports`) when the outputs were seed reports."""
        mech = self.mechanism
        reports = getattr(mech, "reports", None)
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
            "power": self.power,
            "trials_note": self.trials_note,
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
        } | ({} if reports is None else {"reports": reports.describe()})


def _statistics(
    mech: Mechanism, name: str, x: np.ndarray, boundary: bool, trials: int, branches: list[hooks.OutputBranch] | None,
    z_star: float, alpha_each: float, power: float, rng: np.random.Generator, kept: list[np.ndarray], keep_rows: int,
) -> InputCheck:
    """The statistical tests of one input; the first ``keep_rows`` outputs are appended to ``kept``."""
    acc = Accumulator(mech, x, branches, mech.expected_error if boundary else mech.expected_error_max)
    chunk = max(1, _CHUNK_VALUES // mech.d)
    done = 0
    while done < trials:
        rows = min(chunk, trials - done)
        z = mech.privatize(np.tile(x, (rows, 1)), rng)
        if done < keep_rows:
            kept.append(z[: keep_rows - done].copy())
        acc.add(z)
        done += rows
    return check_input(acc, name, boundary, z_star, alpha_each, power)


def trials_for_effect(
    mech: Mechanism, x: np.ndarray, branches: list[hooks.OutputBranch] | None, effect: float, power: float,
    z_star: float, alpha_each: float, rng: np.random.Generator,
) -> tuple[int, str]:
    """(trials, a note): the trials at which the error test of the boundary input ``x`` detects a
    relative deviation ``effect`` of E‖Z − x‖² with probability ``power`` (module docstring).

    σ is the pilot's standard error of the test itself (within branches) times √pilot, raised to its
    90% upper confidence bound √((k − 1)/χ²_{0.1, k−1}) (normal theory, k the pilot's rows).
    """
    from scipy import stats

    acc = Accumulator(mech, x, branches, mech.expected_error)
    acc.add(mech.privatize(np.tile(x, (PILOT_TRIALS, 1)), rng))
    pilot = check_input(acc, "pilot", True, z_star, alpha_each, power)
    upper = math.sqrt((PILOT_TRIALS - 1) / float(stats.chi2.ppf(0.1, PILOT_TRIALS - 1)))
    sd_ratio = pilot.error_se * math.sqrt(PILOT_TRIALS) * upper / mech.expected_error
    ratio = (z_star + float(special.ndtri(power))) * sd_ratio
    needed = max(MIN_TRIALS, math.ceil((ratio / effect) ** 2))
    cap = max(MIN_TRIALS, min(MAX_TRIALS, MAX_VALUES // mech.d))
    what = f"a relative deviation of {effect:g} of E‖Z − x‖² with probability {power:g}"
    how = f"σ/μ of ‖Z − x‖² ≤ {sd_ratio:.4g} from a pilot of {PILOT_TRIALS} rows"
    if needed <= cap:
        return needed, f"{needed} trials per input detect {what} ({how})"
    return cap, (f"detecting {what} needs {needed} trials per input, above the cap of {cap}: auditing with {cap}, "
                 f"which detects a relative deviation of {ratio / math.sqrt(cap):.3g} with that probability ({how})")


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
    mech: Mechanism, *, trials: int | None = None, seed: int | None = None, lower_bound_trials: int | None = None,
    power: float = DEFAULT_POWER, effect: float | None = None, bits: bool = False,
) -> AuditResult:
    """Audit a calibrated mechanism: its privacy level by a second route, its statistics, the law of
    its output and a privacy lower bound from samples.

    ``trials`` (at least 100; default 20000) privatized copies of each fixed input, or, given
    ``effect`` (a relative deviation of E‖Z − x‖², in (0, 1]), as many as detect it with probability
    ``power`` (module docstring; ``trials`` must then be None); ``power`` (in (0, 1), default 0.8) is
    also the detection probability at which every test reports the effect it detects.
    ``lower_bound_trials`` (at least 100; default ``default_lower_bound_trials(d)``) copies of each
    input of the lower bound; ``seed`` None draws OS entropy. ``bits``: the lower bound's events may
    also read the raw bits of the outputs (:mod:`ldpcli.audit._bits`).
    """
    if not (isinstance(power, (int, float)) and 0.0 < power < 1.0):
        raise UsageError(f"`power` must be a probability strictly between 0 and 1, got {power!r}")
    if effect is not None:
        if not (isinstance(effect, (int, float)) and 0.0 < effect <= 1.0):
            raise UsageError(f"`effect` must be a relative deviation in (0, 1], got {effect!r}")
        if trials is not None:
            raise UsageError("give either `trials` or `effect` (which chooses the trials), not both")
    else:
        trials = check_count(DEFAULT_TRIALS if trials is None else trials, "trials", minimum=MIN_TRIALS)
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
    result = AuditResult(mech, route, eps2, bool(privacy_ok), power=float(power))
    inputs = mech.domain.test_points(mech.d, mech.norm_bound, rng)
    branches = [hooks.output_branches(mech, x) for _, x, _ in inputs]
    # Bonferroni over every test of every input (statistics.tests_per_input).
    tests = sum(tests_per_input(mech, b) for b in branches)
    alpha_each = FAMILY_ALPHA / tests
    z_star = float(special.ndtri(1.0 - alpha_each / 2.0))
    if effect is not None:
        at = next((i for i, (_, _, on) in enumerate(inputs) if on), 0)
        trials, result.trials_note = trials_for_effect(mech, inputs[at][1], branches[at], float(effect), float(power),
                                                       z_star, alpha_each, rng)
    assert trials is not None
    keep_rows = min(trials, max(1, _LAW_VALUES // mech.d))
    outputs = []
    for (name, x, boundary), branch in zip(inputs, branches, strict=True):
        kept: list[np.ndarray] = []
        result.inputs.append(_statistics(mech, name, x, boundary, trials, branch, z_star, alpha_each, float(power),
                                         rng, kept, keep_rows))
        outputs.append((name, x, np.concatenate(kept)))
    result.law, result.law_unavailable = _law_checks(mech, outputs)
    del outputs
    result.lower_bound = privacy_lower_bound(mech, trials=lower_bound_trials, beta=LOWER_BOUND_BETA, rng=rng,
                                             bits=bool(bits))
    return result
