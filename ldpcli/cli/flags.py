"""Library parameters → the flags of the running command, for messages.

Library errors and warnings name the Python parameter they are about, between backticks
(:mod:`ldpcli.errors`: ``"`epsilon` must be …"``). The command line shows the same message with the
flag a person typed (``--eps must be …``). The mapping is the running command's click parameters
(a parameter's name → its first long option; ``name=False`` → its ``--no-…`` form), with
:data:`ALIASES` where a library keyword differs from the command's parameter name; a parameter the
command does not have is written as its flag would be (``max_budget`` → ``--max-budget``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ldpcli.cli._typer_compat import get_current_context
from ldpcli.errors import LdpError, render_text

#: Library keyword → the command's parameter name, where the two differ.
ALIASES: Mapping[str, str] = {"epsilon": "eps"}


def flag_of(parameter: str, params: Sequence[Any]) -> str:
    """The flag of ``parameter`` (``norm_bound``, ``overwrite=True``, ``verify=False``) among the
    click parameters ``params`` of a command."""
    name, _, switch = parameter.partition("=")
    name = ALIASES.get(name, name) if all(p.name != name for p in params) else name
    option = next((p for p in params if p.name == name and p.opts[0].startswith("-")), None)
    if option is None:
        return "--" + name.replace("_", "-")
    opts = option.secondary_opts if switch == "False" and option.secondary_opts else option.opts
    return next((opt for opt in opts if opt.startswith("--")), opts[0])


def _params() -> Sequence[Any]:
    """The parameters of the command being run (none outside a command)."""
    ctx = get_current_context(silent=True)
    return ctx.command.params if ctx is not None else ()


def in_flags(exc: LdpError) -> LdpError:
    """``exc`` as the command line shows it: its parameters written as the running command's flags."""
    params = _params()
    return exc.with_flags(lambda parameter: flag_of(parameter, params))


def text_in_flags(text: str) -> str:
    """A library warning or note (parameters between backticks) with the running command's flags."""
    params = _params()
    return render_text(text, lambda parameter: flag_of(parameter, params))
