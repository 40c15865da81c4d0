"""ProjUnit: PrivUnitG (or PrivUnit2) in a random k-dimensional subspace, decoded back to R^d.

Asi, Feldman, Nelson, Nguyen, Talwar, "Fast Optimal Locally Private Mean Estimation via Random
Projections" (NeurIPS 2023), Alg. ProjUnit, with an exactly Haar projection and the exact normalisation.

Algorithm, for a row x with ‖x‖ ≤ L (the norm bound) and 1 ≤ k < d:

1. draw W, k × d with orthonormal rows spanning a Haar-random k-dimensional subspace, independently
   of the data and of every other row (:mod:`ldpcli.math._projection`: k Householder levels, the product
   form of the sign-fixed QR of a d × k Gaussian);
2. v = (‖x‖/‖Wx‖)·Wx (v = 0 for x = 0): a point of the k-dimensional ball of radius ‖x‖ ≤ L;
3. z = the base mechanism, calibrated at dimension k, level ε and bound L, applied to v;
4. release x̂ = Wᵀz/α, α = E‖Wu‖ = Γ((k + 1)/2)Γ(d/2)/(Γ(k/2)Γ((d + 1)/2)) for a unit u
   (‖Wu‖² ~ Beta(k/2, (d − k)/2); log α in log space, exact for d up to 10⁸).

Unbiased exactly: E[z | W] = v, so E[x̂ | W] = ‖x‖·WᵀWu/(α‖Wu‖), u = x/‖x‖. For an orthogonal Q with
Qu = u, WQᵀ has the law of W (Haar) and maps to Q·WᵀWu/‖Wu‖, so E[WᵀWu/‖Wu‖] is fixed by every such Q:
it is c·u, with c = uᵀE[WᵀWu/‖Wu‖] = E[‖Wu‖²/‖Wu‖] = α. Hence E[x̂] = x. (The published code draws W
from the QR of uniform [0, 1) entries, which is not rotation invariant, and omits 1/α: both bias it.)

Error, exactly: WWᵀ = I_k, so ‖x̂‖² = ‖z‖²/α², and for either base E‖z‖² does not depend on its input
(privunit2: ‖z‖ = L/m; privunitg: ‖z‖ = (L/μ)·(z_r² + χ²_{k−1})^{1/2} whatever the rounded direction),
so E‖z‖² is the base's ``expected_error_max`` E₀ (its error at the origin) and

    E‖x̂ − x‖² = E‖x̂‖² − ‖x‖² = E₀/α² − ‖x‖²,

which is ``expected_error_max`` = E₀/α² at x = 0 and ``expected_error`` = E_k/α² + L²·(1/α² − 1) at ‖x‖ = L,
E_k = E₀ − L² the base's own boundary error at dimension k (ldp's convention: the boundary error, the
papers' E‖x̂ − x‖² for unit vectors, and the supremum over the ball). For large d and k,
1/α² ≈ (d/k)(1 + 1/(2k)) and the base's error grows like k/ε, so the error is close to the base's at full d
once k ≫ ε.

Privacy: W is independent of x, so the law of (W, z) given x is P(W)·P(z | v_W(x)): its likelihood ratio
between two inputs is the base's at two points of the k-ball, at most e^{ε_k} with ε_k the base's
``epsilon_exact`` at dimension k, and attained (x' = −x gives v' = −v on the boundary, where the base
attains its level). The release x̂ is a function of (W, z) (post-processing), so it is ε_k-LDP;
``epsilon_exact`` is ε_k, the exact level of the pair (W, z) and an upper bound for x̂ alone.

Choosing k (``k`` not given): the smallest k < d whose exact boundary error is within
:data:`ERROR_TARGET` (5 %) of the base mechanism's at full d, by bisection over k (the error decreases
in k: 1/α² falls faster than the base's error rises; checked by scans in the tests); k = d − 1 when no
k < d is within the target (small d or very large ε), where ``params`` shows the ratio reached. The rule
is a function of (d, ε, base), not of L, so the errors scale as L².

Sampling: rows are taken in chunks whose transforms hold at most
:data:`ldpcli.math._projection.TRANSFORM_VALUES` values (about 8·k·d bytes a row: the Haar transform costs
O(dk) time and memory a row). Draw order, per chunk: the chunk's k·d normals per row (row by row), then
the base mechanism's draws for the chunk's rows. The output rows are d-dimensional decoded vectors.

**FastProjUnit** (``projection`` srht; the paper's SRHT variant): W = √(d′/k)·S·H·D restricted to the padded data
(:mod:`ldpcli.math._hadamard`: d′ the least power of two ≥ d, O(d′ log d′) a row, no d′ × d′ matrix), the same
steps 2–4 with α = √(d′/k)·α_Haar(k, d′), the Haar constant at (k, d′) scaled like W. **Biased**: ‖Wu‖ = R depends
on u. Along u, uᵀE[x̂]/‖x‖ = E R/α exactly (uᵀWᵀWu/R = R), and 1/√M₄ ≤ E R ≤ 1 (M₄ the fourth-moment bound
of :mod:`ldpcli.math._hadamard`), so the relative bias along x lies in [r₋/α − 1, 1/α − 1], r₋ = 1/√M₄; at a vertex
±e_j, R = 1 for every draw and the bias is exactly (1/α − 1)·x. The whole bias vector β = E[x̂]/‖x‖ − u: since
E[WᵀW] = I, β = E[WᵀWu(1/(αR) − 1)], and for a unit t, tᵀβ = E[⟨Wt, Wu/R⟩(1/α − R)] ≤ √(E‖Wt‖²)·√(E(1/α − R)²),
so ‖β‖ ≤ √(1 + 1/α² − 2r₋/α) (E‖Wt‖² = E R² = 1): a rigorous, loose bound (the seeded Monte Carlo of the tests
measures the actual bias, far below it). Error, bounded: ‖x̂‖ ≤ √(d′/k)‖z‖/α (WWᵀ = (d′/k)I_k on R^{d′},
and the restriction to R^d only shortens), so E‖x̂ − x‖² ≤ (d′/k)E₀/α² + ‖x‖²(1 − 2r₋/α), largest at x = 0
(r₋/α > 1/2). For a privunitg base, z = z∥·v̂ + z⊥ with z⊥ an isotropic normal of variance s² in v̂^⊥ (s the
base's output scale), and ‖PᵀM‖_F² = d for M = √(d′/k)·DHSᵀ (every entry of H is ±1/√d′), so with
t = ‖PᵀMv̂‖² ∈ [0, d′/k], α²E‖x̂‖² = E[z∥²]·t + s²(d − t) ≤ s²d + max(0, (E z∥² − s²)·d′/k): the padding's
d′/d is not paid on the noise (the crude (d′/k)E₀ is kept for privunit2; both equal (d/k)E₀ when d = d′). The privacy is the base's at k, as for Haar (W is data-independent). Draws, per chunk of rows:
the signs and the selections of :func:`ldpcli.math._hadamard.srht_projections`, then the base's draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math import _hadamard as hadamard
from ldpcli.math import _projection as projection
from ldpcli.math import _rows as rowmath
from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms._base import MAX_D, Mechanism, OptionSpec, declare, register
from ldpcli.mechanisms._privunit import PrivUnit2
from ldpcli.mechanisms._privunitg import PrivUnitG

#: ``k`` by default: the smallest k whose exact boundary error is at most this times the base's at full d.
ERROR_TARGET = 1.05
#: The base mechanisms, by option value.
BASES: dict[str, type[PrivUnitG] | type[PrivUnit2]] = {"privunitg": PrivUnitG, "privunit2": PrivUnit2}
#: Quadrature points of the norm law's CDF for a privunitg base (``law_tests``): error at most 1/J.
_NORM_LAW_POINTS = 1024


def projected_errors(base: Mechanism, k: int, d: int) -> tuple[float, float]:
    """(E‖x̂ − x‖² at ‖x‖ = L, its sup at x = 0) for ``base`` calibrated at dimension k (module docstring):
    E_k/α² + L²(1/α² − 1) and (E_k + L²)/α², with 1/α² − 1 to full relative precision."""
    excess = projection.inverse_square_excess(k, d)
    return base.expected_error * (1.0 + excess) + base.norm_bound**2 * excess, base.expected_error_max * (1.0 + excess)


def srht_log_alpha(k: int, d: int) -> float:
    """log α for the SRHT: the Haar log E‖Wu‖ at (k, d′) plus ½·log(d′/k), W's scale (module docstring)."""
    dp = hadamard.padded_dimension(d)
    return projection.log_projection_mean(k, dp) + 0.5 * math.log(dp / k)


def default_k(d: int, epsilon: float, base: str) -> int:
    """The smallest k in [1, d − 1] with boundary error ≤ :data:`ERROR_TARGET` × the base's at full d (d − 1
    when none is), by bisection: the error decreases in k."""
    cls = BASES[base]
    target = ERROR_TARGET * cls.calibrate(d, epsilon).expected_error

    def within(k: int) -> bool:
        return projected_errors(cls.calibrate(k, epsilon), k, d)[0] <= target

    lo, hi = 1, d - 1
    if not within(hi):
        return hi
    while lo < hi:
        mid = (lo + hi) // 2
        if within(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@register(
    name="projunit",
    title="ProjUnit (Asi, Feldman, Nelson, Nguyen, Talwar 2023): the base mechanism in a random k-dim subspace (Haar, or SRHT: FastProjUnit)",
    calibrations=("optimal",),
    compared=False,  # its error is the base's within 5 % by construction, and its k jumps with ε
)
@dataclass(frozen=True)
class ProjUnit(Mechanism):
    """ProjUnit on the ℓ2 ball of radius L (the module docstring has the derivation)."""

    k: int
    base: str
    projection: str
    inner: PrivUnitG | PrivUnit2  # the base mechanism at dimension k, level ε, bound L
    log_alpha: float  # log E‖Wu‖

    options = declare(
        OptionSpec("k", int, f"projection dimension, 1 <= k < d (default: the smallest k whose exact error is "
                   f"within {ERROR_TARGET - 1:.0%} of the base mechanism's at full d)", 4, high=MAX_D - 1),
        OptionSpec("base", str, "mechanism applied in the k-dimensional subspace", "privunitg",
                   default="privunitg", choices=tuple(BASES)),
        OptionSpec("projection", str, "the random subspace: haar (exactly Haar-random, O(dk) a row, unbiased) or "
                   "srht (subsampled randomized Hadamard, O(d log d) a row, biased: see the parameters)", "haar",
                   default="haar", choices=("haar", "srht")),
    )

    @classmethod
    def _calibrate(cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any) -> ProjUnit:
        """The base at dimension k (``k`` given, or :func:`default_k`), level ε and bound L, and log α."""
        k, base = options["k"], options["base"]
        if d < 2:
            raise UsageError(f"`d`: projunit projects onto k < d dimensions and needs d >= 2, got d = {d}; "
                             f"use `mechanism` {base} for d = 1")
        if k is None:
            k = default_k(d, epsilon, base)
        elif not 1 <= k < d:
            raise UsageError(f"`k`: the projection dimension must satisfy 1 <= k < d, got k = {k} at d = {d}; "
                             f"pass a `k` between 1 and {d - 1}, or use `mechanism` {base} at full d")
        inner = BASES[base].calibrate(k, epsilon, norm_bound=norm_bound)
        log_alpha = srht_log_alpha(k, d) if options["projection"] == "srht" else projection.log_projection_mean(k, d)
        return cls(d, epsilon, norm_bound, calibration, k, base, options["projection"], inner, log_alpha)

    @property
    def alpha(self) -> float:
        """α = E‖Wu‖ = Γ((k + 1)/2)Γ(d/2)/(Γ(k/2)Γ((d + 1)/2)), the decoder's 1/α (srht: √(d′/k) times it at d′)."""
        return math.exp(self.log_alpha)

    @property
    def srht(self) -> bool:
        """Whether W is the subsampled randomized Hadamard transform (biased, bounded error)."""
        return self.projection == "srht"

    @cached_property
    def srht_bias(self) -> dict[str, float]:
        """The SRHT's relative bias ‖E[x̂] − x‖/‖x‖ (module docstring): exact at a vertex, the bound of its
        component along x, and the bound of the whole vector."""
        low, alpha = hadamard.length_mean_low(self.k, self.d), self.alpha
        return {"relative_bias_vertex": 1.0 / alpha - 1.0,
                "relative_bias_along_max": max(1.0 / alpha - 1.0, 1.0 - low / alpha),
                "relative_bias_max": math.sqrt(max(0.0, 1.0 + 1.0 / alpha**2 - 2.0 * low / alpha))}

    def _srht_errors(self) -> tuple[float, float]:
        """(bound at ‖x‖ = L, bound over the ball): (d′/k)E₀/α² + ‖x‖²(1 − 2r₋/α) (module docstring)."""
        dp = hadamard.padded_dimension(self.d)
        if isinstance(self.inner, PrivUnitG):  # a = E z∥², s² the variance of each coordinate of z⊥
            s2 = self.inner.output_scale**2
            a = self.inner.expected_error_max - (self.k - 1) * s2
            noise = (s2 * self.d + max(0.0, (a - s2) * dp / self.k)) / self.alpha**2
        else:
            noise = (dp / self.k) * self.inner.expected_error_max / self.alpha**2
        pull = 1.0 - 2.0 * hadamard.length_mean_low(self.k, self.d) / self.alpha
        return noise + self.norm_bound**2 * pull, noise + max(0.0, self.norm_bound**2 * pull)

    @property
    def epsilon_exact(self) -> float:
        """The base's ε_exact at dimension k (module docstring: the exact level of (W, z))."""
        return self.inner.epsilon_exact

    @property
    def expected_error(self) -> float:
        """E‖x̂ − x‖² = E_k/α² + L²(1/α² − 1) for ‖x‖ = L (exact); srht: an upper bound."""
        return self._srht_errors()[0] if self.srht else projected_errors(self.inner, self.k, self.d)[0]

    @property
    def expected_error_max(self) -> float:
        """E₀/α², attained at x = 0 (E₀ the base's error at its origin, E‖z‖²); srht: an upper bound."""
        return self._srht_errors()[1] if self.srht else projected_errors(self.inner, self.k, self.d)[1]

    @cached_property
    def _full(self) -> dict[str, float]:
        """The boundary errors of privunitg and privunit2 at full d (same ε and L)."""
        return {name: BASES[name].calibrate(self.d, self.epsilon, norm_bound=self.norm_bound).expected_error
                for name in BASES}

    def parameters(self) -> dict[str, Any]:
        """α, the base's own parameters (``base_…``, at dimension k), and the error against each base at full d."""
        out: dict[str, Any] = {"alpha": self.alpha, "log_alpha": self.log_alpha, "k_error_target": ERROR_TARGET}
        out.update({f"base_{key}": value for key, value in self.inner.parameters().items()})
        out["base_expected_error"] = self.inner.expected_error
        for name, error in self._full.items():
            out[f"error_ratio_{name}"] = self.expected_error / error
        if self.srht:
            bias = self.srht_bias
            out["padded_d"] = hadamard.padded_dimension(self.d)
            out["bias"] = (f"biased: relative bias {bias['relative_bias_vertex']:.3g} at a vertex (exact), at most "
                           f"{bias['relative_bias_along_max']:.3g} along x and {bias['relative_bias_max']:.3g} in "
                           "norm (bounds); the expected errors are upper bounds")
            out.update(bias)
        return out

    def audit_epsilon(self) -> tuple[float, str]:
        """The base's own second route at dimension k (the projection is independent of the data)."""
        epsilon, route = self.inner.audit_epsilon()
        return epsilon, f"the {self.base} base at k = {self.k}: {route} (W is data-independent)"

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """The law of x̂ = Wᵀz/α where it is known exactly for any W.

        Haar only (srht: none). The norm: α‖x̂‖ = ‖z‖, whose law is the base's at any input of norm ‖x‖: privunit2, ‖z‖ = L/m for every
        row; privunitg, ‖z‖²μ²/L² = z_r² + C with z_r the truncated-normal mixture and C ~ χ²(k − 1)
        independent, whose CDF E_C[P(z_r² ≤ t − C)] is a J-point Riemann sum over C's quantiles (a monotone
        integrand in [0, 1]: within 1/J, J = 1024, far below the KS test's resolution at audit sizes). The
        direction: for an orthogonal Q fixing u = x/‖x‖, WQᵀ is Haar and gives Q·x̂, so x̂⊥ (the part
        orthogonal to u) has a uniform direction in u⊥; for x = 0 x̂'s direction is uniform on S^{d−1}.
        """
        from scipy import stats

        from ldpcli.math import _lawtests as lawtests

        if self.srht:  # neither law holds for the SRHT (its W is not rotation invariant): no tests
            return []
        norms = rowmath.row_norms(z) * self.alpha
        if isinstance(self.inner, PrivUnit2):
            radius = self.norm_bound * self.inner.scale
            bad = int(np.count_nonzero(np.abs(norms - radius) > 1e-9 * radius))
            tests = [lawtests.deterministic("α‖x̂‖ = L/m", bad, z.shape[0], "off the base's radius")]
        else:
            t = (norms / self.inner.output_scale) ** 2
            if self.k == 1:
                cdf = self.inner.radial_cdf(np.sqrt(t)) - self.inner.radial_cdf(-np.sqrt(t))
            else:
                chi2 = stats.chi2.ppf((np.arange(_NORM_LAW_POINTS) + 0.5) / _NORM_LAW_POINTS, self.k - 1)
                root = np.sqrt(np.maximum(t[:, None] - chi2[None, :], 0.0))
                cdf = (self.inner.radial_cdf(root) - self.inner.radial_cdf(-root)).mean(axis=1)
            tests = [lawtests.ks_uniform("α²‖x̂‖²μ²/L² ~ z_r² + χ²(k − 1)", cdf,
                                         f"KS, exact, n = {t.size}; CDF within {1 / _NORM_LAW_POINTS:g}")]
        u = lawtests.rounding_weights(x, self.norm_bound)[0]
        if u is None:
            return tests + lawtests.uniform_direction_tests(lawtests.unit_rows(z)[0], self.d, "x̂ direction")
        return tests + lawtests.orthogonal_uniform_tests(z, u, "x̂⊥")

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """x̂ = Wᵀ·base(v)/α per row, v = ‖x‖·Wx/‖Wx‖ (the module docstring gives the draw order)."""
        n, d = x.shape
        out = np.empty((n, d))
        norms = rowmath.row_norms(x)
        lift = math.exp(-self.log_alpha)
        chunks = hadamard.srht_chunks(n, d) if self.srht else projection.projection_chunks(n, self.k, d)
        for rows in chunks:
            transforms: projection.Projections | hadamard.SrhtProjections
            if self.srht:
                transforms = hadamard.srht_projections(rows.stop - rows.start, self.k, d, rng)
            else:
                transforms = projection.haar_projections(rows.stop - rows.start, self.k, d, rng)
            r = norms[rows]
            wu = transforms.project(x[rows] / np.where(r > 0.0, r, 1.0)[:, None])
            length = np.sqrt(np.vecdot(wu, wu))
            v = wu * (r / np.where(length > 0.0, length, math.inf))[:, None]
            out[rows] = transforms.lift(self.inner.privatize(v, rng)) * lift
        return out

