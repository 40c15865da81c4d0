"""Cancellation that library code cannot swallow: SIGINT and SIGTERM are recorded, then raised.

A signal handler in Python raises its exception wherever the main thread happens to be. Inside
library code that catches broad exceptions (pyarrow does, e.g. while it lazily imports pandas in
``Array.to_numpy``), the exception can be swallowed and the run would go on to publish its
release. So :func:`handler` first *records* the request, then raises :class:`Interrupted`; the
long-running loops call :func:`check` at every batch boundary and before anything is published,
so a recorded request always ends the run before its commit.

A signal that arrives during a commit (:class:`ldpcli.io.publication.Publication` holds SIGINT and
SIGTERM back while it runs) comes too late to stop it: the commit completes, the pending signal
is consumed there and recorded by :func:`arrived_late`, and :func:`late` tells the caller, which
reports that the release is complete. Standard library only.
"""

from __future__ import annotations

import signal
import sys
import threading
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


def handler(signum: int, frame: FrameType | None) -> None:
    """The signal handler: record the cancellation, then raise :class:`Interrupted` (exit 128 + signum)."""
    _requested.append(signum)
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


def requested() -> int | None:
    """The first cancelling signal received (None when none was)."""
    return _requested[0] if _requested else None


def received() -> tuple[int, ...]:
    """Every cancelling signal received so far, in order."""
    return tuple(_requested)


def check() -> None:
    """Raise :class:`Interrupted` if a cancellation was requested (even if its exception was swallowed)."""
    if _requested:
        raise Interrupted(_requested[0])


def consume_pending() -> None:
    """Take SIGINT/SIGTERM that are pending (held back) off the queue and record them as late.

    Called at the end of a commit, before the signals are let through again: the commit is
    complete, so they can no longer cancel it.
    """
    if not hasattr(signal, "sigpending") or threading.current_thread() is not threading.main_thread():
        return
    for signum in signal.sigpending() & set(SIGNALS):
        if signal.sigtimedwait([signum], 0) is not None:
            _late.append(int(signum))


def late() -> int | None:
    """A cancelling signal that arrived while a commit was completing (None when none did)."""
    return _late[0] if _late else None


def reset() -> None:
    """Forget every recorded request (a long-lived process starting a new job)."""
    _requested.clear()
    _late.clear()
    _published.clear()
    _reported.clear()
