"""The floating-point error bounds of the secure rendering's proof (docs/floating-point.md §3 and §8),
as numbers: the unit roundoff u = 2⁻⁶⁴ of the extended precision the proof assumes, each step's
relative error bound (:class:`StepBounds`, from γ_k = k·u/(1 − k·u), Higham 2002 §3.1), their sum
over the coordinates in expectation (:func:`cap_error_sum`), PrivUnitG's per-row bound
(:class:`GaussianBounds`) and the χ means these need.

Computed in exact rational arithmetic (1 + u is 1 in double precision) and stored rounded up, so a
bound stays a bound. No array is computed here, and no extended-precision hardware is needed:
Describing a secure rendering (``secure=True``) and reading a secure release back use these numbers on any platform; the
arithmetic they bound is :mod:`ldpcli.math._extended`'s, the rendering that spends them
:mod:`ldpcli.mechanisms._rendering`'s.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

from ldpcli.math import _sphere as sm

#: u = 2⁻⁶⁴, the unit roundoff of the x87 extended format that :data:`WORK` is on x86-64 and aarch64 Linux: the
#: proof's bounds are stated for it, so computing them (describing a secure rendering, reading a secure release
#: back) needs no such hardware; only computing a secure release does (:func:`require_extended_precision`).
UNIT_ROUNDOFF = 2.0**-64


def unit_roundoff() -> float:
    """u of the extended precision the proof assumes (:data:`UNIT_ROUNDOFF`)."""
    return UNIT_ROUNDOFF


def inverse_chi_mean(k: int) -> float:
    """E[1/χ_k] = Γ((k − 1)/2)/(√2·Γ(k/2)) for k ≥ 2 (the χ law with k degrees of freedom), by
    :func:`ldpcli.math._sphere.log_gamma_half_ratio` (full precision at every k; lgamma differences lose ~1e−9)."""
    return math.exp(-sm.log_gamma_half_ratio(k - 1)) / math.sqrt(2.0)


def chi_mean(k: int) -> float:
    """E[χ_k] = √2·Γ((k + 1)/2)/Γ(k/2) for k ≥ 1."""
    return math.sqrt(2.0) * math.exp(sm.log_gamma_half_ratio(k))


class StepBounds(NamedTuple):
    """The relative error bounds of the grid kind's steps (docs/floating-point.md §3), for d and u.

    With ℓ = ⌈log₂ d⌉ pairwise levels and γ_k = k·u/(1 − k·u):
    ``e_u`` = (1 + u)/(1 − γ_{ℓ+2}) − 1 bounds ‖û − û/‖û‖‖ (steps 1–2);
    ``e_c`` = γ_{ℓ+1}(1 + e_u) + e_u bounds |ĉ − ⟨g, u⟩|/‖g‖ (step 3), u = û/‖û‖;
    ``e_w`` = e_c(1 + e_u) + e_u + u(1 + e_c)(1 + e_u)(2 + u) + u bounds ‖w̃ − (g − ⟨g, u⟩u)‖/‖g‖ (step 4);
    ``e_a`` = (1 + γ₃)(1 + u)²/(1 − γ_{ℓ+2}) − 1 bounds |â/(c·r/‖w̃‖) − 1| (step 5), r = √(1 − t²);
    ``k0`` = e_a + e_u(1 + u) + u + (2u + u²)(2 + e_a + u + e_u + u·e_u) (step 6), so that
    ‖Ẑ − Z‖₂ ≤ c·(k0 + 2·e_w·‖g‖/‖g − ⟨g, u⟩u‖) (at d = 2, 2·e_u in place of the second term).
    """

    e_u: float
    e_c: float
    e_w: float
    e_a: float
    k0: float


def _up(value: Fraction) -> float:
    """The double just above a non-negative exact ``value``: a bound stays a bound when stored."""
    return math.nextafter(float(value), math.inf)


def step_bounds(d: int, u: float) -> StepBounds:
    """:class:`StepBounds` for dimension d ≥ 2 and unit roundoff u, computed in exact rational arithmetic
    (1 + u is 1 in double precision for u = 2⁻⁶⁴) and stored rounded up."""
    levels = max(1, math.ceil(math.log2(d)))
    uq = Fraction(u)

    def gamma(k: int) -> Fraction:
        return k * uq / (1 - k * uq)

    g_norm = gamma(levels + 2)
    e_u = (1 + uq) / (1 - g_norm) - 1
    e_c = gamma(levels + 1) * (1 + e_u) + e_u
    e_w = e_c * (1 + e_u) + e_u + uq * (1 + e_c) * (1 + e_u) * (2 + uq) + uq
    e_a = (1 + gamma(3)) * (1 + uq) ** 2 / (1 - g_norm) - 1
    k0 = e_a + e_u * (1 + uq) + uq + (2 * uq + uq * uq) * ((1 + e_a) + (1 + uq) * (1 + e_u))
    return StepBounds(_up(e_u), _up(e_c), _up(e_w), _up(e_a), _up(k0))


def cap_error_sum(d: int, u: float) -> float:
    """A bound on E Σ_j |Ẑ_j − Z_j| / c for the grid kind (docs/floating-point.md §3), d ≥ 2.

    c = L·scale is the output norm, Ẑ the computed output, Z the exact mechanism's output from the same
    variates for the unit vector û/‖û‖: the per-row bound of :class:`StepBounds`, in expectation over
    the normals, E[‖g‖/‖g − ⟨g, u⟩u‖] ≤ 1 + √(2/π)·E[1/χ_{d−1}] (⟨g, u⟩ ~ N(0, 1) is independent of
    ‖g − ⟨g, u⟩u‖ ~ χ_{d−1}; d ≥ 3), then Σ_j ≤ √d·‖·‖₂.
    """
    b = step_bounds(d, u)
    direction = 2.0 * b.e_u if d == 2 else 2.0 * b.e_w * (1.0 + math.sqrt(2.0 / math.pi) * inverse_chi_mean(d - 1))
    return math.sqrt(d) * (b.k0 + direction)


class GaussianBounds(NamedTuple):
    """PrivUnitG's per-row error bound (docs/floating-point.md §8): ‖Ẑ − Z‖₂ ≤ s·(``along``·|z| + ``across``·‖g‖)
    for Ẑ_j = fl(fl(fl(s·z)·û_j) + fl(s·w̃_j)), w̃ = g − ĉ·û as in step 4, Z = s·(z·u + g − ⟨g, u⟩u).

    ``along`` = ((1 + u)³ − 1)(1 + e_u) + e_u: ‖fl(s·z)·û_j(1 + θ)(1 + θ′) − s·z·u_j‖ over s|z|;
    ``across`` = e_w + (2u + u²)(1 + e_w): ‖s·w̃_j(1 + θ)(1 + θ′) − s·(g − ⟨g, u⟩u)‖ over s‖g‖, with
    ‖w̃‖ ≤ (1 + e_w)‖g‖ (e_u, e_w from :class:`StepBounds`).
    """

    along: float
    across: float


def gaussian_bounds(d: int, u: float) -> GaussianBounds:
    """:class:`GaussianBounds` for d ≥ 2, in exact rational arithmetic from the rounded-up e_u and e_w
    (both bounds increase with them), stored rounded up."""
    b = step_bounds(d, u)
    uq, e_u, e_w = Fraction(u), Fraction(b.e_u), Fraction(b.e_w)
    return GaussianBounds(_up(((1 + uq) ** 3 - 1) * (1 + e_u) + e_u), _up(e_w + (2 * uq + uq * uq) * (1 + e_w)))
