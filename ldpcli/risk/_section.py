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
from ldpcli.risk._diffuse import DEFAULT_THRESHOLD, STANDARD_A, TARGET, DiffuseRisk, check_threshold, diffuse_risks

#: How errors name the section's choices: the keywords of the release functions that take them.
RISK_NAMES: Mapping[str, str] = {
    "k": "risk_k", "a": "risk_a", "rho0": "risk_rho0", "d": "d", "threshold": "risk_threshold",
}


@dataclass(frozen=True, slots=True)
class ReconstructionBound:
    """One bound of a level: Prop. 1 (Bhowmick et al. 2018, Sec. 2.3.1) at accuracy ``a`` (ℓ2 tolerance
    ``alpha`` = √(2 − 2a)), as :meth:`ldpcli.risk._diffuse.DiffuseRisk.to_dict` states it without the parameters
    the section states once: the logs of the prior, of the exact bound, of the bound and of Prop. 1's branches
    (None where −∞ or not applicable), the ``probability_bound``, whether it is a ``guarantee`` (below 1), its
    ``verdict`` at the section's threshold and whether success is ``impossible`` (a = 1)."""

    a: float
    alpha: float
    log_prior: float | None
    log_exact: float | None
    log_bound: float | None
    probability_bound: float
    guarantee: bool
    verdict: str
    impossible: bool
    log_prop1_small: float | None
    log_prop1_large: float | None
    log_prop1: float | None

    @classmethod
    def of(cls, risk: DiffuseRisk, threshold: float) -> ReconstructionBound:
        """The bound ``risk`` states, its verdict at ``threshold``."""
        return cls.from_dict(risk.to_dict(with_parameters=False, threshold=threshold))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the bound, its keys in the fields' order."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReconstructionBound:
        """The record of a bound :meth:`to_dict` wrote."""
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class ReconstructionLevel:
    """One privacy level of the section (:func:`ldpcli.mechanisms._hooks.risk_epsilons`): its ``name``, its
    ``epsilon`` (None: no per-output guarantee, and no ``bounds``), when it ``applies``, whether it is the
    ``conservative`` one, and its ``bounds``, each Prop. 1's at one accuracy a (:class:`ReconstructionBound`)."""

    name: str
    epsilon: float | None
    applies: str
    conservative: bool
    bounds: tuple[ReconstructionBound, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the level, its keys in this order."""
        return {"name": self.name, "epsilon": self.epsilon, "applies": self.applies,
                "conservative": self.conservative, "bounds": [bound.to_dict() for bound in self.bounds]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReconstructionLevel:
        """The record of a level :meth:`to_dict` wrote."""
        return cls(data["name"], data["epsilon"], data["applies"], data["conservative"],
                   tuple(ReconstructionBound.from_dict(bound) for bound in data["bounds"]))


@dataclass(frozen=True, slots=True)
class ReconstructionSection:
    """The reconstruction section as a record (``Calibrated.risk``; the sidecar's ``reconstruction``, and the
    section ``ldp params`` and ``ldp risk`` print, is its :meth:`to_dict`): the target, k, ρ0, the accuracies a,
    the threshold, and its privacy levels (:func:`reconstruction_section_for` says what each is)."""

    target: str
    k: int
    rho0: float
    a: tuple[float, ...]
    threshold: float
    levels: tuple[ReconstructionLevel, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON section, its keys in this order: ``from_dict(to_dict())`` is the record."""
        return {"target": self.target, "k": self.k, "rho0": self.rho0, "a": list(self.a),
                "threshold": self.threshold, "levels": [level.to_dict() for level in self.levels]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReconstructionSection:
        """The record of a section :meth:`to_dict` wrote."""
        return cls(data["target"], data["k"], data["rho0"], tuple(data["a"]), data["threshold"],
                   tuple(ReconstructionLevel.from_dict(level) for level in data["levels"]))


def reconstruction_section_for(
    levels: Sequence[RiskEpsilon], *, k: int, rho0: float = 0.0, a: Sequence[float] | None = None,
    d: int | None = None, names: Mapping[str, str] | None = None, threshold: float = DEFAULT_THRESHOLD,
) -> ReconstructionSection:
    """The section for the given privacy levels, as a record: the target, k, ρ0, a, the threshold and one
    :class:`ReconstructionLevel` per level.

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
    out = tuple(
        ReconstructionLevel(level.name, level.epsilon, level.applies, level.conservative, () if level.epsilon is None
                            else tuple(ReconstructionBound.of(risk, threshold) for risk in
                                       diffuse_risks(level.epsilon, k=k, a=accuracies, rho0=rho0, d=d, names=names)))
        for level in levels
    )
    return ReconstructionSection(TARGET, k, rho0, tuple(accuracies), threshold, out)


def reconstruction_for(
    levels: Sequence[RiskEpsilon], *, k: int, rho0: float = 0.0, a: Sequence[float] | None = None,
    d: int | None = None, names: Mapping[str, str] | None = None, threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, Any]:
    """The section for the given privacy levels as JSON: ``{"target", "k", "rho0", "a", "threshold", "levels": [...]}``,
    the :meth:`~ReconstructionSection.to_dict` of :func:`reconstruction_section_for` (which says what each is and
    what is refused)."""
    return reconstruction_section_for(levels, k=k, rho0=rho0, a=a, d=d, names=names, threshold=threshold).to_dict()


def reconstruction_section(
    mech: Mechanism, *, k: int | None = None, rho0: float = 0.0, a: Sequence[float] | None = None,
    copies: int = 1, threshold: float = DEFAULT_THRESHOLD,
) -> ReconstructionSection | None:
    """The section for ``mech`` as a record (k defaults to its d), or None when it has no direction (d = 1, no k).

    ``copies``: the release holds that many independent outputs of ``mech`` for each row, so each
    level is multiplied by it (basic composition, :func:`ldpcli.mechanisms._composition.composed_levels`).
    ``threshold``: the largest bound that reads "protected". Errors name ``risk_k``, ``risk_a``,
    ``risk_rho0`` and ``risk_threshold`` (:data:`RISK_NAMES`).
    """
    if mech.d < 2 and k is None:
        return None
    levels = composed_levels(risk_epsilons(mech), copies)
    return reconstruction_section_for(levels, k=mech.d if k is None else k, rho0=rho0, a=a, d=mech.d,
                                      names=RISK_NAMES, threshold=threshold)


def reconstruction(
    mech: Mechanism, *, k: int | None = None, rho0: float = 0.0, a: Sequence[float] | None = None,
    copies: int = 1, threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, Any] | None:
    """The section for ``mech`` as JSON, the :meth:`~ReconstructionSection.to_dict` of
    :func:`reconstruction_section` (which says what each parameter is), or None when it has no direction."""
    section = reconstruction_section(mech, k=k, rho0=rho0, a=a, copies=copies, threshold=threshold)
    return None if section is None else section.to_dict()
