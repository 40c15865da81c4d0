"""The numba-compiled kernels behind :mod:`ldpcli.math.kernels` (imported only when numba is installed).

Each kernel computes what its numpy reference in :mod:`ldpcli.math.sphere` computes, one row at a
time while the row is in cache, drawing from the same ``numpy.random.Generator`` in the same order
(numba's Generator methods reproduce numpy's draws bit for bit). Sums are taken left to right
instead of numpy's pairwise and SIMD order, so results agree with the reference to rounding, not
bit for bit. ``nogil``: the pipeline's threads privatize blocks side by side.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _row_norm(x: np.ndarray, i: int) -> float:
    """‖x_i‖₂ without overflow or underflow in the squares (``spheremath.row_norms``)."""
    d = x.shape[1]
    ss = 0.0
    for j in range(d):
        ss += x[i, j] * x[i, j]
    norm = math.sqrt(ss)
    if math.isfinite(norm) and norm >= 1e-150:
        return norm
    biggest = 0.0
    for j in range(d):
        biggest = max(biggest, abs(x[i, j]))
    if biggest == 0.0:
        return 0.0
    ss = 0.0
    for j in range(d):
        v = x[i, j] / biggest
        ss += v * v
    return biggest * math.sqrt(ss)


@numba.njit(cache=True, nogil=True)
def rounded_cap_directions(
    x: np.ndarray, flips: np.ndarray, radius: float, t: np.ndarray, r: np.ndarray, scale: float,
    rng: np.random.Generator, out: np.ndarray,
) -> None:
    """``spheremath.rounded_cap_directions`` after the flips and cosines are drawn, into ``out``.

    Per row: the norm; u = ±x/‖x‖ (sign by ``flips``); d normals g with ‖g‖² and ⟨g, u⟩
    accumulated as they are drawn; the explicit double projection when ‖w‖² < ‖g‖²/4; then
    scale·(t·u + r·w) = a·g + b·u in place. A zero row becomes scale·g/‖g‖.
    """
    n, d = x.shape
    for i in range(n):
        norm = _row_norm(x, i)
        gg = 0.0
        if norm == 0.0:
            for j in range(d):
                v = rng.standard_normal()
                out[i, j] = v
                gg += v * v
            factor = scale / math.sqrt(gg)
            for j in range(d):
                out[i, j] *= factor
            continue
        denom = norm if flips[i] < (1.0 + norm / radius) / 2.0 else -norm
        gu = 0.0
        for j in range(d):
            v = rng.standard_normal()
            out[i, j] = v
            gg += v * v
            gu += v * (x[i, j] / denom)
        ww = gg - gu * gu
        if ww < 0.25 * gg:  # most of g along u: project explicitly, twice
            while True:
                for _ in range(2):
                    c = 0.0
                    for j in range(d):
                        c += out[i, j] * (x[i, j] / denom)
                    for j in range(d):
                        out[i, j] -= c * (x[i, j] / denom)
                gu = 0.0
                ww = 0.0
                for j in range(d):
                    ww += out[i, j] * out[i, j]
                if ww > 0.0:
                    break
                for j in range(d):  # g exactly parallel to u: probability 0, draw again
                    out[i, j] = rng.standard_normal()
        a = scale * r[i] / math.sqrt(ww)
        b = scale * t[i] - a * gu
        for j in range(d):
            out[i, j] = a * out[i, j] + b * (x[i, j] / denom)
