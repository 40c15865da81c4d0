"""ldp: privatize vector datasets under local differential privacy, and analyse what was released.

The public API is these names (each loaded on first use, so ``import ldpcli`` and starting the CLI
stay fast and load neither pyarrow nor scipy):

Making a release
    ``privatize(x, epsilon=…, mechanism="privunit2", norm_bound=1.0, rng=None)``
        Privatize the rows of a numpy array, pyarrow Table or pandas DataFrame in memory; returns
        ``(privatized rows, Release)``. ``eps`` is an alias of ``epsilon``.
    ``privatize_file(src, dst, mechanism="privunit2", epsilon=…, norm_bound=1.0, options=ReleaseOptions())``
        ``ldp privatize``: a file and its sidecar; returns the written :class:`Release`.
    ``privatize_dataset(inputs, output_dir, mechanism=…, epsilon=…, options=…, engine=…)``
        Files into a dataset directory of parts, one task per part (``engine``: a Dask cluster, else
        this process); returns its :class:`Release`.

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

from typing import TYPE_CHECKING

from ldpcli import _compat
from ldpcli._lazy import attach
from ldpcli._version import __version__ as __version__
from ldpcli.errors import DataError as DataError
from ldpcli.errors import LdpError as LdpError
from ldpcli.errors import UsageError as UsageError

if TYPE_CHECKING:
    from ldpcli.analysis._handle import Release as Release
    from ldpcli.analysis._handle import open_release as open_release
    from ldpcli.analysis._handle import privatize as privatize
    from ldpcli.analysis._handle import privatize_dataset as privatize_dataset
    from ldpcli.analysis._handle import privatize_file as privatize_file
    from ldpcli.mechanisms._base import MechanismSpec as MechanismSpec
    from ldpcli.release._array_estimate import estimate_mean as estimate_mean
    from ldpcli.release._arrays import LdpWarning as LdpWarning
    from ldpcli.release._ledger import Ledger as Ledger
    from ldpcli.release._options import Budget as Budget
    from ldpcli.release._options import Columns as Columns
    from ldpcli.release._options import ReleaseOptions as ReleaseOptions
    from ldpcli.release._options import Resources as Resources
    from ldpcli.release._options import RiskSection as RiskSection

_compat.install()
__getattr__, __dir__, _lazy_names = attach(__name__, __file__)
__all__ = ["DataError", "LdpError", "UsageError", "__version__", *_lazy_names]
