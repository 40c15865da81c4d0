"""The mean of the raw rows from privatized rows, with its guaranteed and its empirical error bars.

Each privatized row Z_i is an unbiased estimate of its input x_i (E[Z_i | x_i] = x_i), so the
plain average is an unbiased estimate of the true mean, with E‖Z̄ − x̄‖² = (1/n²)Σ E‖Z_i − x_i‖²
≤ expected_error_max / n: the guaranteed error of the mechanism. Per-coordinate standard errors are
estimated from the data (sample variance / n), and the confidence intervals use Student's t with
n − 1 degrees of freedom.

Those intervals are **per coordinate**: each holds its coordinate with probability about
``confidence``, but all d at once far less often (about confidence^d for independent coordinates:
0.44 for d = 16 at 95%). Two joint regions hold the whole mean vector at once (:attr:`MeanEstimate.joint`):

- **Bonferroni** intervals: each coordinate's t-interval at level 1 − (1 − confidence)/d, so by the
  union bound all d hold at once with probability ≥ ``confidence`` (as far as each t-interval has its
  nominal level: the central limit theorem, as for the per-coordinate ones).
- an **ℓ2 ball** around the mean of radius r = √(expected_error / (1 − confidence)): by Markov's
  inequality on ‖Z̄ − x̄‖², whose expectation the mechanism bounds by expected_error for every input,
  P(‖Z̄ − x̄‖ ≥ r) ≤ expected_error / r² = 1 − confidence. Exact for every n (no limit theorem, no
  estimate from the data), so it holds even for one row, and conservative (r is 1/√(1 − confidence),
  4.5 at 95%, times the RMS error).

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
from ldpcli.estimators._moments import RunningMoments
from ldpcli.math._lazy import special
from ldpcli.mechanisms._base import Mechanism


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
    #: Privatized copies of each row averaged into it (``ReleaseOptions.copies``): the guaranteed
    #: error is the per-copy one divided by this.
    copies: int = 1
    #: The mean projected onto a public convex set (``project``), else None.
    projected: np.ndarray | None = None
    #: What it was projected onto and how far it moved (:func:`ldpcli.analysis._estimate.project_mean`).
    projection: dict[str, Any] | None = None
    #: Whether and by whom the files are signed (:func:`ldpcli.release._signing.signature_summary`); None
    #: for an estimate not made from files.
    signature: dict[str, Any] | None = None
    #: For each of ``files``, the central claim its release recorded when it was written shuffled
    #: (``ReleaseOptions.shuffle``: :class:`ldpcli.release._shuffle_claim.ShuffleClaim`, from the sidecar already
    #: read), else None; empty for an estimate not made from files. Not in :meth:`to_dict`.
    shuffled: tuple[Any, ...] = ()
    #: The files whose rows are noisier than their sidecars' mechanism allows
    #: (:class:`ldpcli.analysis._lawcheck.Dispersion`): for them the guaranteed error understates the real one.
    dispersions: tuple[Any, ...] = ()
    #: Bonferroni intervals (each at level 1 − (1 − confidence)/d): all d coordinates at once with probability
    #: ≥ confidence (None when n = 1). See the module docstring.
    joint_lower: np.ndarray | None = None
    joint_upper: np.ndarray | None = None

    @property
    def ball_radius(self) -> float:
        """r = √(expected_error / (1 − confidence)): the ℓ2 ball of radius r around the mean holds the true
        mean with probability ≥ confidence, for every n (Markov's inequality on ‖mean − true mean‖²)."""
        return math.sqrt(self.expected_error / (1.0 - self.confidence))

    @property
    def joint(self) -> dict[str, Any]:
        """The joint confidence regions of the whole mean vector (module docstring), JSON-able."""

        def listed(a: np.ndarray | None) -> list[float] | None:
            return None if a is None else [float(v) for v in a]

        return {
            "confidence": self.confidence,
            "bonferroni": {"lower": listed(self.joint_lower), "upper": listed(self.joint_upper),
                           "per_coordinate_level": 1.0 - (1.0 - self.confidence) / self.d,
                           "note": "every coordinate at once with probability ≥ confidence: each t-interval at level "
                                   "1 − (1 − confidence)/d, and the union bound over the d coordinates"},
            "l2_ball": {"radius": self.ball_radius,
                        "note": "‖mean − true mean‖ ≤ radius with probability ≥ confidence, for every n: Markov's "
                                "inequality on ‖mean − true mean‖², whose expectation is at most expected_error"},
        }

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
            "intervals": "per coordinate: each of lower/upper holds its coordinate with probability about confidence, "
                         "not all at once; joint holds the whole vector",
            "joint": self.joint,
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
    """The :class:`~ldpcli.estimators._protocol.Estimator` of the mean: streaming moments, then t-intervals."""

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
        std_error = lower = upper = joint_lower = joint_upper = None
        if n > 1:
            std_error = np.sqrt(self.moments.m2 / (n - 1) / n)
            half = float(special.stdtrit(n - 1, 0.5 + self.confidence / 2.0)) * std_error
            lower, upper = self.moments.mean - half, self.moments.mean + half
            joint = float(special.stdtrit(n - 1, 1.0 - (1.0 - self.confidence) / (2.0 * self.d))) * std_error
            joint_lower, joint_upper = self.moments.mean - joint, self.moments.mean + joint
        return MeanEstimate(
            mean=self.moments.mean, n=n, d=self.d, expected_error=mechanism.expected_error_mean(n) / self.copies,
            std_error=std_error, confidence=self.confidence, lower=lower, upper=upper,
            mechanism=mechanism.name, epsilon=mechanism.epsilon, norm_bound=mechanism.norm_bound,
            domain=mechanism.domain.describe(mechanism.norm_bound), copies=self.copies,
            joint_lower=joint_lower, joint_upper=joint_upper,
        )
