"""The numba-compiled loops of :mod:`ldpcli.math._hadamard` (imported only when numba is installed and chosen).

Each computes what its numpy reference computes, bit for bit: the Walsh–Hadamard butterflies do the same
additions and subtractions of the same operands in the same passes (one row at a time, while it is in cache),
then the same scaling; the selection applies the same swaps of the same draws. ``nogil``: the pipeline's threads
privatize blocks side by side.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def walsh_hadamard_rows(a: np.ndarray, scale: float) -> None:
    """a ← scale·(a·H_n) for each row of the (m, n) array ``a``, in place (n a power of two, H_n of ±1 entries)."""
    m, n = a.shape
    for i in range(m):
        row = a[i]
        h = 1
        while h < n:
            for start in range(0, n, 2 * h):
                low = row[start:start + h]
                high = row[start + h:start + 2 * h]
                for j in range(h):
                    top = low[j]
                    bottom = high[j]
                    low[j] = top + bottom
                    high[j] = top - bottom
            h *= 2
        for j in range(n):
            row[j] *= scale


@numba.njit(cache=True, nogil=True)
def partial_shuffle(picks: np.ndarray, n: int) -> np.ndarray:
    """The first k entries of each row's partial Fisher–Yates shuffle of 0, …, n − 1: swap j with
    j + picks[j, i] for j = 0, …, k − 1 (``picks`` is (k, m)); returns (m, k)."""
    k, m = picks.shape
    out = np.empty((m, k), dtype=np.int64)
    perm = np.arange(n)
    for i in range(m):
        for j in range(k):
            p = j + picks[j, i]
            value = perm[p]
            perm[p] = perm[j]
            perm[j] = value
            out[i, j] = value
        for j in range(k - 1, -1, -1):  # undo the swaps: perm is the identity again for the next row
            p = j + picks[j, i]
            value = perm[p]
            perm[p] = perm[j]
            perm[j] = value
    return out
