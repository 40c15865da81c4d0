"""A throwaway mechanism in one file, to show that one file is all a new mechanism needs.

``toy-coordinates``: on the ℓ∞ box [−L, L]^d, sample m coordinates uniformly without replacement
(m = the option ``coordinates``), round each to ±L without bias, and report each sign by
randomized response at ε/m, debiased and scaled by d/m. The sampled set does not depend on x and
each sign costs ε/m, so the mechanism is ε-LDP exactly; E[Z] = x; ‖Z‖ = L·(d/m)·c·√m with
c = (e^{ε/m} + 1)/(e^{ε/m} − 1), so E‖Z − x‖² = L²d²c²/m − ‖x‖².

Importing it registers it; ``tests/test_house.py`` then finds it in every command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.math._domains import LINF_BOX
from ldpcli.mechanisms import Mechanism, OptionSpec, declare, register


@register
@dataclass(frozen=True)
class ToyCoordinates(Mechanism):
    """m sampled coordinates, each a debiased randomized-response sign."""

    coordinates: int

    name = "toy-coordinates"
    title = "Toy: m sampled coordinates by randomized response (a test plug-in)"
    calibrations = ("plain",)
    domain = LINF_BOX
    options = declare(OptionSpec("coordinates", int, "coordinates m reported per row (default 1)", 2, low=1, default=1))

    @classmethod
    def _calibrate(cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any) -> ToyCoordinates:
        return cls(d, epsilon, norm_bound, calibration, min(options["coordinates"], d))

    @property
    def c(self) -> float:
        """1/(2p − 1) for the randomized response at ε/m."""
        return 1.0 / math.tanh(self.epsilon / self.coordinates / 2.0)

    @property
    def epsilon_exact(self) -> float:
        return self.epsilon

    @property
    def expected_error_max(self) -> float:
        return self.norm_bound**2 * self.d**2 * self.c**2 / self.coordinates

    @property
    def expected_error(self) -> float:
        return self.expected_error_max - self.d * self.norm_bound**2

    def parameters(self) -> dict[str, Any]:
        return {"c": self.c}

    def audit_epsilon(self) -> tuple[float, str]:
        p = 1.0 / (1.0 + math.exp(-self.epsilon / self.coordinates))
        return self.coordinates * math.log(p / (1.0 - p)), "m randomized-response bits enumerated"

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, d = x.shape
        chosen = np.argsort(rng.random((n, d)), axis=1)[:, : self.coordinates]
        values = np.take_along_axis(x, chosen, axis=1) / self.norm_bound
        sign = np.where(rng.random(values.shape) < (1.0 + np.clip(values, -1.0, 1.0)) / 2.0, 1.0, -1.0)
        keep = rng.random(values.shape) < 1.0 / (1.0 + math.exp(-self.epsilon / self.coordinates))
        reported = np.where(keep, sign, -sign) * (self.c * self.norm_bound * d / self.coordinates)
        out = np.zeros((n, d))
        np.put_along_axis(out, chosen, reported, axis=1)
        return out
