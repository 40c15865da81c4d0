"""Every mechanism with a secure rendering, at every d the bit audit's table covers (benchmarks/audit_bits.py,
docs/floating-point.md §7): the secure mechanism's δ and errors are the plain one's plus the rendering's,
whether the plain mechanism computes them as a ``property`` or a ``functools.cached_property``
(scalar-rel's worst-case error is one, and ``ldp params -m scalar-rel --secure`` once failed on it).
"""

from __future__ import annotations

import json

import pytest

from ldpcli.mechanisms import _rendering as rd
from ldpcli.mechanisms._base import get_mechanism
from tests.helpers import ldp

CASES = [(name, d) for name in ("privunit2", "duchi-l2", "separated", "gaussian-sign", "privunit-inf", "duchi-linf")
         for d in (1, 2, 3, 16)] + [("scalar", 1), ("scalar-rel", 1)]


@pytest.mark.parametrize(("name", "d"), CASES)
def test_secure_delta_and_errors_add_the_renderings(name: str, d: int) -> None:
    """δ, E‖R − x‖² at the boundary and its worst case: the plain value plus the rendering's δ and d·g²/4."""
    plain = get_mechanism(name).calibrate(d, 2.0)
    mech = rd.secured(plain)
    r = mech.rendering
    assert mech.delta_exact == plain.delta_exact + r.delta
    assert mech.expected_error == plain.expected_error + r.added_error
    assert mech.expected_error_max == plain.expected_error_max + r.added_error


def test_params_secure_for_scalar_rel() -> None:
    """``ldp params -m scalar-rel --secure``: the finite rendering, δ = 0, and the plain worst-case error."""
    result = ldp("params", "-m", "scalar-rel", "--d", 1, "--eps", 2, "--secure", "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    plain = get_mechanism("scalar-rel").calibrate(1, 2.0)
    assert info["rendering"]["rendering"] == "finite" and info["rendering"]["delta"] == 0.0
    assert info["rendering"]["error_ratio"] == 1.0
    assert info["expected_error_max"] == plain.expected_error_max
