"""Every use of Typer's internals by the command line, in one place.

Typer 0.29 vendors its own click as the private ``typer._click`` (older Typer, e.g. the 0.20 that Flower pins,
depends on the ``click`` package instead, read in its place); Typer's public API has no names for
the usage errors that ``ldp`` prints as one ``ldp: error: …`` line, nor for the running command's
context (whose parameters turn a library parameter into its flag: :mod:`ldpcli.cli.flags`), nor for the hook that shows a
positional argument by its metavar. ``click`` itself is not a dependency of ldp (dask and old Typer bring it).
``tests/cli/test_typer_compat.py`` checks these names and hooks, so a Typer upgrade that
removes them fails there with a message instead of changing the help or the exit codes silently.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

try:  # Typer 0.29 and later: its own vendored click
    from typer._click import exceptions as _exceptions
    from typer._click import globals as _globals
except ImportError:  # Typer before 0.29 (e.g. 0.20, which Flower pins): the click package it depends on
    try:
        from click import exceptions as _exceptions  # type: ignore[no-redef]
        from click import globals as _globals  # type: ignore[no-redef]
    except ImportError as exc:  # pragma: no cover - only with a Typer that neither vendors nor depends on click
        raise ImportError(
            f"typer {typer.__version__} has neither typer._click nor the click package, whose exceptions "
            "(ClickException, NoArgsIsHelpError, UsageError) and get_current_context ldp's usage errors and flag "
            "names rely on: install typer 0.29 (or a Typer from 0.20 with click) or update ldpcli/cli/_typer_compat.py"
        ) from exc

ClickException = _exceptions.ClickException
NoArgsIsHelpError = _exceptions.NoArgsIsHelpError
ClickUsageError = _exceptions.UsageError
get_current_context = _globals.get_current_context

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
