"""Estimates from privatized files: any estimator over a verified scan, the mean, the mean per group.

:func:`estimate` is the one loop every estimator runs through: :func:`ldpcli.scan.scan` checks the
files against their sidecars and yields their rows; the estimator (:mod:`ldpcli.estimators`) adds
them and finalizes with the calibrated mechanism. :func:`estimate_mean` and
:func:`estimate_group_means` are the library calls behind ``ldp estimate-mean``; :func:`save_mean`
writes a mean to a file.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ldpcli.errors import DataError, UsageError
from ldpcli.estimators.mean import MeanEstimate, MeanEstimator
from ldpcli.estimators.protocol import Estimator, GroupBy
from ldpcli.io import atomic_write_bytes, atomic_write_text, file_format, table_bytes
from ldpcli.scan import Condition, Scan, scan

R = TypeVar("R")
Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def estimate(source: Scan, estimator: Estimator[R]) -> tuple[R, int]:
    """Feed every row of a scan to an estimator; return (its result, the rows it saw).

    The scan's verification happens as each file ends, so a result is only returned for files
    that match their sidecars (or for a scan opened with ``verify=False``).
    """
    n = 0
    for batch in source:
        if batch.values.shape[0]:
            estimator.add(batch.values, batch.keep)
            n += batch.values.shape[0]
    if n == 0:
        raise DataError(
            f"{source.files[0]}: no rows to estimate from"
            + (" (no row satisfies --where)" if source.where else "")
        )
    return estimator.finalize(source.mechanism, n), n


def estimate_mean(
    paths: Paths,
    *,
    sidecar: str | os.PathLike[str] | None = None,
    confidence: float = 0.95,
    where: Sequence[str | Condition] = (),
    verify: bool = True,
    batch_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> MeanEstimate:
    """Estimate the mean of the raw rows from privatized files (one, or the shards of one job).

    Each file's sidecar is the one beside it (or ``sidecar``, for a single file). Refuses a
    sidecar whose n, d or layout do not match its data (unless ``verify=False``), and shards whose
    sidecars disagree on the mechanism, ε, d or parameters. ``where`` keeps the rows whose kept
    columns satisfy every condition (e.g. ``"label == 3"``). ``on_rows`` is called with the rows of
    each batch (progress).
    """
    source = scan(paths, sidecar=sidecar, verify=verify, where=where, batch_rows=batch_rows, on_rows=on_rows)
    result, _ = estimate(source, MeanEstimator(source.mechanism.d, confidence, copies=source.copies))
    return _bind(result, source)


@dataclass(frozen=True)
class GroupMeans:
    """One mean estimate per value of a kept column."""

    column: str
    groups: tuple[tuple[Any, MeanEstimate], ...]
    missing: int  # rows whose value was missing (in no group)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view: the column, and each group's value with its estimate."""
        return {
            "group_by": self.column,
            "groups": [{"value": value, **estimate.to_dict()} for value, estimate in self.groups],
            "missing": self.missing,
        }


def estimate_group_means(
    paths: Paths,
    column: str,
    *,
    sidecar: str | os.PathLike[str] | None = None,
    confidence: float = 0.95,
    where: Sequence[str | Condition] = (),
    verify: bool = True,
    batch_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> GroupMeans:
    """The mean, its error bars and n for each value of the kept column ``column`` (e.g. a label).

    Rows are privatized independently, so each group's estimate has the guarantees of a whole file
    with that group's n: expected_error_max / n_group.
    """
    source = scan(paths, sidecar=sidecar, verify=verify, where=where, batch_rows=batch_rows, on_rows=on_rows)
    if column not in source.sidecars[0].layout.keep:
        raise UsageError(
            f"--group-by {column!r}: not a kept column of {source.files[0]} "
            f"(kept: {', '.join(source.sidecars[0].layout.keep) or 'none'}); privatize with --keep {column}"
        )
    grouped = GroupBy(MeanEstimator(source.mechanism.d, confidence, copies=source.copies), column)
    results, _ = estimate(source, grouped)
    return GroupMeans(column, tuple((value, _bind(result, source)) for value, _, result in results), grouped.missing)


def _bind(result: MeanEstimate, source: Scan) -> MeanEstimate:
    """The estimate with the files it came from and whether they were verified."""
    return dataclasses.replace(
        result, files=source.files, sidecars=tuple(meta.path for meta in source.sidecars), verified=source.verified
    )


def save_mean(estimate: MeanEstimate, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Save the estimate by extension: ``.json`` (everything), ``.npy`` (the mean vector), or
    ``.parquet`` / ``.csv`` (one row per coordinate: mean, std_error, lower, upper). Atomic."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        atomic_write_text(path, json.dumps(estimate.to_dict(), allow_nan=False) + "\n", overwrite=overwrite)
    elif suffix == ".npy":
        buffer = io.BytesIO()
        np.save(buffer, estimate.mean)
        atomic_write_bytes(path, buffer.getvalue(), overwrite=overwrite)
    else:
        if suffix not in (".parquet", ".pq", ".csv"):
            raise UsageError(f"{path}: cannot save a mean as {suffix or 'a file without extension'}; use .json, .npy, .parquet or .csv")
        missing = np.full(estimate.d, np.nan)
        columns = {
            "coordinate": np.arange(estimate.d),
            "mean": estimate.mean,
            "std_error": missing if estimate.std_error is None else estimate.std_error,
            "lower": missing if estimate.lower is None else estimate.lower,
            "upper": missing if estimate.upper is None else estimate.upper,
        }
        atomic_write_bytes(path, table_bytes(columns, file_format(path)), overwrite=overwrite)


def save_group_means(groups: GroupMeans, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Save per-group means as ``.json`` (every group's estimate); other formats are refused. Atomic."""
    path = Path(path)
    if path.suffix.lower() != ".json":
        raise UsageError(f"{path}: per-group means are saved as .json; give -o FILE.json")
    atomic_write_text(path, json.dumps(groups.to_dict(), allow_nan=False, default=str) + "\n", overwrite=overwrite)
