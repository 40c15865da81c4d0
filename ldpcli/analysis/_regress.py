"""Least squares from a release of two private copies of each row: the library call behind ``ldp regress``.

Aliakbarpour et al. 2024, Algorithm 3: each row x = [z, l] is privatized twice independently
(``ReleaseOptions(copies=2)``, any vector mechanism; with ``bcdp`` each copy gets c/2), and the
analyst minimises the unbiased quadratic f̂(θ) = ½θᵀAθ − bᵀθ built from products of the two copies
(:mod:`ldpcli.estimators._regression`) over the ball ‖θ‖ ≤ R, exactly. The rows are read once,
batch by batch, through the verified scan (:func:`ldpcli.analysis._scan.scan`), so memory stays flat and only
the bytes the sidecar binds are used.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli.analysis._scan import Condition, scan
from ldpcli.errors import DataError, UsageError, counted
from ldpcli.estimators._regression import RegressionFit, RegressionMoments, Theorem3Rate, fit, theorem3_rate
from ldpcli.io import VectorLayout, atomic_write_bytes, atomic_write_text, file_format, table_bytes
from ldpcli.mechanisms._composition import release_cost
from ldpcli.release._signing import PublicKey

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


@dataclass(frozen=True)
class RegressionResult:
    """θ̂ over the named features, the fit's diagnostics and Thm 3's rate."""

    features: tuple[str, ...]
    label: str
    fit: RegressionFit
    rate: Theorem3Rate
    mechanism: str
    epsilon_total: float
    per_copy_error: float
    files: tuple[Path, ...]
    verified: bool
    #: Whether and by whom the files are signed (:func:`ldpcli.release._signing.signature_summary`).
    signature: dict[str, Any] | None = None

    @property
    def intercept_note(self) -> str:
        return "no intercept: add a constant feature column before privatizing to fit one"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view: coefficients by feature, objective, diagnostics and the rate."""
        fit_ = self.fit
        return {
            "label": self.label,
            "features": list(self.features),
            "coefficients": {name: float(v) for name, v in zip(self.features, fit_.theta)},
            "theta": [float(v) for v in fit_.theta],
            "objective": fit_.objective,
            "objective_note": "f̂(θ̂) = (1/2n)Σ(θᵀz − l)² estimated without bias from the two copies (it can be negative)",
            "n": fit_.n,
            "radius": fit_.radius,
            "on_boundary": fit_.on_boundary,
            "multiplier": fit_.multiplier,
            "indefinite": fit_.indefinite,
            "hard_case": fit_.hard_case,
            "mechanism": self.mechanism,
            "epsilon_total": self.epsilon_total,
            "per_copy_error": self.per_copy_error,
            "theorem3": {"rate": self.rate.rate, "constant_stated": self.rate.constant_stated,
                         "statement": self.rate.statement},
            "intercept": self.intercept_note,
            "files": [str(path) for path in self.files],
            "verified": self.verified,
            "signature": self.signature,
        }


def _label_index(layout: VectorLayout, label: str, where: Path) -> tuple[int, tuple[str, ...]]:
    """The label's coordinate in a copy and the features' names, from ``label``.

    A column name of the (first copy's) vector columns, or a 0-based coordinate (negative counts
    from the end) for a list column.
    """
    d = layout.d
    names = layout.copy_columns(0)
    if layout.kind == "columns":
        coordinates = list(names)
        if label in coordinates:
            index = coordinates.index(label)
            return index, tuple(name for j, name in enumerate(coordinates) if j != index)
    else:
        coordinates = [f"{names[0]}[{j}]" for j in range(d)]
    try:
        index = int(label)
    except ValueError:
        kept = f"; {label!r} is a kept column, released unprivatized, and cannot be the label" if label in layout.keep else ""
        shown = ", ".join(repr(name) for name in coordinates[:8]) + (", …" if d > 8 else "")
        raise UsageError(
            f"{where}: `label` {label!r} is not one of the privatized coordinates ({shown}){kept}; "
            "give a column name, or a 0-based coordinate such as -1 for the last"
        ) from None
    if not -d <= index < d:
        raise UsageError(f"{where}: `label` {index} is outside the {counted(d, 'coordinate')} "
                         f"(0..{d - 1}, or -1 for the last)")
    index %= d
    return index, tuple(name for j, name in enumerate(coordinates) if j != index)


def regress(
    paths: Paths,
    *,
    label: str,
    radius: float | None = None,
    sidecar: str | os.PathLike[str] | None = None,
    where: Sequence[str | Condition] = (),
    verify: bool = True,
    batch_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
    trust: PublicKey | str | None = None,
) -> RegressionResult:
    """Fit least squares over the ball ‖θ‖ ≤ ``radius`` from a release of two copies of each row.

    ``label`` names the coordinate that is the label (the features are the others, in order).
    ``radius`` defaults to √p (p features): the ball holds every θ with all |θ_j| ≤ 1. The release
    must hold two or more copies of each row (``ReleaseOptions(copies=2)``): the first two are
    used. Thm 3's rate uses r² = the per-copy worst-case error (Lemma 1, Eq. (85)). ``trust``: the
    data owner's public key; files not signed by it are refused (:func:`ldpcli.analysis._scan.scan`).
    """
    source = scan(paths, sidecar=sidecar, verify=verify, where=where, batch_rows=batch_rows, on_rows=on_rows,
                  combine_copies=False, trust=trust)
    meta, mech = source.sidecars[0], source.mechanism
    if source.copies < 2:
        raise UsageError(
            f"{source.files[0]}: regression needs two independent privatized copies of each row, and this release "
            "has one; privatize again with `copies` 2 (each copy then gets half the privacy budget)"
        )
    if mech.d < 2:
        raise UsageError(f"{source.files[0]}: regression needs at least one feature besides the label (d = {mech.d})")
    index, features = _label_index(meta.layout, label, source.files[0])
    p = mech.d - 1
    if radius is None:
        radius = math.sqrt(p)
    if not (isinstance(radius, (int, float)) and math.isfinite(radius) and radius > 0):
        raise UsageError(f"`radius` must be a finite number > 0, got {radius!r}")
    d = mech.d
    moments = RegressionMoments(label_index=index)
    for batch in source:
        if batch.values.shape[0]:
            moments.add_pair(batch.values[:, :d], batch.values[:, d: 2 * d])
    if moments.n == 0:
        raise DataError(f"{source.files[0]}: no rows to fit" + (" (no row satisfies `where`)" if source.where else ""))
    result = fit(moments, float(radius))
    rate = theorem3_rate(n=moments.n, d=d, r_squared=mech.expected_error_max, theta_radius=float(radius))
    label_name = meta.layout.copy_columns(0)[index] if meta.layout.kind == "columns" else str(index)
    return RegressionResult(
        features=features, label=label_name, fit=result, rate=rate, mechanism=mech.name,
        epsilon_total=release_cost(mech, copies=source.copies).epsilon_exact, per_copy_error=mech.expected_error_max,
        files=source.files, verified=source.verified, signature=source.signature_summary(),
    )


def save_coefficients(result: RegressionResult, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
    """Save θ̂: ``.json`` (everything), or ``.csv`` / ``.parquet`` (one row per feature). Atomic."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        atomic_write_text(path, json.dumps(result.to_dict(), allow_nan=False) + "\n", overwrite=overwrite)
        return
    if path.suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise UsageError(f"{path}: coefficients are saved as .json, .csv or .parquet")
    columns = {"feature": np.array(result.features, dtype=object), "coefficient": np.asarray(result.fit.theta)}
    atomic_write_bytes(path, table_bytes(columns, file_format(path)), overwrite=overwrite)
