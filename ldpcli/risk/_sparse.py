"""Reconstruction of sparse histograms under a Zipfian prior (Bhowmick et al. 2018, Sec. 2.3.2, Lemma 2.3, Prop. 2).

Setting (Sec. 2.3.2). A user's data is x ∈ {0, 1}^d (x_j = 1: word j was used); the onlooker's
prior is the Zipfian model (10): independent X_j ~ Bernoulli(min(m/j, 1)), j = 1..d, with m ≥ 1 an
integer and d > m (so X_j = 1 for j ≤ m and |X| ≥ m surely). A guess v ∈ {0, 1}^d with |v| = s ≥ 1
has precision |v ∩ X|/s and recall |v ∩ X|/|X|; it *succeeds* when precision ≥ P and recall ≥ R.
By Lemma 2.2 an ε-LDP release multiplies the prior's best chance by at most e^ε (Eq. 9, Prop. 2).

Two routes to sup_v P(success) under the prior:

* **Lemma 2.3** (Bernstein), with the constants *its proof* (App. A.1) gives, which differ from the
  printed statement (docs/errata.md §20) — see :func:`log_lemma23_precision` and
  :func:`log_lemma23_recall`; the printed forms are kept as :func:`log_lemma23_precision_printed` and :func:`log_lemma23_recall_printed`.
  Every guess has |v| ≥ γm or |v| ≤ γm, so sup_v P(success) ≤ max(B_prec(γ), B_rec(γ)) for each
  γ ≥ 2; :func:`lemma23_bound` minimises over γ. Prop. 2's own constant p_{r,d,m} =
  max{exp(−cm log(1/p)), exp(−cm log(d/m))} cannot be reproduced: the paper leaves the numerical
  constant c > 0 unspecified, so only the Lemma 2.3 route (with explicit constants) is computed.
* **Exact** (:func:`log_best_guess`): the best guess of each size s is the s most likely words (see
  :func:`log_success_by_size` for the proof), so sup_v P(success) = max_s P(success of {1..s}),
  a finite computation with two independent Poisson-binomial laws, done in log space.

Thresholds are compared exactly: a float precision or recall is read as the shortest decimal that
rounds to it (Python's ``repr``: 0.1 is 1/10, 0.3 is 3/10) and compared in rational arithmetic, so
precision ≥ 0.3 with 10 guessed words means at least 3 hits, with no float tolerance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math._lazy import optimize
from ldpcli.math._logspace import logsumexp
from ldpcli.risk._diffuse import DEFAULT_THRESHOLD, as_epsilon, finite_or_none, is_int, is_real, verdict

EXACT_MAX_D = 20_000
"""Largest d for the exact route (:func:`log_best_guess`): 1–3 s at d = 20000 on one core (0.1 s at
d = 2000), O(d^{3/2}) memory, O(d²) work at worst. Above it the exact value is None with a reason;
the Lemma 2.3 route still works."""


# ---------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------


def _check_md(m: int, d: int) -> tuple[int, int]:
    if not (is_int(m) and m >= 1):
        raise UsageError(f"`m` must be an integer >= 1, got {m!r}")
    if not (is_int(d) and d > m):
        raise UsageError(f"`d` must be an integer > m = {m}, got {d!r}")
    return int(m), int(d)


def _check_fraction(value: float, name: str) -> float:
    if not (is_real(value) and 0.0 < value <= 1.0):
        raise UsageError(f"`{name}` must be a number in (0, 1], got {value!r}")
    return float(value)


def _check_gamma(gamma: float) -> float:
    if not (is_real(gamma) and math.isfinite(gamma) and gamma >= 2.0):
        raise UsageError(f"gamma must be a finite number >= 2 (Lemma 2.3), got {gamma!r}")
    return float(gamma)


def _as_decimal_fraction(value: float) -> Fraction:
    """The shortest decimal that rounds to ``value`` (its repr), as an exact fraction: 0.1 → 1/10."""
    return Fraction(repr(float(value)))


# ---------------------------------------------------------------------------------------------
# Lemma 2.3 (Bernstein), as proved in App. A.1 and as printed
# ---------------------------------------------------------------------------------------------


def _bernstein_exponent(dev: float, var_bound: float) -> float:
    """min{dev²/(4σ²), (3/4)·dev} for dev ≥ 0 (App. A.1, Eqs. 24–25), with σ² ≤ var_bound."""
    if dev <= 0.0:
        return 0.0
    if var_bound <= 0.0:
        return 0.75 * dev
    return min(dev * dev / (4.0 * var_bound), 0.75 * dev)


def log_lemma23_precision(precision: float, *, m: int, gamma: float) -> float:
    """log of the bound on P(precision(v, X) ≥ p) for every guess with |v| ≥ γm, γ ≥ 2, as the proof gives it.

    Bhowmick et al. 2018, Lemma 2.3 and its proof (App. A.1, Eq. 24):

        log P ≤ −min{ t²m / (4 log γ), (3/4)·t·m },   t = (pγ − 1 − log γ)_+.

    The printed statement has 2 log γ in the first denominator; Bernstein's inequality gives
    exp(−D²/(2σ² + 2D/3)) ≤ exp(−min{D²/(4σ²), 3D/4}) with D ≥ tm and σ² ≤ m log γ, i.e. 4 log γ
    (the proof's last display agrees). The 2 log γ version is unproven, not shown false (see
    :func:`log_lemma23_precision_printed`).

    Validity for every |v| = s ≥ γm (the proof asserts the prefix is worst "again" without showing
    it): by the swap argument of :func:`log_success_by_size`, P(precision ≥ p) for |v| = s is largest
    for v = {1..s}; there D(s) = ps − Σ_{j≤s} p_j ≥ m(pu − 1 − log u) = m·t(u) and σ²(s) ≤
    Σ_{m<j≤s} m/j ≤ m log u, u = s/m ≥ γ. Both t(u) and t(u)²/log u increase in u once t(u) ≥ 0
    and u ≥ e^{1/2} (the derivative of t²/log u has the sign of (pu − 1)(2 log u − 1) + log u), which
    γ ≥ 2 ensures, so the bound at u = γ covers every s ≥ γm.
    """
    p = _check_fraction(precision, "precision")
    gamma = _check_gamma(gamma)
    log_g = math.log(gamma)
    t = max(p * gamma - 1.0 - log_g, 0.0)
    return -_bernstein_exponent(t * m, m * log_g) + 0.0


def log_lemma23_recall(recall: float, *, m: int, d: int, gamma: float) -> float:
    """log of the bound on P(recall(v, X) ≥ r) for every guess with |v| ≤ γm, as the proof gives it.

    Bhowmick et al. 2018, Lemma 2.3 and its proof (App. A.1, Eq. 25), for r ≤ 1/2:

        log P ≤ −min{ τ²m / (4(1 − r)² log(d/m)), (3/4)·τ·m },   τ = (r(1 + log(d/(m+1))) − 1 − log γ)_+.

    Deviations from the printed statement: (i) the statement asks for |v| ≥ γm, but the proof bounds
    Σ_{j∈v} E X_j ≤ Σ_{j≤γm} E X_j, which needs |v| ≤ γm (as implemented); (ii) the statement's
    4(1 − r²) is valid but looser than the proof's 4(1 − r)² (the proof's display also writes
    (r − v_j)·Var(X_j)² for (r − v_j)²·Var(X_j)). For r > 1/2 the bound at r = 1/2 is used (recall ≥ r
    implies recall ≥ 1/2; the proof needs 1 − r ≥ r to bound |v_j − r| ≤ 1 − r). Any γ ≥ 1 is valid
    here; γ ≥ 2 is required for symmetry with the precision half.
    """
    r = _check_fraction(recall, "recall")
    m, d = _check_md(m, d)
    gamma = _check_gamma(gamma)
    r = min(r, 0.5)
    tau = max(r * (1.0 + math.log(d / (m + 1))) - 1.0 - math.log(gamma), 0.0)
    return -_bernstein_exponent(tau * m, (1.0 - r) ** 2 * m * math.log(d / m)) + 0.0


def log_lemma23_precision_printed(precision: float, *, m: int, gamma: float) -> float:
    """Lemma 2.3's precision bound exactly as printed: −min{t²m/(2 log γ), (3/4)tm}, t = (pγ − 1 − log γ)_+.

    Kept for comparison only: the constant 2 log γ is not what Bernstein's inequality gives (see
    :func:`log_lemma23_precision`, which uses 4 log γ); it is unproven rather than shown false.
    """
    p = _check_fraction(precision, "precision")
    gamma = _check_gamma(gamma)
    log_g = math.log(gamma)
    t = max(p * gamma - 1.0 - log_g, 0.0)
    if t == 0.0:
        return 0.0
    return -min(t * t * m / (2.0 * log_g), 0.75 * t * m)


def log_lemma23_recall_printed(recall: float, *, m: int, d: int, gamma: float) -> float:
    """Lemma 2.3's recall bound exactly as printed: −min{τ²m/(4(1 − r²) log(d/m)), (3/4)τm}, any r ∈ (0, 1].

    Kept for comparison only (the printed hypothesis |v| ≥ γm is the wrong direction, see
    :func:`log_lemma23_recall`). At r = 1 the first term is +∞ and the second is used.
    """
    r = _check_fraction(recall, "recall")
    m, d = _check_md(m, d)
    gamma = _check_gamma(gamma)
    tau = max(r * (1.0 + math.log(d / (m + 1))) - 1.0 - math.log(gamma), 0.0)
    if tau == 0.0:
        return 0.0
    denominator = 4.0 * (1.0 - r * r) * math.log(d / m)
    first = math.inf if denominator <= 0.0 else tau * tau * m / denominator
    return -min(first, 0.75 * tau * m)


def _log_lemma23_at(gamma: float, m: int, d: int, precision: float, recall: float) -> float:
    """max(B_prec(γ), B_rec(γ)); just B_rec(γ) when γm ≥ d (then every guess has |v| ≤ γm)."""
    rec = log_lemma23_recall(recall, m=m, d=d, gamma=gamma)
    if gamma * m >= d:
        return rec
    return max(log_lemma23_precision(precision, m=m, gamma=gamma), rec)


def lemma23_bound(m: int, d: int, precision: float, recall: float) -> tuple[float, float]:
    """(log of the best Lemma 2.3 bound on sup_v P(success), the γ attaining it) (Bhowmick et al. 2018).

    For any γ ≥ 2 every guess has |v| ≥ γm (then P(success) ≤ P(precision ≥ p) ≤ B_prec(γ)) or
    |v| ≤ γm (then P(success) ≤ B_rec(γ)), so sup_v P(success) ≤ max(B_prec(γ), B_rec(γ)). B_prec
    decreases and B_rec increases in γ, so the maximum is unimodal: it is minimised over
    γ ∈ [2, max(2, d/m)] (beyond d/m only B_rec remains and grows) by a log-spaced scan, then
    scipy's bounded Brent search on log γ around the best scan point; endpoints included.
    """
    precision = _check_fraction(precision, "precision")
    recall = _check_fraction(recall, "recall")
    m, d = _check_md(m, d)
    lo = math.log(2.0)
    hi = math.log(max(2.0, d / m))

    def objective(log_gamma: float) -> float:
        gamma = min(max(math.exp(log_gamma), 2.0), max(2.0, d / m))
        return _log_lemma23_at(gamma, m, d, precision, recall)

    best_x, best_f = lo, objective(lo)
    if hi > lo:
        grid = np.linspace(lo, hi, 65)
        values = [objective(float(x)) for x in grid]
        i = int(np.argmin(values))
        if values[i] < best_f:
            best_x, best_f = float(grid[i]), values[i]
        left, right = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
        if right > left:
            res = optimize.minimize_scalar(objective, bounds=(left, right), method="bounded", options={"xatol": 1e-10})
            if float(res.fun) < best_f:
                best_x, best_f = float(res.x), float(res.fun)
    gamma = min(max(math.exp(best_x), 2.0), max(2.0, d / m))
    return _log_lemma23_at(gamma, m, d, precision, recall), gamma


# ---------------------------------------------------------------------------------------------
# The exact best guess
# ---------------------------------------------------------------------------------------------


def _log_zipf(m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """(log P(X_j = 1), log P(X_j = 0)) for j = 1..d (index j − 1) under the Zipfian prior (10)."""
    j = np.arange(1, d + 1, dtype=float)
    log_hit = np.where(j <= m, 0.0, math.log(m) - np.log(j))
    with np.errstate(divide="ignore"):
        log_miss = np.where(j <= m, -np.inf, np.log(np.maximum(j - m, 0.0)) - np.log(j))
    return log_hit, log_miss


@dataclass
class _Law:
    """log pmf of a count N on offset..offset + len(logpmf) − 1, plus the log of the mass cut away so far.

    Mass is cut only as whole entries below (max − margin); the entries kept are then lower bounds of
    the true ones, and the true law minus the kept one has total mass exp(log_cut).
    """

    offset: int
    logpmf: np.ndarray
    log_cut: float = -math.inf

    def add(self, log_one: float, log_zero: float, top: int, margin: float) -> _Law:
        """The law of N + B, B ~ Bernoulli (log P(1), log P(0)) independent, kept on indices ≤ top.

        Entry n of N + B depends only on entries n and n − 1 of N, so entries above ``top`` can be
        dropped without error when no later use needs them (``top`` never increases along a pass);
        then entries below (max − margin) are cut and their mass added to ``log_cut``.
        """
        old = self.logpmf
        n = old.shape[0]
        if n == 0 or top < self.offset:  # nothing a later use needs is left (what was cut is in log_cut)
            return _Law(self.offset, old[:0], self.log_cut)
        new = np.empty(n + 1)
        new[0] = old[0] + log_zero
        if n > 1:
            np.logaddexp(old[1:] + log_zero, old[:-1] + log_one, out=new[1:n])
        new[n] = old[n - 1] + log_one
        new = new[: top - self.offset + 1]
        log_cut = self.log_cut
        offset = self.offset
        if margin < math.inf and new.shape[0] > 1:
            keep = new >= float(np.max(new)) - margin
            first = int(np.argmax(keep))
            last = new.shape[0] - int(np.argmax(keep[::-1]))
            if first > 0 or last < new.shape[0]:
                dropped = np.concatenate([new[:first], new[last:]])
                log_cut = float(np.logaddexp(log_cut, logsumexp(dropped)))
                new = new[first:last]
                offset += first
        return _Law(offset, new, log_cut)


def _success_logs(m: int, d: int, pf: Fraction, rf: Fraction, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """(log of a lower bound, log of the bound's possible shortfall) of P(success of {1..s}), s = 1..d.

    See :func:`log_success_by_size`. With margin = ∞ nothing is cut: the shortfall is 0 (log −∞).
    """
    log_hit, log_miss = _log_zipf(m, d)
    sizes = range(d + 1)
    # Allowed misses per size s (index s): u_s = s − ⌈ps⌉ ≥ 0; the misses' law is needed up to the
    # largest u_{s'}, s' ≥ s (a non-increasing window).
    allowed = np.array([s - (-((-pf.numerator * s) // pf.denominator)) for s in sizes], dtype=np.int64)
    keep_miss = np.maximum.accumulate(allowed[::-1])[::-1]
    # Largest S_out compatible with S_in = i: ⌊i(1 − r)/r⌋, capped at d (exact integer arithmetic);
    # S_out(s) is needed up to out_max[s] (non-increasing as s decreases).
    num, den = rf.numerator, rf.denominator
    out_max = np.array([min((i * (den - num)) // num, d) for i in sizes], dtype=np.int64)

    def step_out(law: _Law, s: int) -> _Law:
        """The law of S_out(s − 1) = S_out(s) + X_s."""
        return law.add(float(log_hit[s - 1]), float(log_miss[s - 1]), int(out_max[s - 1]), margin)

    # Backward pass: checkpoints of S_out(s) every `block` sizes (memory O(d^{3/2}) at most).
    block = math.isqrt(d - 1) + 1
    checkpoints: dict[int, _Law] = {}
    law = _Law(0, np.zeros(1))  # S_out(d) = 0
    for s in range(d, 0, -1):
        if s == d or s % block == 0:
            checkpoints[s] = law
        law = step_out(law, s)

    lower = np.full(d, -math.inf)
    shortfall = np.full(d, -math.inf)
    misses = _Law(0, np.zeros(1))  # misses among the empty guess: 0
    start = 1
    while start <= d:
        stop = min(d, (start // block + 1) * block)  # the next checkpoint after start
        laws: list[_Law] = []
        law = checkpoints[stop]
        for s in range(stop, start - 1, -1):
            laws.append(law)
            if s > start:
                law = step_out(law, s)
        laws.reverse()  # laws[s − start] = S_out(s)
        for s in range(start, stop + 1):
            misses = misses.add(float(log_miss[s - 1]), float(log_hit[s - 1]), int(keep_miss[s]), margin)
            out = laws[s - start]
            shortfall[s - 1] = float(np.logaddexp(misses.log_cut, out.log_cut))
            hi = min(misses.offset + misses.logpmf.shape[0] - 1, int(allowed[s]))
            if hi < misses.offset or out.logpmf.shape[0] == 0:
                continue
            k = np.arange(misses.offset, hi + 1)
            cdf = np.logaddexp.accumulate(out.logpmf)
            pos = out_max[s - k] - out.offset
            terms = misses.logpmf[: k.shape[0]] + np.where(pos >= 0, cdf[np.clip(pos, 0, cdf.shape[0] - 1)], -np.inf)
            lower[s - 1] = logsumexp(terms)
        start = stop + 1
    return lower, shortfall


def _exact_inputs(m: int, d: int, precision: float, recall: float) -> tuple[int, int, Fraction, Fraction]:
    p = _check_fraction(precision, "precision")
    r = _check_fraction(recall, "recall")
    m, d = _check_md(m, d)
    if d > EXACT_MAX_D:
        raise UsageError(f"`d` must be at most {EXACT_MAX_D} for the exact best guess, got {d}")
    return m, d, _as_decimal_fraction(p), _as_decimal_fraction(r)


def log_success_by_size(m: int, d: int, precision: float, recall: float, *, margin: float = math.inf) -> np.ndarray:
    """log sup_{|v| = s} P(precision ≥ p and recall ≥ r) for s = 1..d (entry s − 1), in log space.

    **The best guess of size s is {1, …, s}** (the s most likely words). Proof (swap/coupling): let
    v contain i and not j, with p_j ≥ p_i, and v' = v − {i} + {j}. Condition on all X_l, l ≠ i, j;
    let h = |v ∩ X| − X_i and n = |X| − X_i − X_j. If X_i = X_j the two guesses have the same hits
    and |X|. Outcome (X_i, X_j) = (1, 0) gives v hits h + 1 and v' hits h; outcome (0, 1) gives v hits
    h and v' hits h + 1; both have |X| = n + 1. Success of a guess of fixed size is g(hits, |X|),
    non-decreasing in hits (precision and recall both grow), so
    P(v' succeeds) − P(v succeeds) = E[(p_j(1 − p_i) − p_i(1 − p_j))·(g(h + 1, n + 1) − g(h, n + 1))]
    ≥ 0, because p_j(1 − p_i) − p_i(1 − p_j) = p_j − p_i ≥ 0. Swapping until v is a prefix never
    lowers the success probability (ties p_i = p_j leave it unchanged), so the prefix attains the sup.

    For v = {1..s}: with S_in = Σ_{j≤s} X_j and S_out = Σ_{j>s} X_j (independent Poisson-binomials),
    success ⟺ S_in ≥ p·s and (1 − r)·S_in ≥ r·S_out, compared exactly in rationals (p and r read as
    their repr decimals, see the module docstring). Computed as
    Σ_k P(misses = k)·P(S_out ≤ ⌊(s − k)(1 − r)/r⌋) over k ≤ s − ⌈ps⌉, misses = s − S_in.

    Numerics: both laws are built by log-pmf dynamic programming with ``np.logaddexp`` (one
    vectorised step per word), so probabilities far below 1e−300 stay finite. Adding a Bernoulli
    makes entry n depend only on entries n and n − 1, so each law is kept only up to the largest
    index any later size can use (misses ≤ max_{s'≥s}(s' − ⌈ps'⌉), S_out ≤ ⌊s(1 − r)/r⌋): a lossless
    cut. The suffix laws are rebuilt from checkpoints every ⌈√d⌉ words (memory O(d^{3/2})).

    ``margin``: with a finite margin, entries more than ``margin`` (in log) below their law's
    maximum are also cut, which keeps both laws a few hundred entries wide (O(d·width) time instead
    of O(d²)); the mass cut is tracked exactly, and each returned entry is then log(lower + cut), an
    upper bound within the cut mass (≤ 2d(d + 1)·e^{−margin} absolute) of the true value. The default
    ∞ cuts nothing: every entry is exact (up to rounding; −∞ where success is impossible).
    """
    m, d, pf, rf = _exact_inputs(m, d, precision, recall)
    lower, shortfall = _success_logs(m, d, pf, rf, margin)
    return np.minimum(np.logaddexp(lower, shortfall), 0.0)


def log_best_guess(m: int, d: int, precision: float, recall: float, *, margin: float = 800.0) -> tuple[float, int]:
    """(log sup_v P(precision ≥ p and recall ≥ r), the best size s) under the Zipfian prior (Bhowmick et al. 2018).

    Sec. 2.3.2, prior (10): the supremum over all 2^d − 1 guesses is the maximum over s of the
    success probability of {1..s} (proof in :func:`log_success_by_size`); the smallest s within a
    relative 1e−12 of the maximum is returned (words of equal probability make exact ties). Always finite (the guess of all d words succeeds with positive probability).

    Fast and exact: the laws are first cut at ``margin`` = 800 below their maxima (mass below e^{−800}
    relative, at most 2d(d + 1)·e^{−800} < 1e−330 in all at d ≤ 20000); the cut mass is tracked, and
    if it could exceed 1e−15 of the result (results near or below e^{−760}) the computation is redone
    with a margin large enough (−log result + 40 + log(2d(d + 1))), or with no cut at all. The value
    returned is log(lower bound + cut mass): an upper bound, within a relative 1e−15 of the truth.
    d ≤ :data:`EXACT_MAX_D`, else UsageError.
    """
    m, d, pf, rf = _exact_inputs(m, d, precision, recall)
    if not margin > 0.0:
        raise UsageError(f"margin must be > 0, got {margin!r}")
    log_count = math.log(2.0 * d * (d + 1))
    while True:
        lower, shortfall = _success_logs(m, d, pf, rf, margin)
        best = float(np.max(lower))
        cut = float(np.max(shortfall))
        if cut <= best + math.log(1e-15) or margin == math.inf:
            # the smallest s within a relative 1e-12 of the best: exact ties (equal word probabilities)
            # are broken towards fewer words rather than by rounding noise
            s = int(np.flatnonzero(lower >= best - 1e-12)[0])
            return min(0.0, float(np.logaddexp(best, cut))), s + 1
        margin = max(2.0 * margin, -best + 40.0 + log_count) if math.isfinite(best) else 2.0 * margin
        if margin > 1e5:
            margin = math.inf


# ---------------------------------------------------------------------------------------------
# The bound for a release
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SparseRisk:
    """Lemma 2.2 × the Zipfian prior's best chance, by Lemma 2.3 and exactly (Bhowmick et al. 2018, Prop. 2).

    ``log_prior_lemma``: log of the Lemma 2.3 bound (proof constants) at the best γ (``gamma``);
    ``log_prior_exact``: log sup_v P(success) under the prior (None when d > EXACT_MAX_D, with
    ``exact_reason``); ``best_size``: the size s of the best guess {1..s}. The bounds after an ε-LDP
    release are e^ε times these, clipped at 1.
    """

    epsilon: float
    m: int
    d: int
    precision: float
    recall: float
    log_prior_lemma: float
    gamma: float
    log_prior_exact: float | None
    best_size: int | None
    exact_reason: str | None

    @property
    def log_bound_lemma(self) -> float:
        """min(0, ε + log_prior_lemma): Lemma 2.2 with Lemma 2.3."""
        return min(0.0, self.epsilon + self.log_prior_lemma)

    @property
    def log_bound_exact(self) -> float | None:
        """min(0, ε + log_prior_exact): Lemma 2.2 with the exact best guess; None without it."""
        if self.log_prior_exact is None:
            return None
        return min(0.0, self.epsilon + self.log_prior_exact)

    @property
    def log_bound(self) -> float:
        """The tighter available bound (the exact one when computed: it is never above Lemma 2.3's)."""
        exact = self.log_bound_exact
        return self.log_bound_lemma if exact is None else min(exact, self.log_bound_lemma)

    @property
    def guarantee_lemma(self) -> bool:
        """True when ε + log_prior_lemma < 0 (Lemma 2.3's bound is below 1)."""
        return self.epsilon + self.log_prior_lemma < 0.0

    @property
    def guarantee_exact(self) -> bool | None:
        """True when ε + log_prior_exact < 0; None without the exact value."""
        if self.log_prior_exact is None:
            return None
        return self.epsilon + self.log_prior_exact < 0.0

    @property
    def guarantee(self) -> bool:
        """True when the tighter available bound is below 1."""
        return self.log_bound < 0.0

    def verdict(self, threshold: float = DEFAULT_THRESHOLD) -> str:
        """The tighter bound's verdict at ``threshold``: protected, at risk or no guarantee (:func:`~ldpcli.risk._diffuse.verdict`)."""
        return verdict(self.log_bound, threshold)

    def to_dict(self, threshold: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
        """JSON-ready fields (no NaN or ±∞; a missing exact value is null with ``exact_reason``), with
        the ``verdict`` of the tighter bound at ``threshold``."""
        return {
            "epsilon": self.epsilon,
            "m": self.m,
            "d": self.d,
            "precision": self.precision,
            "recall": self.recall,
            "gamma": self.gamma,
            "log_prior_lemma": finite_or_none(self.log_prior_lemma),
            "log_bound_lemma": finite_or_none(self.log_bound_lemma),
            "guarantee_lemma": self.guarantee_lemma,
            "log_prior_exact": finite_or_none(self.log_prior_exact),
            "log_bound_exact": finite_or_none(self.log_bound_exact),
            "guarantee_exact": self.guarantee_exact,
            "best_size": self.best_size,
            "exact_reason": self.exact_reason,
            "log_bound": finite_or_none(self.log_bound),
            "probability_bound": math.exp(self.log_bound),
            "guarantee": self.guarantee,
            "threshold": threshold,
            "verdict": self.verdict(threshold),
        }


def sparse_risk(epsilon: float, *, m: int, d: int, precision: float, recall: float) -> SparseRisk:
    """Reconstruction risk of a sparse histogram after an ε-LDP release (Bhowmick et al. 2018, Sec. 2.3.2).

    ε ≥ 0 finite, m ≥ 1 and d > m integers, precision and recall in (0, 1]; UsageError otherwise
    (naming the parameter: ``eps``, ``m``, ``d``, ``precision`` or ``recall``). The exact route is skipped above
    :data:`EXACT_MAX_D` (``exact_reason`` says so).
    """
    epsilon = as_epsilon(epsilon)
    m, d = _check_md(m, d)
    precision = _check_fraction(precision, "precision")
    recall = _check_fraction(recall, "recall")
    log_lemma, gamma = lemma23_bound(m, d, precision, recall)
    log_exact: float | None = None
    best: int | None = None
    reason: str | None = None
    if d > EXACT_MAX_D:
        reason = f"the exact best guess is computed for d <= {EXACT_MAX_D} (O(d²) work); Lemma 2.3 still applies"
    else:
        log_exact, best = log_best_guess(m, d, precision, recall)
    return SparseRisk(
        epsilon=epsilon,
        m=m,
        d=d,
        precision=precision,
        recall=recall,
        log_prior_lemma=log_lemma,
        gamma=gamma,
        log_prior_exact=log_exact,
        best_size=best,
        exact_reason=reason,
    )
