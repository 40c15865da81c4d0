"""Least squares from two independent private copies of each row (Aliakbarpour et al. 2024, "BCDP", Sec. 5).

Each row x = [z, l] (features z ∈ R^p, label l) is privatized twice, independently and without
bias: x̂¹ = [ẑ¹, l̂¹] and x̂² = [ẑ², l̂²], with E[x̂ʲ | x] = x and the two copies independent given x.
Products of the two copies are then unbiased for the products of the row (E[ẑ¹ẑ²ᵀ] = zzᵀ,
E[l̂¹ẑ²] = l·z), which is what Algorithm 3 uses: its objective (Eq. (74))

    f̂(θ) = (1/2n) Σᵢ (θᵀẑ¹ᵢẑ²ᵢᵀθ − 2θᵀl̂¹ᵢẑ²ᵢ)

has expectation f(θ) = (1/2n) Σᵢ (θᵀzᵢzᵢᵀθ − 2θᵀlᵢzᵢ) (Eq. (73)), the least-squares loss minus a
constant. Here both cross products are used,

    A = (1/2n) Σᵢ (ẑ¹ᵢẑ²ᵢᵀ + ẑ²ᵢẑ¹ᵢᵀ),   b = (1/2n) Σᵢ (l̂¹ᵢẑ²ᵢ + l̂²ᵢẑ¹ᵢ),

which have the same means, make A symmetric and have less variance, so f̂(θ) = ½θᵀAθ − bᵀθ; adding
½·(1/n)Σᵢ l̂¹ᵢl̂²ᵢ (unbiased for ½·(1/n)Σᵢ lᵢ²) gives an unbiased estimate of the full loss
(1/2n)Σᵢ(θᵀzᵢ − lᵢ)².

A is unbiased but can be indefinite, so Algorithm 3's OPT over Θ = {‖θ‖₂ ≤ R} is solved exactly, as a
trust-region subproblem (:func:`solve_trust_region`, Moré & Sorensen 1983), not by an unconstrained
solve. Thm 3 (Eq. (22)) bounds the excess risk of the result up to an unspecified constant
(:func:`theorem3_rate`).

Nothing here imports pyarrow: the estimators are imported by code that must not load it.
"""

from __future__ import annotations

import math
import numbers
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.errors import counted

# --------------------------------------------------------------------------------- the exact solver


@dataclass(frozen=True)
class TrustRegionSolution:
    """The global minimiser θ of q(θ) = ½θᵀAθ − bᵀθ over ‖θ‖₂ ≤ R, with its certificate.

    ``multiplier`` is λ ≥ 0 with (A + λI)θ = b, A + λI ⪰ 0 and λ(R − ‖θ‖) = 0: the conditions that
    are necessary and sufficient for a global minimum (Moré & Sorensen 1983; Gay 1981).
    ``objective`` is q(θ); ``on_boundary`` says ‖θ‖ = R; ``hard_case`` says that b had no component on
    the eigenspace of A's smallest eigenvalue and θ was completed along that eigenspace.
    """

    theta: np.ndarray
    objective: float
    multiplier: float
    on_boundary: bool
    hard_case: bool


def _positive_finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    result = float(value)
    if not (math.isfinite(result) and result > 0):
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    return result


def solve_trust_region(A: np.ndarray, b: np.ndarray, radius: float, *, tol: float = 1e-12) -> TrustRegionSolution:
    """The exact global minimiser of q(θ) = ½θᵀAθ − bᵀθ subject to ‖θ‖₂ ≤ ``radius``.

    A must be square (only its symmetric part ½(A + Aᵀ) enters q, and that is what is used); it may
    be indefinite or singular. This is Algorithm 3's OPT (Aliakbarpour et al. 2024) over a ball,
    solved exactly rather than to accuracy 1/n, following Moré & Sorensen (1983), "Computing a trust
    region step", SIAM J. Sci. Stat. Comput. 4(3), with a full eigendecomposition in place of their
    Cholesky iterations (p is small, up to ~10³):

    * A = QΛQᵀ (``numpy.linalg.eigh``), g = Qᵀb, and θ(λ) = Q·g/(Λ + λ), i.e. θ̃ⱼ = gⱼ/(λⱼ + λ).
    * λ* ≥ λ_low = max(0, −λ_min). Eigenvalues within ``tol``·‖A‖₂ of λ_min are treated as equal to
      it (and, when λ_min is within ``tol``·‖A‖₂ of 0, as 0), and a component of b of at most
      ``tol``·‖b‖ on that eigenspace as 0: the result is the exact solution for an (A, b) within
      ``tol`` (relative) of the given one, about the accuracy of the eigendecomposition anyway.
    * If b has (numerically) no component on that eigenspace, θ(λ_low) is finite. If
      ‖θ(λ_low)‖ ≤ R: with λ_low = 0 (A ⪰ 0) it is the interior minimiser (λ* = 0; b = 0 gives θ = 0);
      with λ_low > 0 this is the *hard case*, θ = θ(λ_low) + τ·v_min with τ ≥ 0 such that ‖θ‖ = R.
    * Otherwise λ* > λ_low is the one root of the secular equation φ(λ) = 1/R − 1/‖θ(λ)‖ (decreasing
      in λ, nearly linear), found by Brent's method (``scipy.optimize.brentq``) on a bracket proven
      from ‖g‖ and R, in the shifted variable μ = λ − λ_low so that tiny μ keep their digits.

    Raises ValueError for a radius that is not finite and > 0, for non-finite A or b, and for shapes
    that do not match.
    """
    R = _positive_finite(radius, "the radius")
    A = np.asarray(A, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0 or b.shape != (A.shape[0],):
        raise ValueError(f"A must be a square (p, p) matrix, p ≥ 1, and b a (p,) vector; got {A.shape} and {b.shape}")
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
        raise ValueError("A and b must be finite")
    if not (math.isfinite(tol) and 0 <= tol < 1):
        raise ValueError(f"tol must be in [0, 1), got {tol!r}")
    sym = (A + A.T) / 2.0
    values, vectors = np.linalg.eigh(sym)
    g = vectors.T @ b
    a_norm = float(np.max(np.abs(values)))
    b_norm = float(np.linalg.norm(b))
    lam_min = float(values[0])

    # shifted eigenvalues dⱼ = λⱼ + λ_low ≥ 0; the cluster at λ_min is set to exactly 0
    if lam_min >= -tol * a_norm:  # A ⪰ 0 up to tol
        low = 0.0
        shifted = np.maximum(values, 0.0)
    else:
        low = -lam_min
        shifted = values - lam_min
    singular = shifted <= tol * a_norm
    shifted[singular] = 0.0
    g_singular = g[singular]
    heavy = bool(np.any(singular)) and float(np.linalg.norm(g_singular)) > tol * b_norm
    if not heavy:
        g = g.copy()
        g[singular] = 0.0  # numerically no component there: drop rounding noise (≤ tol·‖b‖)

    def theta_at(mu: float) -> np.ndarray:
        """θ̃(λ_low + μ) in the eigenbasis; at μ = 0 only when g vanishes on the singular cluster."""
        out = np.zeros_like(g)
        nonzero = g != 0.0
        out[nonzero] = g[nonzero] / (shifted[nonzero] + mu)
        return out

    def finish(t: np.ndarray, lam: float, on_boundary: bool, hard: bool) -> TrustRegionSolution:
        theta = vectors @ t
        norm = float(np.linalg.norm(theta))
        if norm > R:  # rounding only (relative ~1e-15): keep θ feasible
            theta = theta * (R / norm)
        objective = float(0.5 * theta @ sym @ theta - b @ theta)
        return TrustRegionSolution(theta, objective, lam, on_boundary, hard)

    if not heavy:
        t = theta_at(0.0)
        norm = float(np.linalg.norm(t))
        if norm <= R:
            if low == 0.0:  # interior (A ⪰ 0): the minimum-norm stationary point
                return finish(t, 0.0, False, False)
            # the hard case (Moré & Sorensen 1983): complete along the eigenvector of λ_min
            t[0] = math.sqrt(max(R * R - norm * norm, 0.0))  # t[0] is 0 here: index 0 is in the cluster
            return finish(t, low, True, True)

    # the boundary: ‖θ(λ_low + μ)‖ = R for exactly one μ > 0
    from scipy import optimize  # scipy is imported only when a root is needed

    def secular(mu: float) -> float:
        """−φ(λ_low + μ) = 1/‖θ‖ − 1/R: increasing in μ, < 0 while ‖θ‖ > R."""
        norm = float(np.linalg.norm(theta_at(mu)))
        return math.inf if norm == 0.0 else 1.0 / norm - 1.0 / R

    g_norm = float(np.linalg.norm(g))
    # ‖θ(μ)‖ ≤ ‖g‖/μ since all dⱼ ≥ 0: at μ = ‖g‖/R it is ≤ R, −φ ≥ 0
    upper = g_norm / R
    if heavy:
        # on the singular cluster dⱼ = 0, so ‖θ(μ)‖ ≥ ‖g_S‖/μ = 2R at this μ: −φ < 0
        lower = float(np.linalg.norm(g_singular)) / (2.0 * R)
    else:
        lower = 0.0  # ‖θ(0)‖ > R (else returned above): −φ(0) < 0
    while secular(upper) < 0.0:  # rounding only
        upper *= 2.0
    if secular(lower) >= 0.0:  # rounding only: the root is at the lower end
        mu = lower
    else:
        mu = float(optimize.brentq(secular, lower, upper, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500))
    return finish(theta_at(mu), low + mu, True, False)


# --------------------------------------------------------------------------------- Thm 3's rate


@dataclass(frozen=True)
class Theorem3Rate:
    """Thm 3's rate for E[f(θ̂) − f* | data] (Eq. (22)), with the constant the paper leaves unspecified set to 1.

    ``rate`` is only the shape of the bound: ``constant_stated`` is False because the theorem states
    it with ≲, and ``statement`` says so in words.
    """

    rate: float
    constant_stated: bool
    statement: str


def theorem3_rate(*, n: int, d: int, r_squared: float, theta_radius: float) -> Theorem3Rate:
    """Thm 3, Eq. (22): E[f(θ̂) − f*] ≲ max_{θ∈Θ}(‖θ‖² + ‖θ‖)·((log d/√n)(r² + r·d) ∧ d).

    Θ is the ball of radius R = ``theta_radius``, so max_{θ∈Θ}(‖θ‖² + ‖θ‖) = R² + R; d is the row's
    dimension (features and label); r² = sup_x E‖M(x) − x‖² is the error of ONE copy (Lemma 1,
    Eq. (85)); ∧ is the minimum. The paper gives the bound only up to a universal constant (its proof
    goes through the matrix Bernstein bound of Tropp 2016), so the expression is returned with
    constant 1 and ``constant_stated=False``.

    log is the natural log, taken as max(log d, 1): for d ≤ 2, log d ≤ log 2 (and log 1 = 0) would
    make the bound shrink or vanish, which the proof does not give (its log d comes from the
    dimensional factor of matrix Bernstein, which is at least a constant).
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"theorem3_rate: n must be an integer ≥ 1, got {n!r}")
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1:
        raise ValueError(f"theorem3_rate: d must be an integer ≥ 1, got {d!r}")
    if isinstance(r_squared, bool) or not isinstance(r_squared, numbers.Real) or not (
        math.isfinite(float(r_squared)) and r_squared >= 0
    ):
        raise ValueError(f"theorem3_rate: r_squared must be a finite number ≥ 0, got {r_squared!r}")
    radius = _positive_finite(theta_radius, "theorem3_rate: theta_radius")
    n_, d_, r2 = operator.index(n), operator.index(d), float(r_squared)
    log_d = max(math.log(d_), 1.0)
    rate = (radius**2 + radius) * min(log_d / math.sqrt(n_) * (r2 + math.sqrt(r2) * d_), float(d_))
    statement = (
        "E[f(θ̂) − f*] ≲ (R² + R)·min((log d/√n)(r² + r·d), d), "
        "up to an unspecified universal constant (Thm 3 uses ≲; Tropp 2016 matrix Bernstein)"
    )
    return Theorem3Rate(rate, False, statement)


# --------------------------------------------------------------------------------- the moments


class RegressionMoments:
    """The sums behind Algorithm 3's f̂ (Eq. (74)), accumulated from pairs of private copies.

    A streaming accumulator in the sense of :mod:`ldpcli.estimators._protocol` (``empty``, ``add``,
    ``merge``), fed with :meth:`add_pair`: batches of the two copies of the same rows, each
    (rows, p + 1), the label in column ``label_index`` and the p features in the other columns in
    order. In float64 it keeps n, S = Σ(ẑ¹ẑ²ᵀ + ẑ²ẑ¹ᵀ) (p × p), s = Σ(l̂¹ẑ² + l̂²ẑ¹) and Σ l̂¹l̂²,
    so that A = S/2n, b = s/2n and ½·mean(l̂¹l̂²) are unbiased for (1/n)Σzzᵀ, (1/n)Σ l·z and ½·mean(l²).
    """

    def __init__(self, label_index: int = -1) -> None:
        if isinstance(label_index, bool) or not isinstance(label_index, numbers.Integral):
            raise ValueError(f"label_index must be an integer, got {label_index!r}")
        self.label_index: int = operator.index(label_index)
        self._count: int = 0
        self._width: int | None = None  # p + 1, fixed by the first batch
        self._cross: np.ndarray | None = None  # Σ ẑ¹ẑ²ᵀ + ẑ²ẑ¹ᵀ
        self._linear: np.ndarray | None = None  # Σ l̂¹ẑ² + l̂²ẑ¹
        self._labels: float = 0.0  # Σ l̂¹l̂²

    def empty(self) -> RegressionMoments:
        """A new accumulator with the same label column and no rows."""
        return RegressionMoments(self.label_index)

    @property
    def n(self) -> int:
        """The number of rows (pairs of copies) added."""
        return self._count

    @property
    def p(self) -> int | None:
        """The number of features, or None before the first batch."""
        return None if self._width is None else self._width - 1

    def _label_column(self, width: int) -> int:
        if not -width <= self.label_index < width:
            raise ValueError(f"label_index {self.label_index} is outside rows of {width} values")
        return self.label_index % width

    def add(self, values: np.ndarray, keep: Any | None = None) -> None:
        """The protocol's ``add``: a (rows, 2·(p + 1)) batch holding the two copies side by side."""
        values = np.asarray(values)
        if values.ndim != 2 or values.shape[1] % 2:
            raise ValueError(f"expected the two copies side by side, (rows, 2·(p + 1)); got shape {values.shape}")
        half = values.shape[1] // 2
        self.add_pair(values[:, :half], values[:, half:])

    def add_pair(self, copy1: np.ndarray, copy2: np.ndarray) -> None:
        """Take the two independent private copies of a batch of rows, each (rows, p + 1), p ≥ 1.

        Uses matrix products on the whole batch (ẑ¹ᵀẑ², ẑ²ᵀl̂¹, ...), in float64.
        """
        c1 = np.asarray(copy1, dtype=np.float64)
        c2 = np.asarray(copy2, dtype=np.float64)
        if c1.ndim != 2 or c1.shape != c2.shape or c1.shape[1] < 2:
            raise ValueError(
                "the two copies must have one shape (rows, p + 1) with p ≥ 1; "
                f"got {np.shape(copy1)} and {np.shape(copy2)}"
            )
        width = c1.shape[1]
        if self._width is not None and width != self._width:
            raise ValueError(f"rows of shape {c1.shape} do not match the earlier rows of {self._width} values")
        label = self._label_column(width)
        if not (np.all(np.isfinite(c1)) and np.all(np.isfinite(c2))):
            raise ValueError("the copies must be finite")
        z1, z2 = np.delete(c1, label, axis=1), np.delete(c2, label, axis=1)
        l1, l2 = c1[:, label], c2[:, label]
        product = z1.T @ z2  # Σ ẑ¹ẑ²ᵀ
        cross = product + product.T  # exactly symmetric
        linear = z2.T @ l1 + z1.T @ l2
        if self._cross is None or self._linear is None:
            self._cross, self._linear = cross, linear
        else:
            self._cross += cross
            self._linear += linear
        self._width = width
        self._labels += float(l1 @ l2)
        self._count += c1.shape[0]

    def merge(self, other: RegressionMoments) -> None:
        """Add another accumulator's sums (another shard); it must have the same p and label column."""
        if not isinstance(other, RegressionMoments):
            raise ValueError(f"cannot merge {type(other).__name__} into RegressionMoments")
        if self._width is not None and other._width is not None and self._width != other._width:
            raise ValueError(f"cannot merge moments of p = {counted(other._width - 1, 'feature')} into p = {self._width - 1}")
        width = self._width if self._width is not None else other._width
        if width is None:
            same_label = self.label_index == other.label_index
        else:
            in_range = -width <= other.label_index < width
            same_label = in_range and self._label_column(width) == other.label_index % width
        if not same_label:
            raise ValueError(f"cannot merge moments with label column {other.label_index} into {self.label_index}")
        if other._cross is None or other._linear is None:
            return
        if self._cross is None or self._linear is None:
            self._cross, self._linear = other._cross.copy(), other._linear.copy()
        else:
            self._cross += other._cross
            self._linear += other._linear
        self._width = other._width
        self._labels += other._labels
        self._count += other._count

    def _require_rows(self) -> None:
        if self._count == 0 or self._cross is None:
            raise ValueError("no rows: add copies before asking for A, b or the label moment")

    @property
    def A(self) -> np.ndarray:
        """(1/2n)Σ(ẑ¹ẑ²ᵀ + ẑ²ẑ¹ᵀ): unbiased for (1/n)Σzzᵀ, symmetric, possibly indefinite."""
        self._require_rows()
        return np.asarray(self._cross) / (2 * self._count)

    @property
    def b(self) -> np.ndarray:
        """(1/2n)Σ(l̂¹ẑ² + l̂²ẑ¹): unbiased for (1/n)Σ l·z."""
        self._require_rows()
        return np.asarray(self._linear) / (2 * self._count)

    @property
    def label_second_moment(self) -> float:
        """(1/n)Σ l̂¹l̂²: unbiased for (1/n)Σ l² (it can be negative)."""
        self._require_rows()
        return self._labels / self._count


# --------------------------------------------------------------------------------- the fit


@dataclass(frozen=True)
class RegressionFit:
    """θ̂ = argmin of f̂ over ‖θ‖ ≤ R, and the unbiased estimate f̂(θ̂) of (1/2n)Σ(θ̂ᵀz − l)².

    ``objective`` includes the label term ½·mean(l̂¹l̂²), so it estimates the full least-squares
    loss (and can be negative); ``indefinite`` says λ_min(A) < 0; ``multiplier``, ``on_boundary`` and
    ``hard_case`` are the trust-region solver's (:class:`TrustRegionSolution`).
    """

    theta: np.ndarray
    objective: float
    n: int
    radius: float
    multiplier: float
    on_boundary: bool
    hard_case: bool
    indefinite: bool


def fit(moments: RegressionMoments, radius: float) -> RegressionFit:
    """Algorithm 3's OPT over Θ = {‖θ‖₂ ≤ ``radius``}, solved exactly (:func:`solve_trust_region`).

    Thm 3 (Eq. (22)) bounds the expected excess risk of the result; see :func:`theorem3_rate`.
    """
    R = _positive_finite(radius, "the radius")
    A, b = moments.A, moments.b
    solution = solve_trust_region(A, b, R)
    objective = solution.objective + 0.5 * moments.label_second_moment
    indefinite = bool(np.linalg.eigvalsh(A)[0] < 0.0)
    return RegressionFit(
        theta=solution.theta,
        objective=float(objective),
        n=moments.n,
        radius=R,
        multiplier=solution.multiplier,
        on_boundary=solution.on_boundary,
        hard_case=solution.hard_case,
        indefinite=indefinite,
    )


def _raw_data(z: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    z = np.asarray(z, dtype=np.float64)
    label = np.asarray(label, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] == 0 or label.shape != (z.shape[0],):
        raise ValueError(f"z must be (n, p) with n ≥ 1 and the labels (n,); got {z.shape} and {label.shape}")
    return z, label


def least_squares_objective(z: np.ndarray, label: np.ndarray, theta: np.ndarray) -> float:
    """(1/2n)Σᵢ(θᵀzᵢ − lᵢ)² on raw (non-private) data: the f of Eq. (20)."""
    z, label = _raw_data(z, label)
    residual = z @ np.asarray(theta, dtype=np.float64) - label
    return float(0.5 * np.mean(residual**2))


def ball_least_squares(z: np.ndarray, label: np.ndarray, radius: float) -> np.ndarray:
    """The non-private least squares over the same ball ‖θ‖ ≤ R: the θ* of the excess risk f(θ̂) − f*.

    Solved exactly with :func:`solve_trust_region` on A = zᵀz/n, b = zᵀl/n.
    """
    z, label = _raw_data(z, label)
    n = z.shape[0]
    return solve_trust_region(z.T @ z / n, z.T @ label / n, radius).theta
