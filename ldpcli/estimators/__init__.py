"""Estimators: what an analyst computes from privatized rows alone.

An estimator is one class with the :class:`Estimator` protocol: ``add(values, keep)`` takes a batch
of privatized rows (and the kept columns of the same rows), ``merge(other)`` folds in an estimator
of another part of the data (a shard, a thread), and ``finalize(mechanism, n)`` turns the state into
a result, using the calibrated mechanism for the guaranteed error. :func:`ldpcli.analysis.scan.scan` feeds
it verified batches. Modules: ``moments`` (streaming moments), ``protocol`` (the protocol and the
group-by wrapper), ``mean`` (the mean with error bars).

Nothing here imports pyarrow at import time: estimators see numpy arrays, and a kept-column table
only as an object with ``column(name)``.
"""
