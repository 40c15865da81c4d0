"""The reconstruction section of ``ldp params``, ``ldp risk`` and every sidecar: Prop. 1 for a release.

For each level of :func:`ldpcli.mechanisms._hooks.risk_epsilons` (the conservative one first),
the bounds of :func:`ldpcli.risk._diffuse.diffuse_risks` on reconstructing the direction of a
k-dimensional orthonormal projection of one row (default k = d: the whole direction) under a prior
whose density is at most e^ρ0 times uniform (default ρ0 = 0), at a few accuracies a
(Bhowmick et al. 2018, Sec. 2.3.1, Lemma 2.2, Prop. 1). Public parameters only. Each bound carries
its verdict at the section's ``threshold`` (:func:`ldpcli.risk._diffuse.verdict`): "protected" at
most the threshold, "at risk" above it, "no guarantee" where the bound reaches 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ldpcli.mechanisms import Mechanism
from ldpcli.mechanisms._composition import composed_levels
from ldpcli.mechanisms._hooks import RiskEpsilon, risk_epsilons
from ldpcli.risk._diffuse import DEFAULT_THRESHOLD, STANDARD_A, TARGET, check_threshold, diffuse_risks

#: How errors name the section's choices: the keywords of the release functions that take them.
RISK_NAMES: Mapping[str, str] = {
    "k": "risk_k", "a": "risk_a", "rho0": "risk_rho0", "d": "d", "threshold": "risk_threshold",
}


@dataclass(frozen=True, slots=True)
class ReconstructionSection:
    """The reconstruction section as a record (``Calibrated.risk``; the sidecar's ``reconstruction`` is its
    :meth:`to_dict`): the target, k, ρ0, the accuracies a, the threshold, and per privacy level its name,
    ε, scope and bounds (:func:`reconstruction_for` says what each is; the levels stay JSON objects)."""

    target: str
    k: int
    rho0: float
    a: tuple[float, ...]
    threshold: float
    levels: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON section, its keys in this order: ``from_dict(to_dict())`` is the record."""
        return {"target": self.target, "k": self.k, "rho0": self.rho0, "a": list(self.a),
                "threshold": self.threshold, "levels": list(self.levels)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReconstructionSection:
        """The record of a section :meth:`to_dict` (or :func:`reconstruction_for`) wrote."""
        return cls(data["target"], data["k"], data["rho0"], tuple(data["a"]), data["threshold"], tuple(data["levels"]))


def reconstruction_for(
    levels: Sequence[RiskEpsilon], *, k: int, rho0: float = 0.0, a: Sequence[float] | None = None,
    d: int | None = None, names: Mapping[str, str] | None = None, threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, Any]:
    """The section for the given privacy levels: ``{"target", "k", "rho0", "a", "threshold", "levels": [...]}``.

    Each bound has its ``verdict`` at ``threshold`` (a probability in (0, 1), default 10⁻³). A level
    without an ε (no per-output guarantee) gets no bounds. UsageError (from
    :func:`~ldpcli.risk._diffuse.diffuse_risk`) when k is not in [2, d], an a is not in [0, 1],
    ρ0 < 0 or the threshold is not in (0, 1), whatever the levels, naming each parameter as ``names``
    says (default: its own name).
    """
    threshold = check_threshold(threshold, names)
    accuracies = list(STANDARD_A if a is None else a)
    if all(level.epsilon is None for level in levels):  # nothing below checks k, a and ρ0 then
        diffuse_risks(0.0, k=k, a=accuracies, rho0=rho0, d=d, names=names)
    out: list[dict[str, Any]] = []
    for level in levels:
        bounds = [] if level.epsilon is None else [
            risk.to_dict(with_parameters=False, threshold=threshold)
            for risk in diffuse_risks(level.epsilon, k=k, a=accuracies, rho0=rho0, d=d, names=names)
        ]
        out.append({"name": level.name, "epsilon": level.epsilon, "applies": level.applies,
                    "conservative": level.conservative, "bounds": bounds})
    return ReconstructionSection(TARGET, k, rho0, tuple(accuracies), threshold, tuple(out)).to_dict()


def reconstruction(
    mech: Mechanism, *, k: int | None = None, rho0: float = 0.0, a: Sequence[float] | None = None,
    copies: int = 1, threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, Any] | None:
    """The section for ``mech`` (k defaults to its d), or None when it has no direction (d = 1, no k).

    ``copies``: the release holds that many independent outputs of ``mech`` for each row, so each
    level is multiplied by it (basic composition, :func:`ldpcli.mechanisms._composition.composed_levels`).
    ``threshold``: the largest bound that reads "protected". Errors name ``risk_k``, ``risk_a``,
    ``risk_rho0`` and ``risk_threshold`` (:data:`RISK_NAMES`).
    """
    if mech.d < 2 and k is None:
        return None
    levels = composed_levels(risk_epsilons(mech), copies)
    return reconstruction_for(levels, k=mech.d if k is None else k, rho0=rho0, a=a, d=mech.d, names=RISK_NAMES,
                              threshold=threshold)
