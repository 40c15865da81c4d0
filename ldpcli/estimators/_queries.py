"""Query release over a finite universe: the workload's geometry, and the local and central bounds.

Błasiok, Bun, Nikolov, Steinke 2019 ("Towards instance-optimal private query release") identify each
item x of a finite universe with its vector of m query answers Q(x); a dataset's answers are then
the mean of n such vectors, and every release below estimates that mean and projects it onto the
convex hull K = conv{Q(x)} of the universe (:class:`~ldpcli.estimators._projection.Hull`), which
contains the truth. The workload is public, so everything here is computed from it alone (and from
the public n and privacy parameters), never from the data:

- :class:`Workload`: the items' keys, the queries' names and the answer matrix; its distinct answer
  vectors, their centroid c (the encoding :func:`ldpcli.analysis._answer.encode_queries` subtracts), the
  radius about c, the exact ℓ2 diameter, and the Gaussian mean width g(K) = E sup_{w∈K}⟨w, Z⟩.
- Lemma 5.3 with its constant: for W with E W = x ∈ K and W* its projection onto K,
  ‖W* − x‖² ≤ ⟨W* − x, W − x⟩ ≤ sup_{w∈K}⟨w − x, W − x⟩ (the projection's obtuse angle), so
  E‖W* − x‖² ≤ E sup_{w∈K}⟨w, W − x⟩; for Gaussian noise N(0, σ²I) that is σ·g(K) exactly
  (:func:`projection_bound`; Lemma 2.2 with the constant 1).
- The central projection mechanism (Lemma 2.2, after Nikolov, Talwar, Zhang): X̄ + N(0, σ²I) with
  σ = diam(𝒳)/(n·√(2ρ)) is ρ-zCDP (replacing one row moves X̄ by at most diam/n; the Gaussian
  mechanism is Δ²/(2σ²)-zCDP) — calibrated to the *diameter* (docs/errata.md §18), then projected.
- The coarse projection mechanism (Sec. 4.1): round each item to its nearest point of a public
  α/2-separated maximal subset 𝒳¹ of the universe (a cover, Lemma 2.7; :func:`greedy_cover`), run
  the projection mechanism on 𝒳¹ and project onto conv(𝒳¹), the hull of the public cover, never
  of the data (§19). Its RMS error per query is at most √(σ₁g(𝒳¹)/m) + α/2 (Thm 1.2's form with
  its constants: the projection error on the cover plus the rounding).
- zCDP to (ε, δ): Bun and Steinke 2016, Prop. 1.3 (ε = ρ + 2√(ρ log(1/δ)), the paper's) and the exact
  curve of the Gaussian mechanism with Δ/σ = √(2ρ) (Balle and Wang 2018, Thm 8), which is what
  the release actually is.
- Thm 5.1 (local): err² ≲ (Δ·g(𝒳)/(ε√(nm)))^{1/2} with 𝒳 ⊆ Δ√m·B₂^m, up to an unspecified constant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ldpcli.estimators._projection import Hull

#: Draws of the Monte Carlo estimate of the Gaussian mean width (seeded: a function of the workload).
WIDTH_DRAWS = 512
_WIDTH_SEED = 0x9_1DE5
#: Rows of the universe per block of the exact diameter (a block of the Gram matrix at a time).
_BLOCK = 512


@dataclass(frozen=True)
class MeanWidth:
    """g(K) = E sup_{w∈K}⟨w, Z⟩, Z ~ N(0, I): a Monte Carlo estimate and a rigorous upper bound."""

    estimate: float
    std_error: float
    draws: int
    #: R·√(2 log N) for N distinct points within R of their centroid (a Gaussian maximal inequality).
    upper_bound: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view."""
        return {"estimate": self.estimate, "std_error": self.std_error, "draws": self.draws,
                "upper_bound": self.upper_bound}


@dataclass(frozen=True)
class Workload:
    """A public workload: item keys (rows), query names (columns) and the answers (N × m).

    Values lie in [0, 1] (counting queries) or [−1, 1]; :func:`ldpcli.analysis._answer.read_workload` checks
    that and the keys' uniqueness.
    """

    names: tuple[str, ...]
    values: np.ndarray
    keys: np.ndarray | None = None
    source: str = ""

    @property
    def m(self) -> int:
        """The number of queries."""
        return len(self.names)

    @property
    def items(self) -> int:
        """The number of items (rows) of the universe."""
        return int(self.values.shape[0])

    @cached_property
    def _unique(self) -> tuple[np.ndarray, np.ndarray]:
        distinct, inverse = np.unique(self.values, axis=0, return_inverse=True)
        return distinct, inverse.reshape(-1)

    @property
    def distinct(self) -> np.ndarray:
        """The distinct answer vectors (the universe as the queries see it), in ``np.unique`` order."""
        return self._unique[0]

    @property
    def item_rows(self) -> np.ndarray:
        """For each item, the index of its answer vector in :attr:`distinct`."""
        return self._unique[1]

    @cached_property
    def hull(self) -> Hull:
        """conv of the distinct answer vectors."""
        return Hull(self.distinct, source=self.source)

    @cached_property
    def center(self) -> np.ndarray:
        """c, the centroid of the distinct answer vectors (public): the encoding's origin."""
        return np.asarray(self.distinct.mean(axis=0))

    @cached_property
    def radius(self) -> float:
        """max ‖Q(x) − c‖₂ over the universe: the norm bound of the centred encoding."""
        shifted = self.distinct - self.center
        return float(np.sqrt(np.max(np.einsum("ij,ij->i", shifted, shifted))))

    @cached_property
    def box_radius(self) -> float:
        """max |Q(x) − c|_j over the universe and the queries: the ℓ∞ bound of the centred encoding."""
        return float(np.max(np.abs(self.distinct - self.center)))

    @cached_property
    def diameter(self) -> float:
        """The exact ℓ2 diameter of the distinct answer vectors (blocks of the Gram matrix)."""
        return diameter(self.distinct)

    @cached_property
    def width(self) -> MeanWidth:
        """The Gaussian mean width of K (:func:`mean_width`)."""
        return mean_width(self.distinct)


def diameter(points: np.ndarray) -> float:
    """max ‖v_i − v_j‖₂ over pairs of rows, exactly, by blocks of ‖v_i‖² + ‖v_j‖² − 2⟨v_i, v_j⟩.

    Rows are centred first so that the Gram form does not cancel; the largest pair is then
    recomputed as a direct difference.
    """
    v = points - points.mean(axis=0)
    sq = np.einsum("ij,ij->i", v, v)
    best, pair = -1.0, (0, 0)
    for start in range(0, v.shape[0], _BLOCK):
        block = v[start:start + _BLOCK]
        dist = sq[start:start + _BLOCK, None] + sq[None, :] - 2.0 * (block @ v.T)
        i, j = np.unravel_index(int(np.argmax(dist)), dist.shape)
        if dist[i, j] > best:
            best, pair = float(dist[i, j]), (start + int(i), int(j))
    diff = points[pair[0]] - points[pair[1]]
    return float(np.sqrt(diff @ diff))


def mean_width(points: np.ndarray, draws: int = WIDTH_DRAWS) -> MeanWidth:
    """g(conv V) = E max_i ⟨v_i, Z⟩ by seeded Monte Carlo (a function of the public V only), with
    the rigorous bound R·√(2 log N), R = max_i ‖v_i − v̄‖ (E⟨v̄, Z⟩ = 0 and a maximal inequality)."""
    v = points - points.mean(axis=0)
    rng = np.random.default_rng([_WIDTH_SEED, *v.shape])
    sup = np.empty(draws)
    step = max(1, 2**24 // max(1, v.size))
    for start in range(0, draws, step):
        z = rng.standard_normal((min(step, draws - start), v.shape[1]))
        sup[start:start + z.shape[0]] = np.max(z @ v.T, axis=1)
    radius = float(np.sqrt(np.max(np.einsum("ij,ij->i", v, v))))
    bound = radius * math.sqrt(2.0 * math.log(v.shape[0])) if v.shape[0] > 1 else 0.0
    return MeanWidth(float(sup.mean()), float(sup.std(ddof=1) / math.sqrt(draws)), draws, bound)


def projection_bound(sigma: float, width: float) -> float:
    """E‖W* − x‖² ≤ σ·g(K) for W = x + N(0, σ²I), x ∈ K (Lemma 5.3 / 2.2 with the constant 1)."""
    return sigma * width


def central_sigma(diameter_: float, n: int, rho: float) -> float:
    """σ = diam/(n·√(2ρ)): the mean of n rows has ℓ2 sensitivity diam/n (docs/errata.md §18)."""
    return diameter_ / (n * math.sqrt(2.0 * rho))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε = ρ + 2√(ρ log(1/δ)): ρ-zCDP implies (ε, δ)-DP (Bun and Steinke 2016, Prop. 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def gaussian_epsilon(rho: float, delta: float) -> float:
    """The least ε with δ(ε) ≤ δ for the Gaussian mechanism with Δ/σ = √(2ρ) (Balle and Wang 2018,
    Thm 8): the exact (ε, δ) curve of the central release, never above :func:`zcdp_epsilon`."""
    from scipy import optimize

    from ldpcli.mechanisms._baselines import gaussian_log_delta

    ratio, target = math.sqrt(2.0 * rho), math.log(delta)
    if gaussian_log_delta(ratio, 0.0) <= target:
        return 0.0
    high = zcdp_epsilon(rho, delta)
    while gaussian_log_delta(ratio, high) > target:  # never runs when Prop. 1.3 holds; kept as a guard
        high *= 2.0
    return float(optimize.brentq(lambda e: gaussian_log_delta(ratio, e) - target, 0.0, high, xtol=1e-14, rtol=1e-14))


def greedy_cover(points: np.ndarray, alpha: float) -> np.ndarray:
    """Indices of a maximal α/2-separated subset of the rows in d(x, y) = ‖x − y‖₂/√m.

    Farthest-point traversal (Gonzalez 1985) from the first row: add the row farthest from the
    points chosen so far while it is more than (α/2)·√m away. The chosen rows are pairwise more
    than (α/2)√m apart and every row is within (α/2)√m of one of them: an α/2-cover (Lemma 2.7).
    """
    threshold = 0.5 * alpha * math.sqrt(points.shape[1])
    chosen = [0]
    far = np.sqrt(np.einsum("ij,ij->i", points - points[0], points - points[0]))
    while True:
        nxt = int(np.argmax(far))
        if far[nxt] <= threshold:
            return np.asarray(chosen)
        chosen.append(nxt)
        diff = points - points[nxt]
        far = np.minimum(far, np.sqrt(np.einsum("ij,ij->i", diff, diff)))


def nearest_rows(points: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For each row of ``points``, the index of its nearest row of ``targets`` (blocks of rows)."""
    sq = np.einsum("ij,ij->i", targets, targets)
    out = np.empty(points.shape[0], dtype=np.int64)
    for start in range(0, points.shape[0], _BLOCK):
        block = points[start:start + _BLOCK]
        out[start:start + _BLOCK] = np.argmin(sq[None, :] - 2.0 * (block @ targets.T), axis=1)
    return out


def local_bound(delta_: float, width: float, epsilon: float, n: int, m: int) -> float:
    """Thm 5.1's err² form (Δ·g(𝒳)/(ε√(nm)))^{1/2}, without its unspecified constant."""
    return math.sqrt(delta_ * width / (epsilon * math.sqrt(n * m)))


def marginal_workload(attributes: int, way: int = 2) -> Workload:
    """All ``way``-way marginals of ``attributes`` binary attributes over the universe {0, 1}^attributes.

    Items are the 2^attributes records (key: the record read as a binary number, attribute 0 the
    highest bit); query ``a{i}a{j}={b_i}{b_j}`` (for ``way`` = 2) is 1 on the records with those
    bits and 0 elsewhere: C(attributes, way)·2^way counting queries. The all-2-way workload of 8
    attributes has 112 queries over 256 items.
    """
    from itertools import combinations, product

    records = (np.arange(2**attributes)[:, None] >> np.arange(attributes - 1, -1, -1)[None, :]) & 1
    names, columns = [], []
    for subset in combinations(range(attributes), way):
        for bits in product((0, 1), repeat=way):
            names.append("".join(f"a{i}" for i in subset) + "=" + "".join(map(str, bits)))
            columns.append(np.all(records[:, list(subset)] == np.asarray(bits), axis=1))
    return Workload(tuple(names), np.column_stack(columns).astype(np.float64), np.arange(2**attributes), "marginals")
