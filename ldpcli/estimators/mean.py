"""The mean of the raw rows from privatized rows, with its guaranteed and its empirical error bars.

Each privatized row Z_i is an unbiased estimate of its input x_i (E[Z_i | x_i] = x_i), so the
plain average is an unbiased estimate of the true mean, with E‖Z̄ − x̄‖² = (1/n²)Σ E‖Z_i − x_i‖²
≤ expected_error_max / n: the guaranteed error of the mechanism. Per-coordinate standard errors are
estimated from the data (sample variance / n), and the confidence intervals use Student's t with
n − 1 degrees of freedom.

Noise inflates the norm of the estimate: for rows drawn independently from a population with mean
μ, E‖Z̄‖² = ‖μ‖² + tr Cov(Z)/n, and Σ_j std_error_j² is an unbiased estimate of tr Cov(Z)/n (the
sample variance is unbiased for each coordinate). So ‖Z̄‖² − Σ_j std_error_j² is unbiased for ‖μ‖²,
and :attr:`MeanEstimate.debiased_norm` is its square root, floored at 0. (For the n rows held fixed,
it is low by (1/(n(n−1)))Σ‖x_i − x̄‖² ≤ L²/n: the spread of the rows themselves.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli.errors import UsageError, counted
from ldpcli.estimators.moments import RunningMoments
from ldpcli.math.lazy import special
from ldpcli.mechanisms.base import Mechanism


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
    files: tuple[Path, ...] = ()
    sidecars: tuple[Path, ...] = ()
    #: False when the files were read with ``verify=False`` (filtered or re-encoded after
    #: privatization): the sidecars' n and SHA-256 could not bind them to the release.
    verified: bool = True
    #: The public bound L the rows were privatized under (rows outside the domain were moved onto it).
    norm_bound: float | None = None
    #: The mechanism's domain at L, in words (``"ℓ2 ball of radius L = 1"``), or None.
    domain: str | None = None
    #: Privatized copies of each row averaged into it (``privatize --copies``): the guaranteed
    #: error is the per-copy one divided by this.
    copies: int = 1
    #: The mean projected onto a public convex set (``estimate-mean --project``), else None.
    projected: np.ndarray | None = None
    #: What it was projected onto and how far it moved (:func:`ldpcli.analysis.estimate.project_mean`).
    projection: dict[str, Any] | None = None
    #: Whether and by whom the files are signed (:func:`ldpcli.release.signing.signature_summary`); None
    #: for an estimate not made from files.
    signature: dict[str, Any] | None = None
    #: For each of ``files``, the central claim its release recorded when it was written shuffled
    #: (``privatize --shuffle``: :class:`ldpcli.release.shuffle.ShuffleClaim`, from the sidecar already
    #: read), else None; empty for an estimate not made from files. Not in :meth:`to_dict`.
    shuffled: tuple[Any, ...] = ()
    #: The files whose rows are noisier than their sidecars' mechanism allows
    #: (:class:`ldpcli.analysis.lawcheck.Dispersion`): for them the guaranteed error understates the real one.
    dispersions: tuple[Any, ...] = ()

    @property
    def mean_norm(self) -> float:
        """‖mean‖₂ of the estimate: the scale against which its error is read."""
        return float(np.linalg.norm(self.mean))

    @property
    def noise_sq(self) -> float | None:
        """Σ_j std_error_j²: the estimated E‖mean − μ‖² = tr Cov/n, by which noise inflates ‖mean‖²
        on average (None when n = 1). See the module docstring."""
        return None if self.std_error is None else float(np.sum(self.std_error**2))

    @property
    def debiased_norm(self) -> float | None:
        """√max(0, ‖mean‖² − :attr:`noise_sq`): the norm of the mean with the noise's share of
        ‖mean‖² removed (None when n = 1); 0 when noise alone accounts for ‖mean‖."""
        noise = self.noise_sq
        return None if noise is None else math.sqrt(max(0.0, self.mean_norm**2 - noise))

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
            "norm_bound": self.norm_bound,
            "mean_norm": self.mean_norm,
            "noise_sq": self.noise_sq,
            "debiased_norm": self.debiased_norm,
            "domain": self.domain,
            "files": [str(p) for p in self.files],
            "sidecars": [str(p) for p in self.sidecars],
            "verified": self.verified,
            "copies": self.copies,
            "signature": self.signature,
            "dispersion_warnings": [found.to_dict() for found in self.dispersions],
            **({} if self.projection is None else {"projected": {"mean": listed(self.projected), **self.projection}}),
        }


class MeanEstimator:
    """The :class:`~ldpcli.estimators.protocol.Estimator` of the mean: streaming moments, then t-intervals."""

    def __init__(self, d: int, confidence: float = 0.95, copies: int = 1) -> None:
        """``copies``: each row added is the average of that many independent privatized copies."""
        if not (isinstance(confidence, float | int) and 0.0 < confidence < 1.0):
            raise UsageError(f"`confidence` must be in (0, 1), got {confidence!r}")
        self.d = d
        self.confidence = float(confidence)
        self.copies = copies
        self.moments = RunningMoments(d)

    def empty(self) -> MeanEstimator:
        return MeanEstimator(self.d, self.confidence, self.copies)

    def add(self, values: np.ndarray, keep: Any | None) -> None:
        self.moments.add(values)

    def merge(self, other: MeanEstimator) -> None:
        self.moments.merge(other.moments)

    def finalize(self, mechanism: Mechanism, n: int) -> MeanEstimate:
        """The mean of the ``n`` rows added, its guaranteed error expected_error_max / n, and intervals."""
        if n != self.moments.n:
            added = "was" if self.moments.n == 1 else "were"
            raise ValueError(f"finalize for n = {counted(n, 'row')} but {self.moments.n} {added} added")
        std_error = lower = upper = None
        if n > 1:
            std_error = np.sqrt(self.moments.m2 / (n - 1) / n)
            half = float(special.stdtrit(n - 1, 0.5 + self.confidence / 2.0)) * std_error
            lower, upper = self.moments.mean - half, self.moments.mean + half
        return MeanEstimate(
            mean=self.moments.mean, n=n, d=self.d, expected_error=mechanism.expected_error_mean(n) / self.copies,
            std_error=std_error, confidence=self.confidence, lower=lower, upper=upper,
            mechanism=mechanism.name, epsilon=mechanism.epsilon, norm_bound=mechanism.norm_bound,
            domain=mechanism.domain.describe(mechanism.norm_bound), copies=self.copies,
        )
