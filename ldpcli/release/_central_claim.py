"""The central claim of a model trained with the central layer, as a record: the model sidecar's
``central`` section, the training result's JSON ``central`` and the ledger entry's ``central``
(:class:`CentralTrainingClaim`; the layer that states it is :mod:`ldpcli.learn._central`, the
accountants :mod:`ldpcli.learn._accounting`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ldpcli.release._randomness import RandomnessRecord

#: The record's fields that hold a finite number (``steps`` an integer, ``target_epsilon`` may be null).
_NUMBERS = ("radius", "noise_multiplier", "sampling_rate", "delta", "epsilon_pld", "epsilon_rdp", "rdp_order",
            "epsilon", "noise_std", "expected_batch")
#: The record's fields that hold a text.
_TEXTS = ("claim", "accountant", "neighbouring", "protects_against", "statement")


@dataclass(frozen=True)
class CentralTrainingClaim:
    """A central training run's guarantee and how it was reached (Bhowmick et al. 2018, eq. (13); the
    Poisson-subsampled Gaussian of Abadi et al. 2016): the model is (``epsilon``, ``delta``)-DP for
    ``neighbouring`` neighbours, ``epsilon`` the PLD accountant's ``epsilon_pld`` (the claim), ``epsilon_rdp``
    the RDP accountant's at ``rdp_order`` beside it, after ``steps`` steps of noise multiplier z =
    ``noise_multiplier`` at sampling rate q = ``sampling_rate`` on releases projected onto the ℓ2 ball of
    radius ρ = ``radius``. ``noise_std`` is zρ/(qN), ``expected_batch`` qN, ``target_epsilon`` the ε that z
    was solved for (None when z was given); ``randomness`` describes the generator of the batches and the
    noise. :meth:`to_dict` is the JSON section, its keys in the fields' order."""

    radius: float
    noise_multiplier: float
    sampling_rate: float
    steps: int
    delta: float
    epsilon_pld: float
    epsilon_rdp: float
    rdp_order: float
    epsilon: float
    claim: str
    target_epsilon: float | None
    noise_std: float
    expected_batch: float
    accountant: str
    neighbouring: str
    protects_against: str
    statement: str
    randomness: RandomnessRecord

    def to_dict(self) -> dict[str, Any]:
        """The JSON section (``central``): ``from_dict(to_dict())`` is the record."""
        return {
            "radius": self.radius, "noise_multiplier": self.noise_multiplier, "sampling_rate": self.sampling_rate,
            "steps": self.steps, "delta": self.delta, "epsilon_pld": self.epsilon_pld, "epsilon_rdp": self.epsilon_rdp,
            "rdp_order": self.rdp_order, "epsilon": self.epsilon, "claim": self.claim,
            "target_epsilon": self.target_epsilon, "noise_std": self.noise_std, "expected_batch": self.expected_batch,
            "accountant": self.accountant, "neighbouring": self.neighbouring,
            "protects_against": self.protects_against, "statement": self.statement,
            "randomness": self.randomness.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> CentralTrainingClaim:
        """The record a ``central`` section holds, its values as stored (an integer stays one): ValueError
        naming the first field missing or of the wrong type (a number that is not finite, a ``steps`` that is
        not a positive integer, a text that is not one, a ``randomness`` that is not a :class:`~ldpcli.release._randomness.RandomnessRecord`'s object)."""
        if not isinstance(data, Mapping):
            raise ValueError("is not an object")
        for name in _NUMBERS:
            if not _finite(data.get(name)):
                raise ValueError(f"field {name!r} is missing or not a finite number")
        target = data.get("target_epsilon", math.nan)
        if target is not None and not _finite(target):
            raise ValueError("field 'target_epsilon' is missing or neither null nor a finite number")
        steps = data.get("steps")
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise ValueError("field 'steps' is missing or not a positive integer")
        for name in _TEXTS:
            if not isinstance(data.get(name), str):
                raise ValueError(f"field {name!r} is missing or not a text")
        if not isinstance(data.get("randomness"), Mapping):
            raise ValueError("field 'randomness' is missing or not an object")
        try:
            randomness = RandomnessRecord.from_dict(data["randomness"])
        except ValueError as exc:
            raise ValueError(f"in field 'randomness', {exc}") from None
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name != "randomness"},
                   randomness=randomness)


def _finite(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (a bool is neither)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
