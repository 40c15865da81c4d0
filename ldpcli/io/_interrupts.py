"""Cancellation that library code cannot swallow: SIGINT and SIGTERM are recorded, then raised.

A signal handler in Python raises its exception wherever the main thread happens to be. Inside
library code that catches broad exceptions (pyarrow does, e.g. while it lazily imports pandas in
``Array.to_numpy``), the exception can be swallowed and the run would go on to publish its
release. So :func:`handler` first *records* the request, then raises :class:`Interrupted`; the
long-running loops call :func:`check` at every batch boundary and before anything is published,
so a recorded request always ends the run before its commit.

Inside :func:`held` the handler only records: a few steps then happen together or not at all,
whatever thread the kernel handed the signal to (a process-directed signal goes to any thread that
does not block it, and CPython runs the Python handler in the main thread at its next bytecode,
so blocking the signal in the main thread alone holds nothing back). A signal held back during a
commit (``held(commit=True)``: :class:`ldpcli.io._publication.Publication` holds SIGINT and SIGTERM
back while it runs) comes too late to stop it: the commit completes, the signal is recorded as
:func:`late`, and the caller reports that the release is complete (:func:`late_message`); the run
still stops at its next :func:`check`. A second signal while the first one's exception unwinds the
run is recorded, never raised again, so it cannot cut short a rollback or the removal of
temporaries. Standard library only.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from ldpcli.errors import Interrupted

#: The signals that cancel a run.
SIGNALS = (signal.SIGINT, signal.SIGTERM)

_requested: list[int] = []
_late: list[int] = []
_published: list[str] = []
_reported: list[bool] = []
_default_unraisable: list[Any] = []
#: One entry per open :func:`held` block of the main thread (True: a commit).
_holds: list[bool] = []
#: The signals received while a :func:`held` block was open, not yet accounted for.
_held: list[int] = []


def handler(signum: int, frame: FrameType | None) -> None:
    """The signal handler: record the cancellation, then raise :class:`Interrupted` (exit 128 + signum).

    Inside :func:`held`, or once an earlier request is unwinding the run, it only records.
    """
    first = not _requested
    _requested.append(signum)
    if _holds:
        _held.append(signum)
        return
    if first:
        raise Interrupted(signum)


def install() -> None:
    """Make SIGINT and SIGTERM cancel the run through :func:`handler` (main thread only).

    Also keeps Python from printing a traceback when the handler's exception lands where it cannot
    propagate (a finalizer, a garbage-collection callback: "Exception ignored in …"): the request
    is recorded, and :func:`check` ends the run at the next batch boundary.
    """
    for signum in SIGNALS:
        signal.signal(signum, handler)
    if sys.unraisablehook is not _quiet_unraisable:
        _default_unraisable.append(sys.unraisablehook)
        sys.unraisablehook = _quiet_unraisable


def _quiet_unraisable(unraisable: Any) -> None:
    """``sys.unraisablehook`` that drops a recorded cancellation and passes anything else on."""
    if isinstance(unraisable.exc_value, Interrupted) and _requested:
        return
    (_default_unraisable[0] if _default_unraisable else sys.__unraisablehook__)(unraisable)


def ignore() -> None:
    """Ignore SIGINT and SIGTERM from now on (the process is finishing; main thread only)."""
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def held(*, commit: bool = False) -> Iterator[None]:
    """Hold SIGINT and SIGTERM back in the block: they are recorded, not raised, wherever they land.

    When the outermost block ends normally, a signal it held is raised then (:class:`Interrupted`),
    unless an earlier one is already unwinding the run; when it ends with an exception, that
    exception goes on and the signal stays recorded (:func:`check` raises it). With ``commit``, a
    signal held by a block that ends normally came too late to cancel it: it is recorded as
    :func:`late` and not raised (the run stops at its next :func:`check`). Outside the main thread, where no Python signal handler runs, it does nothing.

    The signals are also blocked in the main thread (``pthread_sigmask``) for a process whose
    handlers are not :func:`handler` (a library user's); one still pending at the end is taken off
    the queue and recorded like one the handler saw.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    start, earlier = len(_held), bool(_requested)
    _holds.append(commit)
    blocked = hasattr(signal, "pthread_sigmask")
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, set(SIGNALS)) if blocked else set()
    completed = False
    try:
        yield
        completed = True
    finally:
        if blocked:
            _take_pending()
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        _holds.pop()
        if commit and completed:
            _late.extend(_held[start:])
            del _held[start:]
        if not _holds and _held:
            signum = _held[0]
            _held.clear()
            if completed and not earlier:  # an earlier request is unwinding the run, or check() raises it
                raise Interrupted(signum)


def _take_pending() -> None:
    """Take SIGINT/SIGTERM that are pending (blocked) off the queue and record them as held."""
    if not hasattr(signal, "sigpending"):
        return
    for signum in sorted(signal.sigpending() & set(SIGNALS)):
        if signal.sigtimedwait([signum], 0) is not None:
            _requested.append(int(signum))
            _held.append(int(signum))


def note_published(label: str) -> None:
    """Record that this process published a release (an interrupt after it must not say "nothing")."""
    _published.append(label)


def interrupted_message() -> str | None:
    """What an interrupted run says about what it left (nothing, or the releases it completed);
    None once it was said (the command line says it once, wherever the interrupt surfaced)."""
    if _reported:
        return None
    _reported.append(True)
    if not _published:
        return "interrupted; no output was left behind"
    return (f"interrupted after publishing {', '.join(_published)}: those releases are complete and recorded in the "
            "ledger; nothing else was left behind")


def late_message() -> str | None:
    """What a run says when a signal arrived while its release was being committed (the release is
    complete); None when none did, or when the run already said that it was interrupted."""
    if not _late or _reported:
        return None
    _reported.append(True)
    return (f"signal {_late[0]} arrived while the release was being published; the release is complete "
            "(output, sidecar and ledger entry)")


def requested() -> int | None:
    """The first cancelling signal received (None when none was)."""
    return _requested[0] if _requested else None


def received() -> tuple[int, ...]:
    """Every cancelling signal received so far, in order (held back or not)."""
    return tuple(_requested)


def check() -> None:
    """Raise :class:`Interrupted` if a cancellation was requested (even if its exception was swallowed)."""
    if _requested:
        raise Interrupted(_requested[0])


def late() -> int | None:
    """A cancelling signal that arrived while a commit was completing (None when none did)."""
    return _late[0] if _late else None


def reset() -> None:
    """Forget every recorded request (a long-lived process starting a new job)."""
    _requested.clear()
    _late.clear()
    _published.clear()
    _reported.clear()
    _held.clear()
