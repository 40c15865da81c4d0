"""The audit of a ``--secure`` release: its rounding adds an error between 0 and d·g²/4 to every row.

The branches of a secured mechanism are its core's, with the core's exact errors, while its claimed error adds the
rounding's bound (docs/floating-point.md §2). The statistics must accept any mean error in that interval (at ε = 8
the grid is coarse enough that an exact comparison failed every seed) and still catch an error outside it.
"""

from __future__ import annotations

import pytest

from ldpcli.audit import _statistics as statistics
from ldpcli.audit._claims import audit
from ldpcli.audit._statistics import rounding_allowance
from ldpcli.mechanisms import PrivUnit2
from ldpcli.mechanisms._rendering import secured


@pytest.mark.parametrize("d", [3, 16])
def test_a_secure_release_at_a_coarse_grid_passes_its_statistics(d: int) -> None:
    mech = secured(PrivUnit2.calibrate(d, 8.0))
    assert rounding_allowance(mech) > 0.0 and rounding_allowance(PrivUnit2.calibrate(d, 8.0)) == 0.0
    result = audit(mech, trials=20_000, seed=0, lower_bound_trials=2_000)
    assert all(check.ok for check in result.inputs), [c.notes for c in result.inputs]


def test_an_error_beyond_the_rounding_allowance_is_still_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    mech = secured(PrivUnit2.calibrate(16, 8.0))
    allowance = rounding_allowance(mech)
    # allow only a hundredth of the rounding the rendering adds: the interval no longer covers what the rows show
    monkeypatch.setattr(statistics, "rounding_allowance", lambda _: allowance / 100.0)
    result = audit(mech, trials=20_000, seed=0, lower_bound_trials=2_000)
    assert not all(check.error_ok for check in result.inputs)
