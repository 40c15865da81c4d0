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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy import special

from ldpcli.errors import DataError, UsageError
from ldpcli.io import atomic_write_bytes, atomic_write_text, file_format, open_vectors, table_bytes
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
        nb = batch.shape[0]
        if nb == 0:
            return
        mb = batch.mean(axis=0)
        m2b = np.einsum("ij,ij->j", batch - mb, batch - mb)
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
    sidecar: Path

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
            "sidecar": str(self.sidecar),
        }


def estimate_mean(
    path: str | os.PathLike[str],
    *,
    sidecar: str | os.PathLike[str] | None = None,
    confidence: float = 0.95,
    batch_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> MeanEstimate:
    """Estimate the mean of the raw rows from a privatized file and its sidecar.

    The sidecar defaults to the one beside ``path``. Refuses a sidecar whose n, d or layout do not
    match the data. ``on_rows`` is called with the number of rows of each batch (progress).
    """
    if not (isinstance(confidence, float | int) and 0.0 < confidence < 1.0):
        raise UsageError(f"confidence must be in (0, 1), got {confidence!r}")
    path = Path(path)
    meta: Sidecar = load_sidecar(sidecar if sidecar is not None else sidecar_path(path))
    moments = RunningMoments(meta.d)
    with open_vectors(path, layout=meta.layout, batch_rows=batch_rows) as reader:
        for batch in reader:
            moments.add(batch.values)
            if on_rows is not None:
                on_rows(batch.values.shape[0])
    if moments.n != meta.n:
        raise DataError(
            f"{path}: has {moments.n} rows but its sidecar {meta.path} says n = {meta.n}; "
            "the file was changed after privatization or the sidecar belongs to another file"
        )
    n = moments.n
    std_error = lower = upper = None
    if n > 1:
        std_error = np.sqrt(moments.m2 / (n - 1) / n)
        half = float(special.stdtrit(n - 1, 0.5 + confidence / 2.0)) * std_error
        lower, upper = moments.mean - half, moments.mean + half
    return MeanEstimate(
        mean=moments.mean, n=n, d=meta.d, expected_error=meta.mechanism.expected_error_mean(n),
        std_error=std_error, confidence=float(confidence), lower=lower, upper=upper,
        mechanism=meta.mechanism.name, epsilon=meta.mechanism.epsilon, sidecar=meta.path,
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
