"""Hypercube-vertex mechanisms for the ℓ∞ box: PrivUnit∞ and the Duchi et al. ℓ∞ mechanism.

Both round a row x (|x_j| ≤ L) without bias to a vertex s ∈ {±1}^d (s_j = +1 with probability
(1 + x_j/L)/2, so E[s] = x/L) and release a scaled vertex Z = L·B·z, z ∈ {±1}^d, drawn from a
*threshold-κ channel* (Bhowmick et al. 2018, Alg. 2 / Eq. 18; Duchi et al. 2014, Prop. 4.6 and
Lemma E.2): z is uniform on the "cap" {z: ⟨z, s⟩ > κ} with probability p and uniform on its
complement {z: ⟨z, s⟩ ≤ κ} (ties go to the complement) otherwise.

Write A for the number of coordinates where z agrees with s, so ⟨z, s⟩ = 2A − d. The cap is
{A ≥ a₀} with a₀ = ⌈(d + κ + 1)/2⌉ (Alg. 2 and Thm 2; docs/errata.md §8), and A ~ Binomial(d, ½) for z
uniform on the cube. With P = N_in/2^d = P(A ≥ a₀) (the ``side_probability``):

- Privacy (Bhowmick et al. Thm 2 proof, made exact): q(z|s) takes the two values p/N_in and
  (1 − p)/N_out, and every z is in the cap of some s and outside the cap of another (s = z and
  s = −z), so the exact worst-case likelihood ratio is e^{ε_exact} = [p/N_in]/[(1 − p)/N_out],
  i.e. ε_exact = logit(p) − logit(P), for p ≥ P. The tight choice logit(p) = ε + logit(P) is the
  channel q ∝ e^ε on the cap, 1 off it: the threshold-k channel of Duchi et al. Lemma 5.8 / E.2,
  with normaliser e^ε·N_in + N_out = (e^ε − 1)·N_in + 2^d (docs/errata.md §13).
- Unbiasedness (Bhowmick et al. Lemma 4.2 proof): E[z | s] = c·s with
  c = E[z_j s_j] = t·(p/P − (1 − p)/(1 − P)), t = C(d − 1, a₀ − 1)/2^d (a telescoping binomial
  sum), so B = 1/c and E[Z | x] = x. At the tight p, c = (e^ε − 1)·t/(1 + (e^ε − 1)·P).
- 1 − c = E[1 − z_j s_j] = p·P'/P + (1 − p)(1 − P')/(1 − P) with P' = P(Binomial(d − 1, ½) ≥ a₀)
  (from (d − a)·C(d, a) = d·C(d − 1, a)): a sum of positive terms, so the error keeps full
  relative precision when c → 1 (small d, large ε).
- ‖Z‖² = d·L²·B² for every output, so E‖Z − x‖² = d·L²·B² − ‖x‖²: ``expected_error`` =
  L²·d·(B² − 1) at a vertex, ``expected_error_max`` = L²·d·B² at x = 0, ``scale`` = B·√d.

Every binomial quantity is carried in log space: log C(d, a)/2^d by Loader's saddle-point form
(Stirling-series remainders plus the deviance bd0, accurate to a few ulps of |log pmf| for every
a even at d = 10^6); tail sums and the ratios t/P, P'/P as sums of the weights C(d, a)/C(d, a₀) ≤ 1,
so c and 1 − c keep ~1e−14 relative accuracy even where P is e^{−1000}. Probabilities that can
be tiny (the side of the channel, the far tails of A) are sampled exactly: the side by
``spheremath.bernoulli_logit``, A by inverting its log survival function at an Exp(1) variate
built with full relative precision in its tail (so an agreement count of probability e^{−500} is
drawn at that rate, never at 0), the agreeing coordinates as an exact uniform subset
(``uniform_subsets``: the A smallest of d random keys, redrawn on a tie at the cut).

``privunit-inf`` (calibration ``optimal``) takes the tight p and the a₀ ∈ {⌊d/2⌋ + 1, …, d}
(κ ∈ {0, …, d − 1}) of least error, found by a vectorized scan over every admissible a₀ and a
precise re-evaluation of the best candidates. ``duchi-linf`` (calibration ``classic``) is the
same channel at κ = 0 (a₀ = ⌊d/2⌋ + 1): for odd d this is (49) as printed (P = ½, so
p = e^ε/(1 + e^ε)); for even d the printed p = e^ε/(1 + e^ε) is not ε-DP (an extra
log(N_out/N_in), log 3 at d = 2) and its printed B is biased, so the tight p is used (docs/errata.md §12).
d = 1 is randomized response in both: p = e^ε/(1 + e^ε), B = (e^ε + 1)/(e^ε − 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ldpcli.math import _logspace as logspace
from ldpcli.math._domains import LINF_BOX
from ldpcli.math._kernels import compiled
from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms._base import Mechanism, register
from ldpcli.mechanisms._hooks import OutputBranch

#: Loader's Stirling remainder δ(k) = log k! − [(k + ½)·log k − k + ½·log 2π] for k < 16 (δ(0) = 0),
#: evaluated in 40-digit arithmetic and rounded to double (the same formula in doubles loses ~10
#: ulps to cancellation).
_STIRLERR_SMALL = np.array([
    0.0, 0.08106146679532726, 0.0413406959554093, 0.02767792568499834, 0.020790672103765093,
    0.016644691189821193, 0.013876128823070748, 0.01189670994589177, 0.010411265261972096,
    0.009255462182712733, 0.00833056343336287, 0.007573675487951841, 0.00694284010720953,
    0.006408994188004207, 0.0059513701127588475, 0.005554733551962801,
])
#: Candidates within this (relative, on c) of the scan's best are re-evaluated precisely.
_SCAN_SLACK = 1e-9
#: Rows privatized per chunk: about this many coordinates at a time (bounds temporary memory).
_CHUNK_ELEMENTS = 1 << 20
#: Rows at least this long find their agreeing set's cut by selection, not sorting (``_cut_keys``; measured crossover).
_PARTITION_MIN_D = 2048
_EXP_M1 = math.exp(-1.0)
#: Largest d: calibration scans every threshold, O(d) time and memory (4 GB at d = 10⁸).
_MAX_D = 10**7
#: Largest d for which the audit counts the cap exactly with integers.
_EXACT_AUDIT_MAX_D = 1 << 11  # 0.1 s; the sums grow as d² digits
#: Largest d for which the law test of an input inside the box computes its exact law (O(d³)).
_LAW_DP_MAX_D = 512


# ---------------------------------------------------------------------------------------------
# log C(d, a)/2^d in log space
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# The threshold channel: κ ↔ a₀, its parameters and the optimal threshold
# ---------------------------------------------------------------------------------------------


def agree_min_from_kappa(d: int, kappa: int) -> int:
    """a₀ = ⌈(d + κ + 1)/2⌉: ⟨z, s⟩ > κ iff z agrees with s in at least a₀ coordinates (docs/errata.md §8)."""
    return (d + kappa + 2) // 2


def kappa_from_agree_min(d: int, agree_min: int) -> int:
    """The least κ ≥ 0 with ⌈(d + κ + 1)/2⌉ = a₀ (κ and κ + 1 can define the same channel)."""
    return max(0, 2 * agree_min - d - 2)


def _check_agree_min(d: int, agree_min: int) -> None:
    if not d // 2 + 1 <= agree_min <= d:
        raise ValueError(
            f"a threshold channel needs {d // 2 + 1} <= a0 <= {d} (0 <= kappa <= d - 1), got a0 = {agree_min}"
        )


@dataclass(frozen=True)
class ChannelLogs:
    """The log-space numbers of one threshold channel (see the module docstring)."""

    logit_p: float  # logit of p, the probability of the cap {A ≥ a₀}
    log_side: float  # log P, P = N_in/2^d
    log_side_c: float  # log(1 − P)
    log_c: float  # log c, c = E[z_j s_j] = 1/B
    log_one_minus_c: float  # log(1 − c), as a sum of positive terms


def channel_logs(d: int, epsilon: float, agree_min: int, lp: np.ndarray | None = None) -> ChannelLogs:
    """The tight threshold channel with cap {A ≥ a₀} at exact level ε (``lp``: log pmf from a₀ on).

    logit(p) = ε + logit(P) (Duchi et al. Lemma 5.8's q ∝ e^ε on the cap), nudged down by an ulp
    if rounding would put ε_exact above ε. The ratios t/P and P'/P, where the far-tail
    magnitudes cancel, are formed from one set of weights w_a = C(d, a)/C(d, a₀) ≤ 1 (a ≥ a₀), so
    c and 1 − c keep full relative precision even when P is e^{−1000}.
    """
    _check_agree_min(d, agree_min)
    if lp is None:
        lp = log_binomial_pmf(d, agree_min)
    a = np.arange(agree_min, d + 1, dtype=float)
    weights = np.exp(lp - lp[0])  # the pmf is non-increasing on the cap: w ≤ 1, w[0] = 1
    total = float(np.sum(weights))  # P/pmf(a₀) ≥ 1
    # P' = P(Binomial(d − 1, ½) ≥ a₀) = Σ_{a ≥ a₀} (C(d, a)/2^d)·2(d − a)/d (a sum of positive terms).
    if agree_min < d:
        log_ratio_prime = math.log(float(np.sum(weights * (2.0 * (d - a) / d)))) - math.log(total)  # log(P'/P)
    else:
        log_ratio_prime = -math.inf  # P' = P(Binomial(d − 1, ½) ≥ d) = 0
    log_side = float(lp[0]) + math.log(total)  # log P(A ≥ a₀)
    log_side_c = logspace.log1mexp(log_side)  # P ≤ 1/2 since a₀ > d/2
    logit_side = log_side - log_side_c
    logit_p = epsilon + logit_side
    while logit_p - logit_side > epsilon:
        logit_p = math.nextafter(logit_p, -math.inf)
    eps_exact = logit_p - logit_side
    log_p = logspace.log_expit(logit_p)
    # c = t·(p/P − (1 − p)/(1 − P)) = (t/P)·p·(1 − e^{−ε_exact}), t/P = (a₀/d)·pmf(a₀)/P.
    log_c = math.log(agree_min / d) - math.log(total) + log_p + logspace.log1mexp(-eps_exact)
    # 1 − c = p·P'/P + (1 − p)(1 − P')/(1 − P).
    log_1mc = float(
        np.logaddexp(
            log_p + log_ratio_prime,
            logspace.log_expit(-logit_p) + logspace.log1mexp(log_side + log_ratio_prime) - log_side_c,
        )
    )
    if log_1mc < -logspace.LOG2:  # c > 1/2: c = 1 − (1 − c) is the better-conditioned route
        log_c = logspace.log1mexp(log_1mc)
    return ChannelLogs(logit_p, log_side, log_side_c, log_c, log_1mc)


def optimal_agree_min(d: int, epsilon: float) -> int:
    """The a₀ ∈ {⌊d/2⌋ + 1, …, d} maximising c (minimising B and the error) at exact level ε.

    log c(a₀) = log(e^ε − 1) + log t(a₀) − log(1 + (e^ε − 1)·P(a₀)) is evaluated for every a₀ at
    once (log pmf, reverse log-cumulative tail sums); the candidates within a relative 1e−9 of
    the best are then re-evaluated with exact tail sums (``channel_logs``). Ties go to the
    smaller κ. O(d): about 0.2 s at d = 10^6 (most of it the log pmf).
    """
    return _optimal_channel(d, epsilon)[0]


def _optimal_channel(d: int, epsilon: float) -> tuple[int, ChannelLogs]:
    """(a₀, its ``channel_logs``) for ``optimal_agree_min``, sharing one log-pmf evaluation."""
    lo = d // 2 + 1
    lp = log_binomial_pmf(d, lo)
    a = np.arange(lo, d + 1, dtype=float)
    log_tail = np.logaddexp.accumulate(lp[::-1])[::-1]
    log_em1 = logspace.log_expm1(epsilon)
    score = lp + np.log(a / d) - np.logaddexp(0.0, log_em1 + log_tail)
    best = float(np.max(score))
    candidates = np.flatnonzero(score >= best - _SCAN_SLACK)
    logs = [channel_logs(d, epsilon, int(lo + k), lp[k:]) for k in candidates]
    pick = int(np.argmax([item.log_c for item in logs]))  # the first of equal ones: the least κ
    return int(lo + candidates[pick]), logs[pick]


# ---------------------------------------------------------------------------------------------
# Exact samplers
# ---------------------------------------------------------------------------------------------


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


def _uniform_keys(rows: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """A (rows, d) array of independent uniform 32-bit keys (uint32): the halves of ⌈rows·d/2⌉
    raw words (``random_raw``, about 1 ns a key with PCG64, half the cost of ``integers``) where
    the raw word is 64 uniform bits, numpy's PCG64 (ldp's default) and randomgen's ChaCha
    (``rng="secure"``, :mod:`ldpcli.math._bitgen`); for any other generator (MT19937's raw word,
    for one, is 32 bits wide) ``rng.integers(0, 2³², dtype=uint32)``, the same law."""
    bitgen = rng.bit_generator
    size = rows * d
    if type(bitgen) is np.random.PCG64 or (
        type(bitgen).__name__ == "ChaCha" and type(bitgen).__module__.startswith("randomgen.")
    ):
        return bitgen.random_raw((size + 1) // 2).view(np.uint32)[:size].reshape(rows, d)
    return rng.integers(0, 1 << 32, size=(rows, d), dtype=np.uint32)


def _cut_keys(keys: np.ndarray, agree: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the cut k_(A) and the key after it k_(A+1) (order statistics, 1-based) for
    A = ``agree``; rows with A = d get k_(d) twice (every key is ≤ it), rows with A = 0 stand-ins.

    Rows shorter than ``_PARTITION_MIN_D``: one vectorised sort of the chunk (1.5–2.5 ns a key).
    Longer rows, few to a chunk: per row an O(d) selection of k_(A) (``np.partition``) and the
    minimum above it (0.6–1.4 ns a key, a sort 2.7–4). Both return the same values from the same
    keys, so the route never changes an output.
    """
    rows, d = keys.shape
    below = np.clip(agree - 1, 0, d - 1)
    above = np.clip(agree, 1, d - 1) if d > 1 else below
    if d < _PARTITION_MIN_D:
        ordered = np.sort(keys, axis=1)
        index = np.arange(rows)
        return ordered[index, below], ordered[index, above]
    cut = np.empty(rows, dtype=keys.dtype)
    after = np.empty(rows, dtype=keys.dtype)
    for i in range(rows):
        part = np.partition(keys[i], below[i])
        cut[i] = part[below[i]]
        after[i] = part[above[i]] if above[i] == below[i] else part[below[i] + 1:].min()
    return cut, after


def uniform_subsets(agree: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    """A (rows, d) boolean array whose row i marks a uniformly random ``agree[i]``-subset of the
    d positions, independently across rows: exactly, from 32-bit keys.

    Row i draws d independent uniform keys k_1, …, k_d (:func:`_uniform_keys`) and marks
    {j: k_j ≤ k_(A)}, A = ``agree[i]`` (:func:`_cut_keys`; none for A = 0, all for A = d). Why the
    law is exact: let E be the event k_(A) < k_(A+1) (no tie at the cut; always true for
    A ∈ {0, d}). On E the marked set S(k) is the set of the A smallest keys, of size exactly A.
    For a permutation π of the positions, k∘π has the law of k (i.i.d. keys), E depends only on
    the multiset of keys (so E(k∘π) = E(k)), and S(k∘π) = π⁻¹(S(k)). So the law of S given E is
    invariant under every permutation, and the permutations act transitively on the A-subsets:
    S given E is uniform over the C(d, A) subsets. A row whose keys tie at its cut
    (k_(A) = k_(A+1), 0 < A < d) draws all d of its keys again, until it does not: rejection
    sampling, so the accepted keys have the law of the keys given E, whatever the number of
    tries. Ties elsewhere in the row do not matter. A tie at the cut has probability about d/2³²
    (adjacent order statistics of d keys lie about 2³²/d apart): 2·10⁻⁴ at d = 10⁶.

    Draw order: the keys of all rows (row by row), then, while some rows tie at their cut, the
    keys of those rows again (in row order). This replaced a per-row shuffle (``rng.permuted``,
    19–20 ns a value on the project's 2-core machine, against 2–5 ns here, keys included).
    """
    keys = _uniform_keys(agree.shape[0], d, rng)
    cut, after = _cut_keys(keys, agree)
    redo = np.flatnonzero((agree > 0) & (agree < d) & (cut == after))
    while redo.size:
        keys[redo] = _uniform_keys(redo.size, d, rng)
        cut[redo], after[redo] = _cut_keys(keys[redo], agree[redo])
        redo = redo[cut[redo] == after[redo]]
    mask = keys <= cut[:, None]
    mask[agree == 0] = False
    return mask


def _agreement_with_sign_pmf(agreement_pmf: np.ndarray, q: np.ndarray) -> np.ndarray:
    """P(#{j: z_j = r_j} = k), k = 0, …, d, for a vertex s with P(s_j = r_j) = q_j independently
    and z agreeing with s on a uniform set of A coordinates, A ~ ``agreement_pmf`` (audits only).

    Per coordinate the generating factor is w·(q_j y + 1 − q_j) (j agreeing: z_j = r_j iff
    s_j = r_j) + ((1 − q_j) y + q_j) (j not agreeing); the coefficient of w^a y^k divided by
    C(d, a) is P(k | A = a). O(d³): a dynamic programme over the coordinates.
    """
    d = q.size
    m = np.zeros((d + 1, d + 1))
    m[0, 0] = 1.0
    for j, qj in enumerate(q):
        new = m * qj
        new[:, 1:] += m[:, :-1] * (1.0 - qj)
        new[1:, :] += m[:-1, :] * (1.0 - qj)
        new[1:, 1:] += m[:-1, :-1] * qj
        m = new
        m[j + 2 :, :] = 0.0  # rows above a = j + 1 stay empty; keeps round-off out of them
    binom = np.array([float(math.comb(d, a)) for a in range(d + 1)])
    return np.asarray(agreement_pmf / binom) @ m


# ---------------------------------------------------------------------------------------------
# The mechanisms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _HypercubeThreshold(Mechanism):
    """A tight threshold-κ hypercube channel on the ℓ∞ box (shared by both registered mechanisms)."""

    agree_min: int  # a₀: the cap is {z: z agrees with s in ≥ a₀ coordinates} = {⟨z, s⟩ > κ}
    logit_p: float
    log_side: float
    log_side_c: float
    log_c: float
    log_one_minus_c: float

    domain = LINF_BOX
    max_d = _MAX_D
    options = {}  # noqa: RUF012 - the base class declares it a ClassVar
    baseline = False
    vector = True

    @classmethod
    def _build(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, agree_min: int,
        logs: ChannelLogs | None = None,
    ) -> Any:
        """The mechanism with cap {A ≥ a₀} and the tight p (``logs`` if already computed)."""
        if logs is None:
            logs = channel_logs(d, epsilon, agree_min)
        return cls(
            d, epsilon, norm_bound, calibration, agree_min,
            logs.logit_p, logs.log_side, logs.log_side_c, logs.log_c, logs.log_one_minus_c,
        )

    def audit_epsilon(self) -> tuple[float, str]:
        """ε = log[(p/N_in)/((1 − p)/N_out)] with the cap size counted by a second route.

        d ≤ 2048: N_in = Σ_{a ≥ a₀} C(d, a) in exact integer arithmetic (no log-space binomial
        code), the two point masses p/N_in and (1 − p)/N_out then being the pmf of every output
        (z is in the cap of s = z and outside the cap of s = −z). Larger d: the binomial tail from
        scipy's incomplete-beta-based ``bdtrc`` (an independent implementation), in log space.
        """
        log_q_in, log_q_out = logspace.log_expit(self.logit_p), logspace.log_expit(-self.logit_p)
        if self.d <= _EXACT_AUDIT_MAX_D:
            n_in = sum(math.comb(self.d, a) for a in range(self.agree_min, self.d + 1))
            n_out = 2**self.d - n_in
            eps = (log_q_in - math.log(n_in)) - (log_q_out - math.log(n_out)) if n_out else log_q_in - log_q_out
            return eps, "cap size by exact integer binomial sums; the two point masses of the output pmf"
        from scipy import special  # only audits need it

        side = float(special.bdtrc(self.agree_min - 1, self.d, 0.5))  # P(A ≥ a₀), A ~ Binomial(d, 1/2)
        if not 0.0 < side < 1.0:
            raise NotImplementedError(
                f"the cap probability at d = {self.d}, κ = {self.kappa} is below double precision for the "
                "second route (bdtrc); only the calibration's log-space value is available"
            )
        eps = (log_q_in - math.log(side)) - (log_q_out - math.log1p(-side))
        return eps, "cap probability by scipy's binomial tail (bdtrc); the two point masses of the output pmf"

    @property
    def kappa(self) -> int:
        """The threshold κ ≥ 0 of ⟨z, s⟩ > κ (the least one defining this channel)."""
        return kappa_from_agree_min(self.d, self.agree_min)

    @property
    def p(self) -> float:
        """The probability of drawing from the cap."""
        return math.exp(logspace.log_expit(self.logit_p))

    @property
    def B(self) -> float:  # noqa: N802 - the papers' name
        """The debiasing factor: Z = L·B·z, B = 1/c."""
        return math.exp(-self.log_c)

    @property
    def side_probability(self) -> float:
        """P = N_in/2^d = P(⟨W, s⟩ > κ) for W uniform on the cube (may underflow; see the log)."""
        return math.exp(self.log_side)

    @property
    def epsilon_exact(self) -> float:
        """logit(p) − logit(P): the exact worst-case log-likelihood ratio (module docstring)."""
        return self.logit_p - (self.log_side - self.log_side_c)

    @property
    def scale(self) -> float:
        """B·√d: the output's ℓ2 norm for L = 1."""
        return math.exp(0.5 * math.log(self.d) - self.log_c)

    @property
    def expected_error(self) -> float:
        """L²·d·(B² − 1) = L²·d·(1 − c)(1 + c)/c²: E‖Z − x‖² at a vertex x of the box."""
        c = math.exp(self.log_c)
        return self.norm_bound**2 * math.exp(
            math.log(self.d) + self.log_one_minus_c + math.log1p(c) - 2.0 * self.log_c
        )

    @property
    def expected_error_max(self) -> float:
        """L²·d·B², attained at x = 0 (in general E‖Z − x‖² = L²·d·B² − ‖x‖²)."""
        return self.norm_bound**2 * math.exp(math.log(self.d) - 2.0 * self.log_c)

    def parameters(self) -> dict[str, Any]:
        """κ, a₀, p (and its logit), B, and the cap's probability P (and its log)."""
        return {
            "kappa": self.kappa,
            "min_agreements": self.agree_min,
            "p": self.p,
            "p_logit": self.logit_p,
            "B": self.B,
            "side_probability": self.side_probability,
            "log_side_probability": self.log_side,
        }

    def agreement_pmf(self) -> np.ndarray:
        """P(A = a), a = 0, …, d: the law of the number of coordinates where z agrees with s.

        C(d, a)/2^d times p/P on the cap {a ≥ a₀} and (1 − p)/(1 − P) off it (module docstring).
        """
        lp = log_binomial_pmf(self.d, 0)
        a = np.arange(self.d + 1)
        cap = logspace.log_expit(self.logit_p) - self.log_side
        rest = logspace.log_expit(-self.logit_p) - self.log_side_c
        return np.exp(lp + np.where(a >= self.agree_min, cap, rest))

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """Every output a vertex of the cube scaled by L·B; the agreement count against its exact pmf.

        At a vertex x = L·s (the rounding is then s itself): A = #{j: z_j = s_j} against
        ``agreement_pmf`` (χ² after pooling, or exact binomial when d = 1) — a per-coordinate
        flipping sampler with the same marginals gives Binomial(d, (1 + c)/2) instead — and the
        agreeing positions exchangeable (χ² homogeneity across coordinates, asymptotic). At x = 0
        the rounded vertex is uniform, so z is uniform on the cube: #{j: z_j = +1} ~ Binomial(d, ½)
        and exchangeable. Elsewhere (d ≤ 512): the agreement count with r = sign(x), whose exact
        law mixes the channel's pmf with the independent roundings (``_agreement_with_sign_pmf``).
        """
        from ldpcli.math import _lawtests as lawtests

        n, d = z.shape
        value = self.norm_bound * self.B
        off = int(np.count_nonzero(np.any(np.abs(np.abs(z) - value) > 1e-12 * value, axis=1)))
        tests = [lawtests.deterministic(f"Z ∈ {{±L·B}}^d, L·B = {value:.6g}", off, n, "off the scaled cube")]
        pos = z > 0.0
        q = np.clip((1.0 + x / self.norm_bound) / 2.0, 0.0, 1.0)  # P(s_j = +1)
        if np.all((q == 0.0) | (q == 1.0)):
            agree = pos == (q == 1.0)
            counts = np.bincount(agree.sum(axis=1), minlength=d + 1)
            tests.append(lawtests.counts_test("agreements with x/L ~ channel pmf", counts,
                                               self.agreement_pmf()))
            if d >= 2:
                tests.append(lawtests.homogeneity_test("agreement positions exchangeable", agree))
        elif np.all(q == 0.5):
            counts = np.bincount(pos.sum(axis=1), minlength=d + 1)
            tests.append(lawtests.counts_test("#{z_j > 0} ~ Binomial(d, ½)", counts,
                                               np.exp(log_binomial_pmf(d, 0))))
            if d >= 2:
                tests.append(lawtests.homogeneity_test("coordinates exchangeable", pos))
        elif d <= _LAW_DP_MAX_D:
            r = q >= 0.5
            counts = np.bincount((pos == r).sum(axis=1), minlength=d + 1)
            probs = _agreement_with_sign_pmf(self.agreement_pmf(), np.where(r, q, 1.0 - q))
            tests.append(lawtests.counts_test("agreements with sign(x) ~ exact pmf", counts, probs))
        else:
            tests.append(lawtests.skipped("agreements with sign(x) ~ exact pmf", f"exact law computed for d <= {_LAW_DP_MAX_D}"))
        return tests

    def output_branches(self, x: np.ndarray) -> list[OutputBranch]:
        """At a vertex x = L·s: the agreement count A = a, a = 0, …, d, each a branch.

        P(A = a) = ``agreement_pmf``; given A = a the agreeing positions are a uniform a-subset, so
        E[Z | a] = L·B·s·(2a − d)/d, and ‖Z − x‖² = L²·(a(B − 1)² + (d − a)(B + 1)²) exactly, with
        B − 1 = (1 − c)/c kept from log(1 − c). Elsewhere the rounding mixes in: NotImplementedError.
        """
        if not np.all(np.abs(x) == self.norm_bound):
            raise NotImplementedError("the output is split into branches at a vertex of the box only")
        d, bound = self.d, self.norm_bound
        s = np.sign(x)
        b_minus = math.exp(self.log_one_minus_c - self.log_c)  # B − 1
        b_plus = math.exp(-self.log_c) + 1.0  # B + 1
        return [OutputBranch(f"{a} of {d} agree", float(p), bound * self.B * s * ((2 * a - d) / d),
                             bound**2 * (a * b_minus**2 + (d - a) * b_plus**2))
                for a, p in enumerate(self.agreement_pmf())]

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The agreement count #{j: sign z_j = sign x_j} of each row."""
        return np.count_nonzero((z > 0.0) == (x > 0.0), axis=1)

    output_count = 2  # each coordinate is −L·B or +L·B

    def output_value(self, index: np.ndarray) -> np.ndarray:
        """−L·B for index 0 and +L·B for index 1: ``privatize`` releases exactly these two doubles
        (2·L·B − L·B and 0 − L·B are exact), whatever the input (docs/floating-point.md)."""
        value = self.norm_bound * self.B
        return np.where(np.asarray(index) == 1, value, -value)

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Round each row to a vertex s, draw z from the channel, return L·B·z row by row. numpy's
        draws: all rows' sides and counts A, then per chunk the s uniforms and ``uniform_subsets``'s keys."""
        n, d = x.shape
        in_cap = logspace.bernoulli_logit(self.logit_p, n, rng)
        agree = sample_agreements(d, self.agree_min, in_cap, rng)
        value = self.norm_bound * self.B
        half_over_l = 0.5 / self.norm_bound
        out = np.empty((n, d))
        kernels = compiled()
        if kernels is not None:  # one compiled pass per row, the same law from fewer draws (not draw for draw)
            kernels.hypercube_vertices(np.ascontiguousarray(x, dtype=np.float64), agree, half_over_l, value, rng, out)
            return out
        step = max(1, _CHUNK_ELEMENTS // d)
        for start in range(0, n, step):
            rows = slice(start, min(n, start + step))
            # s_j = +1 with probability (1 + x_j/L)/2, so E[s] = x/L.
            threshold = x[rows] * half_over_l
            threshold += 0.5
            s_pos = rng.random(threshold.shape) < threshold
            # z agrees with s on a uniformly random set of A coordinates (exact: ``uniform_subsets``).
            mask = uniform_subsets(agree[rows], d, rng)
            np.equal(s_pos, mask, out=mask)  # z_j = +1 iff (s_j = +1) == (j agrees)
            block = out[rows]
            np.multiply(mask, 2.0 * value, out=block)
            block -= value  # exactly ±value
        return out


@register
@dataclass(frozen=True)
class PrivUnitInf(_HypercubeThreshold):
    """PrivUnit∞ with the error-minimising threshold κ and tight p (see the module docstring)."""

    name = "privunit-inf"
    title = "PrivUnit∞ (Bhowmick et al. 2018, Alg. 2; optimal threshold κ, exact ε)"
    calibrations = ("optimal",)

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> PrivUnitInf:
        """PrivUnit∞ at exact level ε: the κ of least error (Duchi et al. Prop. 4.6) with tight p."""
        agree_min, logs = _optimal_channel(d, epsilon)
        return cls._build(d, epsilon, norm_bound, calibration, agree_min, logs)


@register
@dataclass(frozen=True)
class DuchiLinf(_HypercubeThreshold):
    """Duchi et al. (49): the threshold-0 channel, tight p (corrected for even d, docs/errata.md §12)."""

    name = "duchi-linf"
    title = "Duchi–Jordan–Wainwright ℓ∞ hypercube mechanism (2014, App. C.1 eq. (49); even d per docs/errata.md §12)"
    calibrations = ("classic",)

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> DuchiLinf:
        """(49) at level ε: cap {⟨z, s⟩ > 0}, p = e^ε N_in/(e^ε N_in + N_out) (= e^ε/(1 + e^ε) for odd d)."""
        return cls._build(d, epsilon, norm_bound, calibration, agree_min_from_kappa(d, 0))
