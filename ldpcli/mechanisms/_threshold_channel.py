"""The threshold-κ hypercube channel of the ℓ∞ mechanisms: κ ↔ a₀, its calibration at an exact
level ε in log space, the threshold of least error, and its law mixed with the roundings (audits).

The channel draws z ∈ {±1}^d uniform on the cap {z: ⟨z, s⟩ > κ} = {A ≥ a₀} with probability p and
uniform on its complement otherwise (Bhowmick et al. 2018, Alg. 2 / Eq. 18; Duchi et al. 2014,
Lemma 5.8 / E.2); the derivations of p, c = 1/B and 1 − c are in the docstring of
:mod:`ldpcli.mechanisms._hypercube`, which registers PrivUnit∞ and Duchi et al.'s ℓ∞ mechanism
on it. The binomial quantities are :mod:`ldpcli.math._binomial`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldpcli.math import _logspace as logspace
from ldpcli.math._binomial import log_binomial_pmf

#: Candidates within this (relative, on c) of the scan's best are re-evaluated precisely.
_SCAN_SLACK = 1e-9


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
    """The log-space numbers of one threshold channel (see the docstring of :mod:`ldpcli.mechanisms._hypercube`)."""

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
    return optimal_channel(d, epsilon)[0]


def optimal_channel(d: int, epsilon: float) -> tuple[int, ChannelLogs]:
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


def agreement_with_sign_pmf(agreement_pmf: np.ndarray, q: np.ndarray) -> np.ndarray:
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
