"""A closed standard output ends ``ldp`` quietly, the Unix way.

``ldp estimate-mean FILE | head -1``: once ``head`` has its line it exits, and ldp's next write
to the pipe fails with EPIPE (Python ignores SIGPIPE, so no signal ends the process as it would a C
tool). Without care that failure surfaced as Typer's silent exit 1, the code of bad data, or as an
``Exception ignored … BrokenPipeError`` from the interpreter's final flush. Here it is exit
:data:`EXIT_CLOSED_STDOUT` = 141 = 128 + SIGPIPE, what a shell reports for a tool that SIGPIPE ended,
with nothing on stderr: standard output is pointed at ``/dev/null`` first (:func:`end_quietly`), so
no later write, and no flush at exit, fails again. A command that was writing a release to stdout
(``ldp privatize … -o -``) says on stderr that the reader got only part of it.

Only a pipe that really is closed counts (:func:`stdout_gone`, by ``poll``): a broken pipe of
another kind (a worker's connection) is still an error with its traceback. Rich handles a broken
pipe itself (``Console.on_broken_pipe``: ``/dev/null`` on stdout, then exit 1): ldp's consoles
override it (:mod:`ldpcli.cli.render`), and Typer's help console is recognised afterwards
(:func:`stdout_silenced` where stdout was a pipe).
"""

from __future__ import annotations

import errno
import os
import select
import signal
import stat
import sys
from typing import NoReturn

#: The exit code of a run whose standard output was closed by its reader: 128 + SIGPIPE.
EXIT_CLOSED_STDOUT = 128 + int(signal.SIGPIPE)


def stdout_gone() -> bool:
    """Whether standard output is a pipe whose reading end is closed (``poll`` reports an error on it)."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # captured in memory (tests) or already closed
        return False
    if not hasattr(select, "poll"):  # Windows: the EPIPE itself is the evidence
        return True
    poller = select.poll()
    poller.register(descriptor, select.POLLOUT)
    try:
        events = poller.poll(0)
    except OSError:
        return False
    return any(event & (select.POLLERR | select.POLLNVAL) for _, event in events)


def _stdout_stat() -> os.stat_result | None:
    try:
        return os.fstat(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        return None


def stdout_is_pipe() -> bool:
    """Whether standard output is a pipe (or FIFO) now."""
    found = _stdout_stat()
    return found is not None and stat.S_ISFIFO(found.st_mode)


def stdout_silenced() -> bool:
    """Whether standard output is now ``/dev/null``: what rich's own broken-pipe handler (``Console.on_broken_pipe``,
    which then exits 1) and :func:`end_quietly` leave behind."""
    found = _stdout_stat()
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return found is not None and (found.st_dev, found.st_ino) == (null.st_dev, null.st_ino)


def closed_stdout(exc: BaseException) -> bool:
    """Whether ``exc`` is the failed write to a closed standard output."""
    return isinstance(exc, OSError) and exc.errno == errno.EPIPE and stdout_gone()


def end_quietly() -> NoReturn:
    """Point standard output at ``/dev/null`` (its buffered bytes then go nowhere, without an error)
    and exit with :data:`EXIT_CLOSED_STDOUT`."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass
    raise SystemExit(EXIT_CLOSED_STDOUT)


def flush_stdout() -> None:
    """Flush standard output now, at the end of a run, rather than in the interpreter's exit (where a
    closed pipe prints ``Exception ignored``); :func:`end_quietly` if it is closed."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        if not closed_stdout(exc):
            raise
        end_quietly()
