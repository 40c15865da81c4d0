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

This module holds ScalarDP and what both share (:class:`GridResponse`, the exact error, the pmf's
enumeration for the audit); ScalarRelDP's geometric grid is :mod:`ldpcli.mechanisms._scalar_rel`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math import _logspace as logspace
from ldpcli.math._domains import INTERVAL
from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms._base import Mechanism, OptionSpec, declare, register
from ldpcli.mechanisms._hooks import OutputBranch

#: Largest ScalarDP grid size. The default k = ⌈e^{ε/3}⌉ reaches it at ε = 3·52·log 2 ≈ 108.1 and
#: stays there: the grid step r_max·2⁻⁵² is one or two float64 units in the last place of r_max,
#: so a finer grid is not representable, and its rounding error (standard deviation ≤ r_max·2⁻⁵³)
#: is already below double precision. Grid indices up to 2⁵² are exact in float64 and int64.
K_MAX = 2**52
#: Largest ScalarRelDP grid size: its worst-case error is a maximum over the k cells, computed
#: exactly cell by cell (vectorized), so k is kept to about a million.
K_REL_MAX = 2**20
#: The audit splits a grid mechanism's output into its grid values up to this many (``output_branches``).
BRANCH_MAX_VALUES = 4096


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
    a = (k + 1) * math.exp(-logspace.log_expm1(epsilon))
    return a, 1.0 + a


def check_one_column(cls: type[Mechanism], d: int) -> None:
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
    truth = logspace.bernoulli_logit(epsilon - math.log(k), n, rng)
    other = rng.integers(0, k, size=n, dtype=np.int64)
    other += other >= j
    return np.where(truth, j, other)


def grid_error(
    r: np.ndarray, lo: np.ndarray, hi: np.ndarray, mean: float, var: float, a: float, b: float
) -> np.ndarray:
    """E(Z − r)² = A(r − v̄)² + B(hi − r)(r − lo) + A·B·σ² for r in the cell [lo, hi]."""
    rho = np.maximum((hi - r) * (r - lo), 0.0)
    return a * (r - mean) ** 2 + b * rho + a * b * var


def cell_maxima(
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


class GridResponse:
    """What ScalarDP and ScalarRelDP share: (k + 1)-ary randomized response on a grid of k + 1 points."""

    epsilon: float
    k: int
    norm_bound: float

    @property
    def coefficients(self) -> tuple[float, float]:
        """(A, B) = ((k + 1)/(e^ε − 1), (e^ε + k)/(e^ε − 1)): Z = B·v_Ĵ − A·v̄ (v̄ the grid mean)."""
        return rr_coefficients(self.epsilon, self.k)

    @property
    def output_count(self) -> int:
        """k + 1: the output takes one value per grid point (``output_value``)."""
        return self.k + 1

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
        from ldpcli.math import _lawtests as lawtests

        n = z.shape[0]
        r = float(np.clip(x[0], 0.0, self.norm_bound))
        values = z[:, 0]
        if self.k > K_REL_MAX:
            return [self._truthful_share_test(r, values)]
        support = np.asarray(self.support())  # type: ignore[attr-defined]
        idx = _nearest(support, values)
        gap = np.min(np.abs(np.diff(support)))
        off = int(np.count_nonzero(np.abs(values - support[idx]) > 1e-6 * gap))
        tests = [lawtests.deterministic(f"Z on the grid ({self.k + 1} values)", off, n, "off the grid")]
        counts = np.bincount(idx, minlength=support.size)
        tests.append(lawtests.counts_test(f"grid counts ~ pmf(r = {r:.6g})", counts,
                                           self.pmf(r)[0]))  # type: ignore[attr-defined]
        return tests

    def output_branches(self, x: np.ndarray) -> list[OutputBranch]:
        """The output's k + 1 grid values, each a branch: P = ``pmf(r)``, mean the value v, error (v − r)².

        The audit's tests of the mean and the error then hold given the counts of each value (a flip
        of probability e^{−ε} is never seen at large ε); NotImplementedError above
        ``BRANCH_MAX_VALUES`` values.
        """
        if self.k + 1 > BRANCH_MAX_VALUES:
            raise NotImplementedError(f"a grid of {self.k + 1} values is not split into branches")
        r = float(x[0])
        support = np.asarray(self.support())  # type: ignore[attr-defined]
        probs = self.pmf(r)[0]  # type: ignore[attr-defined]
        return [OutputBranch(f"Z = {v:.6g}", float(p), np.array([v]), float((v - r) ** 2))
                for v, p in zip(support, probs, strict=True)]

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The index of the grid value nearest to each output."""
        return _nearest(np.asarray(self.support()), z[:, 0])  # type: ignore[attr-defined]

    def _truthful_share_test(self, r: float, values: np.ndarray) -> LawTest:
        """Large k (ScalarDP only): the share of outputs at the rounding's grid points, exact binomial."""
        from ldpcli.math import _lawtests as lawtests

        g = self.norm_bound / self.k
        a, b = self.coefficients
        t = r / g
        lo = min(math.floor(t), self.k - 1)
        js = {lo, lo + 1} if t > lo else {lo}
        # the outputs' own expression (``privatize_values``), so that a match is bit for bit
        hits = np.zeros(values.shape[0], dtype=bool)
        for j in js:
            hits |= values == (b * g) * float(j) - a * 0.5 * self.norm_bound
        lam = math.exp(-logspace.log_expm1(self.epsilon))
        prob = (len(js) * lam + 1.0) / (1.0 + (self.k + 1) * lam)
        return lawtests.binomial_test(f"share at the rounding's grid points (k = {self.k})",
                                       int(hits.sum()), values.shape[0], prob)


@register(
    name="scalar",
    title="ScalarDP (Bhowmick et al. 2018, Alg. 3): rounding + (k+1)-ary randomized response",
    calibrations=("bhowmick",),
    example_d=1,
)
@dataclass(frozen=True)
class ScalarDP(GridResponse, Mechanism):
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

    domain = INTERVAL
    vector = False
    options = declare(
        OptionSpec("k", int, "grid size (default ⌈e^{ε/3}⌉, Bhowmick et al. Lemma 4.4; at most 2^52)", 4,
                   low=1, high=K_MAX),
    )

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> ScalarDP:
        """ScalarDP at level ε for one column bounded by r_max = ``norm_bound``; option ``k``."""
        check_one_column(cls, d)
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

    def output_branches(self, x: np.ndarray) -> list[OutputBranch]:
        """The grid values (``GridResponse.output_branches``); above ``BRANCH_MAX_VALUES`` of them, the
        branches of ``rounding_split``."""
        if self.k + 1 <= BRANCH_MAX_VALUES:
            return GridResponse.output_branches(self, x)
        return self.rounding_split(float(x[0]))

    def rounding_split(self, r: float) -> list[OutputBranch]:
        """The output of r as branches: Ĵ at each of the rounding's grid points, and Ĵ anywhere else.

        With the rounding's grid points S ({⌊t⌋, ⌊t⌋ + 1}, or {⌊t⌋} for r on the grid) and
        λ = 1/(e^ε − 1): Ĵ ∈ S with P(Ĵ = j) = (P(J = j) + λ)/(1 + (k + 1)λ) each, and Ĵ uniform on the
        other grid points C with probability |C|λ/(1 + (k + 1)λ). On C, Z = B·g·j − A·r_max/2 has mean
        B·g·mean_C(j) − A·r_max/2 and E(Z − r)² = (B·g)²·Var_C(j) + (E[Z | C] − r)², the sums over C
        in exact integers.
        """
        r = float(np.clip(r, 0.0, self.norm_bound))
        a, b = self.coefficients
        js, up = self.rounding_points(r)
        lam = math.exp(-logspace.log_expm1(self.epsilon))
        norm = 1.0 + (self.k + 1) * lam
        weights = [((1.0 - up if j == js[0] else up) + lam) / norm for j in js]
        values = [self._value(j) for j in js]
        near = [OutputBranch(f"Z = {v:.9g} (a rounding point)", w, np.array([v]), (v - r) ** 2)
                for w, v in zip(weights, values, strict=True)]
        size = self.k + 1 - len(js)
        total = Fraction(self.k * (self.k + 1), 2) - sum(js)
        squares = Fraction(self.k * (self.k + 1) * (2 * self.k + 1), 6) - sum(j * j for j in js)
        mean_j = total / size
        mean = (b * self.grid_step) * float(mean_j) - a * 0.5 * self.norm_bound
        spread = (b * self.grid_step) ** 2 * float(squares / size - mean_j * mean_j)
        far = OutputBranch("elsewhere on the grid", size * lam / norm, np.array([mean]), spread + (mean - r) ** 2)
        return [*near, far]

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The grid value's index (small k); large k: the index of the rounding's grid point it equals,
        bit for bit, or the last branch (elsewhere)."""
        if self.k + 1 <= BRANCH_MAX_VALUES:
            return GridResponse.branch_labels(self, x, z)
        js, _ = self.rounding_points(float(np.clip(x[0], 0.0, self.norm_bound)))
        labels = np.full(z.shape[0], len(js), dtype=np.int64)
        for i, j in enumerate(js):
            labels[z[:, 0] == self._value(j)] = i
        return labels

    def rounding_points(self, r: float) -> tuple[list[int], float]:
        """(the grid points the rounding of r may choose, P(J = the upper one)), as ``privatize_values``
        draws them: t − ⌊t⌋ may round just above 1 at r = r_max, where the upper point is sure."""
        t = r / self.grid_step
        lo = min(math.floor(t), self.k - 1)
        return ([lo, lo + 1] if t > lo else [lo]), min(1.0, t - lo)

    def _value(self, j: int) -> float:
        """The output for grid index j, by the expression of ``privatize_values`` (bit for bit)."""
        a, b = self.coefficients
        return (b * self.grid_step) * float(j) - a * 0.5 * self.norm_bound

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
            "p_truth": math.exp(logspace.log_expit(self.truth_logit)),
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
        return rr_pmf(rounding, self.epsilon, k)

    # --- sampling -----------------------------------------------------------------------------

    def privatize_values(self, r: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Z for each value of the 1-D array r (clamped to [0, r_max]); E[Z] = r."""
        r = np.clip(r, 0.0, self.norm_bound)
        k = self.k
        t = r / self.grid_step
        lo = np.minimum(np.floor(t), k - 1)
        j = lo.astype(np.int64) + (rng.random(r.shape[0]) < t - lo)
        return self.output_value(randomized_response(j, k, self.epsilon, rng))

    def output_value(self, index: np.ndarray) -> np.ndarray:
        """Z = B·g·Ĵ − A·r_max/2 for each grid index Ĵ (Alg. 3): from the public (ε, k, r_max) and Ĵ only,
        so the released double is a function of the sampled index (docs/floating-point.md)."""
        a, b = self.coefficients
        return (b * self.grid_step) * np.asarray(index, dtype=np.int64) - a * 0.5 * self.norm_bound

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """ScalarDP on the one column of ``x`` ((n, 1), values in [0, r_max]); returns (n, 1)."""
        return self.privatize_values(x[:, 0], rng)[:, None]


def _nearest(support: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The index of the value of the increasing ``support`` nearest to each of ``values``."""
    idx = np.clip(np.searchsorted(support, values), 1, support.size - 1)
    left, right = support[idx - 1], support[idx]
    return np.where(values - left <= right - values, idx - 1, idx)


def _check_enumerable(k: int) -> None:
    if k > K_REL_MAX:
        raise ValueError(f"the pmf of a grid of k = {k} points is not enumerated (k <= {K_REL_MAX} only)")


def rr_pmf(rounding: np.ndarray, epsilon: float, k: int) -> np.ndarray:
    """P(Ĵ = j) = (P(J = j)·(e^ε − 1) + 1)/(e^ε + k), computed as (1 + P(J = j)/λ)·… stably."""
    # (1 + (e^ε − 1)π)/(e^ε + k) = (λ + π)/(λ(e^ε + k)) with λ = 1/(e^ε − 1) and λ(e^ε + k) = B.
    lam = math.exp(-logspace.log_expm1(epsilon))
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
