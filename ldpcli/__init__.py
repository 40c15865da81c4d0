"""ldp: privatize vector datasets under local differential privacy.

The array API is importable from here (loaded on first use, so ``ldp --help`` stays fast):
``ldpcli.privatize(x, eps=…)`` → (privatized rows, :class:`~ldpcli.release.arrays.Release`) and
``ldpcli.estimate_mean(z, release)``; see :mod:`ldpcli.release.arrays`. The file API is
:func:`ldpcli.release.file.privatize_file` and :func:`ldpcli.analysis.estimate.estimate_mean`.
"""

from __future__ import annotations

import importlib
from typing import Any

from ldpcli._version import __version__

_API = ("privatize", "estimate_mean", "Release", "LdpWarning")


def __getattr__(name: str) -> Any:
    """The array API (:mod:`ldpcli.release.arrays`), imported when first asked for (PEP 562)."""
    if name in _API:
        return getattr(importlib.import_module("ldpcli.release.arrays"), name)
    raise AttributeError(f"module 'ldpcli' has no attribute {name!r}")


__all__ = ["__version__", *_API]
