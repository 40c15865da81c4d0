"""Reconstruction of a direction under a diffuse prior (Bhowmick et al. 2018, Sec. 2.3.1, Lemma 2.2, Prop. 1).

Setting. The onlooker wants the direction f(X) = AX/‖AX‖ ∈ S^{k−1} of a k-dimensional orthonormal
projection (Eq. 8); its prior π on X is in 𝒫_f(ρ0) (Eq. 7): log dπ_f/dπ_uni ≤ ρ0 on the sphere. A
guess v̂ succeeds when ⟨f(X), v̂⟩ ≥ a, i.e. ‖f(X) − v̂‖ ≤ α = √(2 − 2a) (Sec. 2.3.1, the ℓ2 loss).

Lemma 2.2 (Bayes' rule, Lemma 2.1): if the release Z is ε-LDP, then for every observed z and every
estimator, P(success | Z = z) ≤ e^ε · sup_{v0} π_f(⟨V, v0⟩ ≥ a) ≤ e^{ε+ρ0} · P(⟨Y, v0⟩ > a), with Y
uniform on S^{k−1} (for a continuous law > and ≥ agree). This module evaluates that last bound
*exactly* (the uniform cap probability, :func:`log_uniform_cap`), next to the two closed-form upper
bounds printed in Prop. 1 (:func:`log_prop1_small`, :func:`log_prop1_large`), and inverts it in
closed form (:func:`max_epsilon_for_risk`).

Everything is a natural logarithm: at ε = 10⁴ the factor e^ε overflows and at k = 10⁷ the cap
probability is below 1e−300; 1 − a² is formed as log1p(−a²), never as 1 − tiny.

JSON (``to_dict``): a log-probability of −∞ (a probability exactly 0: a = 1 asks for f(X) = v̂,
which a continuous prior gives probability 0) is written as null and flagged ``"impossible": true``;
a Prop. 1 branch outside its range of a (or k < 4) is also null, with ``"impossible": false``. No
NaN or ±∞ is ever written.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ldpcli.errors import UsageError
from ldpcli.math import _sphere as sm

LOG2 = math.log(2.0)

STANDARD_A: tuple[float, ...] = (0.1, 0.3, 0.5, 0.9)
"""The accuracies a reported by default: ⟨f(X), v̂⟩ ≥ a, i.e. ‖f(X) − v̂‖ ≤ √(2 − 2a)."""

TARGET = "direction of a k-dimensional orthonormal projection (Bhowmick et al. 2018, Sec. 2.3.1)"

DEFAULT_THRESHOLD = 1e-3
"""The largest bound that reads "protected" unless the caller chooses another (``risk_threshold``)."""

#: The three verdicts on a bound b at a threshold t, in the words every table and JSON file uses.
PROTECTED, AT_RISK, NO_GUARANTEE = "protected", "at risk", "no guarantee"
VERDICTS = (PROTECTED, AT_RISK, NO_GUARANTEE)

# ---------------------------------------------------------------------------------------------
# Argument checks (UsageError, one line, naming the parameter)
# ---------------------------------------------------------------------------------------------


def _name(parameter: str, names: Mapping[str, str] | None) -> str:
    """How a message names ``parameter``: the caller's keyword for it (``names``, e.g. ``{"k": "risk_k"}``),
    marked as a parameter (:mod:`ldpcli.errors`)."""
    return f"`{(names or {}).get(parameter, parameter)}`"


def is_int(value: object) -> bool:
    """An integer, not a bool (True is an int to Python, not a dimension)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """A real number, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def as_epsilon(epsilon: float, names: Mapping[str, str] | None = None) -> float:
    """ε as a float; UsageError unless it is a finite number ≥ 0."""
    if not (is_real(epsilon) and math.isfinite(epsilon) and epsilon >= 0.0):
        raise UsageError(f"{_name('epsilon', names)} must be a finite number >= 0, got {epsilon!r}")
    return float(epsilon)


def _check_k(k: int, d: int | None, names: Mapping[str, str] | None) -> int:
    if d is not None and not (is_int(d) and d >= 1):
        raise UsageError(f"{_name('d', names)} must be an integer >= 1, got {d!r}")
    if not is_int(k) or k < 2 or (d is not None and k > d):
        upper = "d" if d is None else f"d = {d}"
        raise UsageError(f"{_name('k', names)} must be an integer >= 2 and <= {upper}, got {k!r}")
    return int(k)


def _check_a(a: float, names: Mapping[str, str] | None) -> float:
    if not (is_real(a) and 0.0 <= a <= 1.0):
        raise UsageError(f"{_name('a', names)} must be a number in [0, 1], got {a!r}")
    return float(a)


def _check_rho0(rho0: float, names: Mapping[str, str] | None) -> float:
    if not (is_real(rho0) and math.isfinite(rho0) and rho0 >= 0.0):
        raise UsageError(f"{_name('rho0', names)} must be a finite number >= 0, got {rho0!r}")
    return float(rho0)


def check_threshold(threshold: float, names: Mapping[str, str] | None = None) -> float:
    """The verdict threshold as a float; UsageError unless it is a number in (0, 1)."""
    if not (is_real(threshold) and 0.0 < threshold < 1.0):
        raise UsageError(f"{_name('threshold', names)} must be a probability in (0, 1), e.g. 0.001, got {threshold!r}")
    return float(threshold)


def verdict(log_exact: float, threshold: float) -> str:
    """What a bound e^{log_exact} on the chance of a reconstruction says at ``threshold`` (in (0, 1)).

    ``"protected"`` when the bound is at most the threshold; ``"no guarantee"`` when it reaches 1
    (Lemma 2.2 then rules nothing out); ``"at risk"`` in between: the bound holds, but allows a
    success probability above what the threshold accepts (a bound of 0.38 is not protection).
    """
    if log_exact >= 0.0:
        return NO_GUARANTEE
    return PROTECTED if log_exact <= math.log(threshold) else AT_RISK


def finite_or_none(x: float | None) -> float | None:
    """A JSON-ready float: None for None, ±∞ and NaN."""
    if x is None or not math.isfinite(x):
        return None
    return float(x)


# ---------------------------------------------------------------------------------------------
# The uniform cap and the two branches of Prop. 1
# ---------------------------------------------------------------------------------------------


def log_uniform_cap(a: float, k: int) -> float:
    """log P(⟨Y, v0⟩ > a) for Y uniform on S^{k−1}, exactly (Bhowmick et al. 2018, proof of Prop. 1).

    ⟨Y, v0⟩ has density ∝ (1 − t²)^{(k−3)/2}, so P = I_{(1−a)/2}((k−1)/2, (k−1)/2) (App. D); it is
    evaluated by :func:`ldpcli.math._sphere.log_cap_probability` at the cap logit y = 2·artanh(a)
    (that function takes γ = tanh(y/2) = a). k = 2: arccos(a)/π; k = 3: (1 − a)/2. a = 0 gives
    log ½ (symmetry) and a = 1 gives −∞ (a single point). k ≥ 2, a ∈ [0, 1].
    """
    k = _check_k(k, None, None)
    a = _check_a(a, None)
    if a == 1.0:
        return -math.inf
    if a == 0.0:
        return -LOG2
    return sm.log_cap_probability(sm.cap_logit_from_gamma(a), k)


def _prop1_small_log_prior(k: int, a: float) -> float | None:
    """(k/2)·log(1 − a²), the first branch of Prop. 1 without ε + ρ0; None outside a ∈ [0, 1/√2], k ≥ 4."""
    if k < 4 or not (0.0 <= a <= math.sqrt(0.5)):
        return None
    return 0.5 * k * math.log1p(-a * a)


def _prop1_large_log_prior(k: int, a: float) -> float | None:
    """((k − 1)/2)·log(1 − a²) − log(2a√k), Prop. 1's second branch without ε + ρ0; None outside a ∈ [√(2/k), 1]."""
    if k < 4 or not (math.sqrt(2.0 / k) <= a <= 1.0):
        return None
    if a == 1.0:
        return -math.inf
    return 0.5 * (k - 1) * math.log1p(-a * a) - math.log(2.0 * a) - 0.5 * math.log(k)


def log_prop1_small(epsilon: float, k: int, a: float, rho0: float) -> float | None:
    """log p(a) of Prop. 1, first branch: ε + ρ0 + (k/2)·log(1 − a²) (Bhowmick et al. 2018, Prop. 1).

    Defined for a ∈ [0, 1/√2] and k ≥ 4 (Lemma D.1: P(⟨Y, v0⟩ > a) ≤ (1 − a²)^{k/2}); None otherwise.
    Unclipped: it can exceed 0 (a bound above 1 says nothing).
    """
    base = _prop1_small_log_prior(k, a)
    return None if base is None else epsilon + rho0 + base


def log_prop1_large(epsilon: float, k: int, a: float, rho0: float) -> float | None:
    """log p(a) of Prop. 1, second branch: ε + ρ0 + ((k − 1)/2)·log(1 − a²) − log(2a√k) (Bhowmick et al. 2018).

    Defined for a ∈ [√(2/k), 1] and k ≥ 4 (Lemma D.1: P(⟨Y, v0⟩ > a) ≤ (1 − a²)^{(k−1)/2}/(2a√k));
    None otherwise; −∞ at a = 1. Unclipped.
    """
    base = _prop1_large_log_prior(k, a)
    return None if base is None else epsilon + rho0 + base


def _smaller(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


# ---------------------------------------------------------------------------------------------
# The bound at a given ε
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffuseRisk:
    """Lemma 2.2 with a uniform-cap prior bound, at one (ε, k, a, ρ0) (Bhowmick et al. 2018, Sec. 2.3.1).

    ``log_prior`` = log P(⟨Y, v0⟩ > a), Y uniform on S^{k−1} (the chance of the best blind guess under
    the uniform prior); ``log_exact`` = ε + ρ0 + log_prior, the bound of Lemma 2.2 before clipping at
    1 (it may be > 0); ``log_prop1_small``/``log_prop1_large`` are the two branches of Prop. 1, None
    outside their range of a (or for k < 4). Every ``log_*`` may be −∞ (a = 1).
    """

    epsilon: float
    k: int
    a: float
    rho0: float
    log_prior: float
    log_exact: float
    log_prop1_small: float | None
    log_prop1_large: float | None

    @property
    def log_bound(self) -> float:
        """log of the bound on P(success | Z = z): min(0, log_exact)."""
        return min(0.0, self.log_exact)

    @property
    def probability_bound(self) -> float:
        """The bound itself, exp(log_bound) ∈ [0, 1]; it underflows to 0.0 below ~1e−308 (use ``log_bound``)."""
        return math.exp(self.log_bound)

    @property
    def guarantee(self) -> bool:
        """True when the bound says something (log_exact < 0, i.e. below 1); False means "no guarantee"."""
        return self.log_exact < 0.0

    @property
    def impossible(self) -> bool:
        """True when the prior gives success probability 0 (a = 1), so every bound is 0."""
        return self.log_prior == -math.inf

    def verdict(self, threshold: float = DEFAULT_THRESHOLD) -> str:
        """``"protected"`` (bound ≤ threshold), ``"at risk"`` (between) or ``"no guarantee"`` (bound ≥ 1): :func:`verdict`."""
        return verdict(self.log_exact, threshold)

    @property
    def log_prop1(self) -> float | None:
        """The smaller of the applicable Prop. 1 branches (unclipped), or None when neither applies."""
        return _smaller(self.log_prop1_small, self.log_prop1_large)

    @property
    def alpha(self) -> float:
        """The ℓ2 tolerance α = √(2 − 2a) of Sec. 2.3.1: success is ‖f(X) − v̂‖ ≤ α."""
        return math.sqrt(2.0 - 2.0 * self.a)

    def to_dict(self, *, with_parameters: bool = True, threshold: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
        """JSON-ready fields (no NaN or ±∞).

        Logs of −∞ and inapplicable Prop. 1 branches are null; ``impossible`` is true exactly when
        the log-probabilities are −∞ (a = 1: probability 0), in which case ``probability_bound`` is 0.
        ``guarantee`` is true when the bound is below 1; ``verdict`` is :meth:`verdict` at ``threshold``.
        ``with_parameters=False`` leaves out ε, k, ρ0 and the threshold (for a section that states them once).
        """
        out: dict[str, Any] = {}
        if with_parameters:
            out.update({"epsilon": self.epsilon, "k": self.k, "rho0": self.rho0, "threshold": threshold})
        out.update(
            {
                "a": self.a,
                "alpha": self.alpha,
                "log_prior": finite_or_none(self.log_prior),
                "log_exact": finite_or_none(self.log_exact),
                "log_bound": finite_or_none(self.log_bound),
                "probability_bound": self.probability_bound,
                "guarantee": self.guarantee,
                "verdict": self.verdict(threshold),
                "impossible": self.impossible,
                "log_prop1_small": finite_or_none(self.log_prop1_small),
                "log_prop1_large": finite_or_none(self.log_prop1_large),
                "log_prop1": finite_or_none(self.log_prop1),
            }
        )
        return out


def diffuse_risk(
    epsilon: float,
    *,
    k: int,
    a: float,
    rho0: float = 0.0,
    d: int | None = None,
    names: Mapping[str, str] | None = None,
) -> DiffuseRisk:
    """The reconstruction bound of an ε-LDP release (Bhowmick et al. 2018, Lemma 2.2 and Prop. 1).

    ε ≥ 0 finite; k an integer in [2, d] (d, when given, is the data's dimension); a ∈ [0, 1];
    ρ0 ≥ 0 finite. UsageError otherwise, naming the parameter (``names`` gives the caller's keyword for each, e.g.
    ``{"k": "risk_k"}``).
    """
    epsilon = as_epsilon(epsilon, names)
    k = _check_k(k, d, names)
    a = _check_a(a, names)
    rho0 = _check_rho0(rho0, names)
    log_prior = log_uniform_cap(a, k)
    return DiffuseRisk(
        epsilon=epsilon,
        k=k,
        a=a,
        rho0=rho0,
        log_prior=log_prior,
        log_exact=epsilon + rho0 + log_prior,
        log_prop1_small=log_prop1_small(epsilon, k, a, rho0),
        log_prop1_large=log_prop1_large(epsilon, k, a, rho0),
    )


def diffuse_risks(
    epsilon: float,
    *,
    k: int,
    a: Sequence[float],
    rho0: float = 0.0,
    d: int | None = None,
    names: Mapping[str, str] | None = None,
) -> list[DiffuseRisk]:
    """:func:`diffuse_risk` at each accuracy in ``a`` (same checks)."""
    return [diffuse_risk(epsilon, k=k, a=value, rho0=rho0, d=d, names=names) for value in a]


# ---------------------------------------------------------------------------------------------
# The inverse: the largest ε for a target risk
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RiskBudget:
    """The largest ε keeping e^{ε+ρ0}·P(⟨Y, v0⟩ > a) ≤ max_risk (Bhowmick et al. 2018, Lemma 2.2).

    ``epsilon_max``: with the exact cap probability; ``epsilon_max_prop1``: with the smaller applicable
    branch of Prop. 1 (never larger than ``epsilon_max``, since both branches bound the cap from
    above). None when no ε ≥ 0 meets the target (or Prop. 1 does not apply); ``reason`` then says
    why. ``math.inf`` when every ε meets it (a = 1: the prior gives success probability 0).
    """

    max_risk: float
    k: int
    a: float
    rho0: float
    epsilon_max: float | None
    epsilon_max_prop1: float | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields; an unbounded ε (a = 1) is null with ``"unbounded": true``."""
        return {
            "max_risk": self.max_risk,
            "k": self.k,
            "a": self.a,
            "rho0": self.rho0,
            "epsilon_max": finite_or_none(self.epsilon_max),
            "epsilon_max_prop1": finite_or_none(self.epsilon_max_prop1),
            "unbounded": self.epsilon_max == math.inf,
            "reason": self.reason,
        }


def _show_log(log_p: float) -> str:
    """A number given by its log, plainly when it is representable, else as a power of e."""
    return f"{math.exp(log_p):.4g}" if -700.0 < log_p < 700.0 else f"e^{log_p:.6g}"


def _largest_epsilon(log_target: float, rho0: float, log_prior: float) -> float | None:
    """The largest float ε ≥ 0 with (ε + ρ0) + log_prior ≤ log_target, evaluated as in ``diffuse_risk``."""
    if log_prior == -math.inf:
        return math.inf
    eps = log_target - rho0 - log_prior
    if not eps >= 0.0:
        return None
    # The closed form is exact up to rounding; step down (one ulp at a time) until the bound, computed
    # exactly as diffuse_risk computes log_exact, is <= the target. One or two steps at most.
    while eps + rho0 + log_prior > log_target:
        eps = math.nextafter(eps, -math.inf)
        if eps < 0.0:
            return None
    return eps


def max_epsilon_for_risk(
    max_risk: float,
    *,
    k: int,
    a: float,
    rho0: float = 0.0,
    names: Mapping[str, str] | None = None,
) -> RiskBudget:
    """The largest ε with e^{ε+ρ0}·P(⟨Y, v0⟩ > a) ≤ max_risk, in closed form (Bhowmick et al. 2018, Lemma 2.2).

    ε_max = log(max_risk) − ρ0 − log P(⟨Y, v0⟩ > a), rounded down to the float at which
    ``diffuse_risk(ε_max, k=k, a=a, rho0=rho0).log_exact <= log(max_risk)`` holds exactly. The Prop. 1
    variant uses the smaller applicable branch in place of log P. max_risk ∈ (0, 1].
    """
    if not (is_real(max_risk) and 0.0 < max_risk <= 1.0):
        raise UsageError(f"{_name('max_risk', names)} must be a number in (0, 1], got {max_risk!r}")
    k = _check_k(k, None, names)
    a = _check_a(a, names)
    rho0 = _check_rho0(rho0, names)
    log_target = math.log(max_risk)
    log_prior = log_uniform_cap(a, k)
    eps_exact = _largest_epsilon(log_target, rho0, log_prior)
    prop1 = _smaller(_prop1_small_log_prior(k, a), _prop1_large_log_prior(k, a))
    eps_prop1 = None if prop1 is None else _largest_epsilon(log_target, rho0, prop1)
    reasons = []
    if eps_exact is None:
        reasons.append(f"even at ε = 0 the bound e^ρ0 × P(⟨Y, v0⟩ > a) = {_show_log(rho0 + log_prior)} exceeds {max_risk:g}")
    elif eps_exact == math.inf:
        reasons.append("a = 1 asks for f(X) = v̂ exactly, which the prior gives probability 0: every ε meets the target")
    if prop1 is None:
        reasons.append("Prop. 1 needs k >= 4 and a in [0, 1/√2] or [√(2/k), 1]")
    elif eps_prop1 is None and eps_exact is not None:
        reasons.append(f"Prop. 1's bound exceeds {max_risk:g} even at ε = 0")
    return RiskBudget(
        max_risk=float(max_risk),
        k=k,
        a=a,
        rho0=rho0,
        epsilon_max=eps_exact,
        epsilon_max_prop1=eps_prop1,
        reason="; ".join(reasons) or None,
    )
