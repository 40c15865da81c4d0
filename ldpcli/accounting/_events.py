"""Accounting events: typed descriptions of what was released, apart from the theorems that bound them.

An event says what a mechanism did to each person's row, in the numbers its guarantee depends on, and
nothing about files (dp-accounting keeps its ``DpEvent`` types apart from its accountants the same way).
:func:`ldpcli.accounting.compose` turns a list of events into an (ε, δ) and the theorem behind it. Each event
is a frozen dataclass with ``to_dict``/``from_dict`` (as :class:`ldpcli.mechanisms.MechanismSpec`): the dict
names its ``kind``, and :func:`event_from_dict` reads any of them back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Union

from ldpcli.accounting._pld import check_gaussian
from ldpcli.accounting._theorems import ADD_OR_REMOVE_ONE, REPLACE_ONE
from ldpcli.errors import UsageError
from ldpcli.math._shuffling import check_shuffle_arguments


def _number(value: Any, name: str, *, low: float = 0.0, high: float = math.inf, closed: bool = True) -> float:
    """``value`` as a float in [low, high) (or (low, high) when not ``closed``); UsageError naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not (
            (low <= value if closed else low < value) and value < high):
        bracket = "[" if closed else "("
        raise UsageError(f"`{name}` must be a number in {bracket}{low:g}, {high:g}), not {value!r}")
    return float(value)


def _count(value: Any, name: str, minimum: int = 1) -> int:
    """``value`` when it is an integer ≥ ``minimum`` (a bool is not); UsageError naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"`{name}` must be a whole number ≥ {minimum}, not {value!r}")
    return value


class _Event:
    """What every event shares: its ``kind`` in the dict form, and the round trip of its fields."""

    kind: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict: ``kind`` and the event's fields."""
        return {"kind": self.kind, **{field.name: getattr(self, field.name) for field in fields(self)}}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Inverse of :meth:`to_dict`; ValueError naming what is malformed (a missing field, another kind, a
        value out of range)."""
        if not isinstance(data, Mapping) or data.get("kind") != cls.kind:
            raise ValueError(f"a {cls.kind!r} event must be an object with 'kind': {cls.kind!r}")
        names = [field.name for field in fields(cls)]  # type: ignore[arg-type]
        unknown = sorted(set(data) - {"kind", *names})
        if unknown:
            raise ValueError(f"a {cls.kind!r} event has no field {unknown[0]!r}")
        try:
            return cls(**{name: data[name] for name in names if name in data})
        except (TypeError, UsageError) as exc:
            raise ValueError(f"a {cls.kind!r} event: {exc}") from None


@dataclass(frozen=True)
class LocalRelease(_Event):
    """A local release: each row's report of an (ε, δ)-LDP mechanism, ``copies`` independent reports side by side
    (``ReleaseOptions.copies``), each row used ``epochs`` times in training: copies × epochs uses of one
    (ε, δ) mechanism on each row (ε, δ per use)."""

    epsilon: float
    delta: float = 0.0
    copies: int = 1
    epochs: int = 1
    kind: ClassVar[str] = "local"

    def __post_init__(self) -> None:
        _number(self.epsilon, "epsilon")
        _number(self.delta, "delta", high=1.0)
        _count(self.copies, "copies")
        _count(self.epochs, "epochs")

    @property
    def uses(self) -> int:
        """How many times the mechanism runs on each row: copies × epochs."""
        return self.copies * self.epochs


@dataclass(frozen=True)
class ShuffledRelease(_Event):
    """n reports of a pure ε0-LDP mechanism, one per person, published by an honest shuffler in a uniformly random
    order: a central guarantee at δ (``delta``) for replace-one neighbours, by amplification by shuffling."""

    epsilon0: float
    n: int
    delta: float
    kind: ClassVar[str] = "shuffled"
    neighbouring: ClassVar[str] = REPLACE_ONE

    def __post_init__(self) -> None:
        check_shuffle_arguments(self.epsilon0, self.n, self.delta)


@dataclass(frozen=True)
class SubsampledGaussian(_Event):
    """``steps`` steps of the Poisson-subsampled Gaussian mechanism (each row in each step with probability
    ``sampling_rate``, noise N(0, (zρ)² I) on a sum of sensitivity ρ, z = ``noise_multiplier``): the central
    layer of ``ldp train``, for add/remove-one neighbours."""

    noise_multiplier: float
    sampling_rate: float
    steps: int
    kind: ClassVar[str] = "subsampled_gaussian"
    neighbouring: ClassVar[str] = ADD_OR_REMOVE_ONE

    def __post_init__(self) -> None:
        check_gaussian(self.sampling_rate, self.noise_multiplier, self.steps, None, floor=0.0)


@dataclass(frozen=True)
class CentralClaim(_Event):
    """A central (ε, δ) guarantee as it was recorded (a shuffled release's or a training run's ledger entry), for
    ``neighbouring`` data sets, with the ``theorem`` that gave it: composed as the worst case of its pair."""

    epsilon: float
    delta: float
    neighbouring: str
    theorem: str
    kind: ClassVar[str] = "claim"

    def __post_init__(self) -> None:
        _number(self.epsilon, "epsilon", closed=False)
        _number(self.delta, "delta", high=1.0)
        if self.neighbouring not in (REPLACE_ONE, ADD_OR_REMOVE_ONE):
            raise UsageError(f"`neighbouring` must be {REPLACE_ONE!r} or {ADD_OR_REMOVE_ONE!r}, not {self.neighbouring!r}")
        if not isinstance(self.theorem, str) or not self.theorem:
            raise UsageError("`theorem` must name the result the claim rests on")


@dataclass(frozen=True)
class Composed(_Event):
    """Several events on the same rows, composed: what a person's releases spend together."""

    events: tuple[Event, ...]
    kind: ClassVar[str] = "composed"

    def __post_init__(self) -> None:
        if not isinstance(self.events, tuple) or not self.events:
            raise UsageError("`events` must be a non-empty tuple of events")
        if not all(isinstance(event, EVENTS) for event in self.events):
            raise UsageError("`events` must hold accounting events only")

    def to_dict(self) -> dict[str, Any]:
        """``kind`` and the composed events' own dicts."""
        return {"kind": self.kind, "events": [event.to_dict() for event in self.events]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Composed:
        """Inverse of :meth:`to_dict`; ValueError naming what is malformed."""
        if not isinstance(data, Mapping) or data.get("kind") != cls.kind or not isinstance(data.get("events"), list):
            raise ValueError(f"a {cls.kind!r} event must be an object with 'kind': {cls.kind!r} and a list 'events'")
        try:
            return cls(tuple(event_from_dict(event) for event in data["events"]))
        except UsageError as exc:
            raise ValueError(f"a {cls.kind!r} event: {exc}") from None

    def flat(self) -> tuple[Event, ...]:
        """The events composed, nested compositions opened."""
        return tuple(inner for event in self.events
                     for inner in (event.flat() if isinstance(event, Composed) else (event,)))


Event = Union[LocalRelease, ShuffledRelease, SubsampledGaussian, CentralClaim, Composed]
"""Any accounting event."""

EVENTS: tuple[type, ...] = (LocalRelease, ShuffledRelease, SubsampledGaussian, CentralClaim, Composed)
"""The event types, by which :func:`event_from_dict` reads a ``kind`` back."""


def event_from_dict(data: Mapping[str, Any]) -> Event:
    """Any event from its ``to_dict``, by its ``kind``; ValueError for an unknown kind or a malformed event."""
    kind = data.get("kind") if isinstance(data, Mapping) else None
    for event in EVENTS:
        if event.kind == kind:  # type: ignore[attr-defined]
            result: Event = event.from_dict(data)  # type: ignore[attr-defined]
            return result
    raise ValueError(f"an event's 'kind' must be one of {', '.join(repr(e.kind) for e in EVENTS)}, not {kind!r}")  # type: ignore[attr-defined]
