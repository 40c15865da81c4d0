"""Temporary files and crash safety: every output is written to a hidden temporary file next to
its target and renamed onto it only when complete, so an interrupted run never leaves a partial
file behind.

:class:`AtomicFileSink` is that temporary file as a write-only binary sink (hashing its bytes on
the way); it is the one :class:`Sink` so far, the place where a remote-filesystem or stream sink
would plug in. :func:`atomic_write_bytes` and :func:`atomic_write_text` write small outputs whole
through it, and :func:`remove_temporaries` is the one cleanup entry point after an interrupt.

Standard library only (no pyarrow).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Protocol

from ldpcli.errors import DataError, UsageError
from ldpcli.hashing import Sha256
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
    (for a file: renames it onto its target); :meth:`discard` abandons them and is safe to repeat,
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
        _sync(self._file)
        self._file.close()
        self._digest.close()
        _publish(self._temp, self.path, self.label, self._overwrite, self._mark_published)
        self._committed = True

    def _mark_published(self) -> None:
        self.published = True

    def discard(self) -> None:
        """Abandon the output: close and remove the temporary file (safe to call more than once)."""
        with contextlib.suppress(OSError):
            self._file.close()
        self._digest.close()
        _remove(self._temp)

    @property
    def sha256(self) -> str:
        """The SHA-256 (hex) of the bytes written; known once :meth:`commit` has run."""
        if not self._committed:
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
        raise UsageError(f"{label}: already exists; pass --overwrite to replace it.")


def _create_temp(target: Path, label: str) -> tuple[int, Path]:
    """Create the hidden temporary file next to ``target``: ``(descriptor, path)``, registered."""
    try:
        with _signals_deferred():
            descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
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

    ``on_published`` runs together with the rename (signals held back), so a caller interrupted
    right after it still knows that ``target`` now holds the new file.
    """
    exists = target.exists()
    if exists and not overwrite:
        raise UsageError(f"{label}: already exists; pass --overwrite to replace it.")
    # mkstemp makes the file private (0600); use the replaced file's mode or the usual 0666 - umask.
    os.chmod(temp, stat.S_IMODE(target.stat().st_mode) if exists else 0o666 & ~_umask())
    with _signals_deferred():
        os.replace(temp, target)
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
