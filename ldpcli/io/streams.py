"""``-`` for standard input and output: ldp in a pipeline.

``ldp privatize - -o - --sidecar release.ldp.json`` reads an Arrow IPC stream (or CSV text) on stdin
and writes the privatized rows on stdout in the same format. Standard input is first copied to a
private temporary file (:func:`spool_stdin`): a seeded run keys its noise by the input's bytes, and
the reader needs the schema before the rows, so the input is read in full before the first output
byte; memory stays flat (the copy is on disk). The output is written, hashed and committed like any
file, then copied to stdout (:func:`copy_to_stdout`), so its sidecar binds exactly the bytes that
went down the pipe.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import BinaryIO

from ldpcli.errors import DataError

#: The name that means standard input or output.
STDIO = "-"
#: The first bytes of an Arrow IPC stream (the continuation marker of its first message).
_ARROW_MAGIC = b"\xff\xff\xff\xff"
_CHUNK = 8 * 2**20


def spool_stdin(directory: Path, stream: BinaryIO | None = None) -> Path:
    """Copy standard input into ``directory`` as ``stdin.arrows`` (an Arrow IPC stream) or
    ``stdin.csv`` (anything else, read as CSV text); DataError if it is empty."""
    source = stream if stream is not None else sys.stdin.buffer
    first = source.read(len(_ARROW_MAGIC))
    if not first:
        raise DataError("-: standard input is empty; pipe an Arrow IPC stream or CSV text into ldp")
    path = directory / ("stdin.arrows" if first == _ARROW_MAGIC else "stdin.csv")
    with path.open("wb") as out:
        out.write(first)
        shutil.copyfileobj(source, out, _CHUNK)
    return path


def stdout_suffix(source: Path) -> str:
    """The format written to stdout: the input's when it is a stream format (Arrow IPC, CSV), else Arrow IPC."""
    return ".csv" if source.suffix.lower() == ".csv" else ".arrows"


def copy_to_stdout(path: Path, stream: BinaryIO | None = None) -> None:
    """Write a finished output's bytes to standard output."""
    target = stream if stream is not None else sys.stdout.buffer
    with path.open("rb") as data:
        shutil.copyfileobj(data, target, _CHUNK)
    target.flush()


def is_stdio(path: str | os.PathLike[str] | None) -> bool:
    """Whether a path argument is ``-``."""
    return path is not None and os.fspath(path) == STDIO
