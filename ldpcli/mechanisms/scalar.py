"""ScalarDP and ScalarRelDP: unbiased ε-LDP release of one bounded magnitude r ∈ [0, r_max].

Both are the randomized-response schemes of Bhowmick et al. (2018), Sec. 4.3 and App. B, on a
public grid 0 = v_0 < v_1 < … < v_k (r_max is the public bound ``norm_bound``):

1. round r without bias to a neighbouring grid point: for v_i ≤ r ≤ v_{i+1}, J = i + 1 with
   probability (r − v_i)/(v_{i+1} − v_i) and J = i otherwise, so E[v_J] = r;
2. (k + 1)-ary randomized response: Ĵ = J with probability e^ε/(e^ε + k), otherwise Ĵ is uniform
   on the k other indices;
3. debias: with A = (k + 1)/(e^ε − 1), B = 1 + A = (e^ε + k)/(e^ε − 1) and v̄ the mean of the k + 1
   grid values, Z = B·v_Ĵ − A·v̄. Then E[Z | J] = v_J and E[Z | r] = r.

ScalarDP (Alg. 3) uses the arithmetic grid v_j = j·r_max/k, where step 3 is the paper's
Z = a(Ĵ − b), a = (e^ε + k)/(e^ε − 1)·r_max/k, b = k(k + 1)/(2(e^ε + k)). ScalarRelDP (Alg. 4,
App. B.2) uses the geometric grid v_0 = 0, v_j = α·ν^j, where step 3 is the paper's
Z = a(J̃ − b), J̃ = ν^Ĵ·1{Ĵ ≥ 1}, a = α(e^ε + k)/(e^ε − 1), b = Σ_{j=1}^k ν^j/(e^ε + k).
Z can be negative (docs/errata.md §10: Ĵ = 0 gives −a·b); that is what makes it unbiased, so it is kept.

Exact privacy. Given r, P(Ĵ = j | r) = (1 + (e^ε − 1)·P(J = j | r))/(e^ε + k), between 1/(e^ε + k)
and e^ε/(e^ε + k); both bounds are attained for some j as soon as two grid points lie in [0, r_max]
(r = v_j forces J = j). So ε_exact = ε exactly (Lemma 4.3); ScalarRelDP reports the smaller exact
value when its first nonzero grid point lies beyond r_max.

Exact error (the equalities behind Lemma 4.3 and Lemma B.1, kept exact). With σ² the population
variance of the k + 1 grid values, Var(Z | J = i) = A(v_i − v̄)² + A·B·σ² (randomized response is
uniform off the diagonal), and Var(v_J) = (v_{i+1} − r)(r − v_i) for r in cell i, hence

    E(Z − r)² = A·(r − v̄)² + B·(v_{i+1} − r)(r − v_i) + A·B·σ²,

a sum of non-negative terms, concave in r on each cell (the r² coefficient is A − B = −1). It
never involves e^ε itself: A = (k + 1)/expm1(ε) underflows harmlessly to 0 at ε in the thousands,
where the only error left is the rounding (v_{i+1} − r)(r − v_i).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math import sphere as sm
from ldpcli.math.domains import INTERVAL
from ldpcli.mechanisms.base import LawTest, Mechanism, OptionSpec, declare, register

#: Largest ScalarDP grid size. The default k = ⌈e^{ε/3}⌉ reaches it at ε = 3·52·log 2 ≈ 108.1 and
#: stays there: the grid step r_max·2⁻⁵² is one or two float64 units in the last place of r_max,
#: so a finer grid is not representable, and its rounding error (standard deviation ≤ r_max·2⁻⁵³)
#: is already below double precision. Grid indices up to 2⁵² are exact in float64 and int64.
K_MAX = 2**52
#: Largest ScalarRelDP grid size: its worst-case error is a maximum over the k cells, computed
#: exactly cell by cell (vectorized), so k is kept to about a million.
K_REL_MAX = 2**20
#: Smallest default relative accuracy α/r_max of ScalarRelDP (about 1.5e−8 = √(2⁻⁵²)): the
#: paper's choice α/r_max = e^{−ε/4} is floored here for ε ≳ 72 (before α is lowered by < ν
#: to put the top grid point on r_max).
ALPHA0_MIN = 2.0**-26
#: A geometric grid whose top point ν^k·α misses r_max by less than this relative amount covers
#: it: the top point is then moved onto r_max (floating-point rounding of α·ν^k).
_COVER_RTOL = 1e-12


# ---------------------------------------------------------------------------------------------
# Shared pieces: randomized response on a grid and its exact error
# ---------------------------------------------------------------------------------------------


def default_k(epsilon: float) -> int:
    """Bhowmick et al. Lemma 4.4: k = ⌈e^{ε/3}⌉ (docs/errata.md §7: not ⌈e^{2ε/3}⌉), capped at :data:`K_MAX`."""
    if epsilon / 3.0 >= math.log(K_MAX):
        return K_MAX
    return min(max(1, math.ceil(math.exp(epsilon / 3.0))), K_MAX)


def rr_coefficients(epsilon: float, k: int) -> tuple[float, float]:
    """(A, B) = ((k + 1)/(e^ε − 1), (e^ε + k)/(e^ε − 1)), without forming e^ε."""
    a = (k + 1) * math.exp(-sm.log_expm1(epsilon))
    return a, 1.0 + a


def _check_one_column(cls: type[Mechanism], d: int) -> None:
    if d != 1:
        raise UsageError(
            f"mechanism {cls.name!r} privatizes one column (a value in [0, r_max]), so d must be 1, got d = {d}; "
            "pass one `columns` value, or use 'separated' for vectors"
        )


def randomized_response(j: np.ndarray, k: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Ĵ = j with probability e^ε/(e^ε + k), else uniform on the other k indices of {0, …, k}.

    The probability of the truth, expit(ε − log k), is drawn by ``bernoulli_logit``: exact even when
    its complement is below 2⁻⁵³ (ε in the hundreds), where ``rng.random() < p`` would never lie.
    """
    n = j.shape[0]
    truth = sm.bernoulli_logit(epsilon - math.log(k), n, rng)
    other = rng.integers(0, k, size=n, dtype=np.int64)
    other += other >= j
    return np.where(truth, j, other)


def grid_error(
    r: np.ndarray, lo: np.ndarray, hi: np.ndarray, mean: float, var: float, a: float, b: float
) -> np.ndarray:
    """E(Z − r)² = A(r − v̄)² + B(hi − r)(r − lo) + A·B·σ² for r in the cell [lo, hi]."""
    rho = np.maximum((hi - r) * (r - lo), 0.0)
    return a * (r - mean) ** 2 + b * rho + a * b * var


def _cell_maxima(
    lo: np.ndarray, hi: np.ndarray, upper: float, mean: float, var: float, a: float, b: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per cell [lo, min(hi, upper)]: the maximiser and maximum of the (concave) exact error.

    With r = lo + s: d/ds = 2A(lo + s − v̄) + B(hi − lo − 2s) = 0 at s = A(lo − v̄) + B(hi − lo)/2
    (B − A = 1), clipped to the cell.
    """
    top = np.minimum(hi, upper)
    s = a * (lo - mean) + 0.5 * b * (hi - lo)
    r = np.clip(lo + s, lo, top)
    return r, grid_error(r, lo, hi, mean, var, a, b)


# ---------------------------------------------------------------------------------------------
# ScalarDP (Alg. 3)
# ---------------------------------------------------------------------------------------------


class _GridResponse:
    """What ScalarDP and ScalarRelDP share: (k + 1)-ary randomized response on a grid of k + 1 points."""

    epsilon: float
    k: int
    norm_bound: float

    @property
    def coefficients(self) -> tuple[float, float]:
        """(A, B) = ((k + 1)/(e^ε − 1), (e^ε + k)/(e^ε − 1)): Z = B·v_Ĵ − A·v̄ (v̄ the grid mean)."""
        return rr_coefficients(self.epsilon, self.k)

    @property
    def truth_logit(self) -> float:
        """logit of P(Ĵ = J) = e^ε/(e^ε + k): ε − log k."""
        return self.epsilon - math.log(self.k)

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """Every output on the k + 1 grid values and their counts against the exact pmf ``pmf(r)``.

        Each output is matched to the nearest value of ``support()`` (off the support: more than
        1e−6 of the local grid gap away; a deterministic check), then the counts per grid value
        are compared with ``pmf(r)`` (χ² after pooling adjacent values to an expected count ≥ 5,
        or exact binomial when they pool into two). For k above 2^20 (ScalarDP at ε ≳ 41.6), where
        the pmf is not enumerated, an exact binomial test of the share of outputs equal to the
        value of one of the rounding's two grid points, (2λ + 1)/(1 + (k + 1)λ), λ = 1/(e^ε − 1).
        """
        from ldpcli.math import lawtests

        n = z.shape[0]
        r = float(np.clip(x[0], 0.0, self.norm_bound))
        values = z[:, 0]
        if self.k > K_REL_MAX:
            return [self._truthful_share_test(r, values)]
        support = np.asarray(self.support())  # type: ignore[attr-defined]
        idx = np.clip(np.searchsorted(support, values), 1, support.size - 1)
        left, right = support[idx - 1], support[idx]
        idx = np.where(values - left <= right - values, idx - 1, idx)
        gap = np.min(np.abs(np.diff(support)))
        off = int(np.count_nonzero(np.abs(values - support[idx]) > 1e-6 * gap))
        tests = [lawtests.deterministic(f"Z on the grid ({self.k + 1} values)", off, n, "off the grid")]
        counts = np.bincount(idx, minlength=support.size)
        tests.append(lawtests.counts_test(f"grid counts ~ pmf(r = {r:.6g})", counts,
                                           self.pmf(r)[0]))  # type: ignore[attr-defined]
        return tests

    def _truthful_share_test(self, r: float, values: np.ndarray) -> LawTest:
        """Large k (ScalarDP only): the share of outputs at the rounding's grid points, exact binomial."""
        from ldpcli.math import lawtests

        g = self.norm_bound / self.k
        a, b = self.coefficients
        t = r / g
        lo = min(math.floor(t), self.k - 1)
        js = {lo, lo + 1} if t > lo else {lo}
        # the outputs' own expression (``privatize_values``), so that a match is bit for bit
        hits = np.zeros(values.shape[0], dtype=bool)
        for j in js:
            hits |= values == (b * g) * float(j) - a * 0.5 * self.norm_bound
        lam = math.exp(-sm.log_expm1(self.epsilon))
        prob = (len(js) * lam + 1.0) / (1.0 + (self.k + 1) * lam)
        return lawtests.binomial_test(f"share at the rounding's grid points (k = {self.k})",
                                       int(hits.sum()), values.shape[0], prob)


@register
@dataclass(frozen=True)
class ScalarDP(_GridResponse, Mechanism):
    """ScalarDP (Bhowmick et al. 2018, Alg. 3): one value r ∈ [0, r_max] on the grid {j·r_max/k}.

    k defaults to ⌈e^{ε/3}⌉ (Lemma 4.4; docs/errata.md §7), capped at :data:`K_MAX` = 2⁵² (from
    ε ≈ 108.1 on; see there), and may be given as the option ``k``. With g = r_max/k,
    A = (k + 1)/(e^ε − 1), B = 1 + A and t = r/g, f = t − ⌊t⌋ (module docstring):

        E(Z − r)² = g²·[A(t − k/2)² + B·f(1 − f) + A·B·k(k + 2)/12]      (grid variance g²k(k+2)/12)

    ``expected_error`` is its value at r = r_max (the same as at r = 0):
    r_max²·A/4 + g²·A·B·k(k + 2)/12. ``expected_error_max`` is the sup over [0, r_max]: the error
    is symmetric about r_max/2 and its convex part A(t − k/2)² is largest at the ends, so the sup is
    in the first (and last) cell, at f* = (1 − A(k − 1))/2 = (e^ε − k²)/(2(e^ε − 1)) when positive:
    the value at r_max plus g²·max(f*, 0)². The paper's Lemma 4.3 bound drops the negative terms.
    """

    k: int

    name = "scalar"
    title = "ScalarDP (Bhowmick et al. 2018, Alg. 3): rounding + (k+1)-ary randomized response"
    calibrations = ("bhowmick",)
    domain = INTERVAL
    vector = False
    options = declare(
        OptionSpec("k", int, "grid size (default ⌈e^{ε/3}⌉, Bhowmick et al. Lemma 4.4; at most 2^52)", 4,
                   low=1, high=K_MAX),
    )
    example_d = 1

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> ScalarDP:
        """ScalarDP at level ε for one column bounded by r_max = ``norm_bound``; option ``k``."""
        _check_one_column(cls, d)
        k = options["k"]
        k = default_k(epsilon) if k is None else k
        return cls(1, epsilon, norm_bound, calibration, k)

    # --- parameters ---------------------------------------------------------------------------

    @property
    def grid_step(self) -> float:
        """g = r_max/k."""
        return self.norm_bound / self.k

    @property
    def epsilon_exact(self) -> float:
        """ε: the pmf ratio is e^ε between r = j·g (J = j surely) and any other grid point."""
        return self.epsilon

    @property
    def expected_error(self) -> float:
        """E(Z − r)² at r = r_max (exact): r_max²·A/4 + g²·A·B·k(k + 2)/12, g = r_max/k.

        Evaluated as r_max²·[A/4 + A·B·(k + 2)/(12k)] so that no intermediate underflows and the
        error scales exactly as r_max².
        """
        a, b = self.coefficients
        k = float(self.k)
        return self.norm_bound**2 * (a / 4.0 + a * b * (k + 2.0) / (12.0 * k))

    @property
    def expected_error_max(self) -> float:
        """sup over r ∈ [0, r_max] of E(Z − r)² (exact): the value at r_max plus g²·max(f*, 0)²."""
        f_star = self.worst_rounding_fraction
        return self.expected_error + self.norm_bound**2 * (f_star / self.k) ** 2

    @property
    def worst_rounding_fraction(self) -> float:
        """f* = max(0, (1 − A(k − 1))/2): the worst input is r = f*·g (and r_max − f*·g)."""
        a, _ = self.coefficients
        k = float(self.k)
        return max(0.0, 0.5 * (1.0 - a * (k - 1.0)))

    def error_at(self, r: np.ndarray | float) -> np.ndarray:
        """Exact E(Z − r)² for values r in [0, r_max] (vectorized)."""
        r = np.clip(np.asarray(r, dtype=float), 0.0, self.norm_bound)
        a, b = self.coefficients
        g, k = self.grid_step, float(self.k)
        t = r / g
        f = t - np.minimum(np.floor(t), k - 1.0)
        return g * g * (a * (t - 0.5 * k) ** 2 + b * np.maximum(f * (1.0 - f), 0.0) + a * b * k * (k + 2.0) / 12.0)

    def parameters(self) -> dict[str, Any]:
        """k, the grid step, the probability of the truth (and its logit), and the paper's a, b."""
        a, b = self.coefficients
        return {
            "k": self.k,
            "grid_step": self.grid_step,
            "p_truth": math.exp(sm.log_expit(self.truth_logit)),
            "p_truth_logit": self.truth_logit,
            "a": self.grid_step * b,
            "b": 0.5 * self.k * a / b,
        }

    def audit_epsilon(self) -> tuple[float, str]:
        """The largest log pmf ratio of Ĵ over all k + 1 grid inputs × k + 1 outputs (every grid point
        j·r_max/k lies in [0, r_max], where J = j surely), from k and the randomized response's
        ``truth_logit`` (``enumerated_rr_epsilon``: exact Fractions for small k)."""
        eps, route = enumerated_rr_epsilon(self.k, self.truth_logit, self.k + 1)
        return eps, route + "; inputs: every grid point"

    # --- enumeration (tests, small k) ---------------------------------------------------------

    def support(self) -> np.ndarray:
        """The k + 1 possible outputs Z = B·j·g − A·r_max/2, j = 0, …, k (small k only)."""
        _check_enumerable(self.k)
        a, b = self.coefficients
        v = np.arange(self.k + 1, dtype=float) * self.grid_step
        return b * v - a * 0.5 * self.norm_bound

    def pmf(self, r: np.ndarray | float) -> np.ndarray:
        """P(Ĵ = j | r) for each r (rows) and j = 0, …, k (columns); small k only."""
        _check_enumerable(self.k)
        r = np.clip(np.atleast_1d(np.asarray(r, dtype=float)), 0.0, self.norm_bound)
        k = self.k
        t = r / self.grid_step
        lo = np.minimum(np.floor(t), k - 1).astype(np.int64)
        up = t - lo
        rounding = np.zeros((r.size, k + 1))
        rows = np.arange(r.size)
        rounding[rows, lo] = 1.0 - up
        rounding[rows, lo + 1] += up
        return _rr_pmf(rounding, self.epsilon, k)

    # --- sampling -----------------------------------------------------------------------------

    def privatize_values(self, r: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Z for each value of the 1-D array r (clamped to [0, r_max]); E[Z] = r."""
        r = np.clip(r, 0.0, self.norm_bound)
        k = self.k
        t = r / self.grid_step
        lo = np.minimum(np.floor(t), k - 1)
        j = lo.astype(np.int64) + (rng.random(r.shape[0]) < t - lo)
        j_hat = randomized_response(j, k, self.epsilon, rng)
        a, b = self.coefficients
        return (b * self.grid_step) * j_hat - a * 0.5 * self.norm_bound

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """ScalarDP on the one column of ``x`` ((n, 1), values in [0, r_max]); returns (n, 1)."""
        return self.privatize_values(x[:, 0], rng)[:, None]


def _check_enumerable(k: int) -> None:
    if k > K_REL_MAX:
        raise ValueError(f"the pmf of a grid of k = {k} points is not enumerated (k <= {K_REL_MAX} only)")


def _rr_pmf(rounding: np.ndarray, epsilon: float, k: int) -> np.ndarray:
    """P(Ĵ = j) = (P(J = j)·(e^ε − 1) + 1)/(e^ε + k), computed as (1 + P(J = j)/λ)·… stably."""
    # (1 + (e^ε − 1)π)/(e^ε + k) = (λ + π)/(λ(e^ε + k)) with λ = 1/(e^ε − 1) and λ(e^ε + k) = B.
    lam = math.exp(-sm.log_expm1(epsilon))
    return (lam + rounding) / (1.0 + (k + 1) * lam)


# ---------------------------------------------------------------------------------------------
# Audits: the output pmf enumerated, a second route to ε independent of the calibration
# ---------------------------------------------------------------------------------------------

#: Exact rational enumeration up to this many outputs (k + 1), dense log-space enumeration up to
#: this many pmf entries (inputs × outputs); beyond, the columns are enumerated by class.
_EXACT_OUTPUTS = 64
_DENSE_ENTRIES = 1_000_000


def _log_truth_split(truth_logit: float, k: int) -> tuple[float, float]:
    """(log P(Ĵ = J), log P(Ĵ = one given other index)) for P(Ĵ = J) = 1/(1 + e^{−ℓ}), in log space."""
    if truth_logit >= 0.0:
        soft = math.log1p(math.exp(-truth_logit))
        log_truth, log_lie = -soft, -truth_logit - soft
    else:
        soft = math.log1p(math.exp(truth_logit))
        log_truth, log_lie = truth_logit - soft, -soft
    return log_truth, log_lie - math.log(k)


def enumerated_rr_epsilon(
    k: int, truth_logit: float, n_grid: int, extra: tuple[int, float] | None = None,
    exact_extra: tuple[int, Fraction] | None = None,
) -> tuple[float, str]:
    """sup over inputs r, r' and outputs j of log P(Ĵ = j | r)/P(Ĵ = j | r'), by enumeration.

    The channel is the one the sampler draws from: J from the rounding of r, then Ĵ = J with
    probability expit(``truth_logit``) and each of the k other indices with the rest divided by
    k. The inputs are the grid points v_0, …, v_{n−1} that lie in [0, r_max] (J = i surely) and,
    when r_max itself is not a grid point, r_max rounded between v_i and v_{i+1} with
    P(J = i + 1) = f (``extra`` = (i, f); ``exact_extra`` the same f as an exact Fraction, by default
    the float f itself). These are all the extreme points: P(Ĵ = j | r) is affine in the rounding
    law, which is piecewise linear in r with knots at the grid points, so a ratio of two of them is
    largest at knots or at r_max.

    Small k (k + 1 ≤ 64): every pmf entry as an exact Fraction of e^ℓ (rows checked to sum to 1).
    Moderate k: the dense (inputs × outputs) table of log-probabilities. Huge k (up to 2⁵²): the
    columns fall into a handful of classes (touched by the rounding of r_max or not, in the grid
    part or not), and one representative of each class is enumerated over every input class.
    """
    outputs = k + 1
    log_truth, log_other = _log_truth_split(truth_logit, k)
    if extra is not None and exact_extra is None:
        exact_extra = (extra[0], Fraction(extra[1]))  # the float f, exactly
    if outputs <= _EXACT_OUTPUTS and abs(truth_logit) <= 700.0:
        e = Fraction(math.exp(truth_logit))
        truth, other = e / (1 + e), 1 / (k * (1 + e))
        rows: list[list[Fraction]] = []
        for i in range(n_grid):
            rows.append([truth if j == i else other for j in range(outputs)])
        if exact_extra is not None:
            i, f = exact_extra
            pi = [Fraction(0)] * outputs
            pi[i], pi[i + 1] = 1 - f, f
            rows.append([p * truth + (1 - p) * other for p in pi])
        if any(sum(row) != 1 for row in rows):
            raise ArithmeticError("the enumerated pmf does not sum to 1")  # pragma: no cover
        ratio = max(max(col) / min(col) for col in zip(*rows))
        return (
            math.log(ratio.numerator) - math.log(ratio.denominator),
            f"exact rational enumeration of the {len(rows)} × {outputs} output pmf (Fractions of e^ℓ)",
        )
    inputs = n_grid + (extra is not None)
    if inputs * outputs <= _DENSE_ENTRIES:
        pi = np.zeros((inputs, outputs))
        pi[np.arange(n_grid), np.arange(n_grid)] = 1.0
        if extra is not None:
            i, f = extra
            pi[-1, i], pi[-1, i + 1] = 1.0 - f, f
        with np.errstate(divide="ignore"):
            table = np.logaddexp(np.log(pi) + log_truth, np.log1p(-pi) + log_other)
        worst = float(np.max(table.max(axis=0) - table.min(axis=0)))
        return worst, f"log-space enumeration of the {inputs} × {outputs} output pmf"
    # Column classes: j < n or j ≥ n, and j ∈ {i, i + 1} (touched by r_max's rounding) or not.
    reps = {0, 1, 2, n_grid - 1, n_grid, n_grid + 1, n_grid + 2, k - 1, k}
    if extra is not None:
        reps |= {extra[0], extra[0] + 1}
    worst = 0.0
    for j in sorted(r for r in reps if 0 <= r <= k):
        values = []  # the rounding probabilities P(J = j | r) over the input classes
        if j < n_grid:
            values.append(1.0)  # the input v_j
        if n_grid - (j < n_grid) >= 1:
            values.append(0.0)  # any other grid input
        if extra is not None:
            i, f = extra
            values.append(1.0 - f if j == i else (f if j == i + 1 else 0.0))
        logs = [float(np.logaddexp(math.log(p) + log_truth if p > 0 else -math.inf,
                                   math.log1p(-p) + log_other if p < 1 else -math.inf)) for p in values]
        worst = max(worst, max(logs) - min(logs))
    return worst, f"symbolic enumeration of the output pmf by column class (k = {k}; a grid row takes two values)"


# ---------------------------------------------------------------------------------------------
# ScalarRelDP (Alg. 4, App. B.2)
# ---------------------------------------------------------------------------------------------


def _geometric(alpha: float, nu: float, j: np.ndarray | int) -> np.ndarray:
    """α·ν^j, the one formula used for both the grid and the coverage test."""
    return alpha * np.power(nu, np.asarray(j, dtype=float))


def _default_log_nu(epsilon: float, log_alpha0: float) -> float:
    """log ν for the paper's choice Δ = α₀^{−2/3}·e^{−ε/3}, ν = 1 + Δ (App. B.2)."""
    return math.log1p(math.exp(-(2.0 / 3.0) * log_alpha0 - epsilon / 3.0))


def _cover_k(alpha: float, nu: float, r_max: float) -> int:
    """The smallest k ≥ 1 with α·ν^k ≥ r_max (up to :data:`_COVER_RTOL`), ≤ K_REL_MAX."""
    target = r_max * (1.0 - _COVER_RTOL)
    estimate = math.log(target / alpha) / math.log(nu)
    if estimate > K_REL_MAX + 1:
        raise UsageError(
            f"the geometric grid α = {alpha!r}, ν = {nu!r} needs about {estimate:.3g} points to reach "
            f"r_max = {r_max!r}, more than {K_REL_MAX}; pass a larger `alpha` or `nu`"
        )
    k = max(1, math.ceil(estimate))
    while k > 1 and float(_geometric(alpha, nu, k - 1)) >= target:
        k -= 1
    while float(_geometric(alpha, nu, k)) < target:
        k += 1
    if k > K_REL_MAX:
        raise UsageError(f"the geometric grid needs k = {k} > {K_REL_MAX} points; pass a larger `alpha` or `nu`")
    return k


@register
@dataclass(frozen=True)
class ScalarRelDP(_GridResponse, Mechanism):
    """ScalarRelDP (Bhowmick et al. 2018, Alg. 4, App. B.2): relative error on a geometric grid.

    Grid (27): v_0 = 0 and v_j = α·ν^j, j = 1, …, k, so the cells are E_0 = [0, να] and
    E_i = [ν^i α, ν^{i+1} α]; k is the smallest integer with ν^k·α ≥ r_max (App. B.2) unless given
    (then the grid must reach r_max). Rounding, randomized response and debiasing as in the module
    docstring (Alg. 4's Z = a(J̃ − b) exactly). Ambiguities resolved in the unbiased reading: r is
    rounded within the cell that contains it (at a shared endpoint both cells give J = i surely);
    the top point ν^k·α may exceed r_max (Alg. 4 as printed; the grid is not truncated, which
    would bias the top cell), except that a top point short of r_max by < 1e−12 relative
    (rounding of α·ν^k) is moved onto r_max.

    Defaults (App. B.2's worked choice): α₀ = α/r_max = e^{−ε/4} (floored at 2⁻²⁶), ν = 1 + Δ with
    Δ = α₀^{−2/3}·e^{−ε/3}, coarsened if needed so that k ≤ :data:`K_REL_MAX` = 2²⁰; then α is
    lowered (by less than a factor ν) to r_max·ν^{−k}, so that the top grid point is r_max itself
    and every cell shrinks by the same factor. Given two of (α, ν, k), the third is the smallest
    covering k, ν = (r_max/α)^{1/k} or α = r_max·ν^{−k}. Given one: α alone takes ν from the Δ rule
    with α₀ = α/r_max; ν alone takes the default α; k alone takes the default α₀ and
    ν = α₀^{−1/k}, α = r_max·ν^{−k}.

    Errors are absolute, like every mechanism's: ``expected_error`` = E(Z − r)² at r = r_max and
    ``expected_error_max`` = its sup over [0, r_max] (the exact concave maximum of each cell,
    maximised over the cells). The relative-error design shows in ``parameters()``'s
    ``relative_error_max`` = sup_r E(Z − r)²/max(r, α)², the quantity Lemma B.1 bounds.
    """

    alpha: float
    nu: float
    k: int

    name = "scalar-rel"
    title = "ScalarRelDP (Bhowmick et al. 2018, Alg. 4): geometric grid, relative error"
    calibrations = ("bhowmick",)
    domain = INTERVAL
    vector = False
    options = declare(
        OptionSpec("alpha", float, "accuracy α > 0: the grid is 0, αν, αν², …, αν^k (default r_max·e^{-ε/4}, App. B.2)",
                   0.05, low=0.0, low_open=True),
        OptionSpec("nu", float, "grid ratio ν > 1 (default 1 + (α/r_max)^{-2/3} e^{-ε/3}, App. B.2)", 1.5,
                   low=1.0, low_open=True),
        OptionSpec("k", int, f"number of grid cells (default the smallest with ν^k α ≥ r_max; at most {K_REL_MAX})",
                   8, low=1, high=K_REL_MAX),
    )
    example_d = 1

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> ScalarRelDP:
        """ScalarRelDP at level ε for one column bounded by r_max; options ``alpha``, ``nu``, ``k``."""
        _check_one_column(cls, d)
        r_max = norm_bound
        alpha, nu, k = options["alpha"], options["nu"], options["k"]
        log_alpha0_default = max(-epsilon / 4.0, math.log(ALPHA0_MIN))
        if alpha is None and nu is None:
            log_alpha0 = log_alpha0_default
            if k is None:
                log_nu = _default_log_nu(epsilon, log_alpha0)
                log_nu = max(log_nu, -log_alpha0 / (K_REL_MAX - 1))
                nu = math.exp(log_nu)
                k = _cover_k(r_max * math.exp(log_alpha0), nu, r_max)
            else:
                nu = math.exp(-log_alpha0 / k)
            alpha = r_max * float(np.power(nu, -float(k)))
        elif alpha is None:
            alpha = r_max * (math.exp(log_alpha0_default) if k is None else float(np.power(nu, -float(k))))
        elif nu is None:
            log_alpha0 = math.log(alpha / r_max)
            if k is None:
                log_nu = _default_log_nu(epsilon, log_alpha0)
                if log_alpha0 < 0.0:
                    log_nu = max(log_nu, -log_alpha0 / (K_REL_MAX - 1))
                nu = math.exp(log_nu)
            else:
                nu = math.exp(-log_alpha0 / k) if log_alpha0 < 0.0 else math.exp(_default_log_nu(epsilon, log_alpha0))
        if not nu > 1.0 or not math.isfinite(nu):
            raise UsageError(f"`nu`: the grid ratio must be a finite number > 1, got {nu!r}")
        if k is None:
            k = _cover_k(alpha, nu, r_max)
        elif float(_geometric(alpha, nu, k)) < r_max * (1.0 - _COVER_RTOL):
            raise UsageError(
                f"`k` {k}: the grid α·ν^k = {float(_geometric(alpha, nu, k))!r} does not reach r_max = {r_max!r}; "
                f"pass k >= {_cover_k(alpha, nu, r_max)} or leave it out"
            )
        mech = cls(1, epsilon, r_max, calibration, float(alpha), float(nu), int(k))
        if not np.all(np.diff(mech.grid) > 0.0):
            raise UsageError(
                f"`nu` {nu!r}: the grid points α·ν^j are not distinct in double precision; pass a larger ν"
            )
        return mech

    # --- the grid -----------------------------------------------------------------------------

    @cached_property
    def grid(self) -> np.ndarray:
        """v_0 = 0, v_j = α·ν^j (j = 1, …, k); a top point within rounding of r_max is r_max itself.

        (α·ν^k can round a few ulps to either side of r_max when α was chosen to hit it; a top
        point below r_max is always moved onto it, as the grid must cover [0, r_max].)
        """
        v = _geometric(self.alpha, self.nu, np.arange(self.k + 1))
        v[0] = 0.0
        if v[-1] < self.norm_bound or math.isclose(v[-1], self.norm_bound, rel_tol=1e-12):
            v[-1] = self.norm_bound
        v.setflags(write=False)
        return v

    @cached_property
    def _moments(self) -> tuple[float, float]:
        """Mean and population variance of the k + 1 grid values (two passes)."""
        v = self.grid
        mean = float(v.mean())
        return mean, float(np.mean((v - mean) ** 2))

    def _cells(self, r: np.ndarray) -> np.ndarray:
        """Index i of the cell [v_i, v_{i+1}] holding r (clamped to 0 … k − 1)."""
        return np.clip(np.searchsorted(self.grid, r, side="right") - 1, 0, self.k - 1)

    # --- privacy and error --------------------------------------------------------------------

    @property
    def epsilon_exact(self) -> float:
        """ε when v_1 = αν ≤ r_max (r = v_1 and r = 0 give J = 1 and J = 0 surely).

        Otherwise only J ∈ {0, 1} can occur and P(J = 1 | r) = r/v_1 ≤ ρ = r_max/v_1 < 1: the exact
        level is max(log(1 + (e^ε − 1)ρ), ε − log(1 + (e^ε − 1)(1 − ρ))).
        """
        v1 = self.grid[1]
        if v1 <= self.norm_bound:
            return self.epsilon
        rho = self.norm_bound / v1
        log_em1 = sm.log_expm1(self.epsilon)
        one = float(np.logaddexp(0.0, log_em1 + math.log(rho)))
        zero = self.epsilon - float(np.logaddexp(0.0, log_em1 + math.log1p(-rho)))
        return max(one, zero)

    def error_at(self, r: np.ndarray | float) -> np.ndarray:
        """Exact E(Z − r)² for values r in [0, r_max] (vectorized)."""
        r = np.clip(np.asarray(r, dtype=float), 0.0, self.norm_bound)
        i = self._cells(r)
        mean, var = self._moments
        a, b = self.coefficients
        return grid_error(r, self.grid[i], self.grid[i + 1], mean, var, a, b)

    @property
    def expected_error(self) -> float:
        """E(Z − r)² at r = r_max (exact)."""
        return float(self.error_at(self.norm_bound))

    @cached_property
    def expected_error_max(self) -> float:
        """sup over r ∈ [0, r_max] of E(Z − r)² (exact: the concave maximum of every cell)."""
        v = self.grid
        mean, var = self._moments
        a, b = self.coefficients
        lo, hi = v[:-1], v[1:]
        inside = lo <= self.norm_bound
        _, values = _cell_maxima(lo[inside], hi[inside], self.norm_bound, mean, var, a, b)
        return float(values.max())

    @cached_property
    def relative_error_max(self) -> float:
        """sup over r ∈ [0, r_max] of E(Z − r)²/max(r, α)² (Lemma B.1's left-hand side), exact.

        On r ≤ α (inside the first cell) the numerator is concave; on r ≥ α, with x = 1/r the ratio
        A(1 − v̄x)² + B(hi·x − 1)(1 − lo·x) + A·B·σ²·x² is a quadratic in x on each cell: its maximum
        is at an end or at its vertex.
        """
        v = self.grid
        mean, var = self._moments
        a, b = self.coefficients
        r_max, alpha = self.norm_bound, self.alpha
        best = 0.0
        # r ∈ [0, min(α, r_max)], within the first cell [0, v_1] (v_1 = αν > α).
        _, low = _cell_maxima(v[:1], v[1:2], min(alpha, r_max), mean, var, a, b)
        best = max(best, float(low[0]) / alpha**2)
        if alpha < r_max:
            lo, hi = v[:-1], v[1:]
            left = np.maximum(lo, alpha)
            right = np.minimum(hi, r_max)
            ok = left < right
            lo, hi, left, right = lo[ok], hi[ok], left[ok], right[ok]
            c2 = a * mean**2 - b * hi * lo + a * b * var
            c1 = -2.0 * a * mean + b * (hi + lo)
            x_lo, x_hi = 1.0 / right, 1.0 / left
            candidates = [x_lo, x_hi]
            with np.errstate(divide="ignore", invalid="ignore"):
                vertex = np.where(c2 < 0.0, -c1 / (2.0 * c2), x_lo)
            candidates.append(np.clip(vertex, x_lo, x_hi))
            for x in candidates:
                r = 1.0 / x
                best = max(best, float(np.max(grid_error(r, lo, hi, mean, var, a, b) / r**2)))
        return best

    def parameters(self) -> dict[str, Any]:
        """k, α/r_max, Δ = ν − 1, the probability of the truth, the paper's a and b, the relative error."""
        mean, _ = self._moments
        a, b = self.coefficients
        return {
            "k": self.k,
            "alpha0": self.alpha / self.norm_bound,
            "delta": self.nu - 1.0,
            "top_grid_value": float(self.grid[-1]),
            "p_truth": math.exp(sm.log_expit(self.truth_logit)),
            "p_truth_logit": self.truth_logit,
            "a": self.alpha * b,
            "b": mean * a / (self.alpha * b),
            "relative_error_max": self.relative_error_max,
        }

    def audit_epsilon(self) -> tuple[float, str]:
        """The largest log pmf ratio of Ĵ over the extreme inputs × all k + 1 outputs.

        Inputs: the grid points that lie in [0, r_max] (J surely their index) and r_max itself when
        it falls strictly inside a cell (the top point may exceed r_max, and v_1 = αν may too: then
        only 0 and r_max are extreme), rounded as the sampler rounds it. ``enumerated_rr_epsilon``
        enumerates the pmf from k and ``truth_logit`` (exact Fractions for small k).
        """
        v, r_max = self.grid, self.norm_bound
        n_grid = int(np.count_nonzero(v <= r_max))
        extra = exact_extra = None
        if n_grid <= self.k and v[n_grid - 1] < r_max:  # r_max strictly inside cell n − 1
            i = n_grid - 1
            extra = (i, (r_max - float(v[i])) / (float(v[i + 1]) - float(v[i])))
            lo, hi = Fraction(float(v[i])), Fraction(float(v[i + 1]))
            exact_extra = (i, (Fraction(r_max) - lo) / (hi - lo))
        eps, route = enumerated_rr_epsilon(self.k, self.truth_logit, n_grid, extra, exact_extra)
        inputs = f"{n_grid} grid point(s)" + (" + r_max inside a cell" if extra is not None else "")
        return eps, f"{route}; inputs: {inputs}"

    # --- enumeration (tests) ------------------------------------------------------------------

    def support(self) -> np.ndarray:
        """The k + 1 possible outputs Z = B·v_j − A·v̄."""
        mean, _ = self._moments
        a, b = self.coefficients
        return b * self.grid - a * mean

    def pmf(self, r: np.ndarray | float) -> np.ndarray:
        """P(Ĵ = j | r) for each r (rows) and j = 0, …, k (columns)."""
        r = np.clip(np.atleast_1d(np.asarray(r, dtype=float)), 0.0, self.norm_bound)
        v = self.grid
        i = self._cells(r)
        up = np.clip((r - v[i]) / (v[i + 1] - v[i]), 0.0, 1.0)
        rounding = np.zeros((r.size, self.k + 1))
        rows = np.arange(r.size)
        rounding[rows, i] = 1.0 - up
        rounding[rows, i + 1] += up
        return _rr_pmf(rounding, self.epsilon, self.k)

    # --- sampling -----------------------------------------------------------------------------

    def privatize_values(self, r: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Z for each value of the 1-D array r (clamped to [0, r_max]); E[Z] = r."""
        r = np.clip(r, 0.0, self.norm_bound)
        v = self.grid
        i = self._cells(r)
        up = (r - v[i]) / (v[i + 1] - v[i])
        j = i + (rng.random(r.shape[0]) < up)
        j_hat = randomized_response(j, self.k, self.epsilon, rng)
        mean, _ = self._moments
        a, b = self.coefficients
        return b * v[j_hat] - a * mean

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """ScalarRelDP on the one column of ``x`` ((n, 1), values in [0, r_max]); returns (n, 1)."""
        return self.privatize_values(x[:, 0], rng)[:, None]
