"""Estimators computed from privatized rows alone: the mean, with error bars.

Each privatized row Z_i is an unbiased estimate of its input x_i (E[Z_i | x_i] = x_i), so the
plain average is an unbiased estimate of the true mean, with E‖Z̄ − x̄‖² = (1/n²)Σ E‖Z_i − x_i‖²
≤ expected_error_max / n: the guaranteed error of the mechanism, read from the sidecar.
Per-coordinate standard errors are estimated from the data (sample variance / n), and the
confidence intervals use Student's t with n − 1 degrees of freedom.

The scan is streaming: per-batch means and centred sums of squares are merged with the pairwise
update of Chan, Golub & LeVeque (1983), in float64, so memory stays flat and the sums do not
lose precision as n grows.
"""

from __future__ import annotations

import io
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from scipy import special

from ldpcli.errors import DataError, UsageError
from ldpcli.io import atomic_write_bytes, atomic_write_text, file_format, file_sha256, open_vectors, table_bytes
from ldpcli.sidecar import Sidecar, load_sidecar, sidecar_path


@dataclass
class RunningMoments:
    """Streaming mean and centred sum of squares per coordinate (Chan et al. pairwise merge)."""

    d: int
    n: int = 0
    mean: np.ndarray = field(init=False)
    m2: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.mean = np.zeros(self.d)
        self.m2 = np.zeros(self.d)

    def add(self, batch: np.ndarray) -> None:
        """Merge a (rows, d) batch into the running moments."""
        if batch.shape[0]:
            centred = batch - batch.mean(axis=0)
            self._merge(batch.shape[0], batch.mean(axis=0), np.einsum("ij,ij->j", centred, centred))

    def merge(self, other: RunningMoments) -> None:
        """Merge the moments of another part of the data (e.g. another shard)."""
        if other.n:
            self._merge(other.n, other.mean, other.m2)

    def _merge(self, nb: int, mb: np.ndarray, m2b: np.ndarray) -> None:
        total = self.n + nb
        delta = mb - self.mean
        self.mean += delta * (nb / total)
        self.m2 += m2b + delta**2 * (self.n * nb / total)
        self.n = total


@dataclass(frozen=True)
class MeanEstimate:
    """The estimated mean of the raw rows, with its guaranteed and its empirical uncertainty."""

    mean: np.ndarray
    n: int
    d: int
    expected_error: float  # E‖mean − true mean‖² ≤ expected_error_max / n (from the mechanism)
    std_error: np.ndarray | None  # per-coordinate standard errors from the data (None when n = 1)
    confidence: float
    lower: np.ndarray | None
    upper: np.ndarray | None
    mechanism: str
    epsilon: float
    files: tuple[Path, ...]
    sidecars: tuple[Path, ...]

    @property
    def rms_error(self) -> float:
        """√expected_error: the root-mean-square ℓ2 error of the mean guaranteed by the mechanism."""
        return math.sqrt(self.expected_error)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view (lists of floats)."""

        def listed(a: np.ndarray | None) -> list[float] | None:
            return None if a is None else [float(v) for v in a]

        return {
            "mean": listed(self.mean),
            "n": self.n,
            "d": self.d,
            "expected_error": self.expected_error,
            "rms_error": self.rms_error,
            "std_error": listed(self.std_error),
            "confidence": self.confidence,
            "lower": listed(self.lower),
            "upper": listed(self.upper),
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "files": [str(p) for p in self.files],
            "sidecars": [str(p) for p in self.sidecars],
        }


def estimate_mean(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    sidecar: str | os.PathLike[str] | None = None,
    confidence: float = 0.95,
    batch_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> MeanEstimate:
    """Estimate the mean of the raw rows from privatized files (one, or the shards of one job).

    Each file's sidecar is the one beside it (or ``sidecar``, for a single file). Refuses a
    sidecar whose n, d or layout do not match its data, and shards whose sidecars disagree on the
    mechanism, ε, d or parameters. ``on_rows`` is called with the rows of each batch (progress).
    """
    if not (isinstance(confidence, float | int) and 0.0 < confidence < 1.0):
        raise UsageError(f"--confidence must be in (0, 1), got {confidence!r}")
    files = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]
    if not files:
        raise UsageError("no privatized file given")
    if sidecar is not None and len(files) > 1:
        raise UsageError("--sidecar names one sidecar; with several files each needs its own .ldp.json beside it")
    seen: set[Path] = set()
    for path in files:
        key = path.resolve()
        if key in seen:
            raise UsageError(f"{path}: given twice; each shard must be counted once")
        seen.add(key)
    metas = [load_sidecar(sidecar if sidecar is not None else sidecar_path(path)) for path in files]
    first = metas[0]
    for path, meta in zip(files[1:], metas[1:]):
        if meta.mechanism != first.mechanism or (meta.layout.kind, meta.layout.columns) != (
            first.layout.kind, first.layout.columns
        ):
            raise DataError(
                f"{path}: its sidecar {meta.path} describes {_summary(meta)} but {first.path} describes "
                f"{_summary(first)}; shards of one estimate must come from one privatization"
            )
    total = RunningMoments(first.d)
    with ThreadPoolExecutor(max_workers=1) as hasher:
        for path, meta in zip(files, metas):
            digest = hasher.submit(file_sha256, path)  # overlaps with the scan below
            part = RunningMoments(meta.d)
            with open_vectors(path, layout=meta.layout, batch_rows=batch_rows, writable=False) as reader:
                for batch in reader:
                    part.add(batch.values)
                    if on_rows is not None:
                        on_rows(batch.values.shape[0])
            _check_binding(path, meta, part.n, digest.result())
            total.merge(part)
    n = total.n
    std_error = lower = upper = None
    if n > 1:
        std_error = np.sqrt(total.m2 / (n - 1) / n)
        half = float(special.stdtrit(n - 1, 0.5 + confidence / 2.0)) * std_error
        lower, upper = total.mean - half, total.mean + half
    return MeanEstimate(
        mean=total.mean, n=n, d=first.d, expected_error=first.mechanism.expected_error_mean(n),
        std_error=std_error, confidence=float(confidence), lower=lower, upper=upper,
        mechanism=first.mechanism.name, epsilon=first.mechanism.epsilon,
        files=tuple(files), sidecars=tuple(meta.path for meta in metas),
    )


def _check_binding(path: Path, meta: Sidecar, rows: int, sha256: str) -> None:
    """Refuse data that is not exactly the file the sidecar was written for."""
    if rows != meta.n:
        raise DataError(
            f"{path}: has {rows} rows but its sidecar {meta.path} says n = {meta.n}; "
            "the file was changed after privatization or the sidecar belongs to another file"
        )
    if sha256 != meta.sha256:
        written_for = meta.content.get("data_file")
        raise DataError(
            f"{path}: its bytes do not match the SHA-256 in its sidecar {meta.path} (written for {written_for!r}); "
            "the file was changed after privatization or the sidecar belongs to another file"
        )


def _summary(meta: Sidecar) -> str:
    mech = meta.mechanism
    return f"{mech.name} ({mech.calibration}) at ε = {mech.epsilon:g}, d = {mech.d}, L = {mech.norm_bound:g}"


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
