"""Streaming per-coordinate moments, merged pairwise: the state of the mean and its error bars.

numpy only (no I/O), so the audit and any estimator can use it. The update is the pairwise one of
Chan, Golub & LeVeque (1983), "Algorithms for computing the sample variance", in float64: per-batch
means and centred sums of squares are merged, so the sums do not lose precision as n grows and
shards or threads can be merged in any order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class RunningMoments:
    """Streaming mean and centred sum of squares per coordinate (Chan et al. pairwise merge)."""

    d: int
    n: int = 0
    mean: np.ndarray = field(init=False)
    m2: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.mean = np.zeros(self.d)
        self.m2 = np.zeros(self.d)

    def add(self, batch: np.ndarray) -> None:
        """Merge a (rows, d) batch into the running moments."""
        if batch.shape[0]:
            centred = batch - batch.mean(axis=0)
            self._merge(batch.shape[0], batch.mean(axis=0), np.einsum("ij,ij->j", centred, centred))

    def merge(self, other: RunningMoments) -> None:
        """Merge the moments of another part of the data (e.g. another shard)."""
        if other.n:
            self._merge(other.n, other.mean, other.m2)

    def _merge(self, nb: int, mb: np.ndarray, m2b: np.ndarray) -> None:
        total = self.n + nb
        delta = mb - self.mean
        self.mean += delta * (nb / total)
        self.m2 += m2b + delta**2 * (self.n * nb / total)
        self.n = total
