"""Estimators: what an analyst computes from privatized rows alone.

An estimator is one class with the :class:`Estimator` protocol: ``add(values, keep)`` takes a batch
of privatized rows (and the kept columns of the same rows), ``merge(other)`` folds in an estimator
of another part of the data (a shard, a thread), and ``finalize(mechanism, n)`` turns the state into
a result, using the calibrated mechanism for the guaranteed error. :func:`ldpcli.analysis._scan.scan` feeds
it verified batches. Modules: ``moments`` (streaming moments), ``protocol`` (the protocol and the
group-by wrapper), ``mean`` (the mean with error bars).

Nothing here imports pyarrow at import time: estimators see numpy arrays, and a kept-column table
only as an object with ``column(name)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.estimators._mean import MeanEstimate as MeanEstimate
    from ldpcli.estimators._mean import MeanEstimator as MeanEstimator
    from ldpcli.estimators._moments import RunningMoments as RunningMoments
    from ldpcli.estimators._projection import Hull as Hull
    from ldpcli.estimators._protocol import Estimator as Estimator
    from ldpcli.estimators._protocol import GroupBy as GroupBy
    from ldpcli.estimators._queries import central_sigma as central_sigma
    from ldpcli.estimators._queries import diameter as diameter
    from ldpcli.estimators._queries import greedy_cover as greedy_cover
    from ldpcli.estimators._queries import marginal_workload as marginal_workload
    from ldpcli.estimators._queries import mean_width as mean_width
    from ldpcli.estimators._queries import nearest_rows as nearest_rows
    from ldpcli.estimators._regression import RegressionFit as RegressionFit
    from ldpcli.estimators._regression import RegressionMoments as RegressionMoments
    from ldpcli.estimators._regression import theorem3_rate as theorem3_rate

__getattr__, __dir__, __all__ = attach(__name__, __file__)
