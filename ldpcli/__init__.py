"""ldp: privatize vector datasets under local differential privacy, and analyse what was released.

The public API is these names (each loaded on first use, so ``import ldpcli`` and ``ldp --help``
stay fast and load neither pyarrow nor scipy):

Making a release
    ``privatize(x, epsilon=…, mechanism="privunit2", norm_bound=1.0, rng=None)``
        Privatize the rows of a numpy array, pyarrow Table or pandas DataFrame in memory; returns
        ``(privatized rows, Release)``. ``eps`` is an alias of ``epsilon``.
    ``privatize_file(src, dst, mechanism="privunit2", epsilon=…, norm_bound=1.0, options=ReleaseOptions())``
        ``ldp privatize``: a file and its sidecar; returns the written :class:`Release`.
    ``privatize_dataset(inputs, output_dir, mechanism=…, epsilon=…, options=…, engine=…)``
        ``ldp privatize --engine dask``: a dataset directory of parts; returns its :class:`Release`.

Holding a release
    ``open_release(paths, trust=None)``
        Privatized files (a file, the shards of one job, a dataset directory) opened as one
        :class:`Release`, checked against their sidecars and signatures.
    ``Release``
        A privatization's public description (``spec``, ``mechanism``, ``n``, ``d``,
        ``epsilon_total``, ``sidecar``, ``paths``) and the jobs on its files: ``.mean()``,
        ``.group_means(column)``, ``.regress(label)``, ``.answer(workload)``, ``.attack(raw)``.
    ``estimate_mean(z, release)``
        The mean of the raw rows from privatized rows held in memory (``privatize``'s output);
        for files, ``open_release(paths).mean()``.

Parameters and records
    ``MechanismSpec``
        The public choices of a mechanism (name, ε, calibration, L, options); ``.calibrate(d)``.
    ``ReleaseOptions``
        What a release is asked beyond its mechanism and paths: ``columns`` (a ``Columns``: vector
        and kept columns), ``seed``, ``copies``, ``dtype``, the clipping policy, ``risk`` (a
        ``RiskSection``), ``budget`` (a ``Budget``: ledger and cap), ``resources`` (a ``Resources``).
    ``Ledger``
        The data owner's ledger of releases and spent ε (``Ledger.open()``; pass
        ``ReleaseOptions(budget=Budget(ledger, max_budget))`` to record a release and enforce a cap).

Errors and warnings
    ``LdpError`` (base), ``UsageError`` (impossible options), ``DataError`` (unusable data or a
    release that fails its checks), ``LdpWarning`` (a legal release to look at twice).

Everything else (the mechanisms, estimators, risk bounds, the sidecar format) is in the
subpackages: ``ldpcli.math``, ``io``, ``mechanisms``, ``estimators``, ``risk``, ``audit``,
``release``, ``analysis``, ``planning``, ``learn``, ``cli`` (the README's package map).
"""

from __future__ import annotations

import importlib
from typing import Any

from ldpcli._version import __version__
from ldpcli.errors import DataError, LdpError, UsageError

#: Each lazily loaded public name and the module that defines it.
_LAZY = {
    "privatize": "ldpcli.analysis.release",
    "privatize_file": "ldpcli.analysis.release",
    "privatize_dataset": "ldpcli.analysis.release",
    "open_release": "ldpcli.analysis.release",
    "Release": "ldpcli.analysis.release",
    "estimate_mean": "ldpcli.release.arrays",
    "LdpWarning": "ldpcli.release.arrays",
    "MechanismSpec": "ldpcli.mechanisms",
    "ReleaseOptions": "ldpcli.release.options",
    "Columns": "ldpcli.release.options",
    "RiskSection": "ldpcli.release.options",
    "Budget": "ldpcli.release.options",
    "Resources": "ldpcli.release.options",
    "Ledger": "ldpcli.release.ledger",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module when first asked for (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'ldpcli' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # asked once: later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    """The module's names with the public ones not loaded yet (PEP 562)."""
    return sorted({*globals(), *_LAZY})


__all__ = ["__version__", "LdpError", "UsageError", "DataError", *_LAZY]
