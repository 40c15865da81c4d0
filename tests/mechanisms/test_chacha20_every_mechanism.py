"""Every mechanism draws its noise from the ChaCha20 stream (``rng="chacha20"``) with its exact law.

n = 40,000 copies of one boundary input (‖x‖ = L, or a vertex of the box for the ℓ∞ mechanisms, or r_max for the
scalar ones) privatized with a :class:`CounterGenerator` of a fixed key (so the test is deterministic): each
coordinate's mean lies within z·σ̂_j/√n of x_j and the mean of ‖Z − x‖² within z·ŝ/√n of the mechanism's
``expected_error``, z the Bonferroni threshold for all of a mechanism's tests at family level 10⁻⁴ (σ̂ and ŝ the
sample deviations: the sampling error of the two means).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import bonferroni_z

from ldpcli.math._counter_rng import CounterGenerator
from ldpcli.mechanisms._base import get_mechanism, mechanism_names

N = 40_000
BOX = ("privunit-inf", "duchi-linf")
SCALAR = ("scalar", "scalar-rel")


def boundary_input(name: str, d: int, bound: float) -> np.ndarray:
    if name in BOX:
        return bound * np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    direction = np.linspace(1.0, 2.0, d)
    return bound * direction / np.linalg.norm(direction)


@pytest.mark.parametrize("name", [name for name in mechanism_names() if name != "bcdp"])
def test_the_stream_gives_every_mechanism_its_exact_mean_and_error(name: str) -> None:
    d = 1 if name in SCALAR else 5
    mech = get_mechanism(name).calibrate(d, 4.0, **({"delta": 1e-6} if name == "gaussian" else {}))
    x = boundary_input(name, d, mech.norm_bound)
    z = np.asarray(mech.privatize(np.tile(x, (N, 1)), CounterGenerator(bytes(range(32)))))
    assert z.shape == (N, d) and np.all(np.isfinite(z))
    threshold = bonferroni_z(1e-4, d + 1)
    scores = (z.mean(axis=0) - x) / (z.std(axis=0, ddof=1) / np.sqrt(N))
    assert np.all(np.abs(scores) < threshold), scores
    errors = np.sum((z - x) ** 2, axis=1)
    score = (errors.mean() - mech.expected_error) / (errors.std(ddof=1) / np.sqrt(N))
    assert abs(score) < threshold, (errors.mean(), mech.expected_error)
