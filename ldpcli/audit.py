"""`ldp audit`: check every claim a calibrated mechanism makes, by routes independent of its code.

1. Exact privacy. ``Mechanism.audit_epsilon()`` recomputes the worst-case privacy loss by a
   second route (numerical integration instead of the incomplete beta, full enumeration of the
   output pmf for hypercube and scalar mechanisms, …). It must agree with ``epsilon_exact``, and
   ``epsilon_exact`` must not exceed the ε asked for.
2. Statistics. N privatized copies of three fixed inputs (a boundary point of the domain, an
   interior point, and zero) are checked for unbiasedness: per-coordinate z-scores, with a
   Bonferroni correction over all coordinates of all inputs at family level α. Their squared
   error is checked against the reported numbers: on the boundary E‖Z − x‖² must equal
   ``expected_error`` (two-sided), elsewhere it must not exceed ``expected_error_max``
   (one-sided). Both use z-tests on the sample mean with its estimated standard error.

The audit is seeded (``--seed``) for reproducibility and otherwise draws OS entropy. Rows are
privatized in chunks, so memory stays bounded whatever d.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from ldpcli.estimators.moments import RunningMoments
from ldpcli.mechanisms import Mechanism
from ldpcli.mechanisms.base import check_count

#: |ε_second_route − ε_exact| must be below this, relative to max(1, ε).
EPSILON_TOLERANCE = 1e-7
#: Family-wise false-alarm probability of the statistical tests.
FAMILY_ALPHA = 1e-4
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
class AuditResult:
    """Everything ``ldp audit`` reports."""

    mechanism: Mechanism
    privacy_route: str
    epsilon_second_route: float | None
    privacy_ok: bool
    inputs: list[InputCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.privacy_ok and all(check.unbiased and check.error_ok for check in self.inputs)

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
            "family_alpha": FAMILY_ALPHA,
            "statistics": [check.to_dict() for check in self.inputs],
            "passed": self.passed,
        }


def _check_input(
    mech: Mechanism, name: str, x: np.ndarray, boundary: bool, trials: int, z_star: float, rng: np.random.Generator
) -> InputCheck:
    moments = RunningMoments(mech.d)
    sq_sum = sq_sq_sum = 0.0
    chunk = max(1, _CHUNK_VALUES // mech.d)
    done = 0
    while done < trials:
        rows = min(chunk, trials - done)
        z = mech.privatize(np.tile(x, (rows, 1)), rng)
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


def audit(mech: Mechanism, *, trials: int = 20_000, seed: int | None = None) -> AuditResult:
    """Audit a calibrated mechanism: its privacy level by a second route, and its statistics.

    ``trials`` (at least 100) privatized copies of each fixed input; ``seed`` None draws OS entropy.
    """
    trials = check_count(trials, "--trials", minimum=MIN_TRIALS)
    rng = np.random.default_rng(seed)
    try:
        eps2, route = mech.audit_epsilon()
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
    for name, x, boundary in inputs:
        result.inputs.append(_check_input(mech, name, x, boundary, trials, z_star, rng))
    return result
