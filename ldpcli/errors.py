"""The few exception types the CLI turns into one-line messages.

Library code raises these; ``ldpcli.cli.app`` catches them, prints ``ldp: error: <message>`` on stderr
and exits with :attr:`LdpError.exit_code`. Messages name the file, row and column involved and say
what to do, so they can be shown to a person unchanged.

Messages speak Python: a parameter of the call is written between backticks in the message
(``"`epsilon` must be a finite number > 0"``, ``"pass `overwrite=True` to replace it"``). ``str(exc)``
shows the Python words (``epsilon must be …``, ``pass overwrite=True …``); the CLI shows the same
message with its flags through :meth:`LdpError.render` (``--eps must be …``, ``pass --overwrite …``),
so only ``ldpcli.cli`` knows flag names.
"""

from __future__ import annotations

import copy
import re
from typing import Callable, Sequence

#: A parameter in a message: ```name```, or ```name=True``` / ```name=False``` for a switch.
_PARAMETER = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*(?:=(?:True|False))?)`")
#: Stands for a backtick of quoted text (:func:`quoted`) in a message until it is rendered.
_LITERAL_BACKTICK = "\ue000"


def quoted(text: str) -> str:
    """Text from elsewhere (another library's error, a file name) to put in a message as it is: its
    backticks stay backticks when the message is rendered, never read as a parameter (pyarrow says
    "`fsspec` is required", which is not a flag of ldp)."""
    return text.replace("`", _LITERAL_BACKTICK)


def python_text(text: str) -> str:
    """``text`` with its parameters in Python words: ```norm_bound``` → ``norm_bound``."""
    return _PARAMETER.sub(lambda m: m[1], text).replace(_LITERAL_BACKTICK, "`")


def render_text(text: str, flag_of: Callable[[str], str]) -> str:
    """``text`` with each parameter replaced by ``flag_of(parameter)`` (the parameter as written
    between the backticks, e.g. ``overwrite=True``)."""
    return _PARAMETER.sub(lambda m: flag_of(m[1]), text).replace(_LITERAL_BACKTICK, "`")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun in the number it takes: ``counted(1, "row")`` → ``"1 row"``, ``counted(2, "row")``
    → ``"2 rows"``, ``counted(0, "row")`` → ``"0 rows"`` (``plural`` where it is not the noun and an s:
    ``counted(3, "entry", "entries")``). Every message, warning and table cell that writes a count known
    at run time next to its noun goes through here, never "row(s)"; a verb that agrees with the count
    (was/were) stays with the caller. JSON keys and values never do."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


class LdpError(Exception):
    """Base class: a problem ldp can explain in one line.

    The message (``args[0]``) is the template: parameters between backticks (see the module).
    """

    exit_code: int = 1

    @property
    def template(self) -> str:
        """The message with its parameters marked, to quote inside another error's message."""
        return str(self.args[0]) if self.args else ""

    @property
    def parameters(self) -> tuple[str, ...]:
        """The parameters the message names (``("epsilon",)``), in order."""
        return tuple(m[1].split("=")[0] for m in _PARAMETER.finditer(self.template))

    def __str__(self) -> str:
        return python_text(self.template)

    def render(self, flag_of: Callable[[str], str]) -> str:
        """The message with each parameter written as ``flag_of`` names it (a CLI flag)."""
        return render_text(self.template, flag_of)

    def with_flags(self, flag_of: Callable[[str], str]) -> LdpError:
        """A copy of this error (same type and exit code) whose message is ``render(flag_of)``."""
        rendered = copy.copy(self)
        # still a template: quoted backticks stay quoted, so str() of the copy shows them as they were
        rendered.args = (_PARAMETER.sub(lambda m: flag_of(m[1]), self.template), *self.args[1:])
        return rendered


class UsageError(LdpError):
    """The command or call was given impossible options (ε ≤ 0, unknown mechanism, bad path…)."""

    exit_code = 2


class DataError(LdpError):
    """A file's contents cannot be used (corrupt, empty, non-numeric, NaN, ragged, mismatched)."""

    exit_code = 1


def install_hint(*extras: str) -> str:
    """The command that adds ldp's optional ``extras`` (``"dask"``; several: one line for all of them),
    for an installed package and for a clone of the repository, where the package-name form fails."""
    names = ",".join(extras)
    return f"pip install 'ldp[{names}]' (from a clone of ldp: pip install -e '.[{names}]')"


class MissingDependency(LdpError):
    """An optional dependency is not installed (exit 1: nothing is wrong with the command); the
    message names the ``pip install`` line that adds it."""

    exit_code = 1


def require_extras(purpose: str, needs: Sequence[tuple[str, str, str]]) -> None:
    """:class:`MissingDependency` naming *every* missing package of ``needs`` (pip name, module, extra)
    and the one ``pip install`` line that adds them all, when ``purpose`` needs several extras: checked
    together, so that installing what the message names is enough."""
    import importlib.util

    missing = [(name, extra) for name, module, extra in needs if importlib.util.find_spec(module) is None]
    if not missing:
        return
    names = [name for name, _ in missing]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    verb = "is" if len(names) == 1 else "are"
    raise MissingDependency(f"{purpose} needs {listed}, which {verb} not installed: "
                            f"{install_hint(*dict.fromkeys(extra for _, extra in missing))}")


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: unwind (removing temporary files), then exit 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.exit_code = 128 + signum
