"""Exact Euclidean projections onto public convex sets: ball, box, simplex, orthant, convex hull.

Błasiok, Bun, Nikolov, Steinke 2019, Lemma 5.3: if W is an unbiased estimate of x and x lies in a
closed convex set K, the projection W* of W onto K satisfies ‖W* − x‖ ≤ ‖W − x‖ for every outcome
(the projection's obtuse angle: ⟨W − W*, x − W*⟩ ≤ 0), and on average it can be far smaller. So any
mean estimate can be projected onto a public set known to contain the truth (``Release.mean(project=…)``),
and query answers onto the convex hull of the universe's answer vectors
(``Release.answer``). Each set here projects exactly, with no general-purpose solver:

- :class:`Ball` and :class:`Box`: closed forms (the ball reuses :data:`ldpcli.math._domains.L2_BALL`'s
  overflow-safe scaling);
- :class:`Simplex`: the sort-based algorithm (Held, Wolfe, Crowder 1974; Duchi, Shalev-Shwartz,
  Singer, Chandra 2008, Fig. 1);
- :class:`Nonneg`: max(y, 0);
- :class:`Hull`: Wolfe's minimum-norm-point algorithm (P. Wolfe, "Finding the nearest point in a
  polytope", Math. Programming 11, 1976) on the points translated by −y, finite and exact in exact
  arithmetic, with a certificate of optimality: max_j ⟨y − p, v_j − p⟩ over all points, which is
  ≤ 0 exactly when p is the projection.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.math._domains import L2_BALL
from ldpcli.math._lazy import linalg

#: The accepted forms of a set, for messages.
FORMS = "ball[:R], box[:L], box:LO,HI, simplex[:S], nonneg, hull:FILE, domain"
#: Relative tolerance of Wolfe's stopping rule and of its affine-independence test.
WOLFE_TOLERANCE = 1e-12


def _vector(y: np.ndarray) -> np.ndarray:
    """y as a finite 1-D float64 array (ValueError otherwise)."""
    out = np.asarray(y, dtype=np.float64)
    if out.ndim != 1 or out.size == 0:
        raise ValueError(f"a point to project must be a non-empty 1-D array, got shape {out.shape}")
    if not np.all(np.isfinite(out)):
        raise ValueError("a point to project must be finite")
    return out


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    return float(value)


class ConvexSet(abc.ABC):
    """A closed convex set of R^d with an exact Euclidean projection."""

    name: str

    @abc.abstractmethod
    def project(self, y: np.ndarray) -> np.ndarray:
        """The nearest point of the set to ``y`` (a new array; ``y`` is not modified)."""

    @abc.abstractmethod
    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        """Whether ``x`` lies in the set, up to a tolerance relative to the set's scale."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for people, e.g. ``ℓ2 ball of radius 2``."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """A JSON-able description."""

    def check_dimension(self, d: int) -> None:
        """ValueError if the set lives in a dimension other than d (only a hull has one; the
        others exist in every dimension d ≥ 1)."""
        if d < 1:
            raise ValueError(f"a set lives in dimension >= 1, not {d}")


@dataclass(frozen=True)
class Ball(ConvexSet):
    """{x : ‖x‖₂ ≤ R}."""

    radius: float
    name = "ball"

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", _positive(self.radius, "the ball's radius"))

    def project(self, y: np.ndarray) -> np.ndarray:
        """y scaled onto the sphere of radius R when ‖y‖ > R."""
        return L2_BALL.nearest(_vector(y)[None, :], self.radius)[0]

    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        return bool(np.linalg.norm(x) <= self.radius * (1.0 + tol))

    def describe(self) -> str:
        return f"ℓ2 ball of radius {self.radius:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.name, "radius": self.radius}


@dataclass(frozen=True)
class Box(ConvexSet):
    """[low, high]^d."""

    low: float
    high: float
    name = "box"

    def __post_init__(self) -> None:
        for what, value in (("low", self.low), ("high", self.high)):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(value):
                raise ValueError(f"the box's {what} end must be a finite number, got {value!r}")
        if not self.low < self.high:
            raise ValueError(f"the box needs LO < HI, got {self.low!r}, {self.high!r}")
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))

    def project(self, y: np.ndarray) -> np.ndarray:
        """Each coordinate clamped to [low, high]."""
        return np.clip(_vector(y), self.low, self.high)

    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        slack = tol * max(abs(self.low), abs(self.high), 1.0)
        return bool(np.all(x >= self.low - slack) and np.all(x <= self.high + slack))

    def describe(self) -> str:
        return f"box [{self.low:g}, {self.high:g}]^d"

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.name, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Simplex(ConvexSet):
    """{x ≥ 0 : Σ x = S}: probability vectors (S = 1), e.g. a histogram's frequencies."""

    total: float = 1.0
    name = "simplex"

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", _positive(self.total, "the simplex's total"))

    def project(self, y: np.ndarray) -> np.ndarray:
        """max(y − θ, 0) with θ from the sorted values (Duchi et al. 2008, Fig. 1): u sorted
        descending, ρ the largest j with u_j − (Σ_{i≤j} u_i − S)/j > 0, θ = (Σ_{i≤ρ} u_i − S)/ρ."""
        y = _vector(y)
        u = np.sort(y)[::-1]
        excess = np.cumsum(u) - self.total
        j = np.arange(1, y.size + 1)
        rho = int(np.flatnonzero(u - excess / j > 0)[-1])
        theta = excess[rho] / (rho + 1)
        return np.maximum(y - theta, 0.0)

    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        return bool(np.all(x >= -tol * self.total) and abs(float(np.sum(x)) - self.total) <= tol * self.total * max(1, x.size))

    def describe(self) -> str:
        return f"simplex {{x ≥ 0, Σx = {self.total:g}}}"

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.name, "total": self.total}


@dataclass(frozen=True)
class Nonneg(ConvexSet):
    """{x : x ≥ 0}."""

    name = "nonneg"

    def project(self, y: np.ndarray) -> np.ndarray:
        """max(y, 0) coordinate by coordinate."""
        return np.maximum(_vector(y), 0.0)

    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        return bool(np.all(x >= -tol))

    def describe(self) -> str:
        return "non-negative orthant {x ≥ 0}"

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.name}


@dataclass(frozen=True)
class HullSolution:
    """The projection onto a hull, as a convex combination of active points, with its certificate."""

    point: np.ndarray
    indices: np.ndarray  # into Hull.points: the final corral
    weights: np.ndarray  # ≥ 0, summing to 1
    gap: float  # max_j ⟨y − p, v_j − p⟩ over all points: ≤ 0 (up to rounding) at the projection
    iterations: int


class Hull(ConvexSet):
    """The convex hull of finitely many points (the rows of an array; duplicates are dropped)."""

    name = "hull"

    def __init__(self, points: np.ndarray, source: str = "") -> None:
        """``points``: (N, d), finite. Only the distinct rows are kept (``np.unique`` order)."""
        array = np.asarray(points, dtype=np.float64)
        if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
            raise ValueError(f"a hull needs a non-empty 2-D array of points, got shape {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError("a hull's points must be finite")
        self.points = np.unique(array, axis=0)
        self.source = source

    @property
    def dim(self) -> int:
        """The dimension of the points."""
        return int(self.points.shape[1])

    def check_dimension(self, d: int) -> None:
        if d != self.dim:
            where = f" of {self.source}" if self.source else ""
            raise ValueError(f"the hull{where} has points of dimension {self.dim}, the estimate has dimension {d}")

    def project(self, y: np.ndarray) -> np.ndarray:
        return self.solve(y).point

    def contains(self, x: np.ndarray, tol: float = 1e-9) -> bool:
        x = _vector(x)
        scale = max(1.0, float(np.max(np.abs(self.points))))
        return bool(np.linalg.norm(self.solve(x).point - x) <= tol * scale)

    def describe(self) -> str:
        where = f" ({self.source})" if self.source else ""
        return f"convex hull of {self.points.shape[0]} distinct points in R^{self.dim}{where}"

    def to_dict(self) -> dict[str, Any]:
        return {"set": self.name, "points": int(self.points.shape[0]), "dimension": self.dim, "source": self.source}

    def solve(self, y: np.ndarray) -> HullSolution:
        """Wolfe's algorithm for the point of conv(V − y) nearest to 0, translated back by y.

        Major cycle: with x the current point (in translated coordinates), add the point v_j
        minimising ⟨v_j, x⟩ unless ⟨x, x⟩ − ⟨v_j, x⟩ ≤ tol·scale² (x is then optimal). Minor
        cycle: the affine minimiser of the corral S, λ ∝ (G + 11ᵀ)⁻¹1 with G the Gram matrix of S
        (positive definite iff S is affinely independent); if some λ_i ≤ 0, move from the current
        convex weights towards λ to the first zero, drop the points whose weight is 0, repeat.
        The Cholesky factor of G + 11ᵀ grows by one row per added point and is recomputed after a
        drop. A point whose addition makes the factor singular (affinely dependent within rounding)
        ends the search: the current point is then optimal to working precision.
        """
        y = _vector(y)
        self.check_dimension(y.size)
        v = self.points - y
        norms = np.einsum("ij,ij->i", v, v)
        scale2 = max(float(np.max(norms)), float(np.max(np.einsum("ij,ij->i", self.points, self.points))), 1e-300)
        tol = WOLFE_TOLERANCE * scale2
        start = int(np.argmin(norms))
        corral = [start]
        weights = np.array([1.0])
        factor = np.array([[math.sqrt(norms[start] + 1.0)]])
        x = v[start].copy()
        limit = 50 * (self.dim + 1) + 1000
        iterations = 0
        while True:
            iterations += 1
            if iterations > limit:
                raise RuntimeError(f"Wolfe's algorithm did not converge in {limit} iterations "
                                   f"({self.points.shape[0]} points in R^{self.dim})")
            products = v @ x
            j = int(np.argmin(products))
            if float(x @ x) - float(products[j]) <= tol or j in corral:
                break
            column = v[corral] @ v[j] + 1.0
            row = linalg.solve_triangular(factor, column, lower=True, check_finite=False)
            last = float(v[j] @ v[j] + 1.0 - row @ row)
            if last <= WOLFE_TOLERANCE * (float(v[j] @ v[j]) + 1.0):
                break
            factor = np.block([[factor, np.zeros((factor.shape[0], 1))], [row[None, :], np.array([[math.sqrt(last)]])]])
            corral.append(j)
            weights = np.append(weights, 0.0)
            stalled = False
            while True:  # minor cycles
                mu = linalg.cho_solve((factor, True), np.ones(len(corral)), check_finite=False)
                affine = mu / mu.sum()
                if np.all(affine > 0.0):
                    weights = affine
                    break
                negative = affine <= 0.0
                ratios = np.full(affine.size, np.inf)
                ratios[negative] = weights[negative] / (weights[negative] - affine[negative])
                k = int(np.argmin(ratios))
                if ratios[k] == 0.0 and corral[k] == j:  # the new point cannot enter: optimal to rounding
                    stalled = True
                weights = weights + ratios[k] * (affine - weights)
                weights[k] = 0.0
                keep = weights > 1e-14 * np.max(weights)
                corral = [c for c, kept in zip(corral, keep) if kept]
                weights = weights[keep] / weights[keep].sum()
                sub = v[corral]
                factor = linalg.cholesky(sub @ sub.T + 1.0, lower=True, check_finite=False)
                if stalled:
                    break
            x = weights @ v[corral]
            if stalled:
                break
        indices = np.asarray(corral)
        exact = weights @ self.points[indices]
        residual = y - exact
        gap = float(np.max((self.points - exact) @ residual))
        return HullSolution(exact, indices, weights, gap, iterations)


@dataclass(frozen=True)
class SetRequest:
    """A set that needs the release to be resolved: ``ball``/``box`` without a size (L), ``domain``,
    or ``hull`` (a file to read)."""

    kind: str
    path: str | None = None


def parse_set(spec: str) -> ConvexSet | SetRequest:
    """The set named by ``spec``: ``ball[:R]``, ``box[:L]``, ``box:LO,HI``, ``simplex[:S]``,
    ``nonneg``, ``hull:FILE``, ``domain``. ValueError listing the forms for anything else."""
    text = spec.strip()
    name, _, arg = text.partition(":")
    try:
        if name == "ball":
            return Ball(float(arg)) if arg else SetRequest("ball")
        if name == "box":
            if not arg:
                return SetRequest("box")
            if "," in arg:
                low, high = (float(part) for part in arg.split(","))
                return Box(low, high)
            half = _positive(float(arg), "the box's L")
            return Box(-half, half)
        if name == "simplex":
            return Simplex(float(arg)) if arg else Simplex()
        if name in ("nonneg", "domain") and not arg and ":" not in text:
            return Nonneg() if name == "nonneg" else SetRequest("domain")
        if name == "hull" and arg:
            return SetRequest("hull", arg)
    except ValueError as exc:
        raise ValueError(f"{spec!r}: {exc}; the forms are {FORMS}") from None
    raise ValueError(f"{spec!r} is not a set; the forms are {FORMS}")
