"""Rows and parameters at the edges of double precision get correct results or one clear error."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ldp

from ldpcli.errors import UsageError
from ldpcli.math import _rows as rowmath
from ldpcli.math import _sphere as sm
from ldpcli.mechanisms import PrivUnit2, PrivUnitInf, get_mechanism


def test_row_norms_survive_overflow_and_underflow() -> None:
    x = np.array([[1e308, 1e308, 0.0], [3e-200, 4e-200, 0.0], [5e-324, 0.0, 0.0], [0.0, 0.0, 0.0], [3.0, 4.0, 0.0]])
    norms = rowmath.row_norms(x)
    assert norms[0] == pytest.approx(np.sqrt(2) * 1e308, rel=1e-15)
    assert norms[1] == pytest.approx(5e-200, rel=1e-15)
    assert norms[2] == 5e-324 and norms[3] == 0.0 and norms[4] == 5.0


def test_clip_keeps_the_direction_of_a_huge_row() -> None:
    """√Σx² overflowed to inf and the row became the zero row (a random direction)."""
    clipped, count = PrivUnit2.calibrate(3, 4.0).project(np.array([[1e308, -1e308, 0.0]]))
    assert count == 1 and np.allclose(clipped, [[2**-0.5, -(2**-0.5), 0.0]])


@pytest.mark.parametrize("name", ["privunit2", "privunitg", "duchi-l2", "separated", "laplace"])
def test_tiny_rows_keep_their_direction(name: str) -> None:
    """A row of norm 1e-300 is not the zero row: its privatized mean points its way."""
    mech = get_mechanism(name).calibrate(2, 8.0)
    x = np.tile([[1e-300, 0.0]], (20000, 1))
    z = mech.privatize(x.copy(), np.random.default_rng(0)).mean(axis=0)
    assert np.all(np.isfinite(z))
    if name != "laplace":  # Laplace adds noise: the 1e-300 signal is invisible, correctly so
        direction = sm.round_to_sphere(x[:1], 1.0, np.random.default_rng(1))
        assert abs(direction[0, 0]) == 1.0 and direction[0, 1] == 0.0


@pytest.mark.parametrize("args, fragment", [
    (["-m", "privunit2", "--d", "2", "--eps", "1", "-L", "1e160"], "its square overflows"),
    (["-m", "privunit2", "--d", "100000000000000000000", "--eps", "1"], "is above the 1e+08"),
    (["--d", "100000000000000000000", "--eps", "1"], "is above the 1e+08"),
    (["-m", "privunit-inf", "--d", "20000000", "--eps", "1"], "is above the 1e+07"),
    (["-m", "laplace", "--d", "10000000", "--eps", "0.01", "-L", "1e150"], "not finite in double precision"),
])
def test_unrepresentable_parameters_are_usage_errors(args: list[str], fragment: str) -> None:
    res = ldp("params", *args)
    assert res.exit_code == 2, (res.stdout, res.stderr, res.exception)
    assert res.stderr.startswith("ldp: error: ") and fragment in res.stderr and res.stderr.count("\n") == 1


@pytest.mark.slow
def test_hypercube_limit_is_documented_in_the_error() -> None:
    with pytest.raises(UsageError, match="above the 1e"):
        PrivUnitInf.calibrate(10**7 + 1, 1.0)
    assert PrivUnitInf.calibrate(10**7, 1.0).expected_error > 0
