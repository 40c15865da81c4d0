"""Binomial(d, ½) in log space: its log pmf by Loader's saddle-point form, and exact draws of it
restricted to a stretch of its support, however small that stretch's probability.

log C(d, a)/2^d is δ(d) − δ(a) − δ(d − a) − bd0(a, d/2) − bd0(d − a, d/2) − ½·log(2π·a(d − a)/d)
(Loader 2000, "Fast and accurate computation of binomial probabilities"): Stirling-series remainders
δ plus the deviance bd0, accurate to a few ulps of |log pmf| for every a even at d = 10^6. A count
is drawn by inverting its log survival function at an Exp(1) variate built with full relative
precision in its tail (:func:`standard_exponential_exact`), so a count of probability e^{−500} is
drawn at that rate, never at 0. The threshold channel of the ℓ∞ mechanisms
(:mod:`ldpcli.mechanisms._hypercube`) is the user: its agreement count A is this law restricted to
its cap {A ≥ a₀} or to the complement.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ldpcli.math import _logspace as logspace

#: Loader's Stirling remainder δ(k) = log k! − [(k + ½)·log k − k + ½·log 2π] for k < 16 (δ(0) = 0),
#: evaluated in 40-digit arithmetic and rounded to double (the same formula in doubles loses ~10
#: ulps to cancellation).
_STIRLERR_SMALL = np.array([
    0.0, 0.08106146679532726, 0.0413406959554093, 0.02767792568499834, 0.020790672103765093,
    0.016644691189821193, 0.013876128823070748, 0.01189670994589177, 0.010411265261972096,
    0.009255462182712733, 0.00833056343336287, 0.007573675487951841, 0.00694284010720953,
    0.006408994188004207, 0.0059513701127588475, 0.005554733551962801,
])


_EXP_M1 = math.exp(-1.0)


def _stirlerr(k: np.ndarray) -> np.ndarray:
    """δ(k) = log k! − [(k + ½) log k − k + ½ log 2π] for integer-valued k ≥ 0 (float array)."""
    out = np.empty(k.shape)
    small = k < 16
    out[small] = _STIRLERR_SMALL[k[small].astype(np.int64)]
    big = k[~small]
    r = 1.0 / (big * big)
    # Stirling series Σ B_{2j}/(2j(2j − 1)k^{2j−1}), j ≤ 7: 1/(12k) − 1/(360k³) + 1/(1260k⁵)
    # − 1/(1680k⁷) + 1/(1188k⁹) − 691/(360360k¹¹) + 1/(156k¹³); the next term is below 3e−20 for k ≥ 16.
    series = 1 / 1188 - (691 / 360360 - r / 156) * r
    out[~small] = (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - series * r) * r) * r) * r) / big
    return out


#: (bound on |v|, number of series terms) for ``_bd0``: v^{2·terms} < 1e−18 within each band.
_BD0_BANDS = ((0.1, 9), (0.25, 15), (0.5, 30))


def _bd0(x: np.ndarray, mean: float) -> np.ndarray:
    """The deviance x·log(x/M) + M − x ≥ 0 (M = ``mean``), without cancellation.

    With v = (x − M)/(x + M): x·log(x/M) = 2x·artanh(v), so bd0 = v(x − M) + 2x Σ_{j≥1} v^{2j+1}/(2j + 1),
    a sum of terms of one sign, used for |v| < 1/2 (x/M ∈ (1/3, 3)) with as many terms as the
    band of |v| needs; the direct form outside loses at most a factor ~2.5 to cancellation.
    """
    v = (x - mean) / (x + mean)
    out = x * np.log(x / mean) + mean - x
    size = np.abs(v)
    lower = 0.0
    for upper, terms in _BD0_BANDS:
        band = np.flatnonzero((size >= lower) & (size < upper))
        lower = upper
        if band.size == 0:
            continue
        vn, xn = v[band], x[band]
        v2 = vn * vn
        poly = np.full(vn.shape, 1.0 / (2 * terms + 1))
        for j in range(terms - 1, 0, -1):  # Σ_{j≥1} v^{2(j−1)}/(2j + 1) by Horner
            poly = 1.0 / (2 * j + 1) + v2 * poly
        out[band] = vn * (xn - mean) + 2.0 * xn * vn * v2 * poly
    return out


def log_binomial_pmf(d: int, lo: int = 0) -> np.ndarray:
    """log[C(d, a)/2^d] for a = lo, …, d (Binomial(d, ½) log-pmf), vectorized.

    Loader's form: log C(d, a)/2^d = δ(d) − δ(a) − δ(d − a) − bd0(a, d/2) − bd0(d − a, d/2)
    − ½·log(2π·a(d − a)/d) for 0 < a < d, and −d·log 2 at a ∈ {0, d}. Unlike differences of
    ``gammaln`` (each ~10^7 at d = 10^6, so ~1e−9 absolute error), every term here is small or
    computed without cancellation: the error is a few ulps of the result.
    """
    a = np.arange(lo, d + 1, dtype=float)
    out = np.full(a.shape, -d * logspace.LOG2)
    inner = (a > 0) & (a < d)
    if np.any(inner):
        ai = a[inner]
        bi = d - ai
        half = d / 2.0
        out[inner] = (
            _stirlerr(np.array([float(d)]))[0]
            - _stirlerr(ai)
            - _stirlerr(bi)
            - _bd0(ai, half)
            - _bd0(bi, half)
            - 0.5 * np.log((2.0 * math.pi / d) * ai * bi)
        )
    return out


def standard_exponential_exact(n: int, rng: np.random.Generator) -> np.ndarray:
    """n Exp(1) variates with the exact law in the far tail (P(E > t) = e^{−t} for every t).

    E = G + F with G the number of successes of independent Bernoulli(e^{−1}) trials before the
    first failure (P(G ≥ k) = e^{−k}) and F ~ Exp(1) truncated to [0, 1) by inversion
    (memorylessness). Unlike −log(U), whose tail stops at 53·log 2 ≈ 36.7, this reaches any t.
    """
    e = -np.log1p(-rng.random(n) * -math.expm1(-1.0))
    alive = np.arange(n)
    while alive.size:
        alive = alive[rng.random(alive.size) < _EXP_M1]
        e[alive] += 1.0
    return e


@lru_cache(maxsize=8)
def _neg_log_survival(d: int, lo: int, hi: int) -> np.ndarray:
    """−log P(A ≥ a | lo ≤ A ≤ hi) for a = lo, …, hi, A ~ Binomial(d, ½), lo ≥ d/2 (read-only).

    On [lo, hi] ⊂ [d/2, d] the pmf is non-increasing, so inverting this survival function keeps
    full relative precision for every value, however small its probability.
    """
    lp = log_binomial_pmf(d, lo)[: hi - lo + 1]
    acc = np.logaddexp.accumulate(lp[::-1])[::-1]
    out = acc[0] - acc
    out[0] = 0.0
    out.setflags(write=False)
    return out


def invert_survival(neg_log_survival: np.ndarray, e: np.ndarray) -> np.ndarray:
    """k = max{k: S_k ≥ e^{−E}} for each E in ``e``, given −log S_k (non-decreasing, starting at 0).

    With E ~ Exp(1), P(k ≥ j) = P(E ≥ −log S_j) = S_j: the exact law of the survival function S.
    """
    return np.searchsorted(neg_log_survival, e, side="right").astype(np.int64) - 1


def _sample_decreasing(d: int, lo: int, hi: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of A ~ Binomial(d, ½) conditioned on lo ≤ A ≤ hi, lo ≥ d/2 (survival inversion)."""
    if lo == hi or n == 0:
        return np.full(n, lo, dtype=np.int64)
    return lo + invert_survival(_neg_log_survival(d, lo, hi), standard_exponential_exact(n, rng))


@lru_cache(maxsize=8)
def _complement_split_logit(d: int, agree_min: int) -> float:
    """logit P(⌈d/2⌉ ≤ A | A < a₀): the complement's upper part against its lower part."""
    mode = (d + 1) // 2
    if agree_min <= mode:
        return -math.inf
    lp = log_binomial_pmf(d, d // 2)
    upper = logspace.logsumexp(lp[mode - d // 2 : agree_min - d // 2])  # a ∈ [⌈d/2⌉, a₀ − 1]
    lower = logspace.logsumexp(lp[1:])  # a ∈ [0, ⌈d/2⌉ − 1], by symmetry a ∈ [⌊d/2⌋ + 1, d]
    return upper - lower


def sample_agreements(d: int, agree_min: int, in_cap: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The number A of coordinates where z agrees with s: Binomial(d, ½) restricted to {A ≥ a₀}
    where ``in_cap`` and to {A < a₀} elsewhere (int64 array).

    The cap is a non-increasing stretch of the pmf and is sampled directly; the complement
    [0, a₀ − 1] is split at the mode ⌈d/2⌉ by an exact Bernoulli (``bernoulli_logit``) into a
    non-increasing upper part [⌈d/2⌉, a₀ − 1] and a lower part [0, ⌈d/2⌉ − 1], drawn as
    d − A' with A' on the mirror image [⌊d/2⌋ + 1, d].
    """
    n = in_cap.shape[0]
    out = np.empty(n, dtype=np.int64)
    cap = np.flatnonzero(in_cap)
    out[cap] = _sample_decreasing(d, agree_min, d, cap.size, rng)
    rest = np.flatnonzero(~in_cap)
    logit_upper = _complement_split_logit(d, agree_min)
    if logit_upper == -math.inf:
        upper = np.zeros(rest.size, dtype=bool)
    else:
        upper = logspace.bernoulli_logit(logit_upper, rest.size, rng)
    up, low = rest[upper], rest[~upper]
    out[up] = _sample_decreasing(d, (d + 1) // 2, agree_min - 1, up.size, rng)
    out[low] = d - _sample_decreasing(d, d // 2 + 1, d, low.size, rng)
    return out
