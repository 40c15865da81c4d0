"""The sets a mechanism's rows must lie in, as objects: ℓ2 ball, ℓ∞ box, interval.

A mechanism is ε-LDP for rows inside its domain, whose size is the public bound L (``norm_bound``,
chosen by the user, never computed from the data). Each domain owns everything that depends on its
shape, so the pipeline, the audit and the mechanisms never re-derive it:

- :meth:`Domain.project` moves the rows that lie outside onto the domain, without touching its
  input, and counts them; :meth:`Domain.nearest` is the exact Euclidean projection it uses.
- :meth:`Domain.slack` is the boundary rule: a row beyond L by no more than the rounding of its
  source precision is *on* the boundary (neither moved nor counted). Unit-normalised float32
  embeddings have norms 1 ± a few 1e-7; they are on the sphere, not outside the ball.
- :meth:`Domain.rounded` tells rounding from clipping by a row's own precision: float32 embeddings
  saved as float64 are read at float64's slack and moved onto the boundary (the projection is
  public post-processing, so the release is as before), but a row whose values are all exact in
  float32 and that lies within float32's slack is not *counted* as clipped.
- :meth:`Domain.test_points` gives the audit's fixed inputs (boundary, interior, zero), and
  :meth:`Domain.describe` the words for it.

A domain is a ``str`` subclass whose value is its name (``"l2-ball"``…), so it prints, compares and
serialises as the name that sidecars and ``describe()`` have always carried. The bound is an
argument, not a field: a scalar L, or (for a later per-feature box) an array of per-coordinate
bounds that broadcasts against the rows.

Every mechanism here tolerates rows within the slack: PrivUnit2 and its relatives use only the
row's direction and the sign of an unbiased rounding whose probability saturates at ‖x‖ ≥ L, the
hypercube ones a per-coordinate sign with the same saturation, the scalar ones a grid index
clamped to the grid. Only the additive baselines (Laplace, Gaussian), whose sensitivity is a
distance, apply :meth:`Domain.nearest` to their input as part of their definition.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ldpcli.math import _rows as rowmath

#: Unit roundoff of float64, the precision of values that were integers or float64 in the file.
FLOAT64_PRECISION = 2.0**-53
#: Unit roundoff of float32 (e.g. embeddings exported as float32, or decimal text of ~7 digits).
FLOAT32_PRECISION = 2.0**-24
#: The smallest relative slack: what ldp has always allowed for float64 data.
MIN_SLACK = 1e-9

#: Values per block of :meth:`Domain.rounded` (2 MiB of float64): its temporaries stay in cache.
_BLOCK_VALUES = 1 << 18

#: A fixed input of the audit: (name, x, whether x lies on the boundary of the domain).
TestPoint = tuple[str, np.ndarray, bool]

_DOMAINS: dict[str, Domain] = {}


class Domain(str):
    """A convex set of rows, scaled by the public bound L; the string value is its name."""

    #: One line for the CLI's help, ``params`` and messages, with ``{L}`` for the bound.
    words: ClassVar[str]

    def __new__(cls, name: str) -> Domain:
        """The domain called ``name``, registered so that :func:`get_domain` finds it."""
        self = super().__new__(cls, name)
        if name in _DOMAINS:
            raise ValueError(f"domain {name!r} defined twice")
        _DOMAINS[name] = self
        return self

    def describe(self, bound: float | np.ndarray) -> str:
        """E.g. ``"ℓ2 ball of radius L = 1"``."""
        shown = f"{bound:g}" if np.ndim(bound) == 0 else "per-coordinate bounds"
        return self.words.format(L=shown)

    def slack(self, precision: float, d: int) -> float:
        """Relative distance beyond L within which a row counts as on the boundary."""
        raise NotImplementedError

    def outside(self, x: np.ndarray, bound: float | np.ndarray, tolerance: float) -> np.ndarray:
        """Boolean per row: beyond the domain scaled by (1 + ``tolerance``)."""
        raise NotImplementedError

    def nearest(self, x: np.ndarray, bound: float | np.ndarray) -> np.ndarray:
        """The Euclidean projection of every row onto the domain: a new array."""
        raise NotImplementedError

    def test_points(self, d: int, bound: float, rng: np.random.Generator) -> list[TestPoint]:
        """The audit's three fixed inputs: one on the boundary, one inside, and zero."""
        raise NotImplementedError

    def project(
        self, x: np.ndarray, bound: float | np.ndarray, precision: float = FLOAT64_PRECISION
    ) -> tuple[np.ndarray, int]:
        """Rows outside the domain moved onto it; returns (rows, how many were clipped).

        ``x`` is never modified: when no row is outside, it is returned as it is; otherwise a copy
        with the moved rows replaced by :meth:`nearest`. Rows within :meth:`slack` of the boundary,
        for values read at ``precision`` (unit roundoff of the source type), are left unchanged and
        not counted. Of the moved rows, those :meth:`rounded` onto the boundary are not counted.
        """
        over = self.outside(x, bound, self.slack(precision, x.shape[1]))
        moved = int(np.count_nonzero(over))
        if not moved:
            return x, 0
        rows = x[over]
        out = np.array(x, dtype=np.float64, copy=True)
        out[over] = self.nearest(rows, bound)
        return out, moved - int(np.count_nonzero(self.rounded(rows, bound, precision)))

    def rounded(self, x: np.ndarray, bound: float | np.ndarray, precision: float) -> np.ndarray:
        """Boolean per row: every value is exact in float32 and the row lies within float32's
        :meth:`slack` of the domain, i.e. only the rounding of float32 values puts it outside.

        A float64 value drawn from a continuous law is exact in float32 with probability about
        2⁻²⁹, so genuine float64 rows are judged at ``precision``; the values of float32 data saved
        as float64 all are, and carry float32's precision. All False when ``precision`` is already
        as coarse as float32's (its slack covers the rows).
        """
        rounded = np.zeros(x.shape[0], dtype=bool)
        wider = self.slack(FLOAT32_PRECISION, x.shape[1])
        if wider <= self.slack(precision, x.shape[1]):
            return rounded
        step = max(1, _BLOCK_VALUES // x.shape[1])
        with np.errstate(over="ignore"):  # beyond float32's range: inf, not exact
            for start in range(0, x.shape[0], step):
                block = x[start:start + step]
                first = block[:, 0]
                if not np.any(first.astype(np.float32) == first):  # the float64 rows' usual exit
                    continue
                exact = np.all(block.astype(np.float32) == block, axis=1)
                if exact.all():
                    rounded[start:start + step] = ~self.outside(block, bound, wider)
                elif exact.any():
                    exact[exact] = ~self.outside(block[exact], bound, wider)
                    rounded[start:start + step] = exact
        return rounded


class L2Ball(Domain):
    """{x : ‖x‖₂ ≤ L}: the domain of PrivUnit2, PrivUnitG, duchi-l2, separated and the baselines."""

    words = "ℓ2 ball of radius L = {L}"

    def slack(self, precision: float, d: int) -> float:
        """max(1e-9, 8√d·u): a norm of d values each rounded to relative u errs by about √d·u."""
        return max(MIN_SLACK, 8.0 * math.sqrt(d) * precision)

    def outside(self, x: np.ndarray, bound: float | np.ndarray, tolerance: float) -> np.ndarray:
        return rowmath.row_norms(x) > bound * (1.0 + tolerance)

    def nearest(self, x: np.ndarray, bound: float | np.ndarray) -> np.ndarray:
        """Rows with ‖x‖ > L scaled onto the sphere of radius L (overflow-safe norms).

        A row of norm above 1e150 (whose squares overflow) is first divided by its largest |x_j|
        (:func:`ldpcli.math._sphere.unit_scaled`): one whose norm exceeds float64's range (‖x‖ = inf,
        e.g. d coordinates of 1e308) becomes L·x/‖x‖ like any other row, not L·x/inf = 0, whose
        release would be a random direction, and L/‖x‖ does not lose bits to subnormals.
        """
        out = np.array(x, dtype=np.float64, copy=True)
        norms = rowmath.row_norms(out)
        over = norms > bound
        if over.any():
            huge = over & (norms > 1e150)
            if huge.any():
                out[huge] = rowmath.unit_scaled(out[huge])[0]
                norms[huge] = rowmath.row_norms(out[huge])
            out[over] *= (bound / norms[over])[:, None]
        return out

    def test_points(self, d: int, bound: float, rng: np.random.Generator) -> list[TestPoint]:
        direction = rng.standard_normal(d)
        direction /= np.linalg.norm(direction)
        other = rng.standard_normal(d)
        other /= np.linalg.norm(other)
        return [("boundary (‖x‖ = L)", bound * direction, True),
                ("interior (‖x‖ = L/2)", 0.5 * bound * other, False),
                ("zero", np.zeros(d), False)]


class _Coordinatewise(Domain):
    """Domains that bound each coordinate on its own; the slack does not grow with d."""

    lower_factor: ClassVar[float]  # the lower bound is lower_factor·L (−1 for the box, 0 for the interval)

    def slack(self, precision: float, d: int) -> float:
        """max(1e-9, 4u): each coordinate is rounded once."""
        return max(MIN_SLACK, 4.0 * precision)

    def outside(self, x: np.ndarray, bound: float | np.ndarray, tolerance: float) -> np.ndarray:
        limit = bound * (1.0 + tolerance)
        low = self.lower_factor * limit
        return np.any((x < low) | (x > limit), axis=1)

    def nearest(self, x: np.ndarray, bound: float | np.ndarray) -> np.ndarray:
        """Every coordinate clamped to its interval."""
        return np.clip(x, self.lower_factor * bound, bound)


class LinfBox(_Coordinatewise):
    """{x : |x_j| ≤ L for every j}: the domain of privunit-inf and duchi-linf."""

    words = "ℓ∞ box [−L, L]^d with L = {L}"
    lower_factor = -1.0

    def test_points(self, d: int, bound: float, rng: np.random.Generator) -> list[TestPoint]:
        signs = np.where(rng.random(d) < 0.5, -1.0, 1.0)
        return [("boundary (a vertex of the box)", bound * signs, True),
                ("interior", 0.5 * bound * rng.uniform(-1.0, 1.0, d), False),
                ("zero", np.zeros(d), False)]


class Interval(_Coordinatewise):
    """{r : 0 ≤ r ≤ r_max}, one column: the domain of the scalar mechanisms."""

    words = "interval [0, r_max] with r_max = {L}"
    lower_factor = 0.0

    def test_points(self, d: int, bound: float, rng: np.random.Generator) -> list[TestPoint]:
        return [("boundary (r = r_max)", np.full(d, bound), True),
                ("interior (r = 0.37·r_max)", np.full(d, 0.37 * bound), False),
                ("zero", np.zeros(d), False)]


#: The ℓ2 ball of radius L, the inputs of the ℓ2 mechanisms.
L2_BALL = L2Ball("l2-ball")
#: The ℓ∞ box [−L, L]^d, the inputs of the ℓ∞ mechanisms.
LINF_BOX = LinfBox("linf-box")
#: The interval [−L, L], the inputs of the scalar mechanisms.
INTERVAL = Interval("interval")


def get_domain(name: str) -> Domain:
    """The domain called ``name`` (KeyError for an unknown one)."""
    return _DOMAINS[name]

