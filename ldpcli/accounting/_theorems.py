"""Composition theorems as pure functions of the releases' (ε_i, δ_i): what k releases of the same rows spend.

- **Basic composition** (Dwork & Roth 2014, *The Algorithmic Foundations of Differential Privacy*, Thm 3.16):
  k releases at (ε_i, δ_i) are (Σε_i, Σδ_i)-DP; exact in the worst case at δ = 0 (:func:`basic_composition`).
- **All the releases have the same (ε₀, δ₀)**: the optimal composition theorem of Kairouz, Oh & Viswanath
  (2015, *The composition theorem for differential privacy*, Thm 3.3), exact: no valid bound is smaller
  (:func:`optimal_homogeneous_epsilon`).
- **Different ε's**: KOV's heterogeneous bound (Thm 3.5, :func:`kov_heterogeneous_epsilon`) and Dwork, Rothblum &
  Vadhan's advanced composition (2010, *Boosting and differential privacy*, Thm III.3, :func:`drv_epsilon`); the
  privacy-loss-distribution accountant is in :mod:`ldpcli.accounting._pld`.
- **Group privacy for two rows** (Dwork & Roth 2014, Thm 2.2): an add/remove-one guarantee restated for replace-one
  neighbours (:func:`replace_one`).

docs/composition.md has the statements, the numbers and the tests behind each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math._lazy import special

BASIC = "basic composition (Dwork & Roth 2014, Thm 3.16)"
KOV_OPTIMAL = "optimal composition (Kairouz, Oh & Viswanath 2015, Thm 3.3)"
KOV_HETEROGENEOUS = "heterogeneous composition (Kairouz, Oh & Viswanath 2015, Thm 3.5)"
DRV = "advanced composition (Dwork, Rothblum & Vadhan 2010, Thm III.3)"
#: The neighbouring relation of a shuffled release's central guarantee (n reports, one person's replaced).
REPLACE_ONE = "replace one row"
#: The neighbouring relation of a Poisson-subsampled Gaussian's, a training run's with the central layer
#: (dp-accounting's ``ADD_OR_REMOVE_ONE``).
ADD_OR_REMOVE_ONE = "add/remove one row"
#: The largest ε_i the PLD accountant is given: dp-accounting computes e^ε_i, which overflows a double past 709.78
#: (composing releases at ε = 1000 at a δ would raise an OverflowError); above it the PLD states no bound.
PLD_MAX_EPSILON = 700.0
#: The optimal ε is computed to about 1e-14 relative; it is stated this much larger, so rounding never states less.
ROUND_UP = 1e-12


def check_delta(delta: float) -> float:
    """``delta`` as a float when it is in (0, 1); UsageError otherwise (NaN included)."""
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise UsageError(f"`delta` must be a number in (0, 1), not {delta!r}")
    return float(delta)


def optimal_homogeneous_epsilon(epsilon: float, k: int, delta: float) -> float:
    r"""The smallest ε' such that every k-fold composition of ε-DP mechanisms is (ε', δ)-DP (exact).

    Kairouz, Oh & Viswanath (2015), Thm 3.3: the composition is $((k - 2i)\varepsilon, \delta_i)$-DP for
    $i = 0, \dots, \lfloor k/2 \rfloor$ with

    $$\delta_i = \frac{\sum_{\ell < i} \binom{k}{\ell}
        \left(e^{(k-\ell)\varepsilon} - e^{(k-2i+\ell)\varepsilon}\right)}{(1 + e^\varepsilon)^k},$$

    and no better: k-fold randomized response reaches it. Between those points the exact
    $\delta(\varepsilon')$ is the same hockey-stick sum

    $$\delta(\varepsilon') = \frac{\sum_\ell \binom{k}{\ell}
        \max\left(0, e^{(k-\ell)\varepsilon} - e^{\varepsilon' + \ell\varepsilon}\right)}{(1 + e^\varepsilon)^k},$$

    which on the piece where the terms $\ell < L$ are the positive ones is $A_L - e^{\varepsilon'} B_L$, with
    $A_L = P(\ell < L)$ for $\ell \sim \mathrm{Bin}(k, 1/(1 + e^\varepsilon))$ and $B_L = P(\ell < L)$ for
    $\ell \sim \mathrm{Bin}(k, e^\varepsilon/(1 + e^\varepsilon))$. So $\varepsilon' = \log((A_L - \delta)/B_L)$ on
    the piece where $\delta(\varepsilon')$ crosses δ, rounded up by :data:`ROUND_UP` relative. Everything is in
    log space: finite at ε = 10⁴ and at k = 10⁵ (both tested).
    """
    delta = check_delta(delta)
    if not (epsilon > 0 and math.isfinite(epsilon)) or k < 1:
        raise ValueError("`epsilon` must be positive and finite and `k` at least 1")
    ell = np.arange(k + 1, dtype=float)
    log_binom = special.gammaln(k + 1.0) - special.gammaln(ell + 1.0) - special.gammaln(k - ell + 1.0)
    log_one = -math.log1p(math.exp(-epsilon))  # log(e^ε / (1 + e^ε))
    log_zero = -epsilon + log_one  # log(1 / (1 + e^ε))
    log_a = np.logaddexp.accumulate(log_binom + (k - ell) * log_one + ell * log_zero)  # log A_{L}, L = ℓ + 1
    log_b = np.logaddexp.accumulate(log_binom + ell * log_one + (k - ell) * log_zero)
    log_delta = math.log(delta)
    for piece in range(1, k // 2 + 2):
        low, high = max((k - 2 * piece) * epsilon, 0.0), (k - 2 * piece + 2) * epsilon
        log_a_l, log_b_l = float(log_a[piece - 1]), float(log_b[piece - 1])
        # δ at the piece's low end, A_L − e^{low}·B_L (≥ 0 there)
        log_at_low = log_a_l + _log1mexp(low + log_b_l - log_a_l)
        if log_at_low > log_delta or low == 0.0:
            if log_a_l <= log_delta:
                return low
            crossing = log_a_l + _log1mexp(log_delta - log_a_l) - log_b_l
            return min(max(crossing * (1.0 + ROUND_UP), low), high)
    raise AssertionError("unreachable: the last piece reaches ε' = 0")  # pragma: no cover


def _log1mexp(x: float) -> float:
    """log(1 − e^x) for x ≤ 0 (−inf at x = 0), accurate at both ends."""
    if x >= 0.0:
        return -math.inf
    return math.log(-math.expm1(x)) if x > -0.693 else math.log1p(-math.exp(x))


def kov_heterogeneous_epsilon(epsilons: Sequence[float], delta: float) -> float:
    r"""Kairouz, Oh & Viswanath (2015), Thm 3.5: releases of $\varepsilon_i$-DP mechanisms compose to
    $(\tilde\varepsilon, \tilde\delta)$-DP with

    $$\tilde\varepsilon = \min\left\{ \sum_i \varepsilon_i,\;
      \sum_i \varepsilon_i \tanh\frac{\varepsilon_i}{2} + \sqrt{2 \sum_i \varepsilon_i^2 \,
        \log\left(e + \frac{\sqrt{\sum_i \varepsilon_i^2}}{\tilde\delta}\right)},\;
      \sum_i \varepsilon_i \tanh\frac{\varepsilon_i}{2} + \sqrt{2 \sum_i \varepsilon_i^2 \, \log\frac{1}{\tilde\delta}}
    \right\}$$

    ($\tanh(\varepsilon/2) = (e^\varepsilon - 1)/(e^\varepsilon + 1)$); with $(\varepsilon_i, \delta_i)$-DP
    mechanisms the δ is $1 - (1 - \tilde\delta) \prod_i (1 - \delta_i)$ (:func:`compose_local` states it).
    """
    delta = check_delta(delta)
    eps = np.asarray(epsilons, dtype=float)
    drift = float(np.sum(eps * np.tanh(eps / 2.0)))
    squares = float(np.sum(eps * eps))
    spread = min(math.log(math.e + math.sqrt(squares) / delta), -math.log(delta))
    return min(math.fsum(eps), drift + math.sqrt(2.0 * squares * spread))


def drv_epsilon(epsilons: Sequence[float], delta: float) -> float:
    r"""Dwork, Rothblum & Vadhan (2010), Thm III.3 (advanced composition), for releases of $\varepsilon_i$-DP
    mechanisms: $(\varepsilon', \delta' + \sum_i \delta_i)$-DP with

    $$\varepsilon' = \sqrt{2 \ln(1/\delta') \sum_i \varepsilon_i^2}
        + \sum_i \varepsilon_i \left(e^{\varepsilon_i} - 1\right).$$

    The theorem is stated for k equal ε; its proof (Azuma's inequality on the privacy loss, whose i-th
    step is bounded by $\varepsilon_i$ and has mean at most $\varepsilon_i(e^{\varepsilon_i} - 1)$, Dwork & Roth
    2014, Thm 3.20) gives this form for different $\varepsilon_i$. KOV's Thm 3.5 is never larger; both are shown.
    """
    delta = check_delta(delta)
    eps = np.asarray(epsilons, dtype=float)
    with np.errstate(over="ignore"):
        drift = float(np.sum(eps * np.expm1(eps)))
    return math.sqrt(2.0 * math.log(1.0 / delta) * float(np.sum(eps * eps))) + drift


def basic_composition(guarantees: Sequence[tuple[float, float]]) -> tuple[float, float]:
    r"""Dwork & Roth (2014), Thm 3.16: releases that are $(\varepsilon_i, \delta_i)$-DP, each with fresh randomness,
    are $(\sum_i \varepsilon_i, \sum_i \delta_i)$-DP together, for every neighbouring relation and adaptively.
    Exact at δ = 0 for pure ε-DP (the k-fold product of randomized responses reaches it). Summed by ``math.fsum``:
    the order does not matter."""
    return math.fsum(eps for eps, _ in guarantees), math.fsum(dlt for _, dlt in guarantees)


def replace_one(epsilon: float, delta: float, neighbouring: str) -> tuple[float, float]:
    """An (ε, δ) central guarantee for ``neighbouring`` data sets, stated for replace-one neighbours.

    An add/remove-one (ε, δ)-DP mechanism M is (2ε, (1 + e^ε)δ)-DP for replace-one neighbours: replacing row x
    of D by x' is removing x (giving D₀) and adding x', so P[M(D) ∈ S] ≤ e^ε P[M(D₀) ∈ S] + δ ≤
    e^ε (e^ε P[M(D') ∈ S] + δ) + δ (group privacy for a group of two; Dwork & Roth 2014, Thm 2.2 for δ = 0).
    """
    if neighbouring == REPLACE_ONE:
        return epsilon, delta
    if delta == 0:
        return 2.0 * epsilon, 0.0
    if epsilon > PLD_MAX_EPSILON:  # (1 + e^ε)δ ≥ 1 anyway, without overflowing
        return 2.0 * epsilon, 1.0
    return 2.0 * epsilon, min(1.0, (1.0 + math.exp(epsilon)) * delta)

