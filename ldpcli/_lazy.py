"""Curated, lazily loaded namespaces: each subpackage's public names, imported on first use (PEP 562).

A subpackage's ``__init__`` lists its public names once, as ``from ldpcli.pkg._module import Name as
Name`` lines under ``if TYPE_CHECKING:`` (type checkers and readers see where each name lives), and
ends with::

    __getattr__, __dir__, __all__ = attach(__name__, __file__)

:func:`attach` reads that block from the file and returns the three, so that ``import ldpcli.release``
loads neither pyarrow nor scipy: a name's private module is imported when the name is first asked
for. This is the shape of scientific-python's SPEC 1 (``lazy_loader.attach_stub``), with the stub in
the ``__init__`` itself. A name is looked up afresh each time (not cached in the package), so a
test that patches a module's attribute sees its patch through the namespace too.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: One public name in the ``if TYPE_CHECKING:`` block: ``    from ldpcli.pkg._module import Name as Name``.
_EXPORT_LINE = re.compile(r"^    from (ldpcli(?:\.\w+)+) import (\w+) as (\w+)$", re.M)


def exports_of(init_file: str) -> dict[str, tuple[str, str]]:
    """Each public name of a package's ``__init__``: (its module, its name there).

    Read from the ``from … import Name as Name`` lines of its ``if TYPE_CHECKING:`` block, one name a
    line as ldp writes them (a regular expression, not :mod:`ast`: starting the CLI should not pay for a
    parser).
    """
    text = Path(init_file).read_text(encoding="utf-8")
    block = text.partition("\nif TYPE_CHECKING:\n")[2]
    return {alias: (module, name) for module, name, alias in _EXPORT_LINE.findall(block)}


def attach(package: str, init_file: str, dynamic: dict[str, str] | None = None,
           ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for the package ``package`` whose ``__init__`` is ``init_file``.

    ``__getattr__`` imports a public name's module on first use, and a submodule read as an attribute
    (an old 0.1 module path among them: :mod:`ldpcli._compat` answers it, with its warning). ``__all__`` is the
    public names in the order the ``__init__`` lists them. ``dynamic`` names the public values that a
    module computes when asked (its own ``__getattr__``, as ``FORMATS``), by module: they cannot stand
    in the ``TYPE_CHECKING`` block (mypy 2.4 fails writing its cache for such an import).
    """
    exports = exports_of(init_file) | {name: (module, name) for name, module in (dynamic or {}).items()}

    def __getattr__(name: str) -> Any:
        """A public name, from its private module; else a submodule of that name."""
        if name in exports:
            module, attribute = exports[name]
            return getattr(importlib.import_module(module), attribute)
        try:  # a submodule not imported yet; an old module path is answered by ldpcli._compat's finder, which warns
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise  # a module that exists failed to import: not a missing attribute
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        """The package's own names and its public ones."""
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__, list(exports)
