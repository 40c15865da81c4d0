"""Does a release look like what its sidecar says? Its rows checked against the law the sidecar claims.

A sidecar can be edited consistently (ε = 1 data relabelled ε = 8, every derived number recomputed):
its own checks and the SHA-256 of the data then pass, and the guaranteed error of an estimate is the
claimed mechanism's, far below the data's real noise. The rows themselves say otherwise, and
:class:`LawCheck` reads them in the pass that already streams them (:class:`ldpcli.analysis._scan.Scan`),
with numpy on each batch (no per-row Python, no second read):

1. **What the law pins** (:func:`ldpcli.mechanisms._hooks.pinned_law`): every output row of PrivUnit2,
   duchi-l2 and the hypercube mechanisms has one exact norm L·scale; every coordinate of the hypercube
   and scalar mechanisms is one of finitely many public doubles. A row that breaks it cannot come
   from the claimed release: a :class:`~ldpcli.errors.DataError` names the file, the first such row
   (counting from 1), what the sidecar claims and what was seen. It is raised when the file has been
   read (:meth:`LawCheck.refuse`), after the row count and SHA-256 were checked, so that data changed
   after privatization is reported as such and this message is left for a sidecar that does not
   describe its (unchanged) data. The tolerance is a few units of the
   stored values' roundoff: relative (4 + 2√d)·(u + 2⁻⁵³), u the unit roundoff of the values as
   stored (2⁻⁵³ for float64, 2⁻²⁴ for float32, the text's for a CSV read unverified), which covers the
   mechanisms' own float64 arithmetic (measured at most 26·2⁻⁵³ at d = 4096), plus √d·g for a grid
   rendering (``secure=True``).

2. **The dispersion**, for every mechanism: an honest row has E‖Z‖² ≤ B, the mechanism's
   :func:`~ldpcli.mechanisms._hooks.second_moment_max` (times the copies of each row). The rows are
   dealt into m = min(n, 128) blocks (row i to block i mod m), disjoint sets of independent rows;
   by Markov's inequality an honest block's mean squared norm is ≥ 2B with probability ≤ 1/2, so
   the number of such blocks is stochastically below Binomial(m, 1/2), whatever the inputs and the
   law of ‖Z‖² (no moment beyond the mean is assumed). When at least k of them are, the smallest k
   with P(Binomial(m, 1/2) ≥ k) ≤ α, the file is reported (:class:`Dispersion`): an honest release
   is reported with probability ≤ α. α is :data:`FALSE_ALARM` = 10⁻⁶ split over the files of a scan
   (Bonferroni), so the false-alarm rate of the whole scan is ≤ 10⁻⁶. A file with fewer rows than
   that needs (2⁻ᵐ > α: m < 20 for one file) is not tested. The test sees a release whose rows are
   noisier than the claim allows by more than a factor of 2 in mean squared norm (a release at a
   smaller ε than its sidecar says); it is one-sided on purpose: rows *less* noisy than claimed (ε = 8
   data relabelled ε = 1) make the guaranteed error an overestimate, which is conservative, and are
   not reported (unless the law pins the norm, when check 1 refuses them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpcli.errors import DataError
from ldpcli.io._messages import _row
from ldpcli.math._domains import FLOAT32_PRECISION, FLOAT64_PRECISION
from ldpcli.mechanisms import Mechanism
from ldpcli.mechanisms._hooks import pinned_law, second_moment_max
from ldpcli.release._sidecar import Sidecar

#: The false-alarm rate of the dispersion test over all the files of one scan.
FALSE_ALARM = 1e-6
#: Blocks of rows the dispersion test deals a file into (fewer for a file of fewer rows).
BLOCKS = 128
#: A block is counted when its mean squared norm is at least this many times the claimed bound (Markov: P ≤ 1/2).
FACTOR = 2.0


def stored_precision(meta: Sidecar, read_precision: float, verified: bool) -> float:
    """The unit roundoff of the values as stored: the sidecar's ``data.dtype`` for a verified file (its
    bytes are those ldp wrote: CSV text in round-trip digits), also the reader's for an unverified one
    (a CSV re-encoded in fewer digits)."""
    own = FLOAT32_PRECISION if meta.dtype == "float32" else FLOAT64_PRECISION
    return own if verified else max(own, read_precision)


def critical_count(blocks: int, alpha: float) -> int | None:
    """The smallest k with P(Binomial(blocks, 1/2) ≥ k) ≤ ``alpha`` (exact, in integers), or None when even
    k = blocks has a larger probability (2^−blocks > alpha: too few blocks to test at that level)."""
    tail, total = 0, 2**blocks
    for k in range(blocks, -1, -1):
        tail += math.comb(blocks, k)
        if tail > alpha * total:
            return None if k == blocks else k + 1
    return 0


def _claim(mech: Mechanism) -> str:
    """'a privunit2 release at ε = 8, d = 500, L = 1'."""
    return f"a {mech.name} release at ε = {mech.epsilon:g}, d = {mech.d}, L = {mech.norm_bound:g}"


@dataclass(frozen=True)
class Dispersion:
    """A file whose rows are noisier than its sidecar's mechanism allows (check 2 of the module docstring)."""

    path: Path
    sidecar: Path
    claim: str
    #: The observed mean of ‖Z‖² over the file's rows (a row: its copies side by side).
    mean_sq_norm: float
    #: The claimed bound on E‖Z‖² for every input (:func:`~ldpcli.mechanisms._hooks.second_moment_max`, × copies).
    bound: float
    blocks: int
    #: Blocks whose mean squared norm is at least FACTOR·bound, and how many an honest release reaches with
    #: probability ≤ alpha.
    over: int
    critical: int
    alpha: float

    @property
    def message(self) -> str:
        """The one-line warning."""
        return (
            f"{self.path}: its rows are noisier than its sidecar {self.sidecar} says: their mean squared norm is "
            f"{self.mean_sq_norm:.4g} but {self.claim} has E‖Z‖² ≤ {self.bound:.4g} for every input, and in "
            f"{self.over} of {self.blocks} blocks of rows the mean is over {FACTOR:g} times that (an honest release "
            f"reaches {self.critical} with probability ≤ {self.alpha:.2g}); the guaranteed error understates the "
            "real one (the data may have been privatized at a smaller ε than the sidecar says): rely on the "
            "per-coordinate std errors, and ask the data owner for the release's own sidecar"
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-able view."""
        return {"file": str(self.path), "mean_sq_norm": self.mean_sq_norm, "bound": self.bound,
                "blocks": self.blocks, "blocks_over": self.over, "critical": self.critical, "alpha": self.alpha,
                "message": self.message}


class LawCheck:
    """The checks of one file's rows against its sidecar's mechanism, batch by batch (module docstring)."""

    def __init__(self, path: Path, meta: Sidecar, precision: float, alpha: float) -> None:
        """``precision``: :func:`stored_precision`; ``alpha``: this file's share of :data:`FALSE_ALARM`."""
        self.path, self.meta, self.alpha = path, meta, alpha
        self.mech = meta.mechanism
        self.copies, self.d = meta.layout.copies, meta.mechanism.d
        self.law = pinned_law(self.mech)
        self.tolerance = (4.0 + 2.0 * math.sqrt(self.d)) * (precision + FLOAT64_PRECISION)
        self.blocks = max(1, min(BLOCKS, meta.n))
        self.sums = np.zeros(self.blocks)
        self.counts = np.zeros(self.blocks, dtype=np.int64)
        self.rows = 0
        #: The first row the pinned law excludes, in words (:meth:`refuse` raises it), else None.
        self.violation: str | None = None

    def add(self, values: np.ndarray) -> None:
        """Check a batch of the file's rows as read (shape (rows, copies·d)), noting the first row that the
        pinned law excludes (:meth:`refuse`)."""
        rows = values.shape[0]
        if rows == 0:
            return
        each = values.reshape(rows * self.copies, self.d)
        squares = np.vecdot(each, each)  # the row dots as the samplers take them (ldpcli.math._sphere)
        if self.law.norm is not None and self.violation is None:
            norms = np.sqrt(squares)
            wrong = ~(np.abs(norms - self.law.norm) <= self.tolerance * self.law.norm + self.law.norm_slack)
            if wrong.any():
                first = int(np.argmax(wrong))
                self._note(first // self.copies, f"has norm {norms[first]:.6g}",
                           f"has norm {self.law.norm:.6g} in every row")
        if self.law.values is not None and self.violation is None:
            self._check_values(each)
        per_row = squares.reshape(rows, self.copies).sum(axis=1) if self.copies > 1 else squares
        block = (self.rows + np.arange(rows)) % self.blocks
        self.sums += np.bincount(block, weights=per_row, minlength=self.blocks)
        self.counts += np.bincount(block, minlength=self.blocks)
        self.rows += rows

    def _check_values(self, each: np.ndarray) -> None:
        """Every coordinate within the tolerance of one of the law's finite values."""
        values = self.law.values
        assert values is not None
        if values.size == 2 and values[0] == -values[1]:  # the hypercube's ±c: one pass on |z|
            wrong = ~(np.abs(np.abs(each) - values[1]) <= self.tolerance * float(values[1]))
            if wrong.any():
                self._note_value(each, wrong, values)
            return
        if values.size <= 8:  # the scalar grids: a pass per value beats a binary search
            distance = np.abs(each - values[0])
            for value in values[1:]:
                np.minimum(distance, np.abs(each - value), out=distance)
        else:
            upper = np.clip(np.searchsorted(values, each), 1, values.size - 1)
            distance = np.minimum(np.abs(each - values[upper - 1]), np.abs(each - values[upper]))
        wrong = ~(distance <= self.tolerance * float(np.max(np.abs(values))))
        if wrong.any():
            self._note_value(each, wrong, values)

    def _note_value(self, each: np.ndarray, wrong: np.ndarray, values: np.ndarray) -> None:
        """Note the first coordinate (``wrong``) outside the law's finite ``values``."""
        flat = int(np.argmax(wrong))
        row, coordinate = divmod(flat, self.d)
        shown = ", ".join(f"{v:.6g}" for v in values[:6]) + (", …" if values.size > 6 else "")
        self._note(row // self.copies, f"has {each[row, coordinate]:.6g} at coordinate {coordinate} (counting from 0)",
                   f"has every coordinate in {{{shown}}}")

    def _note(self, row: int, seen: str, claimed: str) -> None:
        self.violation = (
            f"{self.path}: {_row(self.rows + row + 1)} {seen} but {_claim(self.mech)} {claimed}: its sidecar "
            f"{self.meta.path} does not describe this data (edited, or the sidecar of another release); ask the "
            "data owner for the release's own sidecar"
        )

    def refuse(self) -> None:
        """DataError naming the first row the pinned law excludes, if any (check 1)."""
        if self.violation is not None:
            raise DataError(self.violation)

    def finish(self) -> Dispersion | None:
        """The dispersion test on the rows added (check 2): a :class:`Dispersion` when the file is noisier than
        its claim allows at level ``alpha``, else None (also when it has too few rows to be tested)."""
        filled = self.counts > 0
        blocks = int(filled.sum())
        critical = critical_count(blocks, self.alpha) if blocks else None
        if critical is None or self.rows == 0:
            return None
        bound = second_moment_max(self.mech) * self.copies
        over = int(np.sum(self.sums[filled] >= FACTOR * bound * self.counts[filled]))
        if over < critical:
            return None
        return Dispersion(self.path, self.meta.path, _claim(self.mech), float(self.sums.sum() / self.rows), bound,
                          blocks, over, critical, self.alpha)
