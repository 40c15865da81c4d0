"""ScalarRelDP: one bounded magnitude r ∈ [0, r_max] on a geometric grid, for relative error.

Bhowmick et al. (2018), Alg. 4 and App. B.2: the grid v_0 = 0, v_j = α·ν^j (j = 1, …, k), where the
debiased output is the paper's Z = a(J̃ − b), J̃ = ν^Ĵ·1{Ĵ ≥ 1}, a = α(e^ε + k)/(e^ε − 1),
b = Σ_{j=1}^k ν^j/(e^ε + k). The rounding, the (k + 1)-ary randomized response, the debiasing, the
exact error and the enumeration of the output's pmf are those of ScalarDP's arithmetic grid: they
live in :mod:`ldpcli.mechanisms._scalar`, whose docstring derives them (exact privacy, Lemma 4.3;
exact error, the equalities behind Lemma B.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np

from ldpcli.errors import UsageError, counted
from ldpcli.math import _logspace as logspace
from ldpcli.math._domains import INTERVAL
from ldpcli.mechanisms._base import Mechanism, OptionSpec, declare, register
from ldpcli.mechanisms._scalar import (
    K_REL_MAX,
    GridResponse,
    cell_maxima,
    check_one_column,
    enumerated_rr_epsilon,
    grid_error,
    randomized_response,
    rr_pmf,
)

#: Smallest default relative accuracy α/r_max of ScalarRelDP (about 1.5e−8 = √(2⁻⁵²)): the
#: paper's choice α/r_max = e^{−ε/4} is floored here for ε ≳ 72 (before α is lowered by < ν
#: to put the top grid point on r_max).
ALPHA0_MIN = 2.0**-26
#: A geometric grid whose top point ν^k·α misses r_max by less than this relative amount covers
#: it: the top point is then moved onto r_max (floating-point rounding of α·ν^k).
_COVER_RTOL = 1e-12


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


@register(
    name="scalar-rel",
    title="ScalarRelDP (Bhowmick et al. 2018, Alg. 4): geometric grid, relative error",
    calibrations=("bhowmick",),
    example_d=1,
)
@dataclass(frozen=True)
class ScalarRelDP(GridResponse, Mechanism):
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

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> ScalarRelDP:
        """ScalarRelDP at level ε for one column bounded by r_max; options ``alpha``, ``nu``, ``k``."""
        check_one_column(cls, d)
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
        log_em1 = logspace.log_expm1(self.epsilon)
        one = float(np.logaddexp(0.0, log_em1 + math.log(rho)))
        zero = self.epsilon - float(np.logaddexp(0.0, log_em1 + math.log1p(-rho)))
        return max(one, zero)

    def error_at(self, r: np.ndarray | float) -> np.ndarray:
        """Exact E(Z − r)² for values r in [0, r_max] (vectorized)."""
        values = np.clip(np.asarray(r, dtype=float), 0.0, self.norm_bound)
        i = self._cells(values)
        mean, var = self._moments
        a, b = self.coefficients
        return grid_error(values, self.grid[i], self.grid[i + 1], mean, var, a, b)

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
        _, values = cell_maxima(lo[inside], hi[inside], self.norm_bound, mean, var, a, b)
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
        _, low = cell_maxima(v[:1], v[1:2], min(alpha, r_max), mean, var, a, b)
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
            "p_truth": math.exp(logspace.log_expit(self.truth_logit)),
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
        inputs = counted(n_grid, "grid point") + (" + r_max inside a cell" if extra is not None else "")
        return eps, f"{route}; inputs: {inputs}"

    # --- enumeration (tests) ------------------------------------------------------------------

    def support(self) -> np.ndarray:
        """The k + 1 possible outputs Z = B·v_j − A·v̄."""
        mean, _ = self._moments
        a, b = self.coefficients
        return b * self.grid - a * mean

    def pmf(self, r: np.ndarray | float) -> np.ndarray:
        """P(Ĵ = j | r) for each r (rows) and j = 0, …, k (columns)."""
        values = np.clip(np.atleast_1d(np.asarray(r, dtype=float)), 0.0, self.norm_bound)
        v = self.grid
        i = self._cells(values)
        up = np.clip((values - v[i]) / (v[i + 1] - v[i]), 0.0, 1.0)
        rounding = np.zeros((values.size, self.k + 1))
        rows = np.arange(values.size)
        rounding[rows, i] = 1.0 - up
        rounding[rows, i + 1] += up
        return rr_pmf(rounding, self.epsilon, self.k)

    # --- sampling -----------------------------------------------------------------------------

    def privatize_values(self, r: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Z for each value of the 1-D array r (clamped to [0, r_max]); E[Z] = r."""
        r = np.clip(r, 0.0, self.norm_bound)
        v = self.grid
        i = self._cells(r)
        up = (r - v[i]) / (v[i + 1] - v[i])
        j = i + (rng.random(r.shape[0]) < up)
        return self.output_value(randomized_response(j, self.k, self.epsilon, rng))

    def output_value(self, index: np.ndarray) -> np.ndarray:
        """Z = B·v_Ĵ − A·v̄ for each grid index Ĵ (Alg. 4): from the public grid and (ε, k) and Ĵ only,
        so the released double is a function of the sampled index (docs/floating-point.md)."""
        mean, _ = self._moments
        a, b = self.coefficients
        return b * self.grid[index] - a * mean

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """ScalarRelDP on the one column of ``x`` ((n, 1), values in [0, r_max]); returns (n, 1)."""
        return self.privatize_values(x[:, 0], rng)[:, None]
