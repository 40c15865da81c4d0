"""The mechanism interface and the registry that maps names to mechanism classes.

A mechanism is a small immutable object: ``calibrate(d, epsilon, ...)`` builds it with its public
parameters; it knows its exact privacy level (``epsilon_exact``), its exact expected squared error
(``expected_error`` on the boundary of its domain, ``expected_error_max`` over the whole domain),
and privatizes a batch of rows with a given ``numpy.random.Generator``. ``describe()`` is what
``ldp params`` prints and the sidecar stores. The CLI, the sidecar and the estimators read
mechanisms only through this interface, so a new mechanism is one new module plus ``@register``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

from ldpcli import spheremath as sm
from ldpcli.errors import UsageError

M = TypeVar("M", bound="Mechanism")

_REGISTRY: dict[str, type[Mechanism]] = {}
_NORM_SLACK = 1e-9
#: The largest d any mechanism accepts (tested to 10⁷; some mechanisms set a lower limit).
MAX_D = 10**8
#: The largest public bound: L² and the errors must stay finite doubles.
MAX_NORM_BOUND = 1e150


def register(cls: type[M]) -> type[M]:
    """Class decorator: make a mechanism available under ``cls.name``."""
    if cls.name in _REGISTRY:
        raise ValueError(f"mechanism {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def mechanism_names() -> list[str]:
    """Names of all registered mechanisms, in registration order."""
    return list(_REGISTRY)


def get_mechanism(name: str) -> type[Mechanism]:
    """The mechanism class registered as ``name`` (UsageError listing the choices otherwise)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        choices = ", ".join(_REGISTRY)
        raise UsageError(f"unknown mechanism {name!r}; choose one of: {choices}") from None


def check_common(d: int, epsilon: float, norm_bound: float, *, max_d: int = MAX_D) -> None:
    """Reject impossible (d, ε, L) with a UsageError that says what to pass instead.

    L is limited to 1e150 so that L² and the errors stay finite doubles; d to ``max_d``.
    """
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise UsageError(f"--d: d must be an integer >= 1, got {d!r}")
    if d > max_d:
        raise UsageError(f"--d: d = {d} is above the {max_d:.0e} this mechanism supports")
    if not (isinstance(epsilon, (int, float, np.floating)) and math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"--eps: epsilon must be a finite number > 0, got {epsilon!r}")
    if not (isinstance(norm_bound, (int, float, np.floating)) and math.isfinite(norm_bound) and norm_bound > 0):
        raise UsageError(f"--norm-bound: norm bound must be a finite number > 0, got {norm_bound!r}")
    if norm_bound > MAX_NORM_BOUND:
        raise UsageError(
            f"--norm-bound: {norm_bound!r} is above {MAX_NORM_BOUND:g} (its square overflows); rescale the data"
        )


@dataclass(frozen=True)
class Mechanism(ABC):
    """A calibrated ε-LDP randomizer for d-dimensional rows.

    Subclasses set the class attributes, implement ``calibrate``, ``epsilon_exact``,
    ``expected_error``, ``expected_error_max``, ``parameters`` and ``privatize``.
    """

    d: int
    epsilon: float
    norm_bound: float
    calibration: str

    name: ClassVar[str]
    title: ClassVar[str]
    calibrations: ClassVar[tuple[str, ...]]
    #: What a row must satisfy, with L = ``norm_bound``: ``l2-ball`` (‖x‖₂ ≤ L), ``linf-box``
    #: (|x_j| ≤ L) or ``interval`` (d = 1, 0 ≤ x ≤ L). Rows outside are moved onto it by :meth:`clip`.
    domain: ClassVar[str] = "l2-ball"
    #: Extra keyword options of ``calibrate`` (name → one-line help). Each is also a dataclass
    #: field holding its resolved value, reported by ``describe()`` under the same name, so a
    #: sidecar can re-create the mechanism exactly.
    options: ClassVar[dict[str, str]] = {}
    #: A baseline kept for comparison (Laplace, Gaussian), not a recommended mechanism.
    baseline: ClassVar[bool] = False
    #: Privatizes vectors of any dimension (False for mechanisms of one scalar column).
    vector: ClassVar[bool] = True
    #: The largest d the mechanism accepts.
    max_d: ClassVar[int] = MAX_D

    @classmethod
    @abstractmethod
    def calibrate(
        cls: type[M],
        d: int,
        epsilon: float,
        *,
        norm_bound: float = 1.0,
        calibration: str | None = None,
        **options: Any,
    ) -> M:
        """Choose the mechanism's parameters for dimension d and privacy level ε.

        ``options`` are the mechanism's own (see :attr:`options`); unknown ones are a UsageError.
        """

    @classmethod
    def check_inputs(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str | None, options: dict[str, Any]
    ) -> tuple[int, float, float, str]:
        """Validate what every ``calibrate`` receives; return (d, ε, L, calibration) as int/float/str.

        Unknown options, impossible (d, ε, L) (with d ≤ :attr:`max_d`) and unknown calibrations are
        UsageErrors; the calibration defaults to the first listed.
        """
        cls.check_options(options)
        check_common(d, epsilon, norm_bound, max_d=cls.max_d)
        return int(d), float(epsilon), float(norm_bound), cls.check_calibration(calibration)

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """UsageError for an option this mechanism does not take (None values are ignored)."""
        unknown = sorted(name for name, value in options.items() if value is not None and name not in cls.options)
        if unknown:
            flags = ", ".join("--" + name.replace("_", "-") for name in unknown)
            takes = ", ".join("--" + name.replace("_", "-") for name in cls.options) or "none"
            raise UsageError(f"mechanism {cls.name!r} takes no option {flags}; its options: {takes}")

    def option_values(self) -> dict[str, Any]:
        """The resolved values of :attr:`options`, as ``calibrate`` keywords."""
        return {name: getattr(self, name) for name in self.options}

    @classmethod
    def check_calibration(cls, calibration: str | None) -> str:
        """The calibration to use (the first listed by default); UsageError for an unknown one."""
        if calibration is None:
            return cls.calibrations[0]
        if calibration not in cls.calibrations:
            choices = ", ".join(cls.calibrations)
            raise UsageError(f"mechanism {cls.name!r} has no calibration {calibration!r}; choose one of: {choices}")
        return calibration

    @property
    @abstractmethod
    def epsilon_exact(self) -> float:
        """The exact worst-case privacy loss of the calibrated parameters (≤ ``epsilon``)."""

    @property
    @abstractmethod
    def expected_error(self) -> float:
        """E‖Z − x‖² for an input on the boundary of the domain (‖x‖ = L; a vertex of the box; r_max)."""

    @property
    @abstractmethod
    def expected_error_max(self) -> float:
        """sup over the domain of E‖Z − x‖²."""

    @property
    def scale(self) -> float | None:
        """The output's constant ℓ2 norm divided by L, when the mechanism has one (else None)."""
        return None

    @abstractmethod
    def parameters(self) -> dict[str, Any]:
        """The mechanism's own calibrated parameters (γ, p, …), JSON-able."""

    @abstractmethod
    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Privatize a batch: ``x`` is (n, d) float64 with rows in the domain; returns (n, d).

        Each output row is an unbiased estimate of its input row and depends on no other row.
        """

    def audit_epsilon(self) -> tuple[float, str]:
        """The exact privacy level recomputed by a second route, independent of the calibration code.

        Returns (ε, a one-line description of the route). ``ldp audit`` compares it with
        ``epsilon_exact``. A mechanism without such a route reports that it has none.
        """
        raise NotImplementedError(f"mechanism {self.name!r} has no second route to its privacy level")

    def clip(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """Move rows outside the domain onto it (in place); return (x, number of rows moved).

        ``l2-ball``: rows with ‖x‖₂ > L are scaled onto the sphere of radius L. ``linf-box``:
        coordinates are clamped to [−L, L]. ``interval``: values are clamped to [0, L]. The bound
        L is a public parameter chosen by the user, never computed from the data. Rows within a
        relative 1e−9 beyond L (unit-normalised data after rounding) count as on the boundary:
        they are left as they are, and the mechanisms treat them as on it.
        """
        limit = self.norm_bound * (1.0 + _NORM_SLACK)
        if self.domain == "l2-ball":
            norms = sm.row_norms(x)
            over = norms > limit
            if over.any():
                x[over] *= (self.norm_bound / norms[over])[:, None]
        elif self.domain == "linf-box":
            over = np.any(np.abs(x) > limit, axis=1)
            if over.any():
                np.clip(x, -self.norm_bound, self.norm_bound, out=x)
        elif self.domain == "interval":
            over = np.any((x < 0.0) | (x > limit), axis=1)
            if over.any():
                np.clip(x, 0.0, self.norm_bound, out=x)
        else:  # pragma: no cover - a new domain must say how to clip
            raise NotImplementedError(f"no clipping rule for domain {self.domain!r}")
        return x, int(np.count_nonzero(over))

    def expected_error_mean(self, n: int) -> float:
        """Worst-case E‖x̄̂ − x̄‖² of the mean of n independently privatized rows: max error / n."""
        return self.expected_error_max / n

    def describe(self) -> dict[str, Any]:
        """The public description that ``ldp params --json`` prints and the sidecar stores.

        UsageError if a number in it is not a finite double (e.g. an error beyond 1e308).
        """
        where = f"{self.name} at d = {self.d}, ε = {self.epsilon:g}, L = {self.norm_bound:g}"
        advice = "not finite in double precision; rescale the data and use a smaller --norm-bound"
        try:
            out = self._describe()
        except (OverflowError, ValueError) as exc:
            raise UsageError(f"{where}: its parameters or expected errors are {advice}") from exc
        bad = [key for key, value in out.items() if isinstance(value, float) and not math.isfinite(value)]
        if bad:
            raise UsageError(f"{where}: {', '.join(bad)} {advice}")
        return out

    def _describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mechanism": self.name,
            "calibration": self.calibration,
            "d": self.d,
            "epsilon": self.epsilon,
            "epsilon_exact": self.epsilon_exact,
            "norm_bound": self.norm_bound,
            "domain": self.domain,
        }
        out.update(self.option_values())
        out.update(self.parameters())
        out["scale"] = self.scale
        out["expected_error"] = self.expected_error
        out["expected_error_max"] = self.expected_error_max
        return out
