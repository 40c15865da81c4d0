"""The audit of seed-compressed reports: the mechanism whose outputs are the decoded reports.

:func:`reported` extends the class of ``SeedReports.base`` (as :func:`ldpcli.mechanisms._rendering.secured`
extends a mechanism with its rendering) so that :func:`ldpcli.audit._claims.audit` (the command line's audit of
seed reports) checks every claim of the reports (:mod:`ldpcli.mechanisms._compressed`; Feldman &
Talwar 2021, Alg. 1) by its own routes:

- **the outputs**: Z = D(s)/(1 − f), the decoding of the seed that the encoder chose for x among fresh seeds
  drawn from the audit's generator;
- **exact ε**: the reports' (:attr:`~ldpcli.mechanisms.SeedReports.epsilon_exact`, in log space). The second
  route takes the base's own second route ε₀′ (PrivUnit2's cap probability by quadrature, PrivUnitG's) and
  evaluates the mixture's density-ratio bounds directly: log(((1 − f)M + f)/((1 − f)M·e^{−ε₀′} + f)), M = p/P;
- **the errors**: the reports' exact E‖Z − x‖² at ‖x‖ = L and E‖Z‖² at x = 0;
- **no branches**: the mixture's branch probabilities would need the reference law's in every region, so the
  mean and the error are tested unconditionally;
- **the law**: the base's law tests on (1 − f)·Z = D(s), whose law is the mixture (1 − f)·R_x + f·ρ: a test of
  level α under R_x rejects the mixture with probability at most α + n·f over n rows (f ≤ 10⁻¹², so below
  10⁻⁷ at the audit's 20 000 rows per input), and the audit's false-alarm bound is 10⁻³ plus that much per test;
- **the lower bound**: its events on the decoded outputs, against the reports' ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ldpcli.mechanisms import Mechanism, SeedReports
from ldpcli.mechanisms._hooks import LawTest, OutputBranch, audit_epsilon, law_tests

_CLASSES: dict[type, type[Mechanism]] = {}


def reported(reports: SeedReports) -> Mechanism:
    """The mechanism whose outputs are ``reports``' decoded reports (the module docstring): the base's name,
    spec, d, ε and domain; the reports' outputs, exact ε, errors and law."""
    base = reports.base
    values = {item.name: getattr(base, item.name) for item in fields(base)}
    return _reported_class(type(base))(**values, reports=reports)  # type: ignore[call-arg]


def _reported_class(base: type) -> type[Mechanism]:
    """The base class extended with its seed reports (one class per base, as the secure rendering's)."""
    if base in _CLASSES:
        return _CLASSES[base]

    def plain(self: Any) -> Mechanism:
        return base(**{item.name: getattr(self, item.name) for item in fields(base)})

    def privatize(self: Any, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.reports.privatize(x, rng)

    def epsilon_exact(self: Any) -> float:
        return self.reports.epsilon_exact

    def expected_error(self: Any) -> float:
        return self.reports.expected_error

    def expected_error_max(self: Any) -> float:
        return self.reports.expected_error_max

    def second_route(self: Any) -> tuple[float, str]:
        epsilon, route = audit_epsilon(self.plain())
        reports: SeedReports = self.reports
        f, ratio = reports.fallback_probability, math.exp(reports.log_ratio)
        mixed = math.log(((1.0 - f) * ratio + f) / ((1.0 - f) * ratio * math.exp(-epsilon) + f))
        return mixed, (f"{route}, then the mixture (1 − f)·R + f·ρ of the seed reports: its density-ratio bounds "
                       f"evaluated directly (f = {f:.3g}, p/P = {ratio:.6g})")

    def tests(self: Any, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        return law_tests(self.plain(), x, z * (1.0 - self.reports.fallback_probability))

    def no_branches(self: Any, x: np.ndarray) -> list[OutputBranch]:
        raise NotImplementedError("the seed reports' outputs are tested without branches")

    namespace = {
        "__annotations__": {"reports": "SeedReports | None"}, "reports": None, "__module__": __name__,
        "plain": plain, "privatize": privatize, "epsilon_exact": property(epsilon_exact),
        "expected_error": property(expected_error), "expected_error_max": property(expected_error_max),
        "audit_epsilon": second_route, "law_tests": tests, "output_branches": no_branches,
        "__doc__": f"{base.__name__} released as seed reports (ldpcli.audit._reports).",
    }
    cls: type[Mechanism] = dataclass(frozen=True)(type(f"Reported{base.__name__}", (base,), namespace))
    _CLASSES[base] = cls
    return cls
