"""``@register(...)`` carries the registry's metadata (issue 37 item 5); a bare ``@register`` still works."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from ldpcli.mechanisms import Mechanism, get_mechanism, mechanism_names, register, unregister
from ldpcli.mechanisms._base import REGISTRY_METADATA


@dataclass(frozen=True)
class _Identity(Mechanism):
    """x itself: a throwaway mechanism for the registry (not private)."""

    @classmethod
    def _calibrate(cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any) -> Any:
        return cls(d, epsilon, norm_bound, calibration)

    epsilon_exact = expected_error = expected_error_max = 0.0  # type: ignore[assignment]

    def parameters(self) -> dict[str, Any]:
        return {}

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return x.copy()


def test_register_with_keywords_sets_the_metadata_and_registers() -> None:
    @register(name="test-identity", title="Identity (a test)", calibrations=("plain", "other"), baseline=True,
              compared=False, example_d=3)
    @dataclass(frozen=True)
    class Identity(_Identity):
        """x itself."""

    try:
        assert get_mechanism("test-identity") is Identity and "test-identity" in mechanism_names()
        assert (Identity.name, Identity.title, Identity.calibrations) == ("test-identity", "Identity (a test)",
                                                                          ("plain", "other"))
        assert Identity.baseline and not Identity.compared and Identity.example_d == 3
        mech = Identity.calibrate(3, 1.0)
        assert mech.calibration == "plain" and mech.describe()["mechanism"] == "test-identity"
    finally:
        unregister("test-identity")


def test_register_refuses_unknown_metadata_and_a_class_with_keywords() -> None:
    with pytest.raises(TypeError, match="unknown metadata"):
        register(name="x", title="x", calibrations=("x",), domain="l2-ball")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="not both"):
        register(_Identity, name="x")  # type: ignore[call-overload]


def test_every_builtin_mechanism_has_its_metadata_from_register() -> None:
    """No built-in mechanism's class body sets registry metadata: ``@register(...)`` gives it."""
    for name in mechanism_names():
        cls = get_mechanism(name)
        assert cls.name == name
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
        assert isinstance(body, ast.ClassDef)
        set_here = {target.id for stmt in body.body for target in (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
            if isinstance(target, ast.Name)}
        assert not set_here & set(REGISTRY_METADATA), (name, sorted(set_here & set(REGISTRY_METADATA)))
