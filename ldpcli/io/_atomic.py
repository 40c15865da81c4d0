"""Temporary files and crash safety: every output is written to a temporary file next to its
target and renamed onto it only when complete, so an interrupted run never leaves a partial file
behind.

On Linux the temporary has no name while it is written (``O_TMPFILE``): a run killed outright
(``kill -9``, the OOM killer) leaves nothing, where a named temporary would stay, as large as the
output, until the next run in that directory swept it. It gets its hidden name only once
it is finished, just before the renames of the commit (``linkat`` of ``/proc/self/fd/N``:
:meth:`AtomicFileSink.name`), so the journal and the renames of ``docs/commit-protocol.md`` are the
same from there on. Where the directory's file system, the kernel or ``/proc`` lacks that, the
temporary is named from the start (found out per temporary, so per directory; forced by
``$LDP_NAMED_TEMPORARIES`` for the tests: :mod:`ldpcli.io._faults`). A dataset's part is made
without a name beside the staging directory that does not exist yet (``anonymous_in``) and linked
into it, under its final name, at the commit (:meth:`AtomicFileSink.place`).

:class:`AtomicFileSink` is that temporary file as a write-only binary sink (hashing its bytes on
the way); it is the one :class:`Sink` so far, the place where a remote-filesystem or stream sink
would plug in. :func:`atomic_write_bytes` and :func:`atomic_write_text` write small outputs whole
through it, and :func:`remove_temporaries` is the one cleanup entry point after an interrupt.
:func:`finished_bytes` and :func:`finished_text` leave the finished temporary to a
:class:`~ldpcli.io._publication.Publication`, which publishes several outputs as one unit.

Every hidden name ldp makes here carries this host's tag and the pid of its process
(``.NAME.ldp-HOST-PID-RANDOM.tmp`` / ``.old``), so a later run can tell the litter of a dead run
from the work of a live one and remove it (:func:`~ldpcli.io._publication.sweep_stale`). The renames
that never replace a target (:func:`_place_new`) or swap two (:func:`_renameat2`) live here too.

Standard library only (no pyarrow).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import os
import re
import secrets
import shutil
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Protocol

from ldpcli.errors import DataError, UsageError
from ldpcli.io._faults import NAMED_TEMPORARIES_ENV, named_temporaries
from ldpcli.io._hashing import Sha256
from ldpcli.io._interrupts import held
from ldpcli.io._messages import _reason, _write_failed

#: Temporary files named and neither renamed nor removed yet. A signal can interrupt the
#: program between creating one and entering the ``with`` block that would remove it; the
#: top-level handler then calls :func:`remove_temporaries`. (One without a name needs nothing:
#: the kernel frees it with its last descriptor.)
_LIVE_TEMPORARIES: set[Path] = set()

#: Where Linux shows a process its own open files: ``/proc/self/fd/N`` is the file of descriptor N (opening it opens that file anew),
#: also one that has no name, which ``linkat`` through it can then give one.
OWN_FILES = Path("/proc/self/fd")

#: What ``open(O_TMPFILE)`` fails with where it is not supported: the file system (EOPNOTSUPP),
#: a kernel before 3.11 (EISDIR: it reads the flag as ``O_DIRECTORY``), or the combination (EINVAL).
_NO_TMPFILE = frozenset({errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL})


def _signals_deferred() -> contextlib.AbstractContextManager[None]:
    """Hold SIGINT/SIGTERM back so a few steps happen together or not at all, whatever thread the
    signal lands on (:func:`ldpcli.io._interrupts.held`: recorded, then raised at the end)."""
    return held()


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

    It has no name while it is written where the system allows (see the module); :meth:`name`
    gives it its hidden name :attr:`temporary` once it is finished. A write-only binary sink that feeds every byte it passes on to a SHA-256: the sidecar
    records the hash of the data file it describes, computed while the file is written rather
    than by reading it back. A context manager: leaving the ``with`` block without
    :meth:`commit` removes the temporary file.
    """

    path: Path
    label: str

    def __init__(self, path: str | os.PathLike[str], *, overwrite: bool = False,
                 anonymous_in: Path | None = None) -> None:
        """Check the target and create the temporary file next to it.

        ``anonymous_in``: the temporary is a file without a name in that directory instead (``path``'s
        directory need not exist yet), given its name ``path`` only by :meth:`place`; UsageError where the
        directory's file system cannot make one (ask :func:`anonymous_files` first)."""
        self.path = Path(path)
        self.label = os.fspath(path)
        self._overwrite = overwrite
        self._position = 0
        # Hashed in a background thread (the bytes pyarrow passes are immutable: no copy).
        self._digest = Sha256(threaded=True, name="ldp-output-hash")
        self._committed = False
        self._finished = False  # complete and closed (finish), and not discarded since
        if anonymous_in is None:
            _check_output(self.path, self.label, overwrite)
            descriptor, self._temp, self._anonymous = _create_temp(self.path, self.label)
        else:
            descriptor, self._temp, self._anonymous = _anonymous_temp(anonymous_in, self.path, self.label)
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
        """Whether the temporary file is closed (after commit or discard; after finish once it is named)."""
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
        self.name()
        _publish(self._temp, self.path, self.label, self._overwrite, self._mark_published)
        self._committed = True

    def finish(self) -> None:
        """Flush the file to disk, leaving it at its temporary name (closed) or, without one yet,
        open until :meth:`name`: :class:`Publication` names and renames it together with other
        outputs (:meth:`commit` does both for one output)."""
        if not self._file.closed:
            _sync(self._file)
            if not self._anonymous:
                self._file.close()
        self._digest.close()
        self._finished = True

    def name(self) -> Path:
        """Give the finished file its hidden name :attr:`temporary` if it has none yet, close it, and
        return that name. Done as late as possible (just before the journal of the commit): until
        then a kill leaves nothing behind."""
        if not self._finished:
            raise RuntimeError(f"{self.label}: a temporary file is named only once it is finished")
        if self._anonymous:
            _give_name(self._file.fileno(), self._temp)
            self._anonymous = False
            self._file.close()
        return self._temp

    def place(self, target: Path) -> None:
        """Give the finished file without a name the name ``target`` (never replacing a file there) with
        the usual mode (0666 - umask) and close it: a part of a dataset linked into its staging
        directory at the commit (the directory is synced by the caller)."""
        if not (self._finished and self._anonymous):
            raise RuntimeError(f"{self.label}: only a finished file without a name is placed")
        os.fchmod(self._file.fileno(), 0o666 & ~_umask())
        _link_descriptor(self._file.fileno(), target)
        self._anonymous = False
        self._file.close()
        self.path = self._temp = target
        self._mark_committed()

    @property
    def temporary(self) -> Path:
        """The temporary file's hidden name (held by it once :meth:`name` ran, until it is published)."""
        return self._temp

    def _mark_published(self) -> None:
        self.published = True

    def _mark_committed(self) -> None:
        """Published by a :class:`Publication` (which renamed the finished temporary file)."""
        self._committed = True
        self.published = True

    def discard(self) -> None:
        """Abandon the output: close and remove the temporary file (safe to call more than once).
        One without a name is gone with its descriptor."""
        self._finished = False
        with contextlib.suppress(OSError):
            self._file.close()
        self._digest.close()
        if not self._anonymous:
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


def _create_temp(target: Path, label: str) -> tuple[int, Path, bool]:
    """Create the temporary file next to ``target``: ``(descriptor, hidden name, anonymous)``.

    Without a name where the system allows (``anonymous``: the hidden name is only reserved, for
    :func:`_give_name`), else at that name and registered in :data:`_LIVE_TEMPORARIES`.
    """
    try:
        with _signals_deferred():
            descriptor = _open_anonymous(target.parent)
            if descriptor is not None:
                return descriptor, hidden_name(target), True
            descriptor, name = _make_temp(target)
            _LIVE_TEMPORARIES.add(Path(name))
    except OSError as exc:
        raise UsageError(
            f"{label}: cannot create a file in {str(target.parent)!r} ({_reason(exc)}); "
            "choose a writable output directory."
        ) from exc
    return descriptor, Path(name), False


def anonymous_files(directory: Path) -> bool:
    """Whether files without a name can be made in ``directory`` (:func:`_open_anonymous`; the test
    knob ``$LDP_NAMED_TEMPORARIES`` says no)."""
    descriptor = _open_anonymous(directory)
    if descriptor is None:
        return False
    os.close(descriptor)
    return True


def _anonymous_temp(directory: Path, target: Path, label: str) -> tuple[int, Path, bool]:
    """:func:`_create_temp` for ``AtomicFileSink(anonymous_in=directory)``: a file without a name there, or UsageError."""
    try:
        descriptor = _open_anonymous(directory)
    except OSError as exc:
        raise UsageError(f"{label}: cannot create a file in {str(directory)!r} ({_reason(exc)}); "
                         "choose a writable output directory.") from exc
    if descriptor is None:
        raise UsageError(f"{label}: {str(directory)!r} cannot hold a file without a name (O_TMPFILE); "
                         f"set {NAMED_TEMPORARIES_ENV}=1 to write named temporaries")
    return descriptor, target, True


def _open_anonymous(directory: Path) -> int | None:
    """A private (0600) file without a name in ``directory`` (``O_TMPFILE``, linkable later), or
    None where the kernel, the file system or ``/proc`` lacks what that takes (or the tests force
    the named fallback: :func:`~ldpcli.io._faults.named_temporaries`). Another failure is raised."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or named_temporaries() or not OWN_FILES.is_dir():
        return None
    try:
        return os.open(directory, flag | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno in _NO_TMPFILE:
            return None
        raise


def _give_name(descriptor: int, name: Path) -> None:
    """Give the nameless file of ``descriptor`` the name ``name`` (registered as a temporary).

    ``linkat(AT_SYMLINK_FOLLOW)`` of ``/proc/self/fd/N``: os.link makes that call only with a
    directory descriptor (plain ``link(2)`` would link the ``/proc`` entry itself and fail, EXDEV).
    """
    with _signals_deferred():
        _link_descriptor(descriptor, name)
        _LIVE_TEMPORARIES.add(name)


def _link_descriptor(descriptor: int, name: Path) -> None:
    """``linkat`` the file of ``descriptor`` (one without a name) to ``name`` (see :func:`_give_name`)."""
    own = os.open(OWN_FILES, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(str(descriptor), name, src_dir_fd=own, follow_symlinks=True)
    finally:
        os.close(own)


def _sync(file: BinaryIO) -> None:
    """Flush a file's buffers to the disk."""
    file.flush()
    os.fsync(file.fileno())


def _publish(
    temp: Path, target: Path, label: str, overwrite: bool, on_published: Callable[[], None] | None = None,
    *, sync: bool = True,
) -> None:
    """Give the finished temporary file its final permissions and rename it onto ``target``.

    Without ``overwrite`` the rename happens only if ``target`` does not exist, checked atomically
    at the rename itself (:func:`_place_new`), so of two runs publishing one name, one fails.
    ``on_published`` runs together with the rename (signals held back), so a caller interrupted
    right after it still knows that ``target`` now holds the new file. ``sync=False`` leaves the
    directory's fsync to the caller (a publication of several files syncs each directory once).
    """
    exists = os.path.lexists(target)
    if exists and not overwrite:
        raise UsageError(f"{label}: already exists; pass `overwrite=True` to replace it.")
    # The temporary is made private (0600); use the replaced file's mode or the usual 0666 - umask.
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
        if on_published is not None:
            on_published()
    if sync:
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
