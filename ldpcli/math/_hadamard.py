"""Subsampled randomized Hadamard projections (SRHT) of R^d into R^k, O(d′ log d′) a row.

Asi, Feldman, Nelson, Nguyen, Talwar, NeurIPS 2023, FastProjUnit: W = √(d′/k)·S·H·D·P, with d′ the least power
of two ≥ d, P the zero-padding R^d → R^{d′}, D a uniformly random ±1 diagonal of size d′, H = H_{d′}/√d′ the
orthonormal Walsh–Hadamard matrix (HᵀH = I exactly: H_{d′} has ±1 entries and orthogonal rows) and S the
selection of k distinct coordinates, a uniformly random ordered k-subset of {0, …, d′ − 1} (a partial
Fisher–Yates shuffle, exact: every index is one ``integers`` draw). H·D·P is an isometry of R^d into R^{d′}
(the padding and the orthogonal HD), so the transform is exactly orthogonal on the data's space whatever d.

**Moments.** The rows of S·H·D are k of the orthonormal rows of HD, so W·Wᵀ restricted to R^{d′} is
(d′/k)·I_k, and E_S[SᵀS] = (k/d′)·I_{d′} (each coordinate is selected with probability k/d′), so
E[(HDP)ᵀ·(d′/k)SᵀS·(HDP)] = PᵀP = I_d: **E[WᵀW] = I_d** exactly. For a unit u, y = HDPu is a unit vector
of R^{d′} and R² = ‖Wu‖² = (d′/k)·Σ_{i∈S} y_i², so **E R² = 1** for every u. Its fourth moment: with
a_i = y_i², sampling without replacement gives E_S[(Σ_S a_i)²] = (k/d′)q + k(k − 1)/(d′(d′ − 1))·(1 − q),
q = Σ a_i², and E_D[y_i⁴] = (3 − 2‖u‖₄⁴)/d′² (y_i = Σ_j ±u_j/√d′ with independent signs), so
E_D q = (3 − 2‖u‖₄⁴)/d′ ≤ (3 − 2/d)/d′ (‖u‖₄⁴ ≥ 1/d); the coefficient of q is positive, hence

    E R⁴ ≤ M₄ = (d′/k)·q₊ + d′(k − 1)/(k(d′ − 1))·(1 − q₊),   q₊ = (3 − 2/d)/d′,

and by Hölder (E R² ≤ (E R)^{2/3}(E R⁴)^{1/3}) **1/√M₄ ≤ E R ≤ 1** (the right side by Jensen; equal at a vertex
u = ±e_j, where y = ±D-signed 1/√d′ is flat and R = 1 for every S). No d′ × d′ matrix is formed: the
butterflies of :func:`walsh_hadamard` run over the rows of a (m, d′) array, log₂ d′ passes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ldpcli.math import _kernels as kernels

#: Values (float64) of the (m, d′) work arrays of :func:`srht_chunks` (32 MiB), at least one row.
SRHT_VALUES = 2**22


def padded_dimension(d: int) -> int:
    """d′, the least power of two ≥ d."""
    return 1 << (d - 1).bit_length()


def walsh_hadamard(a: np.ndarray) -> np.ndarray:
    """a ← a·H for each row of the C-contiguous (m, n) float64 array ``a`` (n a power of two), in place, and returned:
    the orthonormal Walsh–Hadamard transform (Sylvester order, symmetric), log₂ n butterfly passes a row
    (the compiled loop of :mod:`ldpcli.math._hadamard_numba` when the kernels are numba's: the same bits)."""
    m, n = a.shape
    scale = 1.0 / math.sqrt(n)
    if kernels.kernel_name() == "numba":
        from ldpcli.math import _hadamard_numba

        _hadamard_numba.walsh_hadamard_rows(a, scale)
        return a
    half = np.empty(n // 2)
    for row in a:  # one row at a time, while it is in cache
        h = 1
        while h < n:
            pairs = row.reshape(n // (2 * h), 2, h)
            low = half.reshape(n // (2 * h), h)
            np.subtract(pairs[:, 0, :], pairs[:, 1, :], out=low)
            pairs[:, 0, :] += pairs[:, 1, :]
            pairs[:, 1, :] = low
            h *= 2
        row *= scale
    return a


def partial_shuffle(picks: np.ndarray, n: int) -> np.ndarray:
    """The first k entries of each row's partial Fisher–Yates shuffle of 0, …, n − 1: swap j with j + picks[j, i]
    for j = 0, …, k − 1 (``picks`` (k, m)); returns (m, k), a uniformly random ordered k-subset a row when
    picks[j] is uniform on [0, n − j)."""
    if kernels.kernel_name() == "numba":
        from ldpcli.math import _hadamard_numba

        return _hadamard_numba.partial_shuffle(picks, n)
    k, m = picks.shape
    out = np.empty((m, k), dtype=np.int64)
    for i in range(m):
        swapped: dict[int, int] = {}  # the entries of the permutation that differ from the identity
        for j in range(k):
            p = j + int(picks[j, i])
            value = swapped.get(p, p)
            swapped[p] = swapped.get(j, j)
            out[i, j] = value
    return out


def fourth_moment_bound(k: int, d: int) -> float:
    """M₄ ≥ E‖Wu‖⁴ for every unit u (module docstring)."""
    dp = padded_dimension(d)
    q = (3.0 - 2.0 / d) / dp
    pair = dp * (k - 1) / (k * (dp - 1)) if dp > 1 else 0.0
    return (dp / k) * q + pair * (1.0 - q)


def length_mean_low(k: int, d: int) -> float:
    """1/√M₄ ≤ E‖Wu‖ for every unit u (E‖Wu‖ ≤ 1 above it, equal at the vertices)."""
    return 1.0 / math.sqrt(fourth_moment_bound(k, d))


@dataclass(frozen=True)
class SrhtProjections:
    """The SRHT projections of a chunk of m rows: ``signs`` (m, d′) the diagonals D, ``rows`` (m, k) the
    selected coordinates S (in draw order), ``d`` the data's dimension."""

    signs: np.ndarray
    rows: np.ndarray
    d: int

    @property
    def k(self) -> int:
        """The projection dimension."""
        return int(self.rows.shape[1])

    def project(self, x: np.ndarray) -> np.ndarray:
        """W·x for each row (x is (m, d)); returns (m, k)."""
        m, dp = self.signs.shape
        y = np.zeros((m, dp))
        y[:, : self.d] = x
        y *= self.signs
        walsh_hadamard(y)
        return np.take_along_axis(y, self.rows, axis=1) * math.sqrt(dp / self.k)

    def lift(self, z: np.ndarray) -> np.ndarray:
        """Wᵀ·z for each row (z is (m, k)), the first d coordinates of √(d′/k)·D·H·Sᵀz; returns (m, d)."""
        m, dp = self.signs.shape
        y = np.zeros((m, dp))
        np.put_along_axis(y, self.rows, z * math.sqrt(dp / self.k), axis=1)
        walsh_hadamard(y)
        y *= self.signs
        return y[:, : self.d].copy()


def srht_projections(m: int, k: int, d: int, rng: np.random.Generator) -> SrhtProjections:
    """The SRHT projections of m rows: ⌈d′/64⌉ uniform 64-bit words a row (row by row) whose bits, lowest first,
    are the signs (bit 1: −1), then for j = 0, …, k − 1 one ``integers(0, d′ − j)`` per row, the j-th swap of a
    partial Fisher–Yates shuffle (:func:`partial_shuffle`)."""
    dp = padded_dimension(d)
    words = rng.integers(0, 2**64, size=(m, -(-dp // 64)), dtype=np.uint64)
    bits = np.unpackbits(words.astype("<u8", copy=False).view(np.uint8), axis=1, count=dp, bitorder="little")
    signs = 1.0 - 2.0 * bits
    picks = np.empty((k, m), dtype=np.int64)
    for j in range(k):
        picks[j] = rng.integers(0, dp - j, size=m)
    return SrhtProjections(signs, partial_shuffle(picks, dp), d)


def srht_chunks(n: int, d: int) -> Iterator[slice]:
    """Consecutive slices of n rows whose (m, d′) work arrays hold at most :data:`SRHT_VALUES` values."""
    step = max(1, SRHT_VALUES // padded_dimension(d))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))
