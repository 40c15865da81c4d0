"""Every use of Typer's internals by the command line, in one place.

Typer 0.29 vendors its own click as the private ``typer._click``; its public API has no names for
the usage errors that ``ldp`` prints as one ``ldp: error: …`` line, nor for the running command's
context (whose parameters turn a library parameter into its flag: :mod:`ldpcli.cli.flags`), nor for the hook that shows a
positional argument by its metavar. ``click`` itself is not a dependency (only dask brings it).
``tests/cli/test_typer_compat.py`` checks these names and hooks, so a Typer upgrade that
removes them fails there with a message instead of changing the help or the exit codes silently.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

try:
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
    from typer._click.exceptions import UsageError as ClickUsageError
    from typer._click.globals import get_current_context
except ImportError as exc:  # pragma: no cover - only with a Typer that moved its vendored click
    raise ImportError(
        f"typer {typer.__version__} no longer has typer._click.exceptions (ClickException, NoArgsIsHelpError, "
        "UsageError) or typer._click.globals.get_current_context, which ldp's usage errors and flag names rely on: install typer 0.29 (which this was written against) "
        "or update ldpcli/cli/_typer_compat.py"
    ) from exc

__all__ = ["ClickException", "ClickUsageError", "Command", "Group", "NoArgsIsHelpError", "get_current_context"]


class _Argument(TyperArgument):
    """A positional argument shown by its metavar alone: ``INPUT``, not ``{INPUT}`` and ``<path>``."""

    def _usage_display_name(self) -> str:  # Typer's private hook for the usage line
        return self.display_name_raw

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def _plain_help(params: list[Any]) -> None:
    """Show no type for flags (``--json``, not ``--json <bool>``) and plain argument names
    (:class:`_Argument`) in a command's help."""
    for param in params:
        if isinstance(param, TyperArgument):
            param.__class__ = _Argument
        elif getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class Command(TyperCommand):
    """A command with :func:`_plain_help`."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _plain_help(params)
        return params


class Group(TyperGroup):
    """A group of commands (``ldp``, ``ldp keys``, ``ldp queries``) with :func:`_plain_help`."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _plain_help(params)
        return params
