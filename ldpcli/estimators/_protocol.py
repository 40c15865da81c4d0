"""The estimator protocol, and the group-by that turns any estimator into one per group.

An estimator receives batches of privatized rows with :meth:`Estimator.add`, can absorb another
estimator of the same kind with :meth:`Estimator.merge` (another shard or thread), and produces its
result with :meth:`Estimator.finalize`, given the calibrated mechanism (for guaranteed error bounds)
and the number of rows it saw. A new estimator is one class with these three methods and
:meth:`Estimator.empty`; :func:`ldpcli.analysis._estimate.estimate` runs it over verified files.

Rows are privatized one by one and independently, so any subset chosen by *public* kept columns (a
label, a split) is again a set of independent unbiased rows: each group's estimate has the same
guarantees as the whole, with its own n.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.mechanisms._base import Mechanism

R_co = TypeVar("R_co", covariant=True)
E = TypeVar("E", bound="Estimator[Any]")

#: The most distinct values a group-by column may have: a label, not an identifier.
MAX_GROUPS = 10_000


class Estimator(Protocol[R_co]):
    """What every estimator does; ``keep`` is the batch's kept columns (a pyarrow Table) or None."""

    def empty(self: E) -> E:
        """A new estimator with the same settings and no rows."""
        ...

    def add(self, values: np.ndarray, keep: Any | None) -> None:
        """Take a (rows, d) batch of privatized rows (read-only) and its kept columns."""
        ...

    def merge(self: E, other: E) -> None:
        """Absorb the state of an estimator of another part of the data."""
        ...

    def finalize(self, mechanism: Mechanism, n: int) -> R_co:
        """The result for the ``n`` rows added, with error bounds from ``mechanism``."""
        ...


class GroupBy(Generic[E]):
    """One estimator per distinct value of a kept column; ``finalize`` gives (value, n, result) per group.

    Rows whose value is missing (null) form no group and are counted in :attr:`missing`.
    """

    def __init__(self, estimator: E, column: str) -> None:
        self.template = estimator
        self.column = column
        self.groups: dict[Any, tuple[E, int]] = {}
        self.missing = 0

    def empty(self) -> GroupBy[E]:
        return GroupBy(self.template.empty(), self.column)

    def add(self, values: np.ndarray, keep: Any | None) -> None:
        import pyarrow.compute as pc  # estimators are imported by the audit, which must not load pyarrow

        if keep is None or self.column not in keep.column_names:
            raise UsageError(f"`group_by` {self.column!r}: not a kept column of the privatized file (see its sidecar's layout)")
        encoded = pc.dictionary_encode(keep.column(self.column)).combine_chunks()
        indices = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        self.missing += int(np.count_nonzero(indices < 0))
        for j, value in enumerate(encoded.dictionary.to_pylist()):
            rows = np.flatnonzero(indices == j)
            if rows.size:
                self._group(value).add(values[rows], keep.take(rows))
                estimator, count = self.groups[value]
                self.groups[value] = (estimator, count + int(rows.size))

    def _group(self, value: Any) -> E:
        if value not in self.groups:
            if len(self.groups) >= MAX_GROUPS:
                raise UsageError(
                    f"`group_by` {self.column!r}: more than {MAX_GROUPS} distinct values; group by a label, not an identifier"
                )
            self.groups[value] = (self.template.empty(), 0)
        return self.groups[value][0]

    def merge(self, other: GroupBy[E]) -> None:
        for value, (estimator, count) in other.groups.items():
            mine = self._group(value)
            mine.merge(estimator)
            self.groups[value] = (mine, self.groups[value][1] + count)
        self.missing += other.missing

    def finalize(self, mechanism: Mechanism, n: int) -> list[tuple[Any, int, Any]]:
        """(value, rows, result) for every group, sorted by value (``n`` is the total, unused per group)."""
        ordered = sorted(self.groups.items(), key=lambda item: item[0])
        return [(value, count, estimator.finalize(mechanism, count)) for value, (estimator, count) in ordered]
