"""scipy's submodules, imported on first use.

Importing ``scipy.special`` costs about 0.3 s, more than some whole commands (starting the CLI,
``ldp estimate-mean`` of a small file); only the code that calibrates, samples a cap, audits or
solves needs it. Modules write ``from ldpcli.math._lazy import special`` and call ``special.betainc``
as usual: the first attribute read imports the real module.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """A stand-in for the module ``name`` that imports it when an attribute is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(importlib.import_module(self._name), attribute)
        self.__dict__[attribute] = value  # read as a plain attribute from now on: no call per use
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


special: Any = LazyModule("scipy.special")
optimize: Any = LazyModule("scipy.optimize")
linalg: Any = LazyModule("scipy.linalg")
