"""The few exception types the CLI turns into one-line messages.

Library code raises these; ``ldpcli.cli.app`` catches them, prints ``ldp: error: <message>`` on stderr
and exits with :attr:`LdpError.exit_code`. Messages name the file, row and column involved and say
what to do, so they can be shown to a person unchanged.
"""

from __future__ import annotations


class LdpError(Exception):
    """Base class: a problem ldp can explain in one line."""

    exit_code: int = 1


class UsageError(LdpError):
    """The command or call was given impossible options (ε ≤ 0, unknown mechanism, bad path…)."""

    exit_code = 2


class DataError(LdpError):
    """A file's contents cannot be used (corrupt, empty, non-numeric, NaN, ragged, mismatched)."""

    exit_code = 1


class MissingDependency(LdpError):
    """An optional dependency is not installed (exit 1: nothing is wrong with the command); the
    message names the ``pip install`` line that adds it."""

    exit_code = 1


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: unwind (removing temporary files), then exit 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.exit_code = 128 + signum
