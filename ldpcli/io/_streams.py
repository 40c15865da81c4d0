"""``-`` for standard input and output: ldp in a pipeline.

The ``ldp privatize`` command given ``-`` as its input and its output (and a file for the sidecar)
reads an Arrow IPC stream (or CSV text) on stdin and writes the privatized rows on stdout in the
same format. Standard input is first copied to a temporary file (:func:`spool_stdin`): a seeded run
keys its noise by the input's bytes, and the reader needs the schema before the rows, so the input
is read in full before the first output byte; memory stays flat (the copy is on disk). That copy is
the raw data, so on Linux it has no name from the moment it is created: the operating system frees
it when the process ends, however it ends (even by ``kill -9``). The output is written, hashed and
committed like any file, then copied to stdout (:func:`copy_to_stdout`), so its sidecar binds
exactly the bytes that went down the pipe. What a release of standard input records as its input is
:data:`STDIN_LABEL`, not the copy's path.
Both live in a temporary folder (:func:`stdio_directory`) named by host and pid, so that a run killed
outright, whose folder nothing removed, has it removed by the next run on that host.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ldpcli.errors import DataError, LdpError
from ldpcli.io._atomic import HOST_TAG, OWN_FILES, process_alive
from ldpcli.io._formats import ARROW_STREAM_MAGIC, MAGIC_BYTES, binary_format

#: The name that means standard input or output.
STDIO = "-"
#: How a release of standard input names its input (in the ledger and in messages about the release),
#: rather than by the temporary path :func:`spool_stdin` reads it from.
STDIN_LABEL = "<stdin>"
#: How a release written to standard output names its output (the sidecar's path follows it).
STDOUT_LABEL = "<stdout>"
_CHUNK = 8 * 2**20
#: The folders of :func:`stdio_directory`: ``ldp-stdio-HOST-PID-RANDOM``.
_STDIO_PREFIX = "ldp-stdio-"
_STDIO_FOLDER = re.compile(rf"^{_STDIO_PREFIX}(?P<host>[0-9a-f]{{6}})-(?P<pid>\d+)-")


@contextlib.contextmanager
def stdio_directory() -> Iterator[Path]:
    """A new private folder in the temporary directory for one run's standard input and output
    (:func:`spool_stdin`, the output before :func:`copy_to_stdout`), removed on leaving the block.

    It is named ``ldp-stdio-HOST-PID-RANDOM`` (the host tag and pid of the hidden temporaries of
    :mod:`ldpcli.io._atomic`): a process killed outright cannot remove its folder, so each call first
    removes the folders of this host's processes that no longer run (a reused pid reads as alive and
    is kept). Folders of other hosts sharing the temporary directory are never touched.
    """
    parent = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            match = _STDIO_FOLDER.match(entry.name)
            if (match and match["host"] == HOST_TAG and int(match["pid"]) != os.getpid()
                    and entry.is_dir(follow_symlinks=False) and not process_alive(int(match["pid"]))):
                shutil.rmtree(entry.path, ignore_errors=True)  # never follows the dangling link inside
    with tempfile.TemporaryDirectory(prefix=f"{_STDIO_PREFIX}{HOST_TAG}-{os.getpid()}-", dir=parent) as folder:
        yield Path(folder)


@contextlib.contextmanager
def spool_stdin(directory: Path, stream: BinaryIO | None = None) -> Iterator[Path]:
    """Copy standard input into a temporary file and yield the path to read it by:
    ``directory/stdin.arrows`` (an Arrow IPC stream) or ``directory/stdin.csv`` (anything else, read
    as CSV text; the readers choose the format by this suffix). DataError if it is empty.

    On Linux the copy is a file without a name (created in ``directory``, unlinked at once, kept open)
    and the yielded path is a symbolic link to ``/proc/self/fd/N``, which opens that file anew in this
    process only: when the process ends, however it ends, the kernel frees the raw bytes, and a link
    left behind by ``kill -9`` points nowhere. Where there is no ``/proc/self/fd`` (macOS, Windows) the
    copy is a named file in ``directory``: it is removed on leaving the ``with`` block (the caller's
    temporary directory removes it too), but a process killed outright leaves it behind.

    DataError, before anything is copied, if standard input begins like another binary data file
    (Parquet, Arrow IPC file, .npy: :func:`~ldpcli.io._formats.binary_format`), which would otherwise
    be read as CSV. An :class:`~ldpcli.errors.LdpError` raised inside the ``with`` block names
    :data:`STDIN_LABEL` where it named the copy's path, which means nothing to the user.
    """
    source = stream if stream is not None else sys.stdin.buffer
    first = source.read(MAGIC_BYTES)
    if not first:
        raise DataError("-: standard input is empty; pipe an Arrow IPC stream or CSV text into ldp")
    arrow = first.startswith(ARROW_STREAM_MAGIC)
    kind = None if arrow else binary_format(first)
    if kind is not None:
        raise DataError(
            f"{STDIN_LABEL}: standard input holds {kind}, but ldp reads only an Arrow IPC stream or CSV text "
            "there; give the file's path instead of -, or pipe one of those"
        )
    path = directory / ("stdin.arrows" if arrow else "stdin.csv")
    anonymous = OWN_FILES.is_dir()
    if anonymous:
        descriptor, name = tempfile.mkstemp(dir=directory)
        os.unlink(name)  # before the first byte is written: the raw data never has a name
        os.symlink(OWN_FILES / str(descriptor), path)
    else:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    try:
        with os.fdopen(descriptor, "wb", closefd=False) as out:
            out.write(first)
            shutil.copyfileobj(source, out, _CHUNK)
        try:
            yield path
        except LdpError as exc:
            exc.args = (exc.template.replace(str(path), STDIN_LABEL), *exc.args[1:])
            raise
    finally:
        os.close(descriptor)
        path.unlink(missing_ok=True)


def stdout_suffix(source: Path) -> str:
    """The format written to stdout: the input's when it is a stream format (Arrow IPC, CSV), else Arrow IPC."""
    return ".csv" if source.suffix.lower() == ".csv" else ".arrows"


def copy_to_stdout(path: Path, stream: BinaryIO | None = None) -> None:
    """Write a finished output's bytes to standard output, every one of them or an error.

    A write to a pipe whose reader closes while it is blocked returns the part that went through,
    without an error, and ``shutil.copyfileobj`` ignores that count: the release was cut short and
    the run said it was complete. Each write here continues where the last one stopped, so a closed
    reader ends in BrokenPipeError (:mod:`ldpcli.cli.pipes`).
    """
    target = stream if stream is not None else sys.stdout.buffer
    with path.open("rb") as data:
        while chunk := data.read(_CHUNK):
            view = memoryview(chunk)
            while view:
                written = target.write(view)
                if not written:
                    raise BrokenPipeError(errno.EPIPE, "standard output accepts no more bytes")
                view = view[written:]
    target.flush()


def is_stdio(path: str | os.PathLike[str] | None) -> bool:
    """Whether a path argument is ``-``."""
    return path is not None and os.fspath(path) == STDIO
