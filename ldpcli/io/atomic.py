"""Temporary files and crash safety: every output is written to a hidden temporary file next to
its target and renamed onto it only when complete, so an interrupted run never leaves a partial
file behind.

:class:`AtomicFileSink` is that temporary file as a write-only binary sink (hashing its bytes on
the way); it is the one :class:`Sink` so far, the place where a remote-filesystem or stream sink
would plug in. :func:`atomic_write_bytes` and :func:`atomic_write_text` write small outputs whole
through it, and :func:`remove_temporaries` is the one cleanup entry point after an interrupt.

:class:`Publication` publishes several finished outputs as one unit (a data file and its
sidecar; a dataset directory): after any failure, and after a kill at any moment once the next
run has looked at the place (:func:`sweep_stale`), every target holds either its old content or
its new one, all of them the same. It writes a journal before it replaces anything, keeps the
replaced outputs as hidden backups until the caller's ``confirm`` (the ledger) has succeeded,
and removes the journal as its commit point. ``docs/commit-protocol.md`` states the protocol.

Every hidden name ldp makes here carries this host's tag and the pid of its process
(``.NAME.ldp-HOST-PID-RANDOM.tmp`` / ``.old``), so a later run can tell the litter of a dead run
from the work of a live one and remove it (:func:`sweep_stale`).

Standard library only (no pyarrow).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Protocol

from ldpcli.errors import DataError, UsageError
from ldpcli.io.faults import checkpoint
from ldpcli.io.hashing import Sha256
from ldpcli.io.interrupts import check as check_interrupt
from ldpcli.io.interrupts import consume_pending, note_published
from ldpcli.io.messages import _reason, _write_failed

#: Temporary files created and neither renamed nor removed yet. A signal can interrupt the
#: program between creating one and entering the ``with`` block that would remove it; the
#: top-level handler then calls :func:`remove_temporaries`.
_LIVE_TEMPORARIES: set[Path] = set()


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM back (main thread, POSIX) so a few steps happen together or not at all."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def remove_temporaries() -> None:
    """Remove every temporary output of this process still on disk (after an interrupt)."""
    for path in list(_LIVE_TEMPORARIES):
        _remove(path)


class Sink(Protocol):
    """Where an output's bytes go until they are final.

    The file part (``write``, ``tell``, ``flush``, ``close``, ``closed``, ``writable``,
    ``seekable``) is what pyarrow's writers need of a write-only, non-seekable binary file; their
    ``close`` must leave the output open for :meth:`commit`. :meth:`commit` makes the bytes final
    (for a file: renames it onto its target); :meth:`finish` makes them complete and durable but
    leaves publishing them to a :class:`Publication`; :meth:`discard` abandons them and is safe to repeat,
    also after a failed commit. ``label`` names the output in messages.
    """

    @property
    def label(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    def write(self, data: bytes | bytearray | memoryview) -> int: ...

    def tell(self) -> int: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def writable(self) -> bool: ...

    def seekable(self) -> bool: ...

    def commit(self) -> None: ...

    def finish(self) -> None: ...

    def discard(self) -> None: ...


class AtomicFileSink:
    """A temporary file next to ``path``, renamed onto ``path`` by :meth:`commit`.

    A write-only binary sink that feeds every byte it passes on to a SHA-256: the sidecar
    records the hash of the data file it describes, computed while the file is written rather
    than by reading it back. A context manager: leaving the ``with`` block without
    :meth:`commit` removes the temporary file.
    """

    path: Path
    label: str

    def __init__(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Check the target and create the temporary file next to it."""
        self.path = Path(path)
        self.label = os.fspath(path)
        self._overwrite = overwrite
        self._position = 0
        # Hashed in a background thread (the bytes pyarrow passes are immutable: no copy).
        self._digest = Sha256(threaded=True, name="ldp-output-hash")
        self._committed = False
        self._finished = False  # complete and closed (finish), and not discarded since
        _check_output(self.path, self.label, overwrite)
        descriptor, self._temp = _create_temp(self.path, self.label)
        self._file: BinaryIO = os.fdopen(descriptor, "wb")
        #: True once ``path`` holds this file (set atomically with the rename).
        self.published = False

    def __enter__(self) -> AtomicFileSink:
        """Return the sink itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Remove the temporary file unless :meth:`commit` succeeded."""
        if not self._committed:
            self.discard()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Hash ``data`` and write it to the temporary file; return its length in bytes."""
        view = memoryview(data)
        self._file.write(view)
        self._digest.update(data if isinstance(data, bytes) else bytes(view))  # kept until hashed: no mutable buffer
        self._position += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        """Bytes written so far."""
        return self._position

    def flush(self) -> None:
        """Flush the temporary file's buffer."""
        self._file.flush()

    def close(self) -> None:
        """Nothing: :meth:`commit` syncs and closes the file, :meth:`discard` closes it."""

    @property
    def closed(self) -> bool:
        """Whether the temporary file is closed (after commit or discard)."""
        return self._file.closed

    def writable(self) -> bool:
        """Always true."""
        return True

    def seekable(self) -> bool:
        """Always false: the bytes are hashed as they pass."""
        return False

    def commit(self) -> None:
        """Flush the file to disk, close it and rename it onto ``path``."""
        self.finish()
        _publish(self._temp, self.path, self.label, self._overwrite, self._mark_published)
        self._committed = True

    def finish(self) -> None:
        """Flush the file to disk and close it, leaving it at its temporary name: :class:`Publication`
        renames it together with other outputs (:meth:`commit` does both for one output)."""
        if not self._file.closed:
            _sync(self._file)
            self._file.close()
        self._digest.close()
        self._finished = True

    @property
    def temporary(self) -> Path:
        """The temporary file (its name until it is published)."""
        return self._temp

    def _mark_published(self) -> None:
        self.published = True

    def _mark_committed(self) -> None:
        """Published by a :class:`Publication` (which renamed the finished temporary file)."""
        self._committed = True
        self.published = True

    def discard(self) -> None:
        """Abandon the output: close and remove the temporary file (safe to call more than once)."""
        self._finished = False
        with contextlib.suppress(OSError):
            self._file.close()
        self._digest.close()
        _remove(self._temp)

    @property
    def sha256(self) -> str:
        """The SHA-256 (hex) of the bytes written; known once :meth:`finish` (or :meth:`commit`) has run."""
        if not self._finished:
            raise RuntimeError(f"{self.label}: the hash is known only after commit")
        return self._digest.hexdigest()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, overwrite: bool = False) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    with AtomicFileSink(path, overwrite=overwrite) as sink:
        try:
            sink.write(data)
            sink.commit()
        except OSError as exc:
            raise _write_failed(sink.label, exc) from exc


def finished_text(path: str | os.PathLike[str], text: str) -> AtomicFileSink:
    """``text`` (UTF-8) in a finished temporary file for ``path`` (:func:`finished_bytes`)."""
    return finished_bytes(path, text.encode("utf-8"))


def finished_bytes(path: str | os.PathLike[str], data: bytes) -> AtomicFileSink:
    """``data`` in a finished temporary file for ``path``, to publish with :class:`Publication`.

    The caller owns the sink: leave its ``with`` block (or call ``discard``) to remove the file if
    it is not published.
    """
    sink = AtomicFileSink(path, overwrite=True)
    try:
        sink.write(data)
        sink.finish()
    except OSError as exc:
        sink.discard()
        raise _write_failed(sink.label, exc) from exc
    except BaseException:
        sink.discard()
        raise
    return sink


def atomic_write_text(path: str | os.PathLike[str], text: str, *, overwrite: bool = False) -> None:
    """Write ``text`` as UTF-8 to ``path`` like :func:`atomic_write_bytes` (used for sidecar JSON)."""
    atomic_write_bytes(path, text.encode("utf-8"), overwrite=overwrite)


def file_sha256(path: str | os.PathLike[str], chunk_bytes: int = 8 * 2**20) -> str:
    """The SHA-256 (hex) of a file's bytes, read in chunks (hashlib releases the GIL)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(chunk_bytes):
                digest.update(chunk)
    except OSError as exc:
        raise DataError(f"{os.fspath(path)}: cannot read the file ({_reason(exc)}); check the path and permissions.") from exc
    return digest.hexdigest()


def _check_output(target: Path, label: str, overwrite: bool) -> None:
    """:class:`UsageError` unless ``target`` can be created (or, with ``overwrite``, replaced)."""
    if not target.parent.is_dir():
        raise UsageError(
            f"{label}: {str(target.parent)!r} is not an existing directory; "
            "create it first or choose another output path."
        )
    if target.is_dir():
        raise UsageError(f"{label}: is a directory; give a file name for the output.")
    if target.exists() and not overwrite:
        raise UsageError(f"{label}: already exists; pass `overwrite=True` to replace it.")


def _create_temp(target: Path, label: str) -> tuple[int, Path]:
    """Create the hidden temporary file next to ``target``: ``(descriptor, path)``, registered."""
    try:
        with _signals_deferred():
            descriptor, name = _make_temp(target)
            _LIVE_TEMPORARIES.add(Path(name))
    except OSError as exc:
        raise UsageError(
            f"{label}: cannot create a file in {str(target.parent)!r} ({_reason(exc)}); "
            "choose a writable output directory."
        ) from exc
    return descriptor, Path(name)


def _sync(file: BinaryIO) -> None:
    """Flush a file's buffers to the disk."""
    file.flush()
    os.fsync(file.fileno())


def _publish(
    temp: Path, target: Path, label: str, overwrite: bool, on_published: Callable[[], None]
) -> None:
    """Give the finished temporary file its final permissions and rename it onto ``target``.

    Without ``overwrite`` the rename happens only if ``target`` does not exist, checked atomically
    at the rename itself (:func:`_place_new`), so of two runs publishing one name, one fails.
    ``on_published`` runs together with the rename (signals held back), so a caller interrupted
    right after it still knows that ``target`` now holds the new file.
    """
    exists = os.path.lexists(target)
    if exists and not overwrite:
        raise UsageError(f"{label}: already exists; pass `overwrite=True` to replace it.")
    # mkstemp makes the file private (0600); use the replaced file's mode or the usual 0666 - umask.
    os.chmod(temp, stat.S_IMODE(target.stat().st_mode) if exists else 0o666 & ~_umask())
    with _signals_deferred():
        if exists:
            os.replace(temp, target)
        else:
            try:
                _place_new(temp, target)
            except FileExistsError as exc:
                raise UsageError(f"{label}: already exists (another run wrote it meanwhile); "
                                 "pass `overwrite=True` to replace it.") from exc
        _LIVE_TEMPORARIES.discard(temp)
        on_published()
    _sync_directory(target.parent)


def _umask() -> int:
    """The process umask (it can only be read by setting it, so it is set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable where the platform allows it (best effort)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _remove(path: Path) -> None:
    """Delete a temporary file if it is still there."""
    with contextlib.suppress(OSError):
        path.unlink()
    _LIVE_TEMPORARIES.discard(path)


# --- hidden names of this process ------------------------------------------------------------------

#: This host's tag in hidden names: a run on another host sharing the directory is never judged dead here.
HOST_TAG = hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()[:6]
_HIDDEN = re.compile(r"^\.(?P<name>.+)\.ldp-(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-[0-9a-f]+\.(?P<kind>tmp|old|journal)$")


def hidden_name(target: Path, kind: str = "tmp") -> Path:
    """A new hidden name beside ``target`` for this process: ``.NAME.ldp-HOST-PID-RANDOM.KIND``."""
    return target.parent / f".{target.name}.ldp-{HOST_TAG}-{os.getpid()}-{secrets.token_hex(4)}.{kind}"


def _make_temp(target: Path) -> tuple[int, str]:
    """Create a private (0600) hidden temporary file beside ``target``: ``(descriptor, path)``."""
    while True:
        path = hidden_name(target)
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), str(path)
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue


def process_alive(pid: int) -> bool:
    """Whether a process with this pid runs here (a reused pid reads as alive: the safe side)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _remove_path(path: Path) -> None:
    """Remove a file or a directory tree if it is there (never following a link out)."""
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


# --- renames that never replace, or swap -----------------------------------------------------------

_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2


def _renameat2(source: Path, target: Path, flags: int) -> bool:
    """``renameat2(2)`` with ``flags``: True if it ran, False where the system or file system lacks it.

    Raises the OSError of a real failure (e.g. FileExistsError for ``RENAME_NOREPLACE``).
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    result = function(at_fdcwd, os.fsencode(source), at_fdcwd, os.fsencode(target), ctypes.c_uint(flags))
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(target))


def _place_new(source: Path, target: Path) -> None:
    """Rename ``source`` onto ``target`` only if ``target`` does not exist, atomically where possible.

    FileExistsError otherwise. Files: a hard link (fails if the name exists), then the temporary
    name is removed; directories (or file systems without links): ``renameat2(RENAME_NOREPLACE)``,
    else a check and a rename (a race window, on such systems only).
    """
    if source.is_file():
        try:
            os.link(source, target)
        except FileExistsError:
            raise
        except OSError:
            pass
        else:
            os.unlink(source)
            return
    if _renameat2(source, target, _RENAME_NOREPLACE):
        return
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fspath(target))
    os.rename(source, target)


# --- publishing several outputs as one ------------------------------------------------------------


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
    ``finish``, :meth:`add_directory` for a staging directory), then :meth:`run`:

    1. a journal (a hidden ``.journal`` file beside the first target) lists every move;
    2. each target that exists is kept as a hidden backup (a hard link; a directory is swapped
       with ``renameat2(RENAME_EXCHANGE)`` where the file system has it, else renamed aside);
    3. each temporary is renamed onto its target (without ``overwrite``: only if the target does
       not exist, checked atomically at the rename, so two runs never both publish one target);
    4. ``confirm`` runs (the ledger's confirmation of the release);
    5. the journal is removed: the commit point. Then the backups are removed.

    A failure or an interrupt in steps 2-4 puts every old output back and removes the new ones
    (the error is raised after that). A kill there leaves the journal: the next
    :func:`sweep_stale` of the directory, by any later run, rolls it back the same way. A kill
    after step 5 leaves only hidden backups, which :func:`sweep_stale` removes. SIGINT and SIGTERM
    are held back from step 1 to the end, so a signal is not delivered in the middle of it.
    """

    def __init__(self, *, overwrite: bool) -> None:
        """An empty publication; ``overwrite``: existing targets may be replaced."""
        self._overwrite = overwrite
        self._moves: list[_Move] = []
        self._sinks: list[AtomicFileSink] = []

    def add_file(self, sink: AtomicFileSink) -> None:
        """Publish ``sink``'s finished temporary file onto its path."""
        self._moves.append(_Move(sink.temporary, sink.path, sink.label))
        self._sinks.append(sink)

    @property
    def label(self) -> str:
        """The first output, as messages name the publication."""
        return self._moves[0].label if self._moves else "(nothing)"

    def add_directory(self, staging: Path, target: Path, dataset: str) -> None:
        """Publish the finished directory ``staging`` (a dataset with id ``dataset``) onto ``target``."""
        self._moves.append(_Move(staging, target, os.fspath(target), directory=True, dataset=dataset))

    def run(self, confirm: Callable[[], None] | None = None) -> None:
        """Publish every output, then ``confirm``; on any failure restore the old outputs and re-raise."""
        check_interrupt()  # a cancellation some library code swallowed still stops the run here
        if not self._moves:  # a release with no file (a model printed on stdout): only the confirmation
            if confirm is not None:
                confirm()
            return
        journal = hidden_name(self._moves[0].target, "journal")
        with _signals_deferred():
            for move in self._moves:
                sweep_stale(move.target.parent)
                move.had_old = os.path.lexists(move.target)
                if move.had_old and not self._overwrite:
                    raise UsageError(f"{move.label}: already exists; pass `overwrite=True` to replace it.")
                if move.had_old:
                    move.backup = hidden_name(move.target, "old")
            try:
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
                checkpoint("published")
                if confirm is not None:
                    confirm()
                checkpoint("confirmed")
            except BaseException:
                _roll_back(self._moves)
                _remove_path(journal)
                for move in self._moves:
                    if move.directory:
                        _remove_path(move.temp)
                    else:
                        _remove(move.temp)
                        if move.backup is not None:
                            _remove_path(move.backup)  # not restored: the target never left its old content
                raise
            for move in self._moves:
                _LIVE_TEMPORARIES.discard(move.temp)
            with contextlib.suppress(OSError):
                os.unlink(journal)  # the commit point
            _sync_directory(journal.parent)
            for move in self._moves:
                _drop_old(move)
            note_published(self.label)
            consume_pending()  # too late to cancel: the release is complete
        for sink in self._sinks:
            sink._mark_committed()

    def _place(self, move: _Move) -> None:
        """Step 3 for one output (the old one is kept already, or swapped aside here)."""
        if move.directory:
            if move.had_old:
                if _renameat2(move.temp, move.target, _RENAME_EXCHANGE):
                    move.exchanged = True
                    return
                assert move.backup is not None
                os.rename(move.target, move.backup)
            try:
                _place_new(move.temp, move.target)
            except FileExistsError as exc:
                raise UsageError(f"{move.label}: already exists; pass `overwrite=True` to replace it.") from exc
            return
        _publish(move.temp, move.target, move.label, move.had_old, lambda: None)


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
        _remove_path(move.temp)
    elif move.backup is not None:
        _remove_path(move.backup)


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


def sweep_stale(directory: Path) -> None:
    """Finish what dead ldp runs left in ``directory``: roll back their journals, remove their litter.

    A journal (``.NAME.ldp-HOST-PID-….journal``) of a process of this host that is no longer running is
    an interrupted :class:`Publication`: its outputs are rolled back to what they were before it.
    Hidden temporaries and backups (``.NAME.ldp-HOST-PID-….tmp`` / ``.old``, files or staging
    directories) of this host's dead processes are removed. Anything of a live process, of
    another host, or not named by ldp is left alone.
    """
    try:
        names = os.listdir(directory)
    except OSError:
        return
    stale = [name for name in names if (match := _HIDDEN.match(name)) and match["host"] == HOST_TAG
             and not process_alive(int(match["pid"]))]
    for name in stale:
        if name.endswith(".journal"):
            _recover(directory / name)
    for name in stale:
        _remove_path(directory / name)


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
        _remove_path(move.temp)
