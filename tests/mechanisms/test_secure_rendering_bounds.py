"""The secure rendering's floating-point bounds (docs/floating-point.md §3), step by step, against
exact recomputation (mpmath at 400 bits from the exact values of the computed long doubles).

Each step of the grid kind (:func:`unit_rows`, :func:`orthogonal_rows`, :func:`combine_rows`) is run on
random and adversarial rows (mixed magnitudes down to subnormals, all-equal coordinates, normals
almost along u, cosines at ±1 and 0) and its error is compared with its bound in
:class:`~ldpcli.math._roundoff.StepBounds`: never exceeded.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest

from ldpcli.math import _extended as extended
from ldpcli.math import _roundoff as roundoff

mpmath.mp.prec = 400
U = roundoff.unit_roundoff()


def exact(value: Any) -> mpmath.mpf:
    """A double or long double as an mpmath number, exactly (via its integer ratio)."""
    ratio = Fraction(*np.longdouble(value).as_integer_ratio())
    return mpmath.mpf(ratio.numerator) / ratio.denominator


def vector(values: np.ndarray) -> list[mpmath.mpf]:
    return [exact(v) for v in values]


def norm(v: list[mpmath.mpf]) -> mpmath.mpf:
    return mpmath.sqrt(mpmath.fsum(a * a for a in v))


def dot(a: list[mpmath.mpf], b: list[mpmath.mpf]) -> mpmath.mpf:
    return mpmath.fsum(p * q for p, q in zip(a, b))


class FixedNormals:
    """A generator stand-in whose normals are given (adversarial directions), and fair bits from numpy."""

    def __init__(self, normals: np.ndarray, seed: int = 0) -> None:
        self.normals = normals
        self.rng = np.random.default_rng(seed)

    def standard_normal(self, size: tuple[int, int]) -> np.ndarray:
        assert tuple(size) == self.normals.shape
        return self.normals.copy()

    def integers(self, *args: Any, **kwargs: Any) -> np.ndarray:
        return self.rng.integers(*args, **kwargs)


def rows(d: int, seed: int) -> np.ndarray:
    """Random and adversarial rows of dimension d, inside the unit ball."""
    rng = np.random.default_rng(seed)
    out = [rng.standard_normal(d), np.full(d, 1.0 / np.sqrt(d)), rng.standard_normal(d) * 1e-300]
    mixed = rng.standard_normal(d) * 10.0 ** rng.integers(-320, 0, size=d)
    mixed[0] = 0.75
    out.append(mixed)
    spike = np.full(d, 5e-324)
    spike[-1] = 1.0
    out.append(spike)
    x = np.array(out)
    big = np.linalg.norm(x, axis=1) > 1.0
    x[big] /= 2 * np.linalg.norm(x[big], axis=1, keepdims=True)
    return x


def normals_for(u: np.ndarray, seed: int) -> np.ndarray:
    """Normals: random ones, and ones almost along each row's u (the cancellation case)."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(u.shape)
    along = (u.astype(np.float64) * 3.0) + rng.standard_normal(u.shape) * 1e-9
    return np.where((np.arange(u.shape[0]) % 2 == 0)[:, None], g, along)


COSINES = np.array([1.0, -1.0, 0.0, 1e-300, 1.0 - 2.0**-53, -1.0 + 2.0**-53, 0.3, -0.7])


@pytest.mark.parametrize("d", [2, 3, 4, 7, 64, 300])
def test_each_step_within_its_bound(d: int) -> None:
    bounds = roundoff.step_bounds(d, U)
    x = rows(d, seed=d)
    n = x.shape[0]
    u = extended.secure_unit_rows(x, np.zeros(n), 1.0, np.random.default_rng(0))
    g_given = normals_for(u, seed=d)
    w, g = extended.orthogonal_rows(u, FixedNormals(g_given))
    c = 3.7
    worst = {"u": 0.0, "w": 0.0, "z": 0.0}
    for t in COSINES:
        z = extended.combine_rows(u, w, np.full(n, t), c)
        for i in range(n):
            u_hat = vector(u[i])
            size = norm(u_hat)
            u_ref = [v / size for v in u_hat]
            err_u = abs(size - 1)  # = ‖û − û/‖û‖‖
            assert err_u <= bounds.e_u
            worst["u"] = max(worst["u"], float(err_u / bounds.e_u))
            w_hat = vector(w[i])
            if g is None:  # d = 2: w̃ = ±(−û₂, û₁) exactly, so the exact one is w̃/‖û‖
                w_ref = [v / size for v in w_hat]
                direction = 2 * bounds.e_u
            else:
                gi = vector(g[i])
                along = dot(gi, u_ref)
                w_ref = [a - along * b for a, b in zip(gi, u_ref)]
                err_w = norm([a - b for a, b in zip(w_hat, w_ref)])
                assert err_w <= bounds.e_w * norm(gi)
                worst["w"] = max(worst["w"], float(err_w / (bounds.e_w * norm(gi))))
                direction = 2 * bounds.e_w * norm(gi) / norm(w_ref)
            tq = exact(t)
            r = mpmath.sqrt(1 - tq * tq)
            size_w = norm(w_ref)
            z_ref = [c * (tq * a + r * b / size_w) for a, b in zip(u_ref, w_ref)]
            err_z = norm([exact(a) - b for a, b in zip(z[i], z_ref)])
            limit = c * (bounds.k0 + direction)
            assert err_z <= limit, (d, t, i, float(err_z), float(limit))
            worst["z"] = max(worst["z"], float(err_z / limit))
    assert all(value <= 1.0 for value in worst.values())


def test_pairwise_sum_bound() -> None:
    """Σ by halving: |ŝ − s| ≤ γ_⌈log₂ d⌉ Σ|a| on sums built to cancel (d = 1000, 1001)."""
    rng = np.random.default_rng(5)
    for d in (1000, 1001):
        a = (rng.standard_normal((20, d)) * 10.0 ** rng.integers(-5, 5, size=(20, d))).astype(extended.WORK)
        a[:, -1] = -np.sum(a[:, :-1].astype(np.float64), axis=1)
        levels = int(np.ceil(np.log2(d)))
        gamma = levels * U / (1 - levels * U)
        s = extended.pairwise_sum(a)
        for i in range(a.shape[0]):
            terms = vector(a[i])
            assert abs(exact(s[i]) - mpmath.fsum(terms)) <= gamma * mpmath.fsum(abs(v) for v in terms)


def test_expected_error_sum_dominates_the_rows() -> None:
    """The bound of δ, ``cap_error_sum``, is an expectation over the normals of the per-row bound:
    at d = 3, 8, 64 its value is above the seeded mean of √d·(k0 + 2e_w‖g‖/‖g − ⟨g, u⟩u‖) by more
    than five standard errors of that mean."""
    rng = np.random.default_rng(11)
    for d in (3, 8, 64):
        b = roundoff.step_bounds(d, U)
        g = rng.standard_normal((200_000, d))
        ratio = np.linalg.norm(g, axis=1) / np.linalg.norm(g[:, 1:], axis=1)  # u = e₁
        per_row = np.sqrt(d) * (b.k0 + 2 * b.e_w * ratio)
        assert per_row.mean() + 5 * per_row.std() / np.sqrt(per_row.size) <= roundoff.cap_error_sum(d, U)


def test_bounds_are_rational_not_rounded_away() -> None:
    """1 + 2⁻⁶⁴ is 1 in double precision: the bounds are computed exactly, so none is 0 and each is
    at least the first-order term it must contain."""
    b = roundoff.step_bounds(1000, U)
    assert b.e_u >= 13 * U  # γ_{ℓ+2} + u with ℓ = 10
    assert b.e_a >= 3 * U + 2 * U + 12 * U
    assert min(b) > 0
