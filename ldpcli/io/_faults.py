"""Fault injection at named steps of a commit, for the crash and failure tests (standard library only).

The tests of the commit protocol (``docs/commit-protocol.md``) run real ``ldp`` processes and make
them fail, die or receive a signal at a chosen step: ``LDP_FAULT=STEP:ACTION`` in the environment,
where ``STEP`` is one of :data:`STEPS`, :data:`COMMITTED_STEPS` or :data:`LEDGER_STEPS` and ``ACTION`` is one of
:data:`ACTIONS`:

- ``kill``: the process sends itself SIGKILL (nothing runs after it, as with a power cut or the
  OOM killer);
- ``enospc``: an ``OSError`` "No space left on device" is raised there, as a full disk would
  (at :data:`STEPS` only: after the commit point nothing is left that could fail);
- ``sigint``, ``sigterm``: the process sends itself that signal, as Ctrl-C or ``kill`` would: to
  the process, so the kernel picks the thread that takes it (any thread that does not block it);
- ``double``: SIGINT, then SIGTERM at once (a second Ctrl-C, or a ``kill`` after it);
- ``touch=PATH``: the file ``PATH`` is created there and the run goes on, as a user saving a file into
  the output meanwhile would.

After sending a signal, :func:`checkpoint` waits (at most :data:`_SIGNAL_WAIT` seconds) until
:mod:`ldpcli.io._interrupts` has recorded it, so the test knows that its handler ran at this step
and not later. Without the variable :func:`checkpoint` does nothing. It is no security boundary:
whoever sets a process's environment can kill it anyway.

``LDP_NAMED_TEMPORARIES=1`` (:data:`NAMED_TEMPORARIES_ENV`) is the other test knob here: it makes every
output's temporary a named file from the start, as on systems without ``O_TMPFILE``
(:mod:`ldpcli.io._atomic`), so the tests can show what that fallback leaves behind and who removes it.
"""

from __future__ import annotations

import errno
import os
import signal
import time

#: The environment variable that arms a fault.
FAULT_ENV = "LDP_FAULT"

#: Set to a non-empty value: outputs are written to named temporaries, never anonymous ones (:func:`named_temporaries`).
NAMED_TEMPORARIES_ENV = "LDP_NAMED_TEMPORARIES"

#: The named steps before the commit point, in the order a release passes them: a failure at any of
#: them rolls the release back.
STEPS = (
    "reserve-write",  # the ledger file is about to be rewritten with the reservation
    "reserved",  # the ledger holds the reservation, nothing is published yet
    "journal",  # the commit journal is written, no backup of a replaced output yet
    "data-placed",  # the data file (or dataset directory) is in place, its sidecar not yet
    "published",  # every output is in place, the reservation not yet confirmed
    "confirm-write",  # the ledger file is about to be rewritten with the confirmation
    "confirmed",  # the reservation is confirmed, the journal and backups not yet removed
)

#: The named steps after the commit point: the release is complete and nothing may cancel it.
COMMITTED_STEPS = (
    "committed",  # the journal is removed (the commit point), the backups not yet; signals still held back
    "done",  # the publication has returned and signals are let through again
)

#: The named steps inside a write of the ledger's journal (:mod:`ldpcli.release._ledger_log`), passed by
#: whichever ledger write comes first (a reservation's or a confirmation's), for the kill tests.
LEDGER_STEPS = (
    "log-created",  # a new log is about to get its first line (it names the base's generation)
    "ledger-append",  # a change's line is written without its newline: not acknowledged yet
    "compact-write",  # the log has outgrown the base, which is about to be rewritten with it folded in
    "compacted",  # the new base is in place, the log it folded in not yet removed
)

#: The signals each signal action sends, in order.
SIGNAL_ACTIONS = {
    "sigint": (signal.SIGINT,),
    "sigterm": (signal.SIGTERM,),
    "double": (signal.SIGINT, signal.SIGTERM),
}

#: Every action.
ACTIONS = ("kill", "enospc", *SIGNAL_ACTIONS, "touch=PATH")

#: Seconds a signal action waits for the handler to record its signals.
_SIGNAL_WAIT = 10.0


def checkpoint(step: str) -> None:
    """Fail here if ``$LDP_FAULT`` names this step (see the module)."""
    armed = os.environ.get(FAULT_ENV)
    if not armed:
        return
    name, _, action = armed.partition(":")
    if name != step:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if action in SIGNAL_ACTIONS:
        _send(SIGNAL_ACTIONS[action])
    if action.startswith("touch="):
        with open(action.removeprefix("touch="), "a", encoding="utf-8") as handle:
            handle.write("a file ldp did not write\n")


def named_temporaries() -> bool:
    """Whether ``$LDP_NAMED_TEMPORARIES`` forces the named-temporary fallback of :mod:`ldpcli.io._atomic`."""
    return bool(os.environ.get(NAMED_TEMPORARIES_ENV))


def _send(signals: tuple[int, ...]) -> None:
    """Send ``signals`` to this process, then wait until the handler recorded them (bounded)."""
    from ldpcli.io import _interrupts as interrupts

    before = len(interrupts.received())
    for signum in signals:
        os.kill(os.getpid(), signum)
    deadline = time.monotonic() + _SIGNAL_WAIT
    while len(interrupts.received()) < before + len(signals) and time.monotonic() < deadline:
        time.sleep(0.001)  # the handler runs in the main thread between bytecodes, once the signal is taken
