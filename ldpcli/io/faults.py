"""Fault injection at named steps of a commit, for the crash and failure tests (standard library only).

The tests of the commit protocol (``docs/commit-protocol.md``) run real ``ldp`` processes and make
them fail or die at a chosen step: ``LDP_FAULT=STEP:ACTION`` in the environment, where ``STEP`` is
one of :data:`STEPS` and ``ACTION`` is ``kill`` (the process sends itself SIGKILL: nothing runs
after it, as with a power cut or the OOM killer) or ``enospc`` (an ``OSError`` "No space left on
device" is raised there, as a full disk would) or ``touch=PATH`` (the file ``PATH`` is created there and
the run goes on, as a user saving a file into the output meanwhile would). Without the variable :func:`checkpoint` does
nothing. It is no security boundary: whoever sets a process's environment can kill it anyway.
"""

from __future__ import annotations

import errno
import os
import signal

#: The environment variable that arms a fault.
FAULT_ENV = "LDP_FAULT"

#: The named steps, in the order a release passes them.
STEPS = (
    "reserve-write",  # the ledger file is about to be rewritten with the reservation
    "reserved",  # the ledger holds the reservation, nothing is published yet
    "journal",  # the commit journal is written, no backup of a replaced output yet
    "data-placed",  # the data file (or dataset directory) is in place, its sidecar not yet
    "published",  # every output is in place, the reservation not yet confirmed
    "confirm-write",  # the ledger file is about to be rewritten with the confirmation
    "confirmed",  # the reservation is confirmed, the journal and backups not yet removed
)


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
    if action.startswith("touch="):
        with open(action.removeprefix("touch="), "a", encoding="utf-8") as handle:
            handle.write("a file ldp did not write\n")
