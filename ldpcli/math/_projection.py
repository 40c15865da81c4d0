"""Haar-random projections onto k-dimensional subspaces of R^d, and the mean of ‖Wu‖ for a unit u.

**Sampling** (Stewart 1980, "The efficient generation of random orthogonal matrices with an application
to condition estimators", SIAM J. Numer. Anal. 17; the product form of the QR of a Gaussian matrix).
A Haar orthogonal Q of O(d) has a uniform first column y, and given y its other columns are a Haar
orthonormal basis of y^⊥. With g ~ N(0, I_d), y = g/‖g‖, s = sign(y₁) (+1 at 0) and the reflection
H = I − 2wwᵀ, w = (y + s·e₁)/‖y + s·e₁‖, one has H·e₁ = −s·y (no cancellation in y + s·e₁), so

    Q = H · diag(−s, Q′),   Q′ Haar on O(d − 1), independent of g,

is Haar: Q·e₁ = y, and H maps e₁^⊥ isometrically onto y^⊥, where H·(0 ⊕ Q′) is a Haar basis. The first k
columns of Q need only k such levels: level j (0-based) draws its own Gaussian in dimension d − j and acts
on the coordinates j, …, d − 1. The projection W = Q[:, :k]ᵀ (k × d, orthonormal rows, WWᵀ = I_k, its row
space a Haar-random k-dimensional subspace) is never formed:

    W·x  = first k coordinates of (D_{k−1}H_{k−1} ⋯ D₀H₀)·x,        Wᵀ·z = H₀ ⋯ H_{k−1}·(σ ⊙ z, 0),

with D_j multiplying coordinate j by σ_j = −s_j. Each level costs O(d) per row, so a row costs O(dk)
(drawing the k·d normals included), against O(dk²) for the QR of a d × k Gaussian, which gives the same law
(its sign-fixed Q, R_ii > 0, is Haar as well).

**The mean length** (Asi, Feldman, Nelson, Nguyen, Talwar, NeurIPS 2023, the normalisation of ProjUnit). For a
fixed unit u, ‖Wu‖² is the squared length of the projection of a uniform unit vector onto a fixed
k-dimensional subspace (rotation invariance), i.e. Beta(k/2, (d − k)/2), so

    α = E‖Wu‖ = E[B^{1/2}] = B((k + 1)/2, (d − k)/2)/B(k/2, (d − k)/2) = Γ((k + 1)/2)Γ(d/2)/(Γ(k/2)Γ((d + 1)/2)).

log α is ½·log(k/d) + c(k/2) − c(d/2) with c(a) = log Γ(a + ½) − log Γ(a) − ½·log a, which is small
(≈ −1/(8a)): from ``gammaln`` for a < 1000 and from its asymptotic series −1/(8a) + 1/(192a³) − 1/(640a⁵)
above (next term < 1e−24 there; checked against 50-digit values), so that 1/α² − 1 keeps its relative
precision when k is close to d, for d up to 10⁸.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ldpcli.math._lazy import special

#: Values (float64) of the Householder vectors held at once by :func:`projection_chunks` (128 MiB),
#: at least one row's k·d whatever d and k.
TRANSFORM_VALUES = 2**24

_SERIES_FROM = 1000.0


def _gamma_half_excess(a: float) -> float:
    """c(a) = log Γ(a + ½) − log Γ(a) − ½·log a (module docstring)."""
    if a >= _SERIES_FROM:
        inv = 1.0 / a
        inv2 = inv * inv
        return inv * (-0.125 + inv2 * (1.0 / 192.0 - inv2 / 640.0))
    return float(special.gammaln(a + 0.5) - special.gammaln(a)) - 0.5 * math.log(a)


def log_projection_mean(k: int, d: int) -> float:
    """log α, α = E‖Wu‖ for a unit u and a Haar k × d projection W (1 ≤ k ≤ d; 0 at k = d)."""
    return 0.5 * math.log1p((k - d) / d) + _gamma_half_excess(k / 2.0) - _gamma_half_excess(d / 2.0)


def inverse_square_excess(k: int, d: int) -> float:
    """1/α² − 1 = expm1(−2·log α), to full relative precision (0 at k = d)."""
    return math.expm1(-2.0 * log_projection_mean(k, d))


@dataclass(frozen=True)
class Projections:
    """The Haar projections W of a chunk of m rows (module docstring): ``vectors[i, j]`` is the unit
    Householder vector of level j of row i (zero before coordinate j), ``signs[i, j]`` is σ_j."""

    vectors: np.ndarray  # (m, k, d)
    signs: np.ndarray  # (m, k)

    @property
    def k(self) -> int:
        """The projection dimension."""
        return int(self.signs.shape[1])

    def project(self, x: np.ndarray) -> np.ndarray:
        """W·x for each row (x is (m, d)); returns (m, k)."""
        y = np.array(x, dtype=np.float64, copy=True)
        for j in range(self.k):
            w = self.vectors[:, j, :]
            y -= 2.0 * np.vecdot(w, y)[:, None] * w
            y[:, j] *= self.signs[:, j]
        return y[:, : self.k]

    def lift(self, z: np.ndarray) -> np.ndarray:
        """Wᵀ·z for each row (z is (m, k)); returns (m, d)."""
        m, k, d = self.vectors.shape
        out = np.zeros((m, d))
        out[:, :k] = self.signs * z
        for j in range(k - 1, -1, -1):
            w = self.vectors[:, j, :]
            out -= 2.0 * np.vecdot(w, out)[:, None] * w
        return out


def haar_projections(m: int, k: int, d: int, rng: np.random.Generator) -> Projections:
    """The Haar projections of m rows: m·k·d standard normals, row by row (level j of a row uses the
    last d − j normals of its j-th block of d; the first j are drawn and not used)."""
    g = rng.standard_normal((m, k, d))
    signs = np.empty((m, k))
    for j in range(k):
        block = g[:, j, j:]
        block /= np.sqrt(np.vecdot(block, block))[:, None]  # y, uniform on S^{d−j−1}
        s = np.where(block[:, 0] >= 0.0, 1.0, -1.0)
        block[:, 0] += s  # y + s·e₁, of squared length 2(1 + |y₁|) ≥ 2
        block /= np.sqrt(np.vecdot(block, block))[:, None]
        g[:, j, :j] = 0.0
        signs[:, j] = -s
    return Projections(g, signs)


def projection_chunks(n: int, k: int, d: int) -> Iterator[slice]:
    """Consecutive slices of n rows whose projections hold at most :data:`TRANSFORM_VALUES` values
    (at least one row each)."""
    step = max(1, TRANSFORM_VALUES // (k * d))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))
