"""What a release's inputs cost the ledger, and the index that charges their rows.

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
#: other row files are mapped one at a time for each chunk of rows checked (checking every row file one at a time
#: would make a run of thousands of tiny releases quadratic).
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


class RowRuns:
    """The row files of a ledger's entries as sorted runs, kept by the ``Ledger`` across its reservations.

    Entries are indexed in ledger order as they are appended (:meth:`extend`): each row file is read
    once (``load_rows``: checked, DataError if it cannot be used), and the row files read together
    make one run, sorted by hash then position (an entry's index in the ledger); a run is merged with
    the one before it while that one is at most twice its size (LSM-style, as a binary counter), so
    there are O(log n) runs and each row is merged O(log n) times. The row files of more than
    :data:`_QUERY_CHUNK` rows, and any past :data:`_MERGED_ROWS` rows in all, are kept *apart*, to be
    mapped (``map_rows``) for each check. A run of N per-file releases in one process thus reads
    each earlier row file once, not once per release.
    """

    def __init__(self, load_rows: Callable[[LedgerEntry], np.ndarray], lineage: object = None,
                 changes: int = 0) -> None:
        self._load_rows = load_rows
        #: What the runs were built for (``LedgerState.lineage`` and ``.changes``): a change there starts over.
        self.lineage, self.changes = lineage, changes
        self.count = 0
        self._epsilon = np.empty(16)
        #: The positions of the entries without row hashes (they hold every row of their input), per fingerprint.
        self.whole: dict[str, list[int]] = {}
        #: (hashes, positions), sorted by hash, then position.
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []
        #: The entries searched one at a time: (position, entry), by position.
        self.apart: list[tuple[int, LedgerEntry | np.ndarray]] = []
        self.merged = 0

    @property
    def epsilon(self) -> np.ndarray:
        """The exact ε of the entries indexed, by position."""
        return self._epsilon[:self.count]

    def extend(self, entries: Sequence[LedgerEntry]) -> RowRuns:
        """Index ``entries[self.count:]`` (the entries appended since); returns self."""
        new = entries[self.count:]
        if not new:
            return self
        if self.count + len(new) > self._epsilon.shape[0]:
            grown = np.empty(max(2 * self._epsilon.shape[0], self.count + len(new)))
            grown[:self.count] = self._epsilon[:self.count]
            self._epsilon = grown
        self._epsilon[self.count:self.count + len(new)] = [entry.epsilon_exact for entry in new]
        held: list[tuple[int, int, LedgerEntry]] = []  # (size bound, position, entry)
        for at, entry in enumerate(new, start=self.count):
            if entry.rows_file:
                held.append((entry.rows, at, entry))
            else:
                self.whole.setdefault(entry.fingerprint, []).append(at)
        self.count += len(new)
        self.add_run([(at, entry) for _, at, entry in sorted(held, key=lambda holder: holder[0])])
        return self

    def add_run(self, holders: Sequence[tuple[int, LedgerEntry | np.ndarray]]) -> None:
        """Read the rows of ``holders`` (position, an entry or the hashes themselves), smallest first; merge
        those that fit into a new run, keep the others apart."""
        merged: list[tuple[int, np.ndarray]] = []
        for at, source in holders:
            hashes = self._load_rows(source) if isinstance(source, LedgerEntry) else source
            if hashes.shape[0] <= _QUERY_CHUNK and self.merged + hashes.shape[0] <= _MERGED_ROWS:
                merged.append((at, np.array(hashes, dtype=np.uint64)))  # a copy: the file's mapping is let go
                self.merged += hashes.shape[0]
            else:
                self.apart.append((at, source))
        self.apart.sort(key=lambda holder: holder[0])
        if not merged:
            return
        merged.sort(key=lambda holder: holder[0])
        hashes = np.concatenate([h for _, h in merged])
        positions = np.repeat(np.array([at for at, _ in merged], dtype=np.int64), [h.shape[0] for _, h in merged])
        order = np.argsort(hashes, kind="stable")  # stable: the positions of one hash stay ascending
        self.runs.append((hashes[order], positions[order]))
        while len(self.runs) > 1 and self.runs[-2][0].shape[0] <= 2 * self.runs[-1][0].shape[0]:
            (early, early_at), (late, late_at) = self.runs.pop(-2), self.runs.pop()
            hashes, positions = np.concatenate([early, late]), np.concatenate([early_at, late_at])
            order = np.argsort(hashes, kind="stable")  # the earlier run's positions first: still ascending
            self.runs.append((hashes[order], positions[order]))


class RowIndex:
    """The row files of a ledger's entries, and the rows of the releases being reserved after them, read
    once to charge many new releases (``Ledger.reserve_all``, ``Ledger.rowspend_of``).

    Each holder of rows has a *position*: an entry's index in the ledger, and ``len(entries) + j`` for
    the j-th charge, where its reservation will stand. The entries' rows are the :class:`RowRuns` the
    ledger keeps (sorted runs, some row files apart); the charges' rows make one more run (those of at
    most :data:`_QUERY_CHUNK` rows) or are searched apart. :meth:`spend` charges a row with the ε of
    every holder before a given position that holds it, in ledger order, so its sum is the one adding
    each earlier release in turn gives, to the last bit, however the holders are split into runs.
    """

    def __init__(self, load_rows: Callable[[LedgerEntry], np.ndarray], map_rows: Callable[[LedgerEntry], np.ndarray],
                 entries: Sequence[LedgerEntry], charges: Sequence[Charge] = (), runs: RowRuns | None = None) -> None:
        """Index ``entries`` (read with ``load_rows``, :meth:`Ledger._load_rows`: checked, DataError if one cannot be
        used), or take ``runs``, already indexing them; ``map_rows`` maps a row file again, unchecked, when it is
        searched apart."""
        self._map_rows = map_rows
        known = runs if runs is not None else RowRuns(load_rows).extend(entries)
        assert known.count == len(entries)
        self._known = known
        self._charges = np.array([c.entry.epsilon_exact for c in charges], dtype=float)
        mine = RowRuns(load_rows)
        mine.merged = known.merged  # at most _MERGED_ROWS rows merged in all, the charges' with the entries'
        held: list[tuple[int, LedgerEntry | np.ndarray]] = [
            (len(entries) + j, c.rows.hashes) for j, c in enumerate(charges) if c.rows is not None]
        mine.add_run(sorted(held, key=lambda holder: int(holder[1].shape[0])))  # type: ignore[union-attr]
        self._mine_whole: dict[str, list[int]] = {}
        for j, charge in enumerate(charges):
            if charge.rows is None:
                self._mine_whole.setdefault(charge.entry.fingerprint, []).append(len(entries) + j)
        self._runs = [*known.runs, *mine.runs]
        self._apart = [*known.apart, *mine.apart]

    def _epsilon(self, owners: np.ndarray) -> np.ndarray:
        """The exact ε of the holders at the positions ``owners`` (entries, then charges)."""
        count = self._known.count
        epsilon = np.empty(owners.shape[0])
        early = owners < count
        epsilon[early] = self._known.epsilon[owners[early]]
        epsilon[~early] = self._charges[owners[~early] - count]
        return epsilon

    def spend(self, queries: np.ndarray, before: int, fingerprint: str) -> RowSpend | None:
        """What the holders before position ``before`` spent on the distinct row hashes ``queries`` (of an
        input with ``fingerprint``); None when none of them held any."""
        whole = [at for at in [*self._known.whole.get(fingerprint, ()), *self._mine_whole.get(fingerprint, ())]
                 if at < before]
        apart = [(at, source) for at, source in self._apart if at < before]
        most_spent, most_times, least_times, touched_rows = 0.0, 0, 0, 0
        for start in range(0, queries.shape[0], _QUERY_CHUNK):  # a chunk at a time: temporaries of its size
            block = queries[start:start + _QUERY_CHUNK]
            bounds = [(np.searchsorted(hashes, block, "left"), np.searchsorted(hashes, block, "right"))
                      for hashes, _ in self._runs]
            ends = np.cumsum(sum((high - low for low, high in bounds), np.zeros(block.shape[0], np.int64)))
            at = 0
            while at < block.shape[0]:  # pieces of at most _PAIRS matches (and at least one row)
                stop = max(at + 1, int(np.searchsorted(ends, (ends[at - 1] if at else 0) + _PAIRS, "right")))
                spent, times = self._add(block[at:stop], [(low[at:stop], high[at:stop]) for low, high in bounds],
                                         before, apart, whole)
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

    def _add(self, queries: np.ndarray, bounds: Sequence[tuple[np.ndarray, np.ndarray]], before: int,
             apart: Sequence[tuple[int, LedgerEntry | np.ndarray]], whole: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(ε spent, releases) of each of ``queries`` (whose matches in each run are ``low:high``)."""
        n = queries.shape[0]
        row_parts: list[np.ndarray] = []
        owner_parts: list[np.ndarray] = []
        for (_, run_positions), (low, high) in zip(self._runs, bounds):
            counts = high - low
            rows = np.repeat(np.arange(n), counts)
            owners = run_positions[np.repeat(low - (np.cumsum(counts) - counts), counts) + np.arange(rows.shape[0])]
            keep = owners < before
            row_parts.append(rows[keep])
            owner_parts.append(owners[keep])
        for at, source in apart:  # one mapping at a time
            hashes = self._map_rows(source) if isinstance(source, LedgerEntry) else source
            held = np.flatnonzero(contains(hashes, queries))
            del hashes
            row_parts.append(held)
            owner_parts.append(np.full(held.shape[0], at, dtype=np.int64))
        for at in whole:
            row_parts.append(np.arange(n))
            owner_parts.append(np.full(n, at, dtype=np.int64))
        rows = np.concatenate(row_parts) if row_parts else np.empty(0, np.int64)
        owners = np.concatenate(owner_parts) if owner_parts else np.empty(0, np.int64)
        spent = np.zeros(n)
        if rows.shape[0]:
            ledger_order = np.argsort(owners, kind="stable")  # each row's ε added in ledger order, as one by one
            np.add.at(spent, rows[ledger_order], self._epsilon(owners[ledger_order]))
        return spent, np.bincount(rows, minlength=n)
