"""Estimates from privatized files: any estimator over a verified scan, the mean, the mean per group.

:func:`estimate` is the one loop every estimator runs through: :func:`ldpcli.analysis._scan.scan` checks the
files against their sidecars and yields their rows; the estimator (:mod:`ldpcli.estimators`) adds
them and finalizes with the calibrated mechanism. :func:`estimate_file_mean` and
:func:`estimate_group_means` are the library calls behind ``ldp estimate-mean``; :func:`save_mean`
writes a mean to a file.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ldpcli.analysis._lawcheck import Dispersion
from ldpcli.analysis._scan import Condition, Scan, scan
from ldpcli.errors import DataError, UsageError
from ldpcli.estimators._mean import MeanEstimate, MeanEstimator
from ldpcli.estimators._projection import Ball, Box, ConvexSet, Hull, SetRequest, parse_set
from ldpcli.estimators._protocol import Estimator, GroupBy
from ldpcli.io import atomic_write_bytes, atomic_write_text, file_format, table_bytes
from ldpcli.mechanisms._base import Mechanism
from ldpcli.release._engines import DaskEngine, run_all
from ldpcli.release._sidecar import load_sidecar
from ldpcli.release._signing import PublicKey

R = TypeVar("R")
Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def estimate(source: Scan, estimator: Estimator[R], engine: DaskEngine | None = None) -> tuple[R, int]:
    """Feed every row of a scan to an estimator; return (its result, the rows it saw).

    The scan's verification happens as each file ends, so a result is only returned for files
    that match their sidecars (or for a scan opened with ``verify=False``). With an ``engine``
    (:mod:`ldpcli.release._engines`), each file is one task that reads, verifies and adds its rows into an
    empty copy of the estimator; only those partial states (sums and counts) come back, and they
    are merged in file order (:meth:`~ldpcli.estimators._protocol.Estimator.merge`), with each file's
    dispersion finding (:attr:`Scan.dispersions <ldpcli.analysis._scan.Scan>`).
    """
    n = 0
    if engine is None:
        for batch in source:
            if batch.values.shape[0]:
                estimator.add(batch.values, batch.keep)
                n += batch.values.shape[0]
    else:
        jobs = [_FileJob(path, meta.path, source.verified, source.where, source.combine_copies, estimator.empty(),
                         source.false_alarm) for path, meta in zip(source.files, source.sidecars)]
        for part, rows, dispersions in run_all(engine, _estimate_file, jobs):
            estimator.merge(part)
            n += rows
            source.dispersions.extend(dispersions)
    if n == 0:
        raise DataError(
            f"{source.files[0]}: no rows to estimate from"
            + (" (no row satisfies `where`)" if source.where else "")
        )
    return estimator.finalize(source.mechanism, n), n


@dataclass(frozen=True)
class _FileJob:
    """One file of a scan, as an engine task: where it is and how to read it, and an empty estimator."""

    path: Path
    sidecar: Path
    verify: bool
    where: tuple[Condition, ...]
    combine_copies: bool
    estimator: Any
    false_alarm: float


def _estimate_file(job: _FileJob) -> tuple[Any, int, list[Dispersion]]:
    """The estimator state, row count and dispersion finding of one file (runs on a worker; the file is
    verified and checked against its law there)."""
    meta = load_sidecar(job.sidecar)
    source = Scan([job.path], [meta], verify=job.verify, where=job.where, batch_rows=None, on_rows=None,
                  combine_copies=job.combine_copies, false_alarm=job.false_alarm)
    estimator, n = job.estimator, 0
    for batch in source:
        if batch.values.shape[0]:
            estimator.add(batch.values, batch.keep)
            n += batch.values.shape[0]
    return estimator, n, source.dispersions


def estimate_file_mean(
    paths: Paths,
    *,
    sidecar: str | os.PathLike[str] | None = None,
    confidence: float = 0.95,
    where: Sequence[str | Condition] = (),
    verify: bool = True,
    batch_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
    project: str | ConvexSet | None = None,
    engine: DaskEngine | None = None,
    trust: PublicKey | str | None = None,
    on_start: Callable[[int | None], None] | None = None,
) -> MeanEstimate:
    """Estimate the mean of the raw rows from privatized files (one, or the shards of one job).

    Each file's sidecar is the one beside it (or ``sidecar``, for a single file). Refuses a
    sidecar whose n, d or layout do not match its data (unless ``verify=False``), and shards whose
    sidecars disagree on the mechanism, ε, d or parameters. ``where`` keeps the rows whose kept
    columns satisfy every condition (e.g. ``"label == 3"``). ``on_rows`` is called with the rows of
    each batch (progress), after ``on_start`` with the rows to read (:func:`rows_to_read`). ``project`` (a :func:`~ldpcli.estimators._projection.parse_set` spec or a
    set) adds the mean projected onto that public convex set (:func:`project_mean`). ``engine``: one
    task per file on Dask (:func:`estimate`; no progress calls then). ``trust``: the data owner's
    public key; files not signed by it are refused (:func:`ldpcli.analysis._scan.scan`). The estimate's
    ``signature`` says whether and by whom the files are signed.
    """
    source = scan(paths, sidecar=sidecar, verify=verify, where=where, batch_rows=batch_rows, on_rows=on_rows,
                  trust=trust)
    if on_start is not None:
        on_start(rows_to_read(source))
    convex = None if project is None else projection_set(project, source.mechanism)
    result, _ = estimate(source, MeanEstimator(source.mechanism.d, confidence, copies=source.copies), engine)
    result = _bind(result, source)
    return result if convex is None else project_mean(result, convex, source.mechanism)


def rows_to_read(source: Scan) -> int | None:
    """The rows a scan will read (before ``where``): the sum of its sidecars' n, which a verified scan
    holds every file to; None when the files are not verified (they may have been filtered since)."""
    return sum(meta.n for meta in source.sidecars) if source.verified else None


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
    project: str | ConvexSet | None = None,
    engine: DaskEngine | None = None,
    trust: PublicKey | str | None = None,
    on_start: Callable[[int | None], None] | None = None,
) -> GroupMeans:
    """The mean, its error bars and n for each value of the kept column ``column`` (e.g. a label).

    Rows are privatized independently, so each group's estimate has the guarantees of a whole file
    with that group's n: expected_error_max / n_group. ``on_start``, ``engine`` and ``trust`` as for
    :func:`estimate_file_mean`.
    """
    source = scan(paths, sidecar=sidecar, verify=verify, where=where, batch_rows=batch_rows, on_rows=on_rows,
                  trust=trust)
    if on_start is not None:
        on_start(rows_to_read(source))
    convex = None if project is None else projection_set(project, source.mechanism)
    if column not in source.sidecars[0].layout.keep:
        raise UsageError(
            f"`group_by` {column!r}: not a kept column of {source.files[0]} "
            f"(kept: {', '.join(source.sidecars[0].layout.keep) or 'none'}); privatize with `keep` {column}"
        )
    grouped = GroupBy(MeanEstimator(source.mechanism.d, confidence, copies=source.copies), column)
    results, _ = estimate(source, grouped, engine)
    bound = [_bind(result, source) for _, _, result in results]
    if convex is not None:
        bound = [project_mean(result, convex, source.mechanism) for result in bound]
    return GroupMeans(column, tuple((value, result) for (value, _, _), result in zip(results, bound)), grouped.missing)


def projection_set(spec: str | ConvexSet, mechanism: Mechanism) -> ConvexSet:
    """The public convex set of ``project`` (a mean estimate's) for a release by ``mechanism``.

    ``ball`` and ``box`` without a size take the release's L; ``domain`` is the mechanism's own
    domain at L (the ℓ2 ball or the ℓ∞ box, [0, L] for a scalar mechanism); ``hull:FILE`` is the
    convex hull of the rows of a public file (its numeric columns, or its list column).
    """
    try:
        found = parse_set(spec) if isinstance(spec, str) else spec
    except ValueError as exc:
        raise UsageError(f"`project` {spec}: {exc}") from None
    if isinstance(found, SetRequest):
        bound = mechanism.norm_bound
        kind = found.kind
        if kind == "domain":
            kind = {"l2-ball": "ball", "linf-box": "box", "interval": "interval"}[str(mechanism.domain)]
        if kind == "ball":
            found = Ball(bound)
        elif kind == "box":
            found = Box(-bound, bound)
        elif kind == "interval":
            found = Box(0.0, bound)
        else:
            assert found.path is not None
            found = Hull(_read_points(found.path), source=found.path)
    try:
        found.check_dimension(mechanism.d)
    except ValueError as exc:
        raise UsageError(f"`project`: {exc}") from None
    return found


def _read_points(path: str) -> np.ndarray:
    """Every row of a public file of vectors (the points of ``hull:FILE``), as one array."""
    from ldpcli.io import open_vectors

    with open_vectors(path, writable=False, offer_no_header=False) as reader:
        rows = [np.array(batch.values, dtype=np.float64) for batch in reader]
    points = np.concatenate(rows) if rows else np.empty((0, 0))
    if points.shape[0] == 0:
        raise DataError(f"{path}: no rows; `project` hull:FILE needs at least one point")
    return points


def contains_domain(convex: ConvexSet, mechanism: Mechanism) -> bool:
    """Whether ``convex`` contains the mechanism's whole domain (so certainly the true mean).

    ℓ2 ball of radius L: inside a ball of radius R ≥ L and inside a box [lo, hi] with lo ≤ −L ≤ L ≤ hi.
    ℓ∞ box [−L, L]^d: inside a ball of radius ≥ L√d and a box that contains [−L, L]. The interval
    [0, L]: inside a box containing it, a ball of radius ≥ L, the non-negative orthant. Otherwise
    (the simplex, a hull) the set holds the truth only by the user's claim about the data.
    """
    bound, d, domain = mechanism.norm_bound, mechanism.d, str(mechanism.domain)
    low = {"l2-ball": -bound, "linf-box": -bound, "interval": 0.0}[domain]
    if isinstance(convex, Box):
        return convex.low <= low and convex.high >= bound
    if isinstance(convex, Ball):
        return convex.radius >= bound * (math.sqrt(d) if domain == "linf-box" else 1.0)
    return domain == "interval" and convex.name == "nonneg"


def project_mean(estimate: MeanEstimate, convex: ConvexSet, mechanism: Mechanism) -> MeanEstimate:
    """The estimate with its mean projected onto ``convex`` (Błasiok et al. 2019, Lemma 5.3).

    If the true mean lies in the closed convex set, the projection is never further from it than
    the raw mean, so ``expected_error`` (expected_error_max/n) bounds the projected mean too; the
    per-coordinate standard errors and intervals are the raw mean's only. ``projection`` says so,
    with the set, the distance moved and whether the set contains the mechanism's domain (if not,
    that the truth lies in it is the user's claim about the data).
    """
    solution = convex.solve(estimate.mean) if isinstance(convex, Hull) else None
    projected = convex.project(estimate.mean) if solution is None else solution.point
    inside = contains_domain(convex, mechanism)
    projection = {
        "set": convex.to_dict(),
        "description": convex.describe(),
        "distance_moved": float(np.linalg.norm(projected - estimate.mean)),
        "contains_domain": inside,
        "note": "expected_error bounds the projected mean too when the true mean lies in the set (projection onto a "
                "closed convex set never moves a point away from any point of it: Błasiok et al. 2019, Lemma 5.3); "
                "std_error, lower and upper are for the raw mean only"
                + ("" if inside else "; this set does not contain the mechanism's domain, so that the true mean lies "
                   "in it is a claim about the data"),
    }
    if solution is not None:
        projection["certificate_gap"] = solution.gap
        projection["active_points"] = int(solution.indices.size)
    return dataclasses.replace(estimate, projected=projected, projection=projection)


def _bind(result: MeanEstimate, source: Scan) -> MeanEstimate:
    """The estimate with the files it came from, whether they were verified, who signed them, the shuffle
    claim each one's sidecar records (from the sidecars the scan read: none is read again) and the files
    whose rows are noisier than their sidecars allow (:mod:`ldpcli.analysis._lawcheck`). Rows decoded from
    seed reports have their own exact error (:meth:`ldpcli.mechanisms.SeedReports.expected_error_mean`)."""
    reports = source.sidecars[0].reports
    error = result.expected_error if reports is None else reports.expected_error_mean(result.n) / result.copies
    return dataclasses.replace(
        result, expected_error=error, files=source.files, sidecars=tuple(meta.path for meta in source.sidecars), verified=source.verified,
        signature=source.signature_summary(), shuffled=tuple(meta.shuffled for meta in source.sidecars),
        dispersions=tuple(source.dispersions),
    )


def save_mean(estimate: MeanEstimate, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Save the estimate by extension: ``.json`` (everything), ``.npy`` (the mean vector: the
    projected one with ``project``), or ``.parquet`` / ``.csv`` (one row per coordinate: mean,
    std_error, lower, upper, and projected with ``project``). Atomic."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        atomic_write_text(path, json.dumps(estimate.to_dict(), allow_nan=False) + "\n", overwrite=overwrite)
    elif suffix == ".npy":
        buffer = io.BytesIO()
        np.save(buffer, estimate.mean if estimate.projected is None else estimate.projected)
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
            **({} if estimate.projected is None else {"projected": estimate.projected}),
        }
        atomic_write_bytes(path, table_bytes(columns, file_format(path)), overwrite=overwrite)


def save_group_means(groups: GroupMeans, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Save per-group means as ``.json`` (every group's estimate); other formats are refused. Atomic."""
    path = Path(path)
    if path.suffix.lower() != ".json":
        raise UsageError(f"{path}: per-group means are saved as .json; give -o FILE.json")
    atomic_write_text(path, json.dumps(groups.to_dict(), allow_nan=False, default=str) + "\n", overwrite=overwrite)
