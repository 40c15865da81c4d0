"""The ledger's journal: ``ledger.json``, the compacted base, and ``<ledger>.log``, what changed since.

A release appends to the ledger; rewriting the whole file for each change made a run of N
per-file releases cost O(N²). So a change is one line appended to the *log* beside the file
(``<ledger>.log``, JSON lines, mode 0600), fsynced before :func:`write` returns, under the ledger's
lock (:func:`ldpcli.release._ledger_file.locked`), and the base is rewritten only when the log has
grown past it (:func:`compact`): amortized, every change costs the bytes of its own line.

The log's first line names the *generation* of the base it follows,
``{"format": "ldp-ledger-log", "generation": G}``; every other line is one change of the entries,
``{"n": N, "set": [[i, entry], ...], "drop": [i, ...], "add": [entry, ...]}``: with ``N`` the number
of entries it applies to (checked: a line that does not fit is a damaged ledger), entry ``i`` replaced,
the entries at the ``drop`` positions removed (positions among the N, in ledger order), then ``add``
appended. Positions, not release ids, name the entries, since entries recorded without a release
(older ledgers, :meth:`ldpcli.release._ledger.Ledger.record`) have no id to name them by.

Crashes (``docs/commit-protocol.md``)
    A line is acknowledged once it and its newline are fsynced. A last line without its newline (a
    kill -9 or a full disk mid-append) was never acknowledged: readers ignore it and the next writer
    truncates it, under the lock, before appending. Any other line that is not a valid change is a
    one-line DataError naming the ledger and the line (ldp never resets a ledger).
    Compaction writes the base of generation G + 1 atomically, then removes the log: a kill between
    the two leaves a log of generation G beside a base of G + 1, already folded in, which readers
    ignore and the next writer replaces. A log newer than its base (a base restored from a backup)
    is refused. Readers need no lock: they open the log before reading the base, so whatever they read
    is the ledger as it was at one moment.

Incremental reading
    :func:`load` given the state it returned before re-reads only the log's bytes after the ones it
    applied when the base is the same file (device, inode, size, mtime) and the log the same file;
    otherwise it reads both again, and keeps the state's *lineage* when the entries it knew are
    still the first ones (another run appended and compacted), so caches built on them
    (:class:`ldpcli.release._rowindex.RowRuns`) are kept.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ldpcli.errors import DataError
from ldpcli.io import _faults as faults
from ldpcli.io._atomic import _sync_directory, atomic_write_text
from ldpcli.io._messages import _reason
from ldpcli.release._ledger_file import (
    LEDGER_VERSION,
    LedgerEntry,
    dump_ledger,
    entry_problem,
    locked,
    parse_base,
    private_umask,
    unreadable,
)

#: The ``"format"`` of the log's first line.
LOG_FORMAT = "ldp-ledger-log"


def log_path(target: Path) -> Path:
    """The log beside the ledger file ``target`` (a resolved path): ``<ledger>.log``."""
    return target.with_name(target.name + ".log")


@dataclass(eq=False)
class Change:
    """One change of the entries (a log line): entries replaced, removed, appended (see the module)."""

    set: dict[int, LedgerEntry] = field(default_factory=dict)
    drop: list[int] = field(default_factory=list)
    add: list[LedgerEntry] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.set or self.drop or self.add)


@dataclass(eq=False)
class LedgerState:
    """The ledger as read (base and log): its key and entries, and where the reading stopped."""

    key: bytes
    entries: list[LedgerEntry]
    #: The base's generation and version (1: a ledger without a log, converted by the next write).
    generation: int = 0
    version: int = LEDGER_VERSION
    #: (device, inode, size, mtime_ns) of the base read; None when there is none yet.
    base: tuple[int, int, int, int] | None = None
    #: (device, inode) of the log read; None when there was none.
    log: tuple[int, int] | None = None
    #: Bytes of the log applied (through its last complete line), and its complete lines.
    offset: int = 0
    lines: int = 0
    #: The log is of an older generation (already folded into the base): ignored, and replaced by the next write.
    stale: bool = False
    #: Bumped whenever an entry is removed, or replaced by one with other rows, ε or fingerprint; with
    #: ``lineage`` (kept while the entries known stay the first ones) it tells a cache when to start over.
    changes: int = 0
    lineage: object = field(default_factory=object)
    #: The positions of the entries of each release id.
    where: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index_all()

    def _index_all(self) -> None:
        self.where = {}
        for at, entry in enumerate(self.entries):
            self.where.setdefault(entry.release, []).append(at)

    def apply(self, change: Change) -> None:
        """Make ``change`` to the entries (in place)."""
        for at, entry in change.set.items():
            old = self.entries[at]
            if (old.rows_file, old.epsilon_exact, old.fingerprint) != (entry.rows_file, entry.epsilon_exact,
                                                                       entry.fingerprint):
                self.changes += 1
            self.entries[at] = entry
            if old.release != entry.release:
                self.where[old.release].remove(at)
                self.where.setdefault(entry.release, []).append(at)
        if change.drop:
            gone = set(change.drop)
            self.entries[:] = [entry for at, entry in enumerate(self.entries) if at not in gone]
            self.changes += 1
            self._index_all()
        for entry in change.add:
            self.where.setdefault(entry.release, []).append(len(self.entries))
            self.entries.append(entry)


def _stamp(status: os.stat_result) -> tuple[int, int, int, int]:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def _open_log(path: Path, label: str) -> int | None:
    """A descriptor of the log for reading, None when there is none."""
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise unreadable(label, f"its log {str(path)!r}: {_reason(exc)}") from exc


def load(target: Path, label: str, known: LedgerState | None = None) -> LedgerState | None:
    """The ledger at ``target`` (resolved): its base and log; None when there is no base (and no log).

    ``known``, a state this function returned before, is brought up to date and returned when the
    base is unchanged (only the log's new bytes are read); otherwise a new state is read. DataError
    when the ledger cannot be used (the files are left as they are).
    """
    path = log_path(target)
    descriptor = _open_log(path, label)  # before the base: a compaction meanwhile leaves an older log, ignored
    try:
        log = os.fstat(descriptor) if descriptor is not None else None
        log_id = None if log is None else (log.st_dev, log.st_ino)
        try:
            base = os.open(target, os.O_RDONLY)
        except FileNotFoundError:
            if log is not None and log.st_size:
                raise unreadable(label, f"its log {str(path)!r} is there without the ledger file; put the "
                                        "ledger file back, or move the log away with it") from None
            return None
        except OSError as exc:
            raise unreadable(label, _reason(exc)) from exc
        try:
            stamp = _stamp(os.fstat(base))
            if known is not None and known.base == stamp and known.log in (log_id, None) and (
                    log is None or log.st_size >= known.offset):  # the same file: only the log's new bytes
                state, state.log = known, log_id
            else:
                state = _read_base(base, stamp, label)
                state.log = log_id
                if known is not None:
                    _continue(state, known)
        finally:
            os.close(base)
        if descriptor is not None and not state.stale:
            _read_log(state, descriptor, path, label)
        return state
    finally:
        if descriptor is not None:
            os.close(descriptor)


def _read_base(descriptor: int, stamp: tuple[int, int, int, int], label: str) -> LedgerState:
    try:
        with os.fdopen(os.dup(descriptor), "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise unreadable(label, _reason(exc)) from exc
    key, entries, version, generation = parse_base(raw, label)
    return LedgerState(key, entries, generation=generation, version=version, base=stamp)


def _continue(state: LedgerState, known: LedgerState) -> None:
    """Keep ``known``'s lineage in the state read anew when the entries it knew are still the first ones."""
    if len(state.entries) >= len(known.entries) and state.entries[:len(known.entries)] == known.entries:
        state.lineage, state.changes = known.lineage, known.changes


def _read_log(state: LedgerState, descriptor: int, path: Path, label: str) -> None:
    """Apply the log's complete lines after ``state.offset``; a last line without its newline is left."""
    try:
        os.lseek(descriptor, state.offset, os.SEEK_SET)
        with os.fdopen(os.dup(descriptor), "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise unreadable(label, f"its log {str(path)!r}: {_reason(exc)}") from exc
    end = data.rfind(b"\n") + 1
    for line in data[:end].split(b"\n")[:-1]:
        where = f"line {state.lines + 1} of its log {str(path)!r}"
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise unreadable(label, f"{where}: not JSON: {_reason(exc)}") from exc
        if state.lines == 0:
            if not (isinstance(record, dict) and record.get("format") == LOG_FORMAT
                    and isinstance(record.get("generation"), int)):
                raise unreadable(label, f'{where}: not {{"format": "{LOG_FORMAT}", "generation": ...}}')
            if record["generation"] > state.generation:
                raise unreadable(label, f"{where}: the log is of generation {record['generation']}, newer than the "
                                        f"ledger file's {state.generation} (was the file restored from a backup?)")
            if record["generation"] < state.generation:  # folded in by a compaction that was cut short
                state.stale = True
                return
        else:
            state.apply(_change(record, len(state.entries), label, where))
        state.lines += 1
        state.offset += len(line) + 1


def _change(record: Any, count: int, label: str, where: str) -> Change:
    """The change a log line (parsed) records, DataError naming the line if it is not one that fits ``count`` entries."""
    if not isinstance(record, dict) or record.get("n") != count:
        raise unreadable(label, f"{where}: not a change of the {count} entries before it")
    sets, drop, add = record.get("set", []), record.get("drop", []), record.get("add", [])
    if not (isinstance(sets, list) and isinstance(drop, list) and isinstance(add, list)
            and all(isinstance(item, list) and len(item) == 2 for item in sets)):
        raise unreadable(label, f"{where}: not a change of the {count} entries before it")
    at = [item[0] for item in sets] + drop
    if not all(type(i) is int and 0 <= i < count for i in at) or len(set(at)) != len(at):
        raise unreadable(label, f"{where}: not a change of the {count} entries before it")
    for item in [*(item[1] for item in sets), *add]:
        problem = entry_problem(item)
        if problem is not None:
            raise unreadable(label, f"{where}: an entry: {problem}")
    return Change({at: LedgerEntry.from_dict(item, label) for at, item in sets}, list(drop),
                  [LedgerEntry.from_dict(item, label) for item in add])


def read_ledger(path: Path, label: str) -> tuple[bytes, list[LedgerEntry]] | None:
    """The key and entries of the ledger at ``path`` (base and log); None when there is none."""
    state = load(Path(os.path.realpath(path)), label)
    return None if state is None else (state.key, state.entries)


# --- writing (under the ledger's lock) --------------------------------------------------------------


def write(state: LedgerState, change: Change, target: Path, label: str, step: str) -> None:
    """Make ``change`` durable (one log line, fsynced; the base rewritten when the log outgrew it) and to ``state``.

    ``state`` was just read under the lock (:func:`load`). ``step`` names the write for
    :func:`ldpcli.io._faults.checkpoint`. A ledger with no base yet or a version-1 base is
    written as a base instead (converted: version 2, generation 1). DataError when it cannot be written (then
    ``state`` is unchanged: the next :func:`load` tells what the files hold).
    """
    try:
        if state.base is None or state.version != LEDGER_VERSION:
            faults.checkpoint(step)
            _compact(state, change, target)
            return
        path = log_path(target)
        if state.stale:  # the log of a base that has been compacted already: start the base's own
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            state.stale, state.log, state.offset, state.lines = False, None, 0, 0
        _append(state, change, path, step)
    except OSError as exc:
        raise _unwritable(label, exc) from exc
    if state.base is not None and state.offset > state.base[2]:  # the log outgrew its base: fold it in (amortized linear)
        try:
            faults.checkpoint("compact-write")
            _compact(state, Change(), target)
        except OSError:  # the change is durable in the log, which stays; the next write compacts again
            pass


def _append(state: LedgerState, change: Change, path: Path, step: str) -> None:
    """Append ``change``'s line to the log (created 0600 with its first line when missing)."""
    with private_umask():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        status = os.fstat(descriptor)
        if state.log != (status.st_dev, status.st_ino):  # new: nothing of it was read
            state.log, state.offset, state.lines = (status.st_dev, status.st_ino), 0, 0
        if status.st_size != state.offset:  # a last line never acknowledged (killed mid-append)
            os.ftruncate(descriptor, state.offset)
        head = b""
        if state.offset == 0:
            faults.checkpoint("log-created")
            head = _line({"format": LOG_FORMAT, "generation": state.generation}) + b"\n"
        body = _line({"n": len(state.entries), **({"set": [[at, e.to_dict()] for at, e in change.set.items()]}
                                                  if change.set else {}),
                      **({"drop": change.drop} if change.drop else {}),
                      **({"add": [e.to_dict() for e in change.add]} if change.add else {})})
        faults.checkpoint(step)
        _write_all(descriptor, head + body)
        faults.checkpoint("ledger-append")  # the line without its newline: not acknowledged
        _write_all(descriptor, b"\n")
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    if head:
        _sync_directory(path.parent)
    state.offset += len(head) + len(body) + 1
    state.lines += 2 if head else 1
    state.apply(change)


def _compact(state: LedgerState, change: Change, target: Path) -> None:
    """Fold ``change`` and the log into a base of the next generation, written atomically, then remove the log."""
    entries = list(state.entries)
    probe = LedgerState(state.key, entries)
    probe.apply(change)
    text = dump_ledger(state.key, entries, state.generation + 1)
    if target.exists():
        atomic_write_text(target, text, overwrite=True)
    else:
        with private_umask():
            atomic_write_text(target, text, overwrite=True)
    faults.checkpoint("compacted")  # the new base is in place, the log it folded in not yet removed
    with contextlib.suppress(FileNotFoundError):
        log_path(target).unlink()
    state.apply(change)
    state.generation, state.version = state.generation + 1, LEDGER_VERSION
    state.base, state.log, state.offset, state.lines, state.stale = _stamp(os.stat(target)), None, 0, 0, False


def _line(document: dict[str, Any]) -> bytes:
    """One log line (ASCII JSON, no newline in it)."""
    return json.dumps(document, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]


def positions(state: LedgerState, releases: Iterable[str]) -> list[int]:
    """The positions of the entries of ``releases``, in ledger order."""
    return sorted({at for release in releases for at in state.where.get(release, ())})


def entries_at(state: LedgerState, at: Sequence[int]) -> list[LedgerEntry]:
    """The entries at the positions ``at``."""
    return [state.entries[i] for i in at]


def compact_ledger(path: str | os.PathLike[str], label: str | None = None) -> None:
    """Fold the log of the ledger at ``path`` into its file now (under its lock), e.g. before the owner
    edits the file by hand; nothing when there is no ledger or no log. DataError when it cannot be done."""
    target = Path(os.path.realpath(path))
    label = label if label is not None else os.fspath(path)
    with locked(target.with_name(target.name + ".lock"), label):
        state = load(target, label)
        if state is None or (state.log is None and state.version == LEDGER_VERSION):
            return
        try:
            _compact(state, Change(), target)
        except OSError as exc:
            raise _unwritable(label, exc) from exc


def _unwritable(label: str, exc: OSError) -> DataError:
    """The error of a ledger that cannot be written: the reason, and what to do."""
    return DataError(f"{label}: cannot write the privacy-budget ledger ({_reason(exc)}); "
                     "free space or fix its permissions, then run again")
