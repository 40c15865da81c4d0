"""BCDP's total budget c_d: the admissible set, and its certified least-error point (docs/errata.md §15).

Aliakbarpour, Chaudhuri, Courtade, Fallah, Jordan 2024, Thm 2 (16), with c_d a free public parameter
(docs/errata.md §15): it depends only on (δ, ε, q), so choosing it costs no privacy. This module finds
the c_d of least predicted error over every admissible value, with a proof that nothing admissible
is better by more than a stated relative tolerance; :mod:`ldpcli.mechanisms._feature_levels` holds
the budget vector itself and :mod:`ldpcli.mechanisms._bcdp` the mechanism.

Notation. u_1 < … < u_g are the distinct levels of δ̃ (sorted, most sensitive first), s_i the first
sorted coordinate of level u_i (s_1 = 0), L(c) = log(1 + q·e^c − q) (non-decreasing in c, strictly
increasing for q > 0, 0 at q = 0), c_max = min{log((e^{u_1} + q − 1)/q), u_g}. A release of the
last m sorted features at level b contributes the weight w(m, b) = 1/v(m, b), v its exact
per-coordinate variance (:mod:`ldpcli.mechanisms._bcdp`: inverse-variance weights), and the predicted
error is E = Σ_i 1/Σ_{k≤i} w_k, the releases k being those whose suffix holds coordinate i.

**Assumption (W).** w(m, b) is non-decreasing in b: a larger budget never gives a release more
variance. It holds for every base (duchi-l2's radius (e^b + 1)/(e^b − 1)·… falls with b; privunit2 and
privunitg take the least-variance parameters at level b, and a b-LDP choice is also b'-LDP for
b' > b) and for the weights (c_k − c_{k−1})²/(d − k + 1) of Thm 2 (17). E then falls when any weight
grows (each 1/Σ_{k≤i} w_k does).

**The admissible set is one interval.** c_d is admissible when c_d ∈ (0, c_max] and the first budget
c_1 exceeds :data:`MIN_INCREMENT`·c_d (the mechanism spends no smaller increment, and c_1 = 0 leaves
the most sensitive feature unestimable: docs/errata.md §14). By (16), c_1 = c_d for c_d ≤ u_1 and
c_1 = u_1 − L(c_d) for c_d > u_1. So c_1/c_d is 1 on (0, u_1] and strictly decreasing on (u_1, c_max]
(a non-increasing numerator over an increasing denominator): {c_1 > MIN_INCREMENT·c_d} is an initial
segment, and the admissible set is an interval (0, c_adm) or (0, c_adm], which contains u_1.

**The error is piecewise smooth, with jumps at the levels.** On (u_j, u_{j+1}] (j ≥ 1) the features
of levels u_1, …, u_j are reduced (c_i = u_i − L(c_d)) and the rest get c_d, so Mechanism 1 makes the
releases (first sorted coordinate, budget): (0, u_1 − L(c_d)), (s_i, u_i − u_{i−1}) for 2 ≤ i ≤ j,
and (s_{j+1}, c_d − u_j + L(c_d)); the first budget is non-increasing in c_d, the last increasing,
the others constant. At c_d = u_j the features of level u_j switch from c_d to u_j − L(u_j): the error
jumps there (it is left-continuous), so the set is cut at the levels into the pieces P_0 = (0, u_1]
and P_j = (u_j, u_{j+1}], on each of which the error is continuous. The minimum over P_j may be
approached at its open end u_j⁺; the limit is evaluated there and a point just above u_j returned.

**On P_0 the best point is u_1** (one release at level c_d over all d features; under (W) its error
falls as c_d grows): plain min(δ)-LDP, the baseline that the optimum therefore never loses to.

**Bracket on P_j, and its proof.** For a cell [a, b] ⊂ P_j (closure) and any c_d in it, the first
budget is at most u_1 − L(a) and the last at most b − u_j + L(b); by (W) the weights are at most
w(d, u_1 − L(a)) and w(d − s_{j+1}, b − u_j + L(b)), the middle weights do not move, and skipping an
increment only lowers a weight. So LB(a, b) = E with those two weights is a lower bound on E over
the cell, computed from its two ends' weights only. Branch and bound: every piece gets a grid of
``cells`` cells; U, the least error evaluated anywhere, is an upper bound on the minimum; a cell with
LB ≥ U·(1 − ``rtol``) holds no point better than U by more than ``rtol`` and is dropped, any other is
halved, until every cell is dropped (or narrower than ``xtol``·c_max). The bound is exact at the ends
and continuous in them, so the cells that survive shrink to the minimisers. Result: U's point, whose
error is within ``rtol`` (relative) of the infimum of E over the admissible set; a piece whose bound
over its whole span is already ≥ U costs two weights only.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math._lazy import optimize
from ldpcli.mechanisms import _feature_levels as fl

#: Budget increments at most this fraction of c_d are not spent (rounding residue, e.g. c_1 ≈ 1e-17 at
#: ζ = 1): spending less keeps every guarantee, and no base mechanism calibrates at such an ε.
MIN_INCREMENT = 1e-9
#: The relative tolerance of the certified minimum: no admissible c_d has an error below (1 − RTOL)·E(c_d).
RTOL = 1e-4
#: Cells narrower than this fraction of c_max are not split further, and the polish stops at this width.
XTOL = 1e-10

#: A guard on the points one piece may evaluate (a few hundred suffice at RTOL: the cells that survive
#: near a smooth minimum number about √(1/RTOL)); past it the incumbent stands without its certificate.
MAX_POINTS = 20_000

#: ``log_weight(m, budget)``: log w of a release of the last ``m`` sorted features at level ``budget``,
#: non-decreasing in ``budget`` (Assumption (W)); :class:`UsageError` where it cannot be computed.
LogWeight = Callable[[int, float], float]


def paper_log_weight(m: int, budget: float) -> float:
    """log of Thm 2 (17)'s weight (c_k − c_{k−1})²/(d − k + 1) for a release of m features at level ``budget``."""
    return 2.0 * math.log(budget) - math.log(m)


def error_of(lengths: np.ndarray, log_weights: np.ndarray) -> float:
    """Σ_r lengths_r / Σ_{k≤r} w_k: the predicted error of releases with these log weights, run r
    holding the ``lengths_r`` coordinates covered by releases 1..r (a weight of −∞: a release not made)."""
    if not lengths.size or log_weights[0] == -math.inf:
        return math.inf
    return float(np.sum(lengths * np.exp(-np.logaddexp.accumulate(log_weights))))


@dataclass(frozen=True)
class _Piece:
    """P_j = (u_j, u_{j+1}] ∩ (0, c_max]: the releases' first coordinates, the middle releases' log
    weights, and the piece's ends."""

    first_level: float  # u_1
    left: float  # u_j
    right: float  # min(u_{j+1}, c_max)
    last_start: int  # s_{j+1}
    lengths: np.ndarray  # coordinates between consecutive release starts
    middle: np.ndarray  # log weights of the releases at s_2..s_j (−∞ where not spent)
    middle_budgets: np.ndarray  # their budgets u_i − u_{i−1}


class _Search:
    """The branch and bound of the module docstring, for one (δ̃, q, log_weight)."""

    def __init__(self, tilde: np.ndarray, q: float, log_weight: LogWeight) -> None:
        self.q, self.d = q, int(tilde.size)
        self.top = fl.c_max(tilde, q)
        self._log_weight = log_weight
        self._cache: dict[tuple[int, float], float] = {}
        levels, starts = np.unique(tilde, return_index=True)
        self.levels, self.starts = levels, starts
        #: The incumbent (E, c_d): the least error evaluated so far and its point.
        self.best = (math.inf, float(levels[0]))

    def log_weight(self, m: int, budget: float) -> float:
        """log w(m, budget), cached; −∞ for a budget ≤ 0 or one the base cannot release."""
        key = (m, budget)
        if key not in self._cache:
            value = -math.inf
            if budget > 0.0:
                try:
                    value = float(self._log_weight(m, budget))
                except UsageError:
                    pass
            self._cache[key] = value if not math.isnan(value) else -math.inf
        return self._cache[key]

    def pieces(self) -> list[_Piece]:
        """P_1, …, P_{g−1} cut at c_max (P_0 is handled by its best point u_1)."""
        u, s, d = self.levels, self.starts, self.d
        out = []
        for j in range(1, u.size):
            left, right = float(u[j - 1]), min(float(u[j]), self.top)
            if not right > left:
                break
            release_starts = np.append(s[:j], s[j])
            middle_budgets = np.diff(u[:j])
            middle = np.array([self.log_weight(d - int(start), float(b))
                               for start, b in zip(s[1:j], middle_budgets)])
            out.append(_Piece(float(u[0]), left, right, int(s[j]), np.diff(np.append(release_starts, d)),
                              middle, middle_budgets))
        return out

    def end_weights(self, piece: _Piece, c_d: float) -> tuple[float, float]:
        """(log w of the first release, log w of the last) at c_d on ``piece``, increments not skipped."""
        cost = fl.log_dependence_cost(c_d, self.q)
        return (self.log_weight(self.d, piece.first_level - cost),
                self.log_weight(self.d - piece.last_start, c_d - piece.left + cost))

    def value(self, piece: _Piece, c_d: float) -> float:
        """E(c_d) on ``piece`` as the mechanism makes it: increments ≤ MIN_INCREMENT·c_d not spent."""
        cost = fl.log_dependence_cost(c_d, self.q)
        budgets = (piece.first_level - cost, c_d - piece.left + cost)
        first, last = self.end_weights(piece, c_d)
        floor = MIN_INCREMENT * c_d
        middle = np.where(piece.middle_budgets > floor, piece.middle, -math.inf)
        weights = np.concatenate(([first if budgets[0] > floor else -math.inf], middle,
                                  [last if budgets[1] > floor else -math.inf]))
        return error_of(piece.lengths, weights)

    def bound(self, piece: _Piece, left: tuple[float, float], right: tuple[float, float]) -> float:
        """LB over a cell from its left end's first weight and its right end's last weight."""
        return error_of(piece.lengths, np.concatenate(([left[0]], piece.middle, [right[1]])))

    def minimise(self, cells: int, rtol: float, xtol: float) -> tuple[float, float]:
        """(c_d, E(c_d)) with E(c_d) ≤ (1 − rtol)⁻¹ · inf E over the admissible set."""
        baseline = float(self.levels[0])  # P_0's best point: one release at u_1
        self.best = (error_of(np.array([float(self.d)]), np.array([self.log_weight(self.d, baseline)])), baseline)
        for piece in self.pieces():
            self._search_piece(piece, cells, rtol, xtol)
        return self.best[1], self.best[0]

    def _offer(self, piece: _Piece, c_d: float, value: float) -> None:
        """Make (value, c_d) the incumbent if it is better; the open end u_j is replaced by a point just inside."""
        if value < self.best[0]:
            self.best = (value, math.nextafter(c_d, math.inf) if c_d == piece.left else c_d)

    def _search_piece(self, piece: _Piece, cells: int, rtol: float, xtol: float) -> None:
        """The branch and bound on one piece, updating the incumbent; then, if the incumbent is in
        this piece, a bounded Brent minimisation between its evaluated neighbours (it can only lower E)."""
        points: dict[float, tuple[float, float]] = {}
        before = self.best

        def visit(c_d: float) -> float:
            points[c_d] = self.end_weights(piece, c_d)
            value = self.value(piece, c_d)
            self._offer(piece, c_d, value)
            return value

        def push(heap: list[tuple[float, float, float]], a: float, b: float) -> None:
            heapq.heappush(heap, (self.bound(piece, points[a], points[b]), a, b))

        def open_cell(bound: float, a: float, b: float) -> bool:
            return (bound < self.best[0] * (1.0 - rtol) and b - a > xtol * self.top
                    and math.isfinite(self.best[0]) and len(points) < MAX_POINTS)

        visit(piece.left)
        visit(piece.right)
        if not open_cell(self.bound(piece, points[piece.left], points[piece.right]), piece.left, piece.right):
            return  # no point of the piece beats the incumbent by more than rtol
        grid = np.linspace(piece.left, piece.right, cells + 1).tolist()
        for c_d in grid[1:-1]:
            visit(c_d)
        heap: list[tuple[float, float, float]] = []
        for a, b in zip(grid[:-1], grid[1:]):
            push(heap, a, b)
        while heap:  # lowest bound first, so the incumbent improves early and prunes the most
            bound, a, b = heapq.heappop(heap)
            if open_cell(bound, a, b):
                mid = 0.5 * (a + b)
                visit(mid)
                push(heap, a, mid)
                push(heap, mid, b)
        if self.best is before:
            return
        found = sorted(points)
        i = found.index(self.best[1] if self.best[1] in points else piece.left)
        lo, hi = found[max(i - 1, 0)], found[min(i + 1, len(found) - 1)]
        if hi > lo:
            optimize.minimize_scalar(visit, bounds=(lo, hi), method="bounded", options={"xatol": xtol * self.top})


def best_c_d(
    sorted_tilde: np.ndarray, q: float, log_weight: LogWeight, *, cells: int = 16, rtol: float = RTOL,
    xtol: float = XTOL,
) -> float:
    """The admissible c_d of least predicted error (docs/errata.md §15), certified to ``rtol``.

    ``sorted_tilde``: δ̃ sorted non-decreasing; ``log_weight(m, budget)``: log of a release's weight
    (1/its per-coordinate variance), non-decreasing in ``budget`` (Assumption (W) of the module
    docstring, whose proof this implements: the admissible set is one interval cut at the levels into
    pieces, u_1 is the best point of the first, and a branch and bound over the others with a proven
    lower bound on each cell). The error of the result is at most (1 − rtol)⁻¹ times the infimum
    over every admissible c_d; u_1 (plain min(δ)-LDP) is among the points evaluated, so the result
    never predicts more error than it. Ties go to the point found first (u_1 before the pieces,
    pieces in increasing c_d). Weights that ``log_weight`` refuses (UsageError) count as releases
    not made. ``cells``: the grid of each piece before halving; ``xtol``: the narrowest cell split,
    as a fraction of c_max.
    """
    tilde = np.asarray(sorted_tilde, dtype=float)
    fl.budget_vector(tilde, q, float(tilde[0]))  # validates δ̃ and q (u_1 is always admissible)
    if cells < 1:
        raise ValueError(f"cells must be at least 1, got {cells}")
    return _Search(tilde, float(q), log_weight).minimise(cells, rtol, xtol)[0]
