"""A model update privatized as one row, and the unbiased mean of privatized updates.

:func:`privatize_update` takes an update as a framework holds it (:mod:`ldpcli.integrations._update_tree`:
Flower's list of numpy arrays, a PyTorch ``state_dict`` or list of tensors on their device, a JAX
pytree), flattens it once into one vector u of d values, clips it in ℓ2 to the public bound L
(u ← u·L/‖u‖ when ‖u‖ > L), privatizes that one row with a registered mechanism through the array path
of ``ldpcli.privatize`` (:func:`ldpcli.release._arrays.privatize_rows`; on the arrays' device where
the mechanism has a device sampler), and puts the result back in the same structure, shapes, dtypes
and device. The privatized update Z is unbiased for the clipped one: E[Z | u] = u·min(1, L/‖u‖)
(Bhowmick, Duchi, Freudiger, Kapoor & Rogers 2018, PrivUnit2, Alg. 1 and Thm 1; every vector mechanism
of the registry is unbiased on its domain).

:func:`aggregate_updates` is the server's side: the weighted mean Σ wᵢZᵢ / Σ wᵢ of n privatized updates
with public weights (a count of examples the client reports), unbiased for Σ wᵢuᵢ / Σ wᵢ, with the
mechanism's guaranteed error E‖mean − true mean‖² ≤ (Σ wᵢ² / (Σ wᵢ)²)·sup E‖Z − u‖² (independent reports;
equal weights give the ``expected_error_max / n`` of :class:`~ldpcli.estimators._mean.MeanEstimator`) and
the per-coordinate error bars of that estimator, which it reuses on the rows n·wᵢZᵢ / Σ wᵢ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.estimators._mean import MeanEstimate, MeanEstimator
from ldpcli.integrations._update_tree import UpdateLayout, flatten_update
from ldpcli.math._devices import host_copy
from ldpcli.mechanisms import Mechanism, MechanismSpec


@dataclass(frozen=True)
class UpdateRecord:
    """What :func:`privatize_update` did to one update.

    ``mechanism`` (the calibrated one: its ``spec``, exact ε ``epsilon_exact``, expected errors), ``d``
    (the values of the update), ``generator`` (which generator drew the noise) and ``reproducible``
    (True for an int seed) are public: :meth:`to_dict` holds them, and a client may send them.

    ``clipped`` and ``clip_factor`` (L/‖u‖ when clipped, else 1.0) are functions of the raw update —
    the factor gives its norm ‖u‖ = L/factor exactly, and even the flag says whether ‖u‖ > L — so they
    are the client's local record only: left out of :meth:`to_dict` and of comparisons, never to be sent
    (a Flower client mod logs nothing of them and puts neither into a reply).
    """

    mechanism: Mechanism
    d: int
    generator: str | None
    reproducible: bool | None
    clipped: bool = dataclasses.field(default=False, compare=False, repr=False)
    clip_factor: float = dataclasses.field(default=1.0, compare=False, repr=False)

    @property
    def epsilon(self) -> float:
        """The exact ε of the release (``mechanism.epsilon_exact``: at most the ε asked)."""
        return float(self.mechanism.epsilon_exact)

    def to_dict(self) -> dict[str, Any]:
        """The public part as a JSON-able dict (no clip flag, no clip factor)."""
        return {"mechanism": self.mechanism.spec.to_dict(), "epsilon_exact": self.epsilon, "d": self.d,
                "expected_error_max": float(self.mechanism.expected_error_max), "generator": self.generator,
                "reproducible": self.reproducible}


def checked_spec(mechanism: str, epsilon: float, norm_bound: float, options: dict[str, Any]) -> MechanismSpec:
    """The validated public spec; ValueError (in Python words) for a bad one."""
    from ldpcli.release._arrays import _python_errors

    with _python_errors():
        return MechanismSpec(mechanism, epsilon, None, norm_bound, options).validated()


def update_mechanism(d: int, *, mechanism: str, epsilon: float, norm_bound: float, **options: Any) -> Mechanism:
    """The calibrated mechanism for updates of d values: ValueError (in Python words) for a bad spec."""
    from ldpcli.release._arrays import _python_errors

    spec = checked_spec(mechanism, epsilon, norm_bound, options)
    with _python_errors():
        return spec.calibrate(d)


def privatize_update(
    update: Any,
    *,
    mechanism: str = "privunit2",
    epsilon: float,
    norm_bound: float,
    rng: np.random.Generator | int | None = None,
    **options: Any,
) -> tuple[Any, UpdateRecord]:
    """Privatize a model update under ε-LDP as one vector; ``(privatized update, record)``.

    Parameters
    ----------
    update : list, tuple, dict or JAX pytree of arrays
        The update (or any vector-valued report) as the framework holds it: numpy arrays, or tensors
        of one library on one device (kept there). Every array must be floating point and finite.
    mechanism : str
        A registered vector mechanism (``ldpcli.mechanisms.mechanism_names()``); PrivUnit2 by default.
    epsilon : float
        The privacy level ε of this one release (rounds compose: see the ledgers).
    norm_bound : float
        The public ℓ2 bound L the update is clipped to.
    rng : numpy.random.Generator, ldpcli.math.CounterGenerator, int or None
        None (the default): ldp's ChaCha20 stream keyed from the OS; an int seed only for simulations.
    **options
        The mechanism's own options.

    Returns
    -------
    tuple
        The privatized update (same structure, shapes, dtypes and device; each array rounded to its dtype)
        and its :class:`UpdateRecord`.

    References
    ----------
    Bhowmick et al. (2018), "Protection against reconstruction and its applications in private federated
    learning", Alg. 1 (PrivUnit2) and Sec. 4: the clipped update privatized as one vector.
    """
    from ldpcli.release._arrays import privatize_rows

    vector, layout = flatten_update(update)
    mech = update_mechanism(layout.d, mechanism=mechanism, epsilon=epsilon, norm_bound=norm_bound, **options)
    clipped, factor, vector = _clip(vector, layout, float(mech.norm_bound))
    row = vector[None, :] if layout.xp is None or _on_device(mech) else host_copy(vector)[None, :]
    privatized, record = privatize_rows(row, epsilon=epsilon, mechanism=mechanism, norm_bound=norm_bound, rng=rng,
                                        **options)
    out = privatized[0]
    if layout.xp is not None and isinstance(out, np.ndarray):  # a host-only mechanism: back onto the device
        out = layout.xp.asarray(out, device=layout.device)
    return layout.unflatten(out), UpdateRecord(record.mechanism, layout.d, record.generator, record.reproducible,
                                               clipped, factor)


def _on_device(mech: Mechanism) -> bool:
    """Whether ``mech`` samples on a device (a rounded-cap sampler: PrivUnit2 and its kin); else the row
    goes through the host and its result back."""
    from ldpcli.mechanisms._hooks import rounded_cap

    try:
        rounded_cap(mech)
    except NotImplementedError:
        return False
    return True


def _clip(vector: Any, layout: UpdateLayout, bound: float) -> tuple[bool, float, Any]:
    """(whether ‖u‖ > L, the factor L/‖u‖ or 1.0, the clipped vector): the ℓ2 clip of every vector mechanism's
    domain (an ℓ∞ box of half-width L holds the ℓ2 ball of radius L)."""
    xp = layout.xp
    norm = float(np.linalg.norm(vector)) if xp is None else float(xp.linalg.vector_norm(vector))
    if norm <= bound:
        return False, 1.0, vector
    factor = bound / norm
    return True, factor, vector * factor


@dataclass(frozen=True)
class AggregateUpdate:
    """The weighted mean of privatized updates, in the updates' structure, with its error bars.

    ``mean``, ``std_error``, ``lower`` and ``upper`` are in the updates' structure (the last three None for
    one update); ``estimate`` is the flat :class:`~ldpcli.estimators._mean.MeanEstimate` (its
    ``expected_error`` the guaranteed E‖mean − true mean‖², ``rms_error``, ``ball_radius`` and ``joint``
    regions); ``effective_n`` is (Σ wᵢ)² / Σ wᵢ² (n for equal weights).
    """

    mean: Any
    std_error: Any
    lower: Any
    upper: Any
    estimate: MeanEstimate
    effective_n: float

    @property
    def expected_error(self) -> float:
        """The guaranteed E‖mean − true weighted mean‖² (ℓ2, over the whole update)."""
        return self.estimate.expected_error


def aggregate_updates(
    updates: Sequence[Any],
    weights: Sequence[float] | None = None,
    *,
    mechanism: str = "privunit2",
    epsilon: float,
    norm_bound: float,
    confidence: float = 0.95,
    **options: Any,
) -> AggregateUpdate:
    """The unbiased weighted mean of privatized updates, with per-coordinate and ℓ2 error bars.

    Parameters
    ----------
    updates : sequence
        The privatized updates (:func:`privatize_update`'s outputs), all of one structure.
    weights : sequence of float or None
        Public non-negative weights (a client's number of examples), not all zero; None: equal weights.
    mechanism, epsilon, norm_bound, **options
        The public spec the updates were privatized under (for the guaranteed error).
    confidence : float
        The level of the intervals.

    Returns
    -------
    AggregateUpdate
        The mean in the updates' structure (dtypes and device of the first), and its error bars.
    """
    if len(updates) == 0:
        raise ValueError("updates is empty: aggregate at least one privatized update")
    rows, layout = _stacked(updates)
    n = rows.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(f"weights must be {n} finite non-negative numbers, not all zero (one per update)")
    share = w / w.sum()
    mech = update_mechanism(layout.d, mechanism=mechanism, epsilon=epsilon, norm_bound=norm_bound, **options)
    estimator = MeanEstimator(layout.d, confidence)
    estimator.add(rows * (n * share)[:, None], None)
    estimate = estimator.finalize(mech, n)
    concentration = float(np.sum(share**2))
    estimate = dataclasses.replace(estimate, expected_error=mech.expected_error_max * concentration)
    back = (layout.unflatten if layout.xp is None
            else lambda v: layout.unflatten(layout.xp.asarray(v, device=layout.device)))
    return AggregateUpdate(
        mean=back(estimate.mean), std_error=None if estimate.std_error is None else back(estimate.std_error),
        lower=None if estimate.lower is None else back(estimate.lower),
        upper=None if estimate.upper is None else back(estimate.upper),
        estimate=estimate, effective_n=1.0 / concentration,
    )


def _stacked(updates: Sequence[Any]) -> tuple[np.ndarray, UpdateLayout]:
    """The updates' flat vectors as (n, d) float64 rows on the host, and the first one's layout; ValueError
    for an update whose arrays differ from the first's."""
    rows, first = [], None
    for i, update in enumerate(updates):
        vector, layout = flatten_update(update, f"updates[{i}]")
        if first is None:
            first = layout
        elif layout.shapes != first.shapes or len(layout.names) != len(first.names):
            raise ValueError(f"updates[{i}] has other arrays than updates[0] (shapes {layout.shapes[:3]}… against "
                             f"{first.shapes[:3]}…): aggregate updates of one model")
        rows.append(vector if layout.xp is None else host_copy(vector))
    assert first is not None
    return np.stack(rows), first
