"""What only some mechanisms have (ldpcli.mechanisms._hooks, and the spec's hooks in base): who has
which hook, and what the adapters give a mechanism without it."""

from __future__ import annotations

import dataclasses

import pytest

from ldpcli.mechanisms import BCDP, MechanismSpec, PrivUnit2, get_mechanism, _hooks as hooks, mechanism_names
from ldpcli.mechanisms._base import ColumnOptions, SplitsCopies

BUILT_IN = [name for name in mechanism_names() if not name.startswith(("test-", "toy-"))]


def example(name: str) -> object:
    cls = get_mechanism(name)
    options = {spec.name: spec.example for spec in cls.options.values() if spec.required}
    return cls.calibrate(cls.example_d, 2.0, **options)


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_built_in_mechanism_has_a_second_route_and_law_tests(name: str) -> None:
    mech = example(name)
    assert isinstance(mech, hooks.PrivacyRoute) and isinstance(mech, hooks.LawTested)


def test_a_mechanism_without_a_hook_gets_the_adapters_answer() -> None:
    class Plain(PrivUnit2):  # PrivUnit2's math with none of the optional hooks
        audit_epsilon = law_tests = second_moments = None

    honest = PrivUnit2.calibrate(5, 2.0)
    plain = Plain(**{field.name: getattr(honest, field.name) for field in dataclasses.fields(honest)})
    with pytest.raises(NotImplementedError, match="no second route to its privacy level"):
        hooks.audit_epsilon(plain)
    with pytest.raises(NotImplementedError, match="no tests of its output's law"):
        hooks.law_tests(plain, None, None)  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="does not report its output's second moments"):
        hooks.second_moments(plain)
    assert hooks.feature_section(plain) is None
    (level,) = hooks.risk_epsilons(plain)
    assert level.epsilon == plain.epsilon_exact and level.conservative


def test_risk_levels_of_the_mechanisms_that_say_more() -> None:
    levels = hooks.risk_epsilons(example("separated"))
    assert [level.name for level in levels] == ["release", "direction"] and levels[0].conservative
    (gaussian,) = hooks.risk_epsilons(example("gaussian"))
    assert gaussian.epsilon is None


def test_only_bcdp_has_a_feature_section_and_the_spec_hooks() -> None:
    mech = example("bcdp")
    assert isinstance(mech, BCDP) and hooks.feature_section(mech) == mech.feature_section()
    assert isinstance(BCDP, ColumnOptions) and isinstance(BCDP, SplitsCopies)
    others = [get_mechanism(name) for name in BUILT_IN if name != "bcdp"]
    assert not any(isinstance(cls, (ColumnOptions, SplitsCopies)) for cls in others)
    assert all(hooks.feature_section(example(cls.name)) is None for cls in others)


def test_a_spec_without_hooks_binds_to_itself_and_splits_epsilon_by_basic_composition() -> None:
    spec = MechanismSpec("privunit2", 3.0, None, 2.0, {})
    assert spec.bind_columns(["a", "b"], 2) == (spec, ())
    assert spec.for_copies(1) is spec
    assert spec.for_copies(3) == MechanismSpec("privunit2", 1.0, None, 2.0, {})
