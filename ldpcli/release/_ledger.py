"""The data owner's privacy-budget ledger, input fingerprints and input tags.

Releasing the same people's rows twice at ε spends 2ε: this module keeps the account. Composition
here is *basic composition*: the ε of the releases of one input add up (and, for the (ε, δ)
Gaussian baseline, so do the δ). For pure ε-LDP the sum is tight in the worst case (a person whose
rows are released k times at ε can lose exactly kε), so ldp never claims a smaller total.

What the ledger holds
    one entry per release: the input's *fingerprint* (below), the input and output paths as given
    (resolved), rows, d, the vector columns, the mechanism, ε asked for, the exact ε, δ, the UTC
    time, the release's input tag, whether it was seeded and its *row file*; plus a secret 32-byte
    key. Never the data itself. The row file (``<ledger stem>-rows/<release id>.npy`` beside the
    ledger, 0600 in a 0700 directory) holds the release's distinct keyed row hashes
    (:mod:`ldpcli.release._rowhash`), 8 bytes a row, so that a later release sharing some of its rows, in
    whatever file, is charged for them (:meth:`Ledger.row_spend`). Paths and fingerprints are as sensitive as the file names and contents they stand
    for, so the ledger is written with mode 0600 (its directory, when ldp creates it, 0700) and it
    belongs with the data owner, never next to a release.

Where it lives
    The path given (``Ledger.open(path)``), else ``$LDP_LEDGER``, else the user data directory
    (:func:`default_ledger_path`): ``$XDG_DATA_HOME/ldp/ledger.json`` (``~/.local/share/...``) on
    Linux and other systems, ``~/Library/Application Support/ldp/ledger.json`` on macOS,
    ``%APPDATA%\\ldp\\ledger.json`` on Windows. A missing file is an empty ledger; nothing is
    written until the first release is recorded. A ledger ldp cannot read is never reset or
    overwritten: the owner fixes or moves it.

The fingerprint
    :class:`InputFingerprint` is an *unkeyed* SHA-256 of the vector values exactly as read
    (float64, little-endian), of d and of the row count, so the same values read from CSV or
    Parquet, in any batch size, give the same fingerprint. Because it is unkeyed, anyone holding a
    guess of the raw data could test the guess against it: the fingerprint must never leave the
    ledger: it is never written into a sidecar, and anything that displays it is for the owner only.

The input tag
    what goes into a release's sidecar instead: ``"ldptag1-" + HMAC-SHA256(key, fingerprint)`` with
    the ledger's secret key. Two releases of one input recorded in one ledger carry the same tag, so
    whoever holds both releases can see that they describe the same rows and that their ε add up
    (``estimate-mean`` explains this). The tag reveals *that* inputs are equal, and nothing else:
    without the key nobody can test a guess of the raw data against it. With the key, i.e. for the
    owner of the ledger, a guess can be tested, as it can against the fingerprint itself. Tags from
    different ledgers (different keys) never match, even for equal inputs.

Concurrency and crashes: reserve, publish, confirm
    A release is committed in three steps (``docs/commit-protocol.md``). :meth:`Ledger.reserve`
    takes an exclusive lock on the sibling file ``<ledger>.lock`` (``fcntl.flock`` on POSIX,
    ``msvcrt.locking`` on Windows; on a platform with neither it proceeds without a lock), re-reads
    the ledger under it, creates the ledger's key if the file has none yet (once, under the lock,
    so concurrent first releases of one input get one tag; a release that hashes its rows has made
    it before reading, :meth:`Ledger.ensure_key`), checks ``max_budget`` against every entry (per
    row when the release's row hashes are given), writes the release's row file and appends the
    release as a *reservation* (``"state": "reserved"``) before anything is published. The outputs are then published, and :meth:`Ledger.confirm` marks the entry
    ``"confirmed"``; a release that fails before it is published is taken out again
    (:meth:`Ledger.cancel`). A release of many inputs does each step for all of them in one
    write (:meth:`Ledger.reserve_all`, :meth:`Ledger.confirm_all`, :meth:`Ledger.cancel_all`). A reservation counts like a release, so overlapping runs can never
    spend past a cap, and a run killed at any moment leaves the ledger over-counting, never
    under-counting: its reservation stays, :meth:`Ledger.pending` lists it (``ldp budget``, with what became of it:
    :func:`ldpcli.release._commit.pending_releases`), and the owner removes it with :func:`ldpcli.release._commit.release_reservation` once its release is known never to
    have appeared. Every change is one line appended to the ledger's log (``<ledger>.log``, 0600,
    fsynced), folded into the file, rewritten atomically, once the log outgrows it; readers need no lock.

The entries, their file format and the lock are in :mod:`ldpcli.release._ledger_file`; the log, its
crash rules and the incremental reading in :mod:`ldpcli.release._ledger_log` (``docs/commit-protocol.md``).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import math
import os
import secrets
import socket
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli.errors import DataError, UsageError, counted
from ldpcli.io._atomic import AtomicFileSink
from ldpcli.io._hashing import Sha256
from ldpcli.io._messages import _reason
from ldpcli.release._ledger_file import (
    CONFIRMED,
    RESERVED,
    LedgerEntry,
    ReservationOwner,
    RowSpend,
    Spend,
    default_ledger_path,
    distinct,
    entry_problem,
    locked,
    private_umask,
    spend_of,
    unreadable,
)
from ldpcli.release._ledger_log import Change, LedgerState, load, positions, write
from ldpcli.release._rowhash import ReleaseRows, RowDigest, key_check
from ldpcli.release._rowindex import Charge, RowIndex, RowRuns

#: The prefix of every input tag (the 1 is the tag's version: HMAC-SHA256 of the fingerprint).
TAG_PREFIX = "ldptag1-"

_FINGERPRINT_PREFIX = b"ldp-input-fingerprint-v1\0"
#: Relative slack of the budget comparison, so that e.g. three releases at ε = 0.1 fit a cap of
#: 0.3 although 0.1 + 0.1 + 0.1 > 0.3 in floating point. It is far below any meaningful ε.
_BUDGET_SLACK = 1e-9


class BudgetError(DataError):
    """A release would take an input's privacy loss past ``options.budget.max_budget`` (nothing written)."""

    exit_code = 1


# --- the fingerprint ---------------------------------------------------------------------------------


class InputFingerprint:
    """An incremental, format- and batch-independent SHA-256 of an input's vector values.

    Feed every batch of vectors as read, in order, to :meth:`update`; the bytes hashed are the
    values as little-endian float64 in row-major order (``np.ascontiguousarray(values, '<f8')``),
    so float64 values equal in a CSV and a Parquet file, or float32 values widened to float64,
    give the same fingerprint, and so does any split into batches. NaN payloads and the sign of
    zero are hashed as they are. :meth:`hexdigest` is the SHA-256 of a domain-separation prefix,
    d and the row count (``struct '<QQ'``) and the digest of the value stream.

    With ``threaded=True`` the hashing runs in one background thread (hashlib releases the GIL on
    large buffers), so it overlaps with the caller's work; at most ``max_pending`` batches wait.
    :meth:`update` may then keep a *reference* to the batch until it is hashed (no copy when the
    batch is already C-contiguous float64), so the caller must pass an array it will not mutate
    afterwards, or a copy. The default (``threaded=False``) hashes at once and keeps nothing.
    """

    def __init__(self, d: int, *, threaded: bool = False, max_pending: int = 4) -> None:
        """A fingerprint of an input whose vectors have ``d`` coordinates."""
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
            raise ValueError(f"d must be a positive integer, got {d!r}")
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending!r}")
        self._d = int(d)
        self._rows = 0
        self._stream = Sha256(threaded=threaded, max_pending=max_pending, name="ldp-fingerprint")

    @property
    def d(self) -> int:
        """The number of coordinates of each vector."""
        return self._d

    @property
    def rows(self) -> int:
        """The number of rows passed to :meth:`update` so far."""
        return self._rows

    def update(self, values: np.ndarray) -> None:
        """Hash a batch: an (n_b, d) array of the vectors as read (any real dtype; n_b may be 0)."""
        batch = np.ascontiguousarray(values, dtype="<f8")
        if batch.ndim != 2 or batch.shape[1] != self._d:
            raise ValueError(f"expected an (n, {self._d}) array of vectors, got shape {batch.shape}")
        self._rows += batch.shape[0]
        self._stream.update(batch.data)

    def hexdigest(self) -> str:
        """The fingerprint (64 hex digits) of the rows passed so far; more rows may follow."""
        final = hashlib.sha256(_FINGERPRINT_PREFIX)
        final.update(struct.pack("<QQ", self._d, self._rows))
        final.update(self._stream.digest())
        return final.hexdigest()

    def close(self) -> None:
        """Stop the background thread, if any, after the pending batches (:meth:`hexdigest` still works)."""
        self._stream.close()


def _check_arguments(epsilon: float, max_budget: float | None) -> None:
    """UsageError unless ``epsilon`` is a positive finite ε and ``max_budget`` None or positive."""
    if max_budget is not None and not max_budget > 0:
        raise UsageError(f"`max_budget` must be a positive ε, got {max_budget!r}; give the largest total ε to allow")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"`epsilon` must be a positive finite number, got {epsilon!r}")


def _tag(key: bytes, fingerprint: str) -> str:
    """The input tag of ``fingerprint`` under ``key`` (:meth:`Ledger.tag`)."""
    return TAG_PREFIX + hmac.new(key, fingerprint.encode("utf-8"), hashlib.sha256).hexdigest()


def _input_spend(entries: Sequence[LedgerEntry], fingerprint: str) -> RowSpend | None:
    """What the entries of ``fingerprint`` spent, counted per input (a release without row hashes)."""
    own = [entry for entry in entries if entry.fingerprint == fingerprint]
    if not own:
        return None
    spend = spend_of(own)
    return RowSpend(spend.epsilon, spend.releases, spend.releases, 0, 0)


def _fmt(value: float) -> str:
    """A privacy parameter for a message: 6 significant digits."""
    return f"{value:.6g}"


# --- the ledger ----------------------------------------------------------------------------------


class Ledger:
    """The data owner's record of releases: open with :meth:`open`, append with :meth:`record`.

    References
    ----------
    The ε an input has spent is the sum over its releases (basic composition; Dwork and Roth
    2014, Theorem 3.16).
    """

    def __init__(self, path: Path, label: str, key: bytes | None, entries: list[LedgerEntry],
                 state: LedgerState | None = None) -> None:
        """Use :meth:`open`."""
        self._path = path
        self._label = label
        self._key = key
        self._entries = entries
        #: The file as last read (base and log), brought up to date by each change (only the log's new bytes),
        #: and the row files of its entries as sorted runs: a run of many releases reads each once.
        self._state = state
        self._runs: RowRuns | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> Ledger:
        """The ledger at ``path`` (default :func:`default_ledger_path`); a missing file is empty.

        Writes nothing. DataError when the file exists but cannot be used (it is left as it is).

        Parameters
        ----------
        path : path or None
            The ledger file (its directory holds the owner's key and row files).

        Returns
        -------
        Ledger
            Its releases as recorded; pass it as ``ledger=`` to ``ldpcli.privatize_file``.
        """
        target = Path(path) if path is not None else default_ledger_path()
        label = os.fspath(target)
        state = load(Path(os.path.realpath(target)), label)
        if state is None:
            return cls(target, label, None, [])
        return cls(target, label, state.key, state.entries, state)

    @property
    def path(self) -> Path:
        """The ledger file."""
        return self._path

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """Every recorded release, oldest first."""
        return tuple(self._entries)

    def _secret(self) -> bytes:
        """The key, created (in memory; :meth:`record` persists it) for a ledger that has none yet."""
        if self._key is None:
            self._key = secrets.token_bytes(32)
        return self._key

    def ensure_key(self) -> bytes:
        """The ledger's key, read from the file, or created and written now (an empty ledger) if it has none.

        Under the lock, once: of concurrent first runs on a new ledger, the first writes the key
        and the others read it. A release needs the key before it reads its input (its row
        hashes are keyed), so it calls this first.
        """
        self._update(lambda key, state, change: None, create=True)
        assert self._key is not None
        return self._key

    def row_digest(self, d: int, *, threaded: bool = False) -> RowDigest:
        """A :class:`ldpcli.release._rowhash.RowDigest` of a release's rows of ``d`` values, keyed by this ledger's key
        (:meth:`ensure_key`: created now if the ledger has none)."""
        return RowDigest(self.ensure_key(), d, threaded=threaded)

    def tag(self, fingerprint: str) -> str:
        """The input tag for a sidecar: ``"ldptag1-"`` + HMAC-SHA256(key, fingerprint), hex."""
        return _tag(self._secret(), fingerprint)

    def spent(self, fingerprint: str) -> Spend | None:
        """What the releases of the input with this fingerprint spent; None if it was never released."""
        entries = [entry for entry in self._entries if entry.fingerprint == fingerprint]
        return spend_of(entries) if entries else None

    def check(self, fingerprint: str, epsilon: float, *, max_budget: float | None, input_label: str,
              rows: ReleaseRows | None = None) -> str | None:
        """Judge a release at ``epsilon`` of the input with this fingerprint, before it is written.

        ``epsilon`` is what the release will spend (its exact ε). Returns a warning sentence when
        the input was already released, None when it is new. Raises :class:`BudgetError` when the
        release alone, or with what was spent already (sum of exact ε), exceeds ``max_budget``
        (UsageError when ``max_budget`` is not positive). δ is summed by :meth:`spent` but not capped.

        With ``rows`` (the release's row hashes, :meth:`row_digest`), what was spent is counted per
        row (:meth:`row_spend`): the ε of every earlier release that held the row, and the row
        that was released most decides. So a shard of an input released before, or a file that
        shares some rows with one, is charged for what its rows spent. Without, per input: the
        releases of this fingerprint.
        """
        _check_arguments(epsilon, max_budget)
        if rows is None:
            used = _input_spend(self._entries, fingerprint)
        else:
            used = self.rowspend_of(fingerprint, rows)
        return self._judge(used, epsilon, max_budget=max_budget, input_label=input_label)

    def _judge(self, used: RowSpend | None, epsilon: float, *, max_budget: float | None,
               input_label: str) -> str | None:
        """:meth:`check`'s verdict once what the earlier releases spent (``used``) is known."""
        spent = used.epsilon if used is not None else 0.0
        total = spent + epsilon
        if max_budget is not None and total > max_budget * (1 + _BUDGET_SLACK):
            if used is None:
                before = "it was never released before"
            else:
                before = f"ε spent so far: {_fmt(spent)}{used.where()}, with it: {_fmt(total)}"
            raise BudgetError(
                f"{input_label}: this release's ε = {_fmt(epsilon)} would exceed `max_budget` {_fmt(max_budget)} "
                f"({before}; ledger {self._label}); nothing was written: choose a smaller `epsilon`, "
                "or a larger `max_budget` if you accept the larger privacy loss"
            )
        if used is None:
            return None
        if used.rows == 0 or used.held == used.rows and used.least == used.times:
            opening = f"{input_label} was already released {counted(used.times, 'time')}"
        else:
            opening = (f"{input_label}: {used.held} of its {counted(used.rows, 'row')} "
                       f"{'was' if used.held == 1 else 'were'} already released, up to {counted(used.times, 'time')}")
        whole = "its one row was" if used.rows == 1 else f"all {used.rows} of its rows were"
        every = f"; {whole} in earlier releases" if used.rows and used.held == used.rows else ""
        return (
            f"{opening} (ε spent so far: {_fmt(spent)}{' on the most released row' if used.rows else ''}; "
            f"with this release: {_fmt(total)}{every}). Each release of the same people's rows adds to their "
            "privacy loss; see `ldp budget`."
        )

    def rowspend_of(self, fingerprint: str, rows: ReleaseRows) -> RowSpend | None:
        """What the earlier releases spent on the rows of a new release; None when none of them held any.

        A row's spend is the sum of the exact ε of every entry (confirmed or reserved) whose row
        file holds its hash, plus every entry without a row file (older ledgers) of the same
        fingerprint, added in ledger order. Reads each row file once (:class:`RowIndex`);
        vectorized, no per-row Python. DataError when a row file is missing or damaged (the ledger
        is never guessed at).
        """
        if self._state is None:
            return RowIndex(self._load_rows, self._map_rows, self._entries).spend(rows.hashes, len(self._entries), fingerprint)
        runs = self._row_runs(self._state)
        return RowIndex(self._load_rows, self._map_rows, self._entries, runs=runs).spend(rows.hashes, runs.count,
                                                                                        fingerprint)

    def _row_runs(self, state: LedgerState) -> RowRuns:
        """The row files of ``state``'s entries as sorted runs: those indexed before and the ones appended since,
        or all of them again when an entry was removed or replaced by one with other rows (or the file swapped)."""
        runs = self._runs
        if runs is None or runs.lineage is not state.lineage or runs.changes != state.changes:
            runs = self._runs = RowRuns(lambda entry: self._load_rows(entry), state.lineage, state.changes)
        return runs.extend(state.entries)

    def _rows_name(self, release: str) -> str:
        """The row file of ``release``, relative to the ledger's directory: ``<ledger stem>-rows/<release>.npy``
        (the stem of the file a link at the ledger's path points to)."""
        return f"{Path(os.path.realpath(self._path)).stem}-rows/{release}.npy"

    def _map_rows(self, entry: LedgerEntry) -> np.ndarray:
        """The row hashes of ``entry`` as stored (memory-mapped), DataError if the file cannot be read."""
        path = Path(os.path.realpath(self._path)).parent / entry.rows_file
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise unreadable(self._label, f"the row file {str(path)!r} of release {entry.release}: "
                                           f"{_reason(exc) if isinstance(exc, OSError) else exc}") from exc

    def _load_rows(self, entry: LedgerEntry) -> np.ndarray:
        """The sorted distinct row hashes of ``entry`` (memory-mapped), DataError if they cannot be used."""
        path = Path(os.path.realpath(self._path)).parent / entry.rows_file
        hashes = self._map_rows(entry)
        if hashes.dtype != np.dtype("<u8") or hashes.ndim != 1 or (
                hashes.shape[0] > 1 and not bool(np.all(hashes[1:] > hashes[:-1]))):
            raise unreadable(self._label, f"the row file {str(path)!r} of release {entry.release} is not an "
                                           "ascending array of 64-bit row hashes")
        return hashes

    def _write_rows(self, entry: LedgerEntry, rows: ReleaseRows) -> None:
        """Write the row file of ``entry`` (its directory 0700, the file 0600, atomically)."""
        path = Path(os.path.realpath(self._path)).parent / entry.rows_file
        directory = path.parent
        try:
            with private_umask():
                directory.mkdir(mode=0o700, exist_ok=True)
                with AtomicFileSink(path) as sink:  # streamed in numpy's buffered chunks: no copy of the hashes
                    np.lib.format.write_array(sink, np.ascontiguousarray(rows.hashes, dtype="<u8"),
                                              allow_pickle=False)
                    sink.commit()
        except (OSError, DataError, UsageError) as exc:
            raise DataError(f"{self._label}: cannot write the release's row file {str(path)!r} "
                            f"({_reason(exc) if isinstance(exc, OSError) else exc}); free space or fix the "
                            "directory's permissions, then run again") from exc

    def _remove_rows(self, entries: Iterable[LedgerEntry]) -> None:
        """Remove the row files of entries taken out of the ledger (one already gone is fine), and their
        directory once it is empty; under the lock (:meth:`_update`), as every row file is written."""
        parent = Path(os.path.realpath(self._path)).parent
        for entry in entries:
            if entry.rows_file:
                path = parent / entry.rows_file
                with contextlib.suppress(OSError):
                    path.unlink()
                with contextlib.suppress(OSError):
                    path.parent.rmdir()

    def record(self, entry: LedgerEntry) -> None:
        """Append ``entry`` (as it is: no budget check) to the ledger file, atomically and under its lock.

        Creates the directory (0700) and the file (0600, with a new key unless :meth:`tag` made one
        already) when missing. Under the lock the file and its log are read again (the log's new
        bytes only, when the file is the one read before), so releases recorded by other runs since
        :meth:`open` are kept; if it has become unreadable, DataError and nothing is written. The
        entry is appended to the log (created 0600); a compaction's rewrite keeps the file's mode
        (``atomic_write_text`` gives the new file the mode of the one it replaces), so 0600 stays
        0600. A symbolic link at the ledger's path is followed: the file it points to is rewritten,
        and the lock file and the log sit beside that file.

        If the file held a different key when re-read (another run created the ledger after this
        one opened it, or it was swapped), the file's key is kept: tags already handed out with this
        object's key stay in their entries, and :meth:`by_tag` still finds them there. A release
        being published uses :meth:`reserve` and :meth:`confirm` instead, whose tag is always the
        file's.

        The 0600/0700 modes are set through the process umask while the file and directory are
        created, which is per process: a file another thread creates at that moment is made
        private too (never less private).
        """
        problem = entry_problem(entry.to_dict())
        if problem is not None:
            raise ValueError(f"not a valid ledger entry: {problem}")
        self._update(lambda key, state, change: change.add.append(entry))

    def reserve(self, entry: LedgerEntry, *, max_budget: float | None, input_label: str,
                rows: ReleaseRows | None = None) -> Reservation:
        """Step 1 of a release: check the budget and append ``entry`` as a reservation, under the lock.

        ``entry`` describes the release (its ``tag`` is ignored: the tag is made from the key the
        file holds under the lock, which is created there if the file has none). The budget check is
        :meth:`check`'s, against the ledger as it is under the lock, reservations of runs still in
        flight (or killed) included, so overlapping runs can never spend past ``max_budget``:
        :class:`BudgetError` and nothing is written. Returns the :class:`Reservation` (its ``tag``
        goes into the sidecar; :meth:`Reservation.confirm` once the outputs are published,
        :meth:`Reservation.cancel` if they never will be).

        ``rows`` (the release's row hashes, made with this ledger's key: :meth:`row_digest`) makes
        the check row-level (:meth:`check`) and is kept as the entry's row file
        (``<ledger stem>-rows/<release>.npy``, written before the entry), so that later releases
        that share rows with this one are charged for it. DataError when the ledger's key is no
        longer the one the rows were hashed with (the ledger was replaced meanwhile).
        """
        return self.reserve_all([Charge(entry, input_label, rows)], max_budget=max_budget)[0]

    def reserve_all(self, charges: Sequence[Charge], *, max_budget: float | None) -> list[Reservation]:
        """:meth:`reserve` every input of one release at once: one read and one write of the ledger.

        Each charge is checked as if the ones before it had been reserved one by one (a row two
        inputs share is charged for both), against one merged index of every row file
        (:class:`RowIndex`, each file read once), so a release of many inputs costs the ledger
        linear work, not one rewrite and one pass over every earlier row file per input.
        Every row file is written, then every entry, in one log line: a kill leaves either none of
        the reservations or all of them (and perhaps row files no entry names, never read). The
        ledger keeps the row files read as sorted runs (:class:`RowRuns`), so the next reservation
        reads only the row files added since.
        :class:`BudgetError` for the first charge past ``max_budget``, and nothing is written.
        """
        releases = [secrets.token_hex(8) for _ in charges]
        reserved: list[LedgerEntry] = []
        notices: list[str | None] = []

        for charge in charges:
            _check_arguments(charge.entry.epsilon_exact, max_budget)

        def add(key: bytes, state: LedgerState, change: Change) -> None:
            entries = state.entries
            for charge in charges:
                if charge.rows is not None and charge.rows.key_check != key_check(key):
                    raise DataError(f"{self._label}: the ledger's key changed while {charge.label} was read (was the "
                                    "ledger replaced?); nothing was written: run again")
            index = (RowIndex(self._load_rows, self._map_rows, entries, charges, runs=self._row_runs(state))
                     if any(c.rows is not None for c in charges) else None)
            for charge, release in zip(charges, releases):
                if charge.rows is None:
                    used = _input_spend([*entries, *reserved], charge.entry.fingerprint)
                else:
                    assert index is not None
                    used = index.spend(charge.rows.hashes, len(entries) + len(reserved), charge.entry.fingerprint)
                entry = replace(charge.entry, tag=_tag(key, charge.entry.fingerprint), state=RESERVED,
                                release=release, owner=_this_process(),
                                rows_file=self._rows_name(release) if charge.rows is not None else "")
                notices.append(self._judge(used, charge.entry.epsilon_exact, max_budget=max_budget,
                                           input_label=charge.label))
                problem = entry_problem(entry.to_dict())
                if problem is not None:
                    raise ValueError(f"not a valid ledger entry: {problem}")
                reserved.append(entry)
            for charge, entry in zip(charges, reserved):
                if charge.rows is not None:
                    written.append(entry)
                    self._write_rows(entry, charge.rows)
            change.add.extend(reserved)

        written: list[LedgerEntry] = []
        # The row files were written (some of them), the entries were not.
        self._update(add, step="reserve-write", undo=lambda: self._remove_rows(written))
        return [Reservation(self, entry.release, entry.tag, notice, entry) for entry, notice in zip(reserved, notices)]

    def confirm(self, release: str, **changes: Any) -> None:
        """Step 3: mark the reservation ``release`` confirmed (its outputs are published).

        ``changes`` update its fields (e.g. ``created``, the sidecar's time). DataError if the
        reservation is no longer in the file (removed by hand meanwhile): the release stays
        published and the owner is told to record it.
        """
        self.confirm_all([release], **changes)

    def confirm_all(self, releases: Sequence[str], **changes: Any) -> None:
        """:meth:`confirm` every reservation in ``releases`` in one log line (all, or none when one is missing)."""
        wanted = set(releases)

        def mark(key: bytes, state: LedgerState, change: Change) -> None:
            found = set()
            for index in positions(state, wanted):  # by release id: no pass over every entry
                entry = state.entries[index]
                if entry.state == RESERVED:
                    change.set[index] = replace(entry, state=CONFIRMED, owner=None, **changes)
                    found.add(entry.release)
            missing = [release for release in releases if release not in found]
            if missing:
                raise DataError(
                    f"{self._label}: the reservation {missing[0]} of a release that is now published is no longer in "
                    "the ledger (was it removed by hand?); the release's ε is not counted: record it again"
                )

        self._update(mark, step="confirm-write")

    def cancel(self, release: str) -> None:
        """Take the entry ``release`` out again: its outputs were never published, or were put back.

        For the run that reserved it (the id is its own): the entry goes whether reserved or
        already confirmed, since that run knows its outputs are not in place.
        """
        self.cancel_all([release])

    def cancel_all(self, releases: Sequence[str]) -> None:
        """:meth:`cancel` every entry in ``releases`` in one log line, and their row files after it."""
        wanted = set(releases)

        def drop(key: bytes, state: LedgerState, change: Change) -> None:
            change.drop.extend(positions(state, wanted))
            removed.extend(state.entries[at] for at in change.drop)

        removed: list[LedgerEntry] = []
        self._update(drop, then=lambda: self._remove_rows(removed))

    def pending(self) -> list[LedgerEntry]:
        """Every reservation not confirmed (what became of each: :func:`ldpcli.release._commit.pending_releases`)."""
        return [entry for entry in self._entries if entry.state == RESERVED]

    def release_reservation(self, release: str, removable: Callable[[LedgerEntry], str | None]) -> LedgerEntry:
        """Remove the reservation ``release`` whose release never appeared (the owner's decision).

        ``release`` may be a unique prefix of at least 4 hex digits. ``removable(entry)`` says, under
        the lock, why the entry must stay (a sentence), or None when it may go
        (:func:`ldpcli.release._commit.release_reservation` judges whether its run still runs or published).
        UsageError when no reservation has that id, or it must stay.
        """
        def drop(key: bytes, state: LedgerState, change: Change) -> None:
            matches = [(at, e) for at, e in enumerate(state.entries)
                       if e.state == RESERVED and len(release) >= 4 and e.release.startswith(release)]
            if len(matches) != 1:
                found = "no" if not matches else "more than one"
                raise UsageError(f"{self._label}: {found} reservation has the id {release!r}; `ldp budget` lists them")
            at, match = matches[0]
            reason = removable(match)
            if reason is not None:
                raise UsageError(f"{self._label}: reservation {match.release} is {reason}; it stays counted")
            change.drop.append(at)
            removed.append(match)

        removed: list[LedgerEntry] = []
        self._update(drop, then=lambda: self._remove_rows(removed))
        return removed[0]

    def _update(self, change: Callable[[bytes, LedgerState, Change], None], *, step: str = "",
                create: bool = False, then: Callable[[], None] | None = None,
                undo: Callable[[], None] | None = None) -> None:
        """Bring the ledger up to date under the lock, ``change(key, state, draft)`` it, write the draft durably.

        ``change`` reads the entries (``state``) and records what it changes in the draft
        (:class:`ldpcli.release._ledger_log.Change`): one line appended to the log, or the base
        rewritten (:func:`ldpcli.release._ledger_log.write`). A missing file starts empty with this
        object's key (made now, and so written once, under the lock, by the first change, or at once
        with ``create``). ``change`` may raise to write nothing; an empty draft is not written.
        ``step`` names the write for :func:`ldpcli.io._faults.checkpoint`. Still under the lock,
        ``then()`` runs once the change is written, and ``undo()`` when ``change`` or the write failed.
        """
        target = Path(os.path.realpath(self._path))
        self._make_directory(target.parent)
        with locked(target.with_name(target.name + ".lock"), self._label):
            loaded = load(target, self._label, self._state)
            state = loaded if loaded is not None else LedgerState(self._secret(), [])
            draft = Change()
            try:
                change(state.key, state, draft)
                if draft or (loaded is None and create):
                    write(state, draft, target, self._label, step)
            except BaseException:
                if undo is not None:
                    undo()
                raise
            if then is not None:
                then()
        self._key = state.key
        self._state = state
        self._entries = state.entries

    def _make_directory(self, directory: Path) -> None:
        """Create the ledger's directory (0700, parents with the usual mode) if it is missing."""
        if directory.is_dir():
            return
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise DataError(
                f"{self._label}: cannot create the ledger's directory ({_reason(exc)}); "
                "create it yourself, or choose another ledger with `ledger` PATH"
            ) from exc

    def by_input(self) -> list[list[LedgerEntry]]:
        """The entries of each input (fingerprint), in ledger order, the input released most recently last."""
        groups: dict[str, list[LedgerEntry]] = {}
        for entry in self._entries:
            groups.setdefault(entry.fingerprint, []).append(entry)
        order = {entry.fingerprint: index for index, entry in enumerate(self._entries)}
        return [groups[fingerprint] for fingerprint in sorted(groups, key=order.__getitem__)]

    def summary(self) -> list[Spend]:
        """One :class:`Spend` per input (fingerprint), in the order of :meth:`by_input`."""
        return [spend_of(entries) for entries in self.by_input()]

    def by_tag(self, tag: str) -> Spend | None:
        """The spend of the input whose releases carry ``tag`` (from a sidecar); None if unknown here.

        A tag from another ledger (another key) is unknown here, even for an equal input.
        """
        for entry in self._entries:
            if entry.tag == tag:
                return self.spent(entry.fingerprint)
        if self._key is None:
            return None
        for fingerprint in distinct(entry.fingerprint for entry in self._entries):
            if self.tag(fingerprint) == tag:
                return self.spent(fingerprint)
        return None


# --- reservations ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reservation:
    """A release reserved in the ledger (:meth:`Ledger.reserve`), to confirm or cancel."""

    ledger: Ledger
    release: str
    tag: str
    #: The warning that the input was released before (None when it is new).
    notice: str | None
    entry: LedgerEntry

    def confirm(self, **changes: Any) -> None:
        """The outputs are published: mark the entry confirmed (with ``changes``, e.g. ``created``)."""
        self.ledger.confirm(self.release, **changes)

    def cancel(self) -> None:
        """The outputs were not published: take the entry out."""
        self.ledger.cancel(self.release)


def _this_process() -> ReservationOwner:
    """The reserving process: host name and pid (to tell a running reservation from a dead one)."""
    return ReservationOwner(socket.gethostname(), os.getpid())
