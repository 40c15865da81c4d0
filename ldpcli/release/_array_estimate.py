"""The estimator of the Python API for rows in memory: ``ldpcli.estimate_mean(z, release)``, the mean
of the raw rows from privatized rows the caller holds (the rows of files are read by
``ldpcli.open_release(paths).mean()``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ldpcli.errors import counted
from ldpcli.estimators._mean import MeanEstimate, MeanEstimator
from ldpcli.math._devices import device_namespace, host_copy
from ldpcli.mechanisms import Mechanism, MechanismSpec
from ldpcli.mechanisms._rendering import as_recorded
from ldpcli.release._array_input import _array_rows, _as_table, _is_arrow, _is_pandas
from ldpcli.release._arrays import ReleaseRecord, _python_errors


def _description(description: Any) -> Mechanism:
    """The calibrated mechanism behind a release record, its dict, a sidecar file or a mechanism."""
    if isinstance(description, ReleaseRecord):
        return description.mechanism
    if isinstance(description, Mechanism):
        return description
    if isinstance(description, Mapping):
        if "schema_version" in description:  # a sidecar's content
            spec = MechanismSpec.from_dict(description["mechanism"]["spec"])
            return as_recorded(spec.calibrate(int(description["mechanism"]["d"])),
                               description.get("release", {}).get("rendering"))
        return ReleaseRecord.from_dict(description).mechanism
    if isinstance(description, (str, os.PathLike)):
        from ldpcli.release._sidecar import load_sidecar

        with _python_errors():
            return load_sidecar(description).mechanism
    raise TypeError(
        "description must be a Release (from ldpcli.privatize), its to_dict(), a sidecar path or a Mechanism, "
        f"got {type(description).__name__}"
    )


def estimate_mean(z: Any, description: Any, *, confidence: float = 0.95) -> MeanEstimate:
    """The mean of the raw rows estimated from privatized rows ``z`` held in memory, with error bars.

    ``ldpcli.estimate_mean``. For the rows of privatized files, ``ldpcli.open_release(paths).mean()``
    reads them (verified against their sidecars); this function takes rows the caller holds.

    Parameters
    ----------
    z : numpy.ndarray, Array API array, pyarrow.Table or pandas.DataFrame
        The privatized (n, d) rows, or any subset of them (each row is unbiased on its own); a
        table needs the release of the table privatization (it names the vector columns). Rows on
        a device (PyTorch, CuPy, JAX) are copied to the host (:func:`~ldpcli.math._devices.host_copy`).
    description : Release, dict, path or Mechanism
        The :class:`~ldpcli.analysis._handle.Release` that ``ldpcli.privatize`` returned (or any
        :class:`ReleaseRecord`), its ``to_dict()``, a sidecar path, or the calibrated mechanism.
    confidence : float
        The level of the per-coordinate Student-t intervals.

    Returns
    -------
    MeanEstimate
        The mean, its guaranteed expected squared error ``expected_error_max / n``,
        per-coordinate standard errors and intervals (:class:`~ldpcli.estimators._mean.MeanEstimate`).

    References
    ----------
    Bhowmick, Duchi, Freudiger, Kapoor, Rogers (2018), "Protection against reconstruction and its
    applications in private federated learning": each released row is unbiased, so their average is.
    """
    mech = _description(description)
    if _is_pandas(z) or _is_arrow(z):
        if not isinstance(description, ReleaseRecord) or description.columns is None:
            raise TypeError("a table z needs the Release of the table privatization (it names the vector columns)")
        z = _release_table_values(z, description)
    elif device_namespace(z) is not None:
        z = host_copy(z)
    values, _ = _array_rows(z)
    if values.shape[1] != mech.d:
        raise ValueError(f"z has d = {counted(values.shape[1], 'coordinate')} but the release has d = {mech.d}")
    with _python_errors():
        estimator = MeanEstimator(mech.d, confidence)
    estimator.add(values, None)
    return estimator.finalize(mech, values.shape[0])


def _release_table_values(z: Any, release: ReleaseRecord) -> np.ndarray:
    """The vector columns of a privatized table as an (n, d) array, read by the file readers' rules."""
    import pyarrow as pa

    from ldpcli.io._read import open_table

    table = _as_table(z, "z")
    assert release.columns is not None
    names = list(release.columns)
    is_list = len(names) == 1 and names[0] in table.column_names and pa.types.is_nested(
        table.schema.field(names[0]).type)
    with _python_errors():
        values, _, _ = open_table(table, label="z", column=names[0] if is_list else None,
                                  columns=None if is_list else names)
    return values


__all__ = ["estimate_mean"]
