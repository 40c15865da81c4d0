"""``ldp queries``: release the answers of a public workload of queries, locally or centrally.

A workload is a public file whose rows are the items of a finite universe (a key column names each
item) and whose m numeric columns are the queries' values on that item, in [0, 1] or [−1, 1]. Each
person's data is one item (the key column of the data file). The answers are the mean of the
people's answer vectors (Błasiok, Bun, Nikolov, Steinke 2019, Sec. 1.2, the "mean point problem");
the math is in :mod:`ldpcli.estimators._queries` and the projection in
:mod:`ldpcli.estimators._projection`.

Local model (each person randomizes their own answer vector):

- :func:`encode_queries` maps each row of the data to Q(x) − c, its answer vector minus the
  workload's public centroid c (a smaller norm bound: the workload's radius about c), written as one
  column per query. ``ldp privatize`` (any vector mechanism) releases that file.
- :func:`answer_queries` averages the privatized rows, adds c back and projects onto the convex
  hull of the workload's rows: every query's answer, raw and projected, with the guaranteed error
  (expected_error_max/n, which the projection cannot increase) and Thm 5.1's bound.

Central model (a curator holds the whole dataset): :func:`release_queries`, the projection
mechanism (Gaussian noise calibrated to the universe's diameter, then the projection onto its hull)
or its coarse variant (a public α-cover), ρ-zCDP, with a sidecar of its own kind
(``ldp-central-release``) that states the privacy model.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli._version import __version__
from ldpcli.errors import DataError, UsageError, counted, python_text, quoted
from ldpcli.estimators._mean import MeanEstimate, MeanEstimator
from ldpcli.estimators._projection import Hull, HullSolution
from ldpcli.estimators._queries import (
    MeanWidth,
    Workload,
    central_sigma,
    diameter,
    gaussian_epsilon,
    greedy_cover,
    local_bound,
    mean_width,
    nearest_rows,
    projection_bound,
    zcdp_epsilon,
)
from ldpcli.io import VectorLayout, file_format, open_vectors, table_bytes
from ldpcli.release._ledger import InputFingerprint, Ledger, LedgerEntry
from ldpcli.release._signing import PublicKey

#: The sidecar kind of a central release (a per-row release's is ``ldp-sidecar``).
CENTRAL_FORMAT = "ldp-central-release"
CENTRAL_VERSION = 1
#: The δ at which a zCDP release's (ε, δ) is printed unless another is asked for.
DEFAULT_DELTA = 1e-6

PathLike = str | os.PathLike[str]


# ---------------------------------------------------------------------------------------------
# Reading a workload and the data's keys
# ---------------------------------------------------------------------------------------------


def read_workload(path: PathLike, *, key: str | None = None, queries: Sequence[str] | None = None) -> Workload:
    """The workload in ``path``: keys from the column ``key`` (if given), and the query columns.

    The queries are ``queries`` (exact names, in that order) or else every numeric column but the
    key. Refuses (DataError, naming the file, row and column) an empty workload, missing or
    non-finite values, values outside [−1, 1], and duplicate keys.
    """
    label = os.fspath(path)
    with open_vectors(path, columns=list(queries) if queries is not None else None,
                      keep=[key] if key is not None else (), keep_unsafe=True, writable=False,
                      offer_no_header=False) as reader:
        values, keys = [], []
        for batch in reader:
            values.append(np.array(batch.values, dtype=np.float64))
            if key is not None and batch.keep is not None:
                keys.append(batch.keep.column(key))
        names = tuple(reader.layout.columns) if reader.layout.kind == "columns" else tuple(
            f"{reader.layout.columns[0]}[{j}]" for j in range(reader.layout.d))
    if not values or sum(v.shape[0] for v in values) == 0:
        raise DataError(f"{label}: the workload has no items (rows); it needs one row per item of the universe")
    matrix = np.concatenate(values)
    outside = (matrix < -1.0) | (matrix > 1.0)
    if outside.any():
        row, col = (int(i) for i in np.argwhere(outside)[0])
        raise DataError(
            f"{label}: row {row + 1} (counting from 1), query {names[col]!r}: value {matrix[row, col]!r} is outside "
            "[−1, 1]; query values must lie in [0, 1] (counting queries) or [−1, 1] (rescale the workload)"
        )
    key_values = None
    if key is not None:
        import pyarrow as pa

        column = pa.chunked_array(keys) if keys else pa.chunked_array([], pa.null())
        if column.null_count:
            first = int(np.flatnonzero(np.asarray(column.is_null()))[0])
            raise DataError(f"{label}: row {first + 1} (counting from 1): key column {key!r} is empty")
        key_values = np.asarray(column.to_pylist(), dtype=object)
        unique, counts = np.unique(key_values.astype(str), return_counts=True)
        if np.any(counts > 1):
            raise DataError(f"{label}: key {unique[np.argmax(counts > 1)]!r} names {counts.max()} items; "
                            f"the key column {key!r} must name each item once")
    return Workload(names, matrix, key_values, label)


def _item_index(workload: Workload, data: PathLike, key: str, batch_rows: int) -> Callable[[], Any]:
    """A generator factory over the data's rows, as indices of items of the workload, batch by batch."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    label = os.fspath(data)
    fmt = file_format(data)
    try:
        dataset = ds.dataset(os.fspath(data), format="csv" if fmt == "csv" else "parquet")
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"{label}: cannot read it ({quoted(str(exc))})") from None
    if key not in dataset.schema.names:
        raise UsageError(f"{label}: no column {key!r} (`key`); its columns: {', '.join(dataset.schema.names)}")
    assert workload.keys is not None
    key_type = dataset.schema.field(key).type
    integers = all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in workload.keys)
    as_text = not (pa.types.is_integer(key_type) and integers)
    universe = pa.array([str(k) for k in workload.keys] if as_text else [int(k) for k in workload.keys])

    def batches() -> Any:
        first = 0
        for record in dataset.to_batches(columns=[key], batch_size=batch_rows):
            column = record.column(0)
            if as_text:
                column = pc.cast(column, pa.string())
            index = pc.index_in(column, value_set=universe)
            if index.null_count:
                bad = int(np.flatnonzero(np.asarray(index.is_null()))[0])
                # The value is the data's own (private): the message says where, not what.
                what = "is empty" if column[bad].as_py() is None else f"is not an item of the workload {workload.source}"
                raise DataError(f"{label}: row {first + bad + 1} (counting from 1), column {key!r}: the value {what}")
            yield np.asarray(index, dtype=np.int64)
            first += record.num_rows

    return batches


# ---------------------------------------------------------------------------------------------
# Local: encode, then answer
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Encoded:
    """What :func:`encode_queries` wrote."""

    path: Path
    rows: int
    queries: int
    #: max ‖Q(x) − c‖₂ over the universe: the smallest ``norm_bound`` that clips no row.
    norm_bound: float
    #: Also the ℓ∞ bound max |Q(x) − c|_j, for box mechanisms.
    box_bound: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view."""
        return {"path": str(self.path), "rows": self.rows, "queries": self.queries, "norm_bound": self.norm_bound,
                "box_bound": self.box_bound}


def _bound(value: float) -> float:
    """``value`` rounded up to 7 significant digits: a public bound to print, never below ``value``."""
    if value <= 0.0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(value)) - 6)
    bound = math.ceil(value / step) * step
    while bound < value:
        bound = float(np.nextafter(bound, math.inf))
    return bound


def encode_queries(
    data: PathLike, workload: Workload, key: str, output: PathLike, *, overwrite: bool = False,
    batch_rows: int = 65536, on_rows: Callable[[int], None] | None = None,
) -> Encoded:
    """Write each data row's centred answer vector Q(x) − c (one column per query) to ``output``.

    ``workload`` must have keys. The file is as private as ``data`` (it is the data, re-expressed):
    privatize it (``privatize_file(OUTPUT, norm_bound=B)``, B = :attr:`Encoded.norm_bound`) and
    publish only the privatized file. Atomic.
    """
    from ldpcli.io import AtomicVectorWriter

    if workload.keys is None:
        raise UsageError(f"{workload.source}: the workload needs a key column (`key`) to encode data rows")
    centred = workload.values - workload.center
    layout = VectorLayout("columns", tuple(workload.names), workload.m, ())
    rows = 0
    with AtomicVectorWriter(output, layout, overwrite=overwrite) as writer:
        for index in _item_index(workload, data, key, batch_rows)():
            writer.write(centred[index])
            rows += index.size
            if on_rows is not None:
                on_rows(index.size)
        if rows == 0:
            raise DataError(f"{os.fspath(data)}: no rows to encode")
        writer.commit()
    return Encoded(Path(output), rows, workload.m, _bound(workload.radius), _bound(workload.box_radius))


@dataclass(frozen=True)
class QueryAnswers:
    """Every query's answer from a local release: raw (unbiased) and projected onto the hull."""

    names: tuple[str, ...]
    raw: np.ndarray
    projected: np.ndarray
    estimate: MeanEstimate  # of the centred vectors: its errors and intervals apply to ``raw``
    solution: HullSolution
    width: MeanWidth
    theorem_bound: float  # Thm 5.1's err² form, without its constant
    delta: float  # Δ = L/√m of 𝒳 ⊆ Δ√m·B₂^m
    warnings: tuple[str, ...] = ()

    @property
    def m(self) -> int:
        """The number of queries."""
        return len(self.names)

    @property
    def rms_error(self) -> float:
        """√(expected_error/m): the guaranteed root-mean-square error per query, raw or projected."""
        return math.sqrt(self.estimate.expected_error / self.m)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view: per query, the raw answer with its interval and the projected one."""
        est = self.estimate
        queries = []
        for j, name in enumerate(self.names):
            row: dict[str, Any] = {"query": name, "raw": float(self.raw[j]), "projected": float(self.projected[j])}
            if est.std_error is not None and est.lower is not None and est.upper is not None:
                shift = float(self.raw[j] - est.mean[j])
                row.update(std_error=float(est.std_error[j]), lower=float(est.lower[j]) + shift,
                           upper=float(est.upper[j]) + shift)
            queries.append(row)
        return {
            "queries": queries, "n": est.n, "m": self.m, "mechanism": est.mechanism, "epsilon": est.epsilon,
            "norm_bound": est.norm_bound, "copies": est.copies, "verified": est.verified, "signature": est.signature,
            "expected_error": est.expected_error, "rms_error_per_query": self.rms_error,
            "projection": {
                "set": "convex hull of the workload's distinct answer vectors", "distance_moved": float(np.linalg.norm(self.projected - self.raw)),
                "certificate_gap": self.solution.gap, "active_items": int(self.solution.indices.size),
                "note": "the guaranteed error bounds the projected answers too: the projection onto a convex set "
                        "that contains the true answers never moves them further from it (Błasiok et al. 2019, "
                        "Lemma 5.3); the standard errors and intervals are for the raw answers only",
            },
            "theorem_5_1": {
                "err2_form": self.theorem_bound, "delta": self.delta, "mean_width": self.width.to_dict(),
                "statement": "err²(𝒳, Π_LPM, n) ≲ (Δ·g(𝒳)/(ε√(nm)))^{1/2} (Thm 5.1), up to an unspecified universal "
                             "constant; err² is the RMS error per query",
            },
            "warnings": [python_text(text) for text in self.warnings],
            "files": [str(p) for p in est.files],
        }

def answer_queries(
    paths: PathLike | Sequence[PathLike], workload_path: PathLike, *, sidecar: PathLike | None = None,
    confidence: float = 0.95, verify: bool = True, on_rows: Callable[[int], None] | None = None,
    trust: PublicKey | str | None = None, on_start: Callable[[int | None], None] | None = None,
) -> QueryAnswers:
    """Every query's answer from files privatized from :func:`encode_queries`' output.

    The privatized file's columns must be the workload's query names (in order). Warns when the
    release's norm bound is below the workload's radius (rows were clipped: the estimate is then of
    the clipped vectors) or the mechanism's domain is not the ℓ2 ball. ``trust``: the data owner's
    public key; files not signed by it are refused (:func:`ldpcli.analysis._scan.scan`). ``on_start``
    gets the rows to read before the first batch (:func:`ldpcli.analysis._estimate.rows_to_read`),
    ``on_rows`` each batch's rows (progress).
    """
    from ldpcli.analysis._estimate import _bind, estimate, rows_to_read
    from ldpcli.analysis._scan import scan

    source = scan(paths, sidecar=sidecar, verify=verify, on_rows=on_rows, trust=trust)
    if on_start is not None:
        on_start(rows_to_read(source))
    layout = source.sidecars[0].layout
    names = list(layout.copy_columns(0)) if layout.kind == "columns" else None
    workload = read_workload(workload_path, queries=names)
    mech = source.mechanism
    if workload.m != mech.d:
        raise UsageError(f"{source.files[0]}: {counted(mech.d, 'privatized coordinate')} but "
                         f"{counted(workload.m, 'query', 'queries')} in "
                         f"{workload.source}; answer with the workload the data was encoded with")
    result, _ = estimate(source, MeanEstimator(mech.d, confidence, copies=source.copies))
    est = _bind(result, source)
    warnings = []
    needed = workload.radius if str(mech.domain) == "l2-ball" else workload.box_radius
    if mech.norm_bound < needed * (1.0 - 1e-9):
        warnings.append(
            f"the release's norm bound L = {mech.norm_bound:g} is below the encoded vectors' bound {needed:.7g} for "
            f"its {mech.domain}: rows beyond it were clipped, so the answers estimate the clipped vectors, not the "
            "queries (privatize again with --norm-bound at least the bound `ldp queries encode` printed)"
        )
    raw = est.mean + workload.center
    solution = workload.hull.solve(raw)
    width = workload.width
    delta = mech.norm_bound / math.sqrt(workload.m)
    bound = local_bound(delta, width.estimate, mech.epsilon * source.copies, est.n, workload.m)
    return QueryAnswers(tuple(workload.names), raw, solution.point, est, solution, width, bound, delta,
                        tuple(warnings))


# ---------------------------------------------------------------------------------------------
# Central: the projection mechanism and the coarse projection mechanism
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CentralRelease:
    """A ρ-zCDP release of every query's answer by the (coarse) projection mechanism."""

    names: tuple[str, ...]
    answers: np.ndarray  # projected
    noisy: np.ndarray  # before the projection (itself ρ-zCDP: the projection is post-processing)
    n: int
    rho: float
    delta: float
    sigma: float
    diameter: float  # of the universe (or of the cover) the noise is calibrated to
    items: int  # distinct answer vectors the release projects onto
    alpha: float | None  # the cover's α (None: the plain projection mechanism)
    width: MeanWidth
    reproducible: bool
    distinct_items: int = 0

    @property
    def m(self) -> int:
        """The number of queries."""
        return len(self.names)

    def bounds(self) -> dict[str, Any]:
        """E‖·‖² bounds on the answers' error (ℓ2², and as RMS per query), all with their constants.

        ``noisy``: mσ². ``projected``: min(mσ², σ·g(K)), plus the rounding α/2 per query with a cover
        (Thm 1.2's form): σ·g(K) is Lemma 2.2/5.3's bound (constant 1) with g's rigorous upper bound,
        and mσ² holds too, since projecting onto a convex set that holds the truth never moves the
        answers away from it (Lemma 5.3). ``projected_form``: σ·g(K) alone, and ``projected_by``
        which of the two is the smaller (``"noise"`` or ``"width"``), so a report names the bound it
        prints.
        """
        m = self.m
        noisy = m * self.sigma**2
        form = projection_bound(self.sigma, self.width.upper_bound)
        projection = min(noisy, form)
        projection_mc = min(noisy, projection_bound(self.sigma, self.width.estimate))
        rounding = 0.0 if self.alpha is None else 0.5 * self.alpha * math.sqrt(m)
        total = (math.sqrt(projection) + rounding) ** 2
        total_mc = (math.sqrt(projection_mc) + rounding) ** 2
        return {
            "noisy": noisy, "noisy_rms_per_query": math.sqrt(noisy / m),
            "projected": total, "projected_rms_per_query": math.sqrt(total / m),
            "projected_form": form, "projected_form_rms_per_query": math.sqrt(form / m),
            "projected_by": "noise" if noisy <= form else "width",
            "projected_with_estimated_width": total_mc, "projected_with_estimated_width_rms_per_query":
                math.sqrt(total_mc / m),
        }

    def privacy(self) -> dict[str, Any]:
        """ρ, and (ε, δ) by Bun–Steinke Prop. 1.3 and by the Gaussian mechanism's exact curve."""
        return {
            "model": "central", "definition": "rho-zCDP", "rho": self.rho,
            "neighbours": "datasets of the same n that differ in one person's item",
            "delta": self.delta, "epsilon_bun_steinke": zcdp_epsilon(self.rho, self.delta),
            "epsilon_exact_gaussian": gaussian_epsilon(self.rho, self.delta),
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view."""
        return {
            "queries": [{"query": q, "answer": float(a), "noisy": float(y)}
                        for q, a, y in zip(self.names, self.answers, self.noisy)],
            "n": self.n, "m": self.m, "privacy": self.privacy(), "sigma": self.sigma, "diameter": self.diameter,
            "mechanism": "coarse-projection" if self.alpha is not None else "projection",
            "alpha": self.alpha, "cover_items": self.items, "distinct_items": self.distinct_items,
            "mean_width": self.width.to_dict(), "bounds": self.bounds(), "reproducible": self.reproducible,
        }


def release_queries(
    data: PathLike, workload: Workload, key: str, *, rho: float, delta: float = DEFAULT_DELTA,
    alpha: float | None = None, seed: int | None = None, batch_rows: int = 65536,
    on_rows: Callable[[int], None] | None = None, fingerprint: InputFingerprint | None = None,
) -> CentralRelease:
    """The projection mechanism (``alpha`` None) or the coarse projection mechanism at ``alpha``.

    The curator counts each item's rows, computes the mean answer vector X̄ (of the items rounded to
    the public cover with ``alpha``), adds N(0, σ²I) with σ = diam/(n√(2ρ)) (the diameter of the
    universe, or of the cover) and projects onto the hull of the universe (or of the cover): ρ-zCDP.
    ``fingerprint`` (the ledger's, of d = the number of queries) is fed each row's answer vector.
    """
    if not (isinstance(rho, (int, float)) and math.isfinite(rho) and rho > 0):
        raise UsageError(f"`rho` must be a finite number > 0, got {rho!r}")
    if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
        raise UsageError(f"`delta` must be in (0, 1), got {delta!r}")
    if alpha is not None and not (isinstance(alpha, (int, float)) and 0.0 < alpha < math.inf):
        raise UsageError(f"`cover` must be a number > 0, got {alpha!r}")
    counts: np.ndarray = np.zeros(workload.distinct.shape[0])
    for index in _item_index(workload, data, key, batch_rows)():
        counts += np.bincount(workload.item_rows[index], minlength=counts.size)
        if fingerprint is not None:
            fingerprint.update(workload.distinct[workload.item_rows[index]])
        if on_rows is not None:
            on_rows(index.size)
    n = int(counts.sum())
    if n == 0:
        raise DataError(f"{os.fspath(data)}: no rows to release")
    points = workload.distinct
    width: MeanWidth
    if alpha is None:
        support, spread, width, hull = points, workload.diameter, workload.width, workload.hull
    else:
        cover = greedy_cover(points, float(alpha))
        support = points[cover]
        owner = nearest_rows(points, support)
        counts = np.bincount(owner, weights=counts, minlength=support.shape[0]).astype(np.float64)
        spread = diameter(support) if support.shape[0] > 1 else 0.0
        width, hull = mean_width(support), Hull(support, source=f"α = {alpha:g} cover of {workload.source}")
    mean = counts @ support / n
    sigma = central_sigma(spread, n, float(rho))
    rng = np.random.default_rng(seed)
    noisy = mean + sigma * rng.standard_normal(mean.size)
    answers = hull.project(noisy)
    return CentralRelease(tuple(workload.names), answers, noisy, n, float(rho), float(delta), sigma, spread,
                          int(support.shape[0]), None if alpha is None else float(alpha), width, seed is not None,
                          int(points.shape[0]))


def central_sidecar(release: CentralRelease, output: Path, sha256: str, workload: Workload, *,
                    created: str | None = None) -> dict[str, Any]:
    """The sidecar of a central release: public parameters and counts only (n, m, ρ, σ, the sets).
    ``created``: the release's time (default now)."""
    from ldpcli.release._sidecar import REPRODUCIBLE_NOTE, utc_now

    release_section: dict[str, Any] = {
        "created": created if created is not None else utc_now(), "reproducible": release.reproducible,
    }
    if release.reproducible:
        release_section["note"] = REPRODUCIBLE_NOTE
    info = release.to_dict()
    return {
        "format": CENTRAL_FORMAT, "version": CENTRAL_VERSION, "tool": {"name": "ldp", "version": __version__},
        "privacy": release.privacy(),
        "mechanism": {
            "name": info["mechanism"], "sigma": release.sigma, "sensitivity": release.diameter / release.n,
            "diameter": release.diameter, "alpha": release.alpha, "projected_onto": (
                f"convex hull of the public α = {release.alpha:g} cover ({release.items} items)"
                if release.alpha is not None else f"convex hull of the universe ({release.items} distinct items)"),
            "reference": "Błasiok, Bun, Nikolov, Steinke 2019, Lemma 2.2 and Sec. 4.1; noise calibrated to the "
                         "diameter (docs/errata.md §18), projection onto the public cover (§19)",
        },
        "workload": {"file": Path(workload.source).name, "items": workload.items, "distinct_items": release.distinct_items,
                     "queries": release.m},
        "data": {"file": output.name, "sha256": sha256, "format": file_format(output) if output.suffix != ".json"
                 else "json", "n": release.n},
        "bounds": release.bounds(),
        "release": release_section,
    }


def save_central_release(release: CentralRelease, workload: Workload, output: PathLike, *,
                         overwrite: bool = False, ledger: Ledger | None = None, source: PathLike | None = None,
                         fingerprint: InputFingerprint | None = None, max_budget: float | None = None) -> Path:
    """Write the answers (``.json``, ``.csv`` or ``.parquet``: query, answer, noisy) and the sidecar
    ``OUTPUT.ldp.json`` beside them, published together by the commit protocol
    (:class:`ldpcli.release._commit.Commit`). With a ``ledger`` (and the ``fingerprint`` that
    :func:`release_queries` fed from ``source``), the release is charged to that input at its exact
    (ε, δ) (the Gaussian mechanism's curve at ``release.delta``) and refused past ``max_budget``.
    Returns the sidecar's path."""
    from ldpcli.io._atomic import finished_bytes
    from ldpcli.io._publication import Publication
    from ldpcli.release._commit import Commit
    from ldpcli.release._rowindex import Charge
    from ldpcli.release._sidecar import check_replaceable, sidecar_path, sidecar_text

    path = Path(output)
    suffix = path.suffix.lower()
    if suffix == ".json":
        payload = (json.dumps(release.to_dict(), allow_nan=False) + "\n").encode()
    elif suffix in (".csv", ".parquet", ".pq"):
        payload = table_bytes({"query": np.asarray(release.names, dtype=object), "answer": release.answers,
                               "noisy": release.noisy}, file_format(path))
    else:
        raise UsageError(f"{path}: save the answers as .json, .csv or .parquet")
    side = sidecar_path(path)
    if not overwrite:
        for target in (path, side):
            if target.exists():
                raise UsageError(f"{target} exists; pass `overwrite=True` to replace it")
    else:
        check_replaceable(path, side, ledger_path=ledger.path if ledger is not None else None)
    if max_budget is not None and ledger is None:
        raise UsageError("max_budget needs the privacy-budget ledger (it counts what each input has spent)")
    charges = []
    if ledger is not None and fingerprint is not None and source is not None:
        epsilon = float(release.privacy()["epsilon_exact_gaussian"])
        charges.append(Charge(LedgerEntry(
            fingerprint=fingerprint.hexdigest(), input=str(Path(source).resolve()), rows=fingerprint.rows,
            d=fingerprint.d, columns=list(release.names), output=str(path.resolve()),
            mechanism=release.to_dict()["mechanism"], epsilon=epsilon, epsilon_exact=epsilon, delta=release.delta,
            created="", tag="", reproducible=release.reproducible,
        ), os.fspath(source)))
    publication = Publication(overwrite=overwrite, replaceable=partial(
        check_replaceable, path, side, ledger_path=ledger.path if ledger is not None else None))
    with contextlib.ExitStack() as files:
        publication.add_file(files.enter_context(finished_bytes(path, payload)))
        with Commit(publication, ledger=ledger, charges=charges, max_budget=max_budget) as commit:
            commit.reserve()
            content = central_sidecar(release, path, hashlib.sha256(payload).hexdigest(), workload,
                                      created=commit.created)
            publication.add_file(files.enter_context(finished_bytes(side, sidecar_text(content).encode())))
            commit.publish()
    return side
