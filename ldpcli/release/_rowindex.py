"""What a release's inputs cost the ledger, and the index that charges their rows (issue 36).

:class:`Charge` is one input of a release as the ledger reserves it: its entry, its label, its row
hashes. :class:`RowIndex` reads the row files of a ledger's earlier entries once and merges them
into one sorted array, so that charging many new inputs against them (a dataset of many small files)
costs one read of each file, not one per new input; each row's ε is still added in ledger order, so
the sums are the ones of checking each earlier release in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ldpcli.release._ledger_file import LedgerEntry, RowSpend
from ldpcli.release._rowhash import ReleaseRows, contains

#: Rows of a new release checked against the earlier releases' row files at a time (bounds the temporaries).
_QUERY_CHUNK = 1 << 18
#: Row hashes of earlier releases that a budget check merges into one sorted index in memory (16 bytes a row:
#: the hash and its release), from the row files of at most :data:`_QUERY_CHUNK` rows, smallest first; the
#: other row files are mapped one at a time for each chunk of rows checked, as every row file was before
#: issue 36 (thousands of tiny releases checked one file at a time made a run of many inputs quadratic).
_MERGED_ROWS = 1 << 24
#: (row, release) matches added up at a time while a chunk of rows is charged (bounds the temporaries).
_PAIRS = 1 << 22


@dataclass(frozen=True)
class Charge:
    """What one input of a release costs: its ledger entry (tag and time are set at the reservation)."""

    entry: LedgerEntry
    #: The input as messages name it.
    label: str
    #: The release's row hashes (``Ledger.row_digest``): the budget is then checked per row and the
    #: rows are kept in the ledger; None: per input (by the entry's fingerprint).
    rows: ReleaseRows | None = None


class RowIndex:
    """The row files of a ledger's entries, and the rows of the releases being reserved after them, read
    once to charge many new releases (``Ledger.reserve_all``, ``Ledger.rowspend_of``).

    Each holder of rows has a *position*: an entry's index in the ledger, and ``len(entries) + j`` for
    the j-th charge, where its reservation will stand. The row files of at most :data:`_QUERY_CHUNK`
    rows (and the charges' rows of that size), smallest first up to :data:`_MERGED_ROWS` rows in
    all, are merged into one array sorted by hash, then position; the others are kept to be mapped
    (row files, checked once here) or searched (charges) one at a time. :meth:`spend` charges a row
    with the ε of every holder before a given position that holds it, in ledger order, so its sum is
    the one adding each earlier release in turn gives, to the last bit.
    """

    def __init__(self, load_rows: Callable[[LedgerEntry], np.ndarray], map_rows: Callable[[LedgerEntry], np.ndarray],
                 entries: Sequence[LedgerEntry], charges: Sequence[Charge] = ()) -> None:
        """Read every row file of ``entries`` once with ``load_rows`` (:meth:`Ledger._load_rows`: checked,
        DataError if one cannot be used); ``map_rows`` maps one again, unchecked, when it is searched apart."""
        self._map_rows = map_rows
        self._epsilon = np.array([e.epsilon_exact for e in entries] + [c.entry.epsilon_exact for c in charges])
        #: The positions of the holders without row hashes (they hold every row of their input), per fingerprint.
        self._whole: dict[str, list[int]] = {}
        holders: list[tuple[int, int, LedgerEntry | np.ndarray]] = []  # (size bound, position, its rows)
        for at, entry in enumerate(entries):
            if entry.rows_file:
                holders.append((entry.rows, at, entry))
            else:
                self._whole.setdefault(entry.fingerprint, []).append(at)
        for j, charge in enumerate(charges):
            if charge.rows is not None:
                holders.append((charge.rows.hashes.shape[0], len(entries) + j, charge.rows.hashes))
            else:
                self._whole.setdefault(charge.entry.fingerprint, []).append(len(entries) + j)
        merged: list[tuple[int, np.ndarray]] = []
        #: The holders searched one at a time: (position, its rows: an entry to map, or the hashes).
        self._apart: list[tuple[int, LedgerEntry | np.ndarray]] = []
        total = 0
        for _, at, source in sorted(holders, key=lambda holder: holder[0]):
            hashes = load_rows(source) if isinstance(source, LedgerEntry) else source
            if hashes.shape[0] <= _QUERY_CHUNK and total + hashes.shape[0] <= _MERGED_ROWS:
                merged.append((at, np.array(hashes, dtype=np.uint64)))  # a copy: the file's mapping is let go
                total += hashes.shape[0]
            else:
                self._apart.append((at, source))
        merged.sort(key=lambda holder: holder[0])
        self._apart.sort(key=lambda holder: holder[0])
        hashes = np.concatenate([h for _, h in merged]) if merged else np.empty(0, np.uint64)
        positions = np.repeat(np.array([at for at, _ in merged], dtype=np.int64), [h.shape[0] for _, h in merged])
        order = np.argsort(hashes, kind="stable")  # stable: the positions of one hash stay ascending
        self._hashes, self._positions = hashes[order], positions[order]

    def spend(self, queries: np.ndarray, before: int, fingerprint: str) -> RowSpend | None:
        """What the holders before position ``before`` spent on the distinct row hashes ``queries`` (of an
        input with ``fingerprint``); None when none of them held any."""
        whole = [at for at in self._whole.get(fingerprint, ()) if at < before]
        apart = [(at, source) for at, source in self._apart if at < before]
        most_spent, most_times, least_times, touched_rows = 0.0, 0, 0, 0
        for start in range(0, queries.shape[0], _QUERY_CHUNK):  # a chunk at a time: temporaries of its size
            block = queries[start:start + _QUERY_CHUNK]
            low = np.searchsorted(self._hashes, block, "left")
            high = np.searchsorted(self._hashes, block, "right")
            ends = np.cumsum(high - low)
            at = 0
            while at < block.shape[0]:  # pieces of at most _PAIRS matches (and at least one row)
                stop = max(at + 1, int(np.searchsorted(ends, (ends[at - 1] if at else 0) + _PAIRS, "right")))
                spent, times = self._add(block[at:stop], low[at:stop], high[at:stop], before, apart, whole)
                touched = times > 0
                if touched.any():
                    most_spent, most_times = max(most_spent, float(spent.max())), max(most_times, int(times.max()))
                    fewest = int(times[touched].min())
                    least_times = fewest if not touched_rows else min(least_times, fewest)
                    touched_rows += int(np.count_nonzero(touched))
                at = stop
        if not touched_rows:
            return None
        return RowSpend(most_spent, most_times, least_times, touched_rows, queries.shape[0])

    def _add(self, queries: np.ndarray, low: np.ndarray, high: np.ndarray, before: int,
             apart: Sequence[tuple[int, LedgerEntry | np.ndarray]], whole: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(ε spent, releases) of each of ``queries`` (whose matches in the merged index are ``low:high``)."""
        n = queries.shape[0]
        counts = high - low
        rows = np.repeat(np.arange(n), counts)
        owners = self._positions[np.repeat(low - (np.cumsum(counts) - counts), counts) + np.arange(rows.shape[0])]
        keep = owners < before
        row_parts, owner_parts = [rows[keep]], [owners[keep]]
        for at, source in apart:  # one mapping at a time
            hashes = self._map_rows(source) if isinstance(source, LedgerEntry) else source
            held = np.flatnonzero(contains(hashes, queries))
            del hashes
            row_parts.append(held)
            owner_parts.append(np.full(held.shape[0], at, dtype=np.int64))
        for at in whole:
            row_parts.append(np.arange(n))
            owner_parts.append(np.full(n, at, dtype=np.int64))
        rows, owners = np.concatenate(row_parts), np.concatenate(owner_parts)
        spent = np.zeros(n)
        if rows.shape[0]:
            ledger_order = np.argsort(owners, kind="stable")  # each row's ε added in ledger order, as one by one
            np.add.at(spent, rows[ledger_order], self._epsilon[owners[ledger_order]])
        return spent, np.bincount(rows, minlength=n)
