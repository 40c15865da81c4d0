"""The extended-precision arithmetic of the secure rendering (docs/floating-point.md §3–§8): rows in
``numpy.longdouble`` (64-bit significand), pairwise sums, the unit rows û = ±x/‖x‖, the part of the
normals orthogonal to û, the outputs combined from them, and the unbiased rounding to a power-of-two
grid with an exactly drawn Bernoulli(frac(Ẑ_j/g)) (:func:`round_to_grid`).

Each function is one step of the proof, whose error bound is :mod:`ldpcli.math._roundoff`'s; which
mechanism runs which steps, and at which grid, is :mod:`ldpcli.mechanisms._rendering`'s.
"""

from __future__ import annotations

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math._roundoff import UNIT_ROUNDOFF

#: The working type of the grid kind's arithmetic and its unit roundoff u = 2⁻⁶⁴ (x86-64, aarch64 Linux).
WORK = np.longdouble


_TWO_64 = 2**64


#: The largest count of grid steps released: (2⁵³ − 1)·g is an exact double, and so is every count below it.
_MAX_STEPS = 2**53 - 1


def require_extended_precision() -> None:
    """UsageError where ``numpy.longdouble`` is not the extended format the proof assumes (u ≤ 2⁻⁶⁴, and a range
    in which no square of a double underflows): macOS on Apple silicon and Windows, where it is a plain double."""
    info = np.finfo(WORK)
    if float(info.eps) / 2.0 > UNIT_ROUNDOFF or info.minexp > -16000:
        raise UsageError("the secure rendering needs numpy's extended long double (x86-64 or aarch64 Linux); "
                         "on this platform `numpy.longdouble` is a plain double")


def exact_bernoulli(f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Booleans True with probability exactly f (an array of :data:`WORK` values in [0, 1)).

    V < f for V uniform on [0, 1), compared 64 bits at a time: the block of V's bits (a uniform
    64-bit integer) below f's block ⌊f·2⁶⁴⌋ decides True, above it False, and equal (probability 2⁻⁶⁴)
    moves on to the next block of both; f's blocks and its rest are exact in :data:`WORK`, and a rest
    of 0 means V ≥ f. f is never rounded: a fraction with bits below 2⁻⁶⁴ (a |z| far below g) is read
    to its last bit.
    """
    flat = f.ravel()
    out = np.zeros(flat.shape, dtype=bool)
    todo = np.arange(flat.size)
    rest = flat
    while todo.size:
        rest = rest * WORK(_TWO_64)
        block = rest.astype(np.uint64)  # the floor: 0 ≤ rest < 2⁶⁴, converted by truncation, exactly
        rest = rest - block.astype(WORK)
        bits = rng.integers(0, _TWO_64, size=todo.size, dtype=np.uint64)
        out[todo[bits < block]] = True
        tie = (bits == block) & (rest > 0)
        todo, rest = todo[tie], rest[tie]
    return out.reshape(f.shape)


def round_to_grid(z: np.ndarray, grid: float, rng: np.random.Generator) -> np.ndarray:
    """Each value of ``z`` (:data:`WORK`) rounded without bias to gℤ: ±g·(⌊|z|/g⌋ + B), B ~ Bernoulli(frac(|z|/g))
    exactly (:func:`exact_bernoulli`), so E[R | z] = z. |z|/g, its floor and its fraction are exact
    (g a power of two, the fraction of a non-negative value is exact); the signed integer count of
    steps (|·| < 2⁵³) times g is an exact float64, and a count of 0 is +0.0 whatever the sign of z
    (a −0.0 would tell it). |z| is first clipped at (2⁵³ − 1)·g, a 1-Lipschitz post-processing that only
    an unbounded output can reach (PrivUnitG; docs/floating-point.md §8)."""
    y = np.minimum(np.abs(z) * WORK(1.0 / grid), WORK(_MAX_STEPS))
    whole = y.astype(np.int64)  # the floor: 0 ≤ y < 2⁵³, converted by truncation, exactly
    steps = whole + exact_bernoulli(y - whole.astype(WORK), rng)
    return np.where(z < 0, -steps, steps).astype(np.float64) * grid


def pairwise_sum(a: np.ndarray) -> np.ndarray:
    """Σ_j a_ij per row by halving: each term passes through at most ⌈log₂ d⌉ additions, so the error
    is at most γ_{⌈log₂ d⌉}·Σ_j |a_ij| (Higham 2002, §4.2), whatever numpy's own order would be."""
    while a.shape[1] > 1:
        half = a.shape[1] // 2
        head = a[:, :half] + a[:, half: 2 * half]
        a = np.concatenate([head, a[:, 2 * half:]], axis=1) if a.shape[1] % 2 else head
    return a[:, 0]


def secure_unit_rows(x: np.ndarray, flips: np.ndarray, radius: float, rng: np.random.Generator) -> np.ndarray:
    """Steps 1–2 (docs/floating-point.md §3): û = ±x/‖x‖ in :data:`WORK`, ‖x‖ by a pairwise sum of squares.

    + where ``flips`` < (1 + ‖x‖/radius)/2 (the unbiased rounding; any rounding keeps the privacy, §2).
    A zero row gets u uniform on the sphere: the direction of its own d normals, drawn here.
    """
    n, d = x.shape
    xw = x.astype(WORK)
    norms = np.sqrt(pairwise_sum(xw * xw))
    zero = norms == 0
    while np.any(zero):
        xw[zero] = rng.standard_normal((int(zero.sum()), d))
        norms[zero] = np.sqrt(pairwise_sum(xw[zero] * xw[zero]))
        zero = norms == 0
    sign = np.where(flips < (1 + norms / WORK(radius)) / 2, WORK(1), WORK(-1))
    return xw / (norms * sign)[:, None]


def orthogonal_rows(u: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """Steps 3–4: (w̃, g), w̃ = g − ⟨g, û⟩·û for d normals g per row (⟨g, û⟩ a pairwise sum), whose
    direction is uniform on the sphere orthogonal to u. At d = 2, w̃ = ±(−û₂, û₁) from one fair bit
    per row, exact, and g is None. A w̃ of 0 (the normals exactly along û) is drawn again."""
    n, d = u.shape
    if d == 2:
        turn = np.where(rng.integers(0, 2, size=n) == 1, WORK(1), WORK(-1))
        return np.stack([-u[:, 1] * turn, u[:, 0] * turn], axis=1), None
    g = rng.standard_normal((n, d)).astype(WORK)
    w = orthogonal_part(g, u)
    bad = np.flatnonzero(pairwise_sum(w * w) == 0)
    while bad.size:
        g[bad] = rng.standard_normal((bad.size, d))
        w[bad] = orthogonal_part(g[bad], u[bad])
        bad = bad[pairwise_sum(w[bad] * w[bad]) == 0]
    return w, g


def orthogonal_part(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Step 4: w̃ = g − ĉ·û per row, ĉ = ⟨g, û⟩ a pairwise sum (step 3), in :data:`WORK`."""
    return g - pairwise_sum(g * u)[:, None] * u


def gaussian_combine(u: np.ndarray, w: np.ndarray, z: np.ndarray, s: float) -> np.ndarray:
    """PrivUnitG's output Ẑ_j = fl(s·z)·û_j + s·w̃_j in :data:`WORK` (docs/floating-point.md §8)."""
    return (WORK(s) * z.astype(WORK))[:, None] * u + WORK(s) * w


def combine_rows(u: np.ndarray, w: np.ndarray, t: np.ndarray, c: float) -> np.ndarray:
    """Steps 5–6: Ẑ = a·w̃ + b·û with r = √((1 − t)(1 + t)), a = (c·r)/‖w̃‖ (a pairwise sum of
    squares) and b = c·t, all in :data:`WORK`."""
    tw = t.astype(WORK)
    r = np.sqrt((1 - tw) * (1 + tw))
    a = (WORK(c) * r) / np.sqrt(pairwise_sum(w * w))
    b = WORK(c) * tw
    return a[:, None] * w + b[:, None] * u
