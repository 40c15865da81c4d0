"""The hypercube mechanisms are registered, audited by exact integer counting, and pass `ldp audit`."""

from __future__ import annotations

import dataclasses

import pytest

from ldpcli.audit._claims import audit
from ldpcli.mechanisms import DuchiLinf, PrivUnitInf, get_mechanism


@pytest.mark.parametrize("cls", [PrivUnitInf, DuchiLinf])
@pytest.mark.parametrize("d", [1, 2, 3, 9, 64, 500, 2048, 5000, 10**6])
@pytest.mark.parametrize("eps", [0.1, 2.0, 8.0, 100.0])
def test_second_route_agrees(cls: type, d: int, eps: float) -> None:
    mech = cls.calibrate(d, eps)
    second, route = mech.audit_epsilon()
    assert second == pytest.approx(mech.epsilon_exact, rel=1e-7, abs=1e-7)
    assert ("exact integer" in route) == (d <= 2048)


def test_registered() -> None:
    assert get_mechanism("privunit-inf") is PrivUnitInf and get_mechanism("duchi-linf") is DuchiLinf


@pytest.mark.parametrize("cls", [PrivUnitInf, DuchiLinf])
@pytest.mark.parametrize("d, eps", [(9, 2.0), (500, 8.0)])
def test_audit_passes(cls: type, d: int, eps: float) -> None:
    result = audit(cls.calibrate(d, eps), trials=4000, seed=5)
    assert result.passed, result.to_dict()


def test_audit_catches_a_p_that_is_not_tight() -> None:
    """p pushed up by 0.05 in logit: the exact count says the channel leaks more than claimed."""
    honest = PrivUnitInf.calibrate(12, 3.0)
    broken = dataclasses.replace(honest, logit_p=honest.logit_p + 0.05)
    second, _ = broken.audit_epsilon()
    assert second > broken.epsilon + 0.04
