"""Publishing several finished outputs as one unit (a data file and its sidecar; a dataset
directory), and finishing what dead runs left behind.

:class:`Publication`: after any failure, and after a kill at any moment once the next run has
looked at the place (:func:`sweep_stale`), every target holds either its old content or its new
one, all of them the same. It writes a journal before it replaces anything, keeps the replaced
outputs as hidden backups until the caller's confirmation (the ledger), the block of
:meth:`Publication.publishing`, has succeeded, and removes
the journal as its commit point. ``docs/commit-protocol.md`` states the protocol.

The outputs are the finished temporaries of :mod:`ldpcli.io._atomic` (an
:class:`~ldpcli.io._atomic.AtomicFileSink` after ``finish``, or a staging directory), named and
renamed with its hidden names and renames. A file without a name yet (``O_TMPFILE``) gets its hidden
name right before the journal is written, so a kill before that leaves nothing of it.

Standard library only (no pyarrow).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import shutil
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldpcli.errors import UsageError
from ldpcli.io._atomic import (
    _HIDDEN,
    _LIVE_TEMPORARIES,
    _RENAME_EXCHANGE,
    HOST_TAG,
    AtomicFileSink,
    _place_new,
    _publish,
    _remove,
    _remove_path,
    _renameat2,
    _sync_directory,
    hidden_name,
    process_alive,
)
from ldpcli.io._faults import checkpoint
from ldpcli.io._interrupts import check as check_interrupt
from ldpcli.io._interrupts import held, note_published


@dataclass
class _Move:
    """One output of a :class:`Publication`: its finished temporary, its target, and its backup."""

    temp: Path
    target: Path
    label: str
    directory: bool = False
    #: A directory output: its dataset id (tells the new directory from the old one).
    dataset: str | None = None
    #: Whether ``target`` existed before (so a backup of it is kept until the commit point).
    had_old: bool = False
    backup: Path | None = None
    #: A directory swapped in place with ``renameat2(RENAME_EXCHANGE)``: the old one is at ``temp`` now.
    exchanged: bool = False
    #: A directory output: the entries of the old directory that the caller checked ldp wrote.
    known: frozenset[str] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {"temp": os.fspath(self.temp), "target": os.fspath(self.target), "directory": self.directory,
                "dataset": self.dataset, "had_old": self.had_old,
                "backup": None if self.backup is None else os.fspath(self.backup)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _Move:
        backup = data.get("backup")
        return cls(Path(data["temp"]), Path(data["target"]), data["target"], bool(data.get("directory")),
                   data.get("dataset"), bool(data.get("had_old")), None if backup is None else Path(backup))


class Publication:
    """Finished outputs published together: every target old, or every target new.

    Add each finished temporary (:meth:`add_file` for an :class:`AtomicFileSink` after
    ``finish``, :meth:`add_directory` for a staging directory), then enter :meth:`publishing`:

    1. a journal (a hidden ``.journal`` file beside the first target) lists every move;
    2. each target that exists is kept as a hidden backup (a hard link; a directory is swapped
       with ``renameat2(RENAME_EXCHANGE)`` where the file system has it, else renamed aside);
    3. each temporary is renamed onto its target (without ``overwrite``: only if the target does
       not exist, checked atomically at the rename, so two runs never both publish one target);
    4. the block of ``with publication.publishing():`` runs (the caller's confirmation of the
       release in the ledger: :class:`ldpcli.release._commit.Commit` drives it);
    5. the journal is removed: the commit point. Then the backups are removed.

    A failure in steps 2-4 puts every old output back and removes the new ones (the error is
    raised after that). A kill there leaves the journal: the next :func:`sweep_stale` of the
    directory, by any later run, rolls it back the same way. A kill after step 5 leaves only hidden
    backups, which :func:`sweep_stale` removes. SIGINT and SIGTERM are held back from step 1 to the
    end (:func:`ldpcli.io._interrupts.held` with ``commit``): a signal then comes too late to cancel
    the release, which completes, and it cannot cut a rollback short. :attr:`committed` is true from
    the commit point on: nothing may then take the release back (its ledger entry included).
    """

    def __init__(self, *, overwrite: bool, replaceable: Callable[[], None] | None = None) -> None:
        """An empty publication; ``overwrite``: existing targets may be replaced, after
        ``replaceable()`` (the caller's rule, raising to refuse) has run again once they exist."""
        self._overwrite = overwrite
        self._replaceable = replaceable
        self._moves: list[_Move] = []
        self._sinks: list[AtomicFileSink] = []
        #: True once the journal is removed (the commit point): the release is complete.
        self.committed = False

    def add_file(self, sink: AtomicFileSink) -> None:
        """Publish ``sink``'s finished temporary file onto its path."""
        self._moves.append(_Move(sink.temporary, sink.path, sink.label))
        self._sinks.append(sink)

    @property
    def label(self) -> str:
        """The first output, as messages name the publication."""
        return self._moves[0].label if self._moves else "(nothing)"

    def add_directory(self, staging: Path, target: Path, dataset: str, *, replaces: Collection[str] = ()) -> None:
        """Publish the finished directory ``staging`` (a dataset with id ``dataset``) onto ``target``.

        ``replaces``: the names of the old directory's entries that the caller checked ldp wrote. Once
        the old directory is swapped out (before the commit point) it is listed again, and any other
        entry (added meanwhile) rolls the publication back with a UsageError naming it."""
        self._moves.append(_Move(staging, target, os.fspath(target), directory=True, dataset=dataset,
                                 known=frozenset(replaces)))

    @contextlib.contextmanager
    def publishing(self) -> Iterator[None]:
        """Publish every output; the block is step 4 (the caller's confirmation: the ledger's), and
        its normal end is the commit point. On any failure before it, the old outputs are restored
        and the error goes on. Signals are held back from the journal to the end (see the class)."""
        check_interrupt()  # a cancellation some library code swallowed still stops the run here
        if not self._moves:  # a release with no file (a model printed on stdout): only the confirmation
            with held(commit=True):
                yield
                self.committed = True
            return
        journal = hidden_name(self._moves[0].target, "journal")
        with held(commit=True):
            self._check_targets()
            try:
                self._place_all(journal)
                checkpoint("published")
                yield
                checkpoint("confirmed")
            except BaseException:
                self._undo(journal)
                raise
            self._commit(journal)
        checkpoint("done")

    def _check_targets(self) -> None:
        """Which targets exist (each gets a backup), refused without ``overwrite``; the caller's rule again."""
        for directory in dict.fromkeys(move.target.parent for move in self._moves):  # each once: a listing costs O(entries)
            sweep_stale(directory)
        for move in self._moves:
            move.had_old = os.path.lexists(move.target)
            if move.had_old and not self._overwrite:
                raise UsageError(f"{move.label}: already exists; pass `overwrite=True` to replace it.")
            if move.had_old:
                move.backup = hidden_name(move.target, "old")
        if self._replaceable is not None and any(move.had_old for move in self._moves):
            self._replaceable()  # again now: a file may have appeared, or changed, since the run began

    def _place_all(self, journal: Path) -> None:
        """Steps 1-3 (and the sync): name the temporaries, write the journal, keep backups, rename."""
        for sink in self._sinks:
            sink.name()  # a file without a name until now: a kill before this left nothing
        _write_journal(journal, self._moves)
        checkpoint("journal")
        for move in self._moves:
            if move.had_old and not move.directory:
                _keep_backup(move)
        for index, move in enumerate(self._moves):
            self._place(move)
            if index == 0:
                checkpoint("data-placed")
        for directory in {move.target.parent for move in self._moves}:
            _sync_directory(directory)

    def _undo(self, journal: Path) -> None:
        """Every old output back, every new one and every temporary removed, the journal too."""
        _roll_back(self._moves)
        _remove_path(journal)
        for move in self._moves:
            if move.directory:
                remove_dataset_directory(move.temp, move.dataset)
            else:
                _remove(move.temp)
                if move.backup is not None:
                    _remove_path(move.backup)  # not restored: the target never left its old content

    def _commit(self, journal: Path) -> None:
        """Step 5: remove the journal (the commit point), then the backups."""
        for move in self._moves:
            _LIVE_TEMPORARIES.discard(move.temp)
        with contextlib.suppress(OSError):
            os.unlink(journal)  # the commit point
        self.committed = True
        note_published(self.label)
        for sink in self._sinks:
            sink._mark_committed()
        checkpoint("committed")
        _sync_directory(journal.parent)
        for move in self._moves:
            _drop_old(move)

    def _place(self, move: _Move) -> None:
        """Step 3 for one output (the old one is kept already, or swapped aside here)."""
        if move.directory:
            if move.had_old:
                if _renameat2(move.temp, move.target, _RENAME_EXCHANGE):
                    move.exchanged = True
                    _check_swapped_out(move, move.temp)
                    return
                assert move.backup is not None
                os.rename(move.target, move.backup)
                _check_swapped_out(move, move.backup)
            try:
                _place_new(move.temp, move.target)
            except FileExistsError as exc:
                raise UsageError(f"{move.label}: already exists; pass `overwrite=True` to replace it.") from exc
            return
        _publish(move.temp, move.target, move.label, move.had_old, sync=False)  # synced once, by _place_all


def _check_swapped_out(move: _Move, old: Path) -> None:
    """UsageError naming the entries of the old directory, now at ``old``, that the caller did not
    check ldp wrote (a file added while the run went on): raised before the commit point, so the
    publication rolls back and the old directory returns whole."""
    unknown = unknown_entries(old, move.known)
    if unknown:
        raise UsageError(
            f"{move.label}: {entry_list(unknown)} appeared in it while ldp was writing its replacement; nothing was "
            "replaced, and `overwrite=True` never deletes a file ldp did not write: move it away, then run again"
        )


def unknown_entries(directory: Path, known: Collection[str]) -> list[str]:
    """The entries of ``directory`` (hidden ones included) not in ``known`` or not regular files
    (links, subdirectories), sorted."""
    with os.scandir(directory) as entries:
        return sorted(entry.name for entry in entries if entry.name not in known or not entry.is_file(follow_symlinks=False))


def entry_list(names: Sequence[str], shown: int = 3) -> str:
    """The first ``shown`` of ``names``, quoted, and how many more (``'a', 'b', 'c' and 2 more``)."""
    listed = ", ".join(repr(name) for name in names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")


#: The names ldp gives the files of a dataset directory (its manifest, ``part-NNNNN.parquet`` and their
#: sidecars: :func:`ldpcli.release._dataset._part_name`), which alone it deletes from one.
_DATASET_ENTRY = re.compile(r"^(_ldp_dataset\.json|part-\d{5,}\.parquet(\.ldp\.json)?)$")


def remove_dataset_directory(path: Path, dataset: str | None = None) -> None:
    """Remove a dataset directory that ldp staged, replaced or swapped out, entry by entry: only
    the names it gives a dataset's files (:data:`_DATASET_ENTRY`) and its own hidden temporaries;
    any other entry stays, and with it the directory. With ``dataset``, a directory whose manifest
    records another dataset (an old one that a failed roll-back left here) stays whole. A file, or
    a link, is removed as it is."""
    if path.is_symlink() or not path.is_dir():
        _remove_path(path)
        return
    if dataset is not None and _dataset_id(path) not in (None, dataset):
        return
    with contextlib.suppress(OSError):
        with os.scandir(path) as entries:
            owned = [entry.path for entry in entries if not entry.is_dir(follow_symlinks=False)
                     and (_DATASET_ENTRY.match(entry.name) or _HIDDEN.match(entry.name))]
        for name in owned:
            with contextlib.suppress(OSError):
                os.unlink(name)
        os.rmdir(path)


def _keep_backup(move: _Move) -> None:
    """Keep the old file at ``move.backup`` (a hard link, or a copy where links are not allowed;
    a copy cut short is never restored: a backup is used only once its temporary was placed)."""
    assert move.backup is not None
    try:
        os.link(move.target, move.backup)
    except OSError:
        shutil.copy2(move.target, move.backup)


def _dataset_id(directory: Path) -> str | None:
    """The ``dataset`` id in a directory's manifest (None when there is none or it is unreadable)."""
    try:
        with open(directory / "_ldp_dataset.json", "rb") as handle:
            data = json.loads(handle.read(2**22))
    except (OSError, ValueError, RecursionError):
        return None
    value = data.get("dataset") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _roll_back(moves: Sequence[_Move]) -> None:
    """Put every old output back and take every new one away (repeatable: it also recovers a journal)."""
    for move in reversed(moves):
        with contextlib.suppress(OSError):
            if move.directory:
                _roll_back_directory(move)
            elif not _placed(move):
                continue  # the target still holds what it held (a backup made meanwhile is litter)
            elif move.backup is not None and move.backup.exists():
                os.replace(move.backup, move.target)
            elif not move.had_old:
                os.unlink(move.target)  # there was nothing before it
    for directory in {move.target.parent for move in moves}:
        _sync_directory(directory)


def _placed(move: _Move) -> bool:
    """Whether a file's temporary is at its target (renamed, or linked and not yet unlinked)."""
    if not os.path.lexists(move.target):
        return False
    if not move.temp.exists():
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(move.temp, move.target)
    return False


def _roll_back_directory(move: _Move) -> None:
    """:func:`_roll_back` for a dataset directory, judged by the dataset id at the target."""
    new_in_place = move.dataset is not None and _dataset_id(move.target) == move.dataset
    old_aside = move.temp if move.temp.is_dir() and _dataset_id(move.temp) != move.dataset else None
    if new_in_place:
        if old_aside is not None and _renameat2(old_aside, move.target, _RENAME_EXCHANGE):
            return  # swapped back: the new one is at its staging name, removed afterwards
        # the new one goes back to its staging name (free: it was renamed from there), removed afterwards
        os.rename(move.target, move.temp if not os.path.lexists(move.temp) else hidden_name(move.target, "old"))
    if move.backup is not None and move.backup.is_dir() and not os.path.lexists(move.target):
        os.rename(move.backup, move.target)


def _drop_old(move: _Move) -> None:
    """After the commit point: remove the replaced output (a backup, or a swapped-out directory)."""
    if move.directory and move.exchanged:
        remove_dataset_directory(move.temp)
    elif move.backup is not None:
        remove_dataset_directory(move.backup)


def _write_journal(journal: Path, moves: Sequence[_Move]) -> None:
    """Write the journal (atomically: a temporary file renamed) and make it durable."""
    document = {"format": "ldp-commit", "version": 1, "host": HOST_TAG, "pid": os.getpid(),
                "moves": [move.to_dict() for move in moves]}
    temp = hidden_name(journal)
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(document))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, journal)
    _sync_directory(journal.parent)


#: The directories :func:`sweep_stale` has listed in this run, within :func:`sweeping_once` (else None); a
#: context variable, so a release on another thread (or a Dask task) keeps its own sweep.
_SWEPT: contextvars.ContextVar[set[Path] | None] = contextvars.ContextVar("ldp_swept", default=None)


@contextlib.contextmanager
def sweeping_once() -> Iterator[None]:
    """Within the block, :func:`sweep_stale` lists each directory once: a run of N releases into one
    directory lists it once, not 2N times (each listing costs O(its entries), so 2N listings are quadratic).
    What dead runs left there is swept by the first release; the block's own releases are live, and
    a run that dies meanwhile beside it leaves litter that the next run sweeps."""
    token = _SWEPT.set(_SWEPT.get() if _SWEPT.get() is not None else set())
    try:
        yield
    finally:
        _SWEPT.reset(token)


def _entries(directory: Path) -> list[str]:
    """The names in ``directory`` (one listing: what :func:`sweeping_once` saves)."""
    return os.listdir(directory)


def sweep_stale(directory: Path) -> None:
    """Finish what dead ldp runs left in ``directory``: roll back their journals, remove their litter.

    A journal (``.NAME.ldp-HOST-PID-….journal``) of a process of this host that is no longer running is
    an interrupted :class:`Publication`: its outputs are rolled back to what they were before it.
    Hidden temporaries and backups (``.NAME.ldp-HOST-PID-….tmp`` / ``.old``, files or staging
    directories) of this host's dead processes are removed. Anything of a live process, of
    another host, or not named by ldp is left alone.
    """
    swept = _SWEPT.get()
    if swept is not None:
        if directory in swept:
            return
        swept.add(directory)
    try:
        names = _entries(directory)
    except OSError:
        return
    stale = [name for name in names if (match := _HIDDEN.match(name)) and match["host"] == HOST_TAG
             and not process_alive(int(match["pid"]))]
    for name in stale:
        if name.endswith(".journal"):
            _recover(directory / name)
    for name in stale:
        remove_dataset_directory(directory / name)


def _recover(journal: Path) -> None:
    """Roll back the interrupted publication of ``journal`` if its process is dead (see :func:`sweep_stale`)."""
    try:
        with open(journal, "rb") as handle:
            data = json.loads(handle.read(2**20))
        moves = [_Move.from_dict(item) for item in data["moves"]]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return
    _roll_back(moves)
    _remove_path(journal)
    for move in moves:
        remove_dataset_directory(move.temp)
