"""The ``ldp`` console script: cancellation first, then the command line.

SIGINT and SIGTERM are routed to :func:`ldpcli.io._interrupts.handler` before the command-line
framework is imported, so a signal during start-up ends the run with one line instead of a
``KeyboardInterrupt`` traceback, and a signal that some library swallows later is still honoured
at the next batch boundary or before the commit. ``python -m ldpcli`` runs the same.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point (see the module)."""
    import faulthandler

    from ldpcli.io import _interrupts as interrupts

    faulthandler.enable()  # a crash in native code prints every thread's stack (for a bug report), not nothing
    interrupts.install()
    try:
        from ldpcli.cli.app import main as run
    except KeyboardInterrupt as exc:
        _report(interrupts.interrupted_message())
        raise SystemExit(getattr(exc, "exit_code", 130)) from None
    try:
        run()
    except KeyboardInterrupt as exc:  # raised outside a command's own handling
        _remove_temporaries()
        _report(interrupts.interrupted_message())
        raise SystemExit(getattr(exc, "exit_code", 130)) from None
    except SystemExit as exc:
        signum = interrupts.requested()
        if signum is None or exc.code != 130:
            raise
        _remove_temporaries()
        _report(interrupts.interrupted_message())  # Typer turned the interrupt into a silent exit 130
        raise SystemExit(128 + signum) from None
    finally:
        interrupts.ignore()  # the run is over: a signal now could only turn a finished run into a failed one
        _report(interrupts.late_message())  # a signal held back during the commit: the release is complete


def _remove_temporaries() -> None:
    """Remove this run's temporary outputs after an interrupt that escaped the command's own handling
    (the command's handler does the same; this is the last place a signal can be caught)."""
    atomic = sys.modules.get("ldpcli.io._atomic")  # loaded if anything was being written
    if atomic is not None:
        atomic.remove_temporaries()


def _report(message: str | None) -> None:
    """Say once that the run was interrupted."""
    if message is not None:
        sys.stderr.write(f"ldp: {message}\n")

