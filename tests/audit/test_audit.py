"""`ldp audit` passes on honest mechanisms and fails on deliberately broken ones."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from helpers import ldp

from ldpcli.audit._claims import audit
from ldpcli.math import _sphere as sm
from ldpcli.mechanisms import DuchiL2, PrivUnit2


@pytest.mark.parametrize("d, eps", [(9, 2.0), (500, 8.0), (1, 1.0), (2, 0.5)])
def test_privunit2_passes(d: int, eps: float) -> None:
    result = audit(PrivUnit2.calibrate(d, eps), trials=5000 if d < 500 else 2000, seed=3)
    assert result.privacy_ok and result.passed, result.to_dict()
    assert result.epsilon_second_route == pytest.approx(eps, rel=1e-9)


def printed_sign_privunit2(d: int, eps: float) -> PrivUnit2:
    """PrivUnit2 with Asi et al. Alg. 1's printed normaliser m = c·[p/P + (1 − p)/(1 − P)]."""
    honest = PrivUnit2.calibrate(d, eps)
    p_cap = honest.cap_probability
    c = math.exp(sm.log_cap_normaliser(honest.cap_logit, d))
    m_printed = c * (honest.p / p_cap + (1 - honest.p) / (1 - p_cap))
    return dataclasses.replace(honest, log_m=math.log(m_printed), log_one_minus_m=math.log1p(-m_printed))


def test_audit_fails_on_the_printed_sign_of_asi_alg_1() -> None:
    """ERRATA 1 at ε = 1: outputs shrunk by ≈ tanh(ε/2); the privacy check still passes."""
    result = audit(printed_sign_privunit2(10, 1.0), trials=20_000, seed=1)
    assert result.privacy_ok
    assert not result.passed
    boundary = result.inputs[0]
    assert not boundary.unbiased and not boundary.error_ok


def test_audit_fails_on_duchi_l2_with_the_printed_factor_two_radius() -> None:
    """ERRATA 11: the printed B is twice too large, so E[Z] = 2x."""
    honest = DuchiL2.calibrate(5, 2.0)

    class PrintedRadius(DuchiL2):
        @property
        def scale(self) -> float:  # type: ignore[override]
            return 2.0 * super().scale

    broken = PrintedRadius(**{f.name: getattr(honest, f.name) for f in dataclasses.fields(honest)})
    result = audit(broken, trials=20_000, seed=2)
    assert not result.passed
    assert not result.inputs[0].unbiased


def test_audit_fails_when_the_second_route_disagrees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PrivUnit2, "audit_epsilon", lambda self: (self.epsilon_exact * 1.01, "tampered"))
    result = audit(PrivUnit2.calibrate(4, 1.0), trials=1000, seed=0)
    assert not result.privacy_ok and not result.passed


def test_cli_audit_json_and_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    res = ldp("audit", "-m", "privunit2", "--d", "9", "--eps", "2", "--trials", "3000", "--seed", "1", "--json")
    assert res.exit_code == 0, res.stderr
    info = json.loads(res.stdout)
    for key in ("mechanism", "epsilon", "epsilon_exact", "epsilon_second_route", "passed", "statistics"):
        assert key in info
    assert info["passed"] is True and len(info["statistics"]) == 3
    monkeypatch.setattr(PrivUnit2, "audit_epsilon", lambda self: (self.epsilon_exact + 0.5, "tampered"))
    res = ldp("audit", "-m", "privunit2", "--d", "9", "--eps", "2", "--trials", "1000", "--seed", "1")
    assert res.exit_code == 1 and "FAILED" in res.stdout
    res = ldp("audit", "-m", "privunit2", "--d", "9", "--eps", "2", "--trials", "5")
    assert res.exit_code == 2 and "--trials" in res.stderr
