"""Log-space scalar functions, and the exact Bernoulli draw of a probability given by its logit.

Every probability that can be tiny is carried as a logarithm (docs/errata.md "Numerics"): these
are the helpers that keep it so without overflow, underflow or cancellation (softplus, log-sum-exp,
log(1 − e^q) after Mächler 2012, log(e^x − 1), log cosh), the exponentials that answer +inf
instead of raising, and :func:`bernoulli_logit`, which draws an event of probability expit(ℓ)
exactly even below 2^−53. The sphere's cap geometry (:mod:`ldpcli.math._sphere`) and the scalar
mechanisms build on them.
"""

from __future__ import annotations

import math

import numpy as np

#: log 2, the switch point of :func:`log1mexp` and a term of the cap formulas.
LOG2 = math.log(2.0)


# Probabilities at least this large are sampled by one uniform comparison (relative error 2^-33).
_DIRECT_BERNOULLI_MIN = 2.0**-20


def softplus(x: float) -> float:
    """log(1 + e^x) without overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def log_expit(x: float) -> float:
    """log(1/(1 + e^{−x})), exact in both tails."""
    return -softplus(-x)


def logsumexp(v: np.ndarray) -> float:
    """log Σ e^{v_i} (−inf for an empty v or all −inf); pairwise summation, so ~1 ulp relative."""
    if v.size == 0:
        return -math.inf
    top = float(np.max(v))
    if top == -math.inf:
        return -math.inf
    return top + math.log(float(np.sum(np.exp(v - top))))


def log1mexp(log_q: float) -> float:
    """log(1 − e^{log_q}) for log_q ≤ 0 (Mächler 2012: switch at −log 2)."""
    if log_q > -LOG2:
        return math.log(-math.expm1(log_q))
    return math.log1p(-math.exp(log_q))


def exp_or_inf(x: float) -> float:
    """e^x, or +inf (its correct rounding) where it exceeds the double range; ``math.exp`` raises there.

    An exact error computed in log space can exceed 1.8e308 (PrivUnit2 at d = 1 and ε < 1e−154, which
    bcdp's budget search evaluates for tiny q): the property then says inf instead of stopping the caller.
    """
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def expm1_or_inf(x: float) -> float:
    """e^x − 1, or +inf where it exceeds the double range (as :func:`exp_or_inf`)."""
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf


def log_expm1(x: float) -> float:
    """log(e^x − 1) for x > 0, exact for tiny x and for x in the thousands."""
    if x > 30.0:
        return x + math.log1p(-math.exp(-x))
    return math.log(math.expm1(x))


def log_cosh(z: float) -> float:
    """log cosh z without overflow, and without cancellation for small z (cosh z − 1 = 2 sinh²(z/2))."""
    z = abs(z)
    if z < 1.0:
        return math.log1p(2.0 * math.sinh(z / 2.0) ** 2)
    return z + math.log1p(math.exp(-2.0 * z)) - LOG2


def bernoulli_logit(logit: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n independent booleans with P(True) = expit(logit), exact even when P is below 2^−53.

    A plain ``rng.random() < p`` turns p = expit(50) into 1 and so never draws the complement:
    the output law would then put zero mass where the privacy analysis needs e^{−ε} of it. For
    tiny q = e^{ℓ}/(1 + e^{ℓ}) the event is drawn as the conjunction of independent events of
    probabilities e^{−1} (repeated), e^{−frac} and 1/(1 + e^{ℓ}), each large enough to be drawn
    exactly from a double-precision uniform.
    """
    if logit > 0.0:
        return ~bernoulli_logit(-logit, n, rng)
    q = math.exp(log_expit(logit))
    if q >= _DIRECT_BERNOULLI_MIN:
        return rng.random(n) < q
    out = rng.random(n) < 1.0 / (1.0 + math.exp(logit))
    remaining = -logit  # still to draw: an event of probability e^{−remaining}
    alive = np.flatnonzero(out)
    while alive.size and remaining > 0.0:
        step = min(1.0, remaining)
        keep = rng.random(alive.size) < math.exp(-step)
        out[alive[~keep]] = False
        alive = alive[keep]
        remaining -= step
    return out
