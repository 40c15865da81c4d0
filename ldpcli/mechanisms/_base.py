"""The mechanism interface, its declared options, the spec that names a mechanism, and the registry.

A mechanism is a small immutable object: ``calibrate(d, epsilon, ...)`` builds it with its public
parameters; it knows its exact privacy level (``epsilon_exact``), its exact expected squared error
(``expected_error`` on the boundary of its domain, ``expected_error_max`` over the whole domain),
and privatizes a batch of rows with a given ``numpy.random.Generator``. ``describe()`` is what
``ldp params`` prints and the sidecar stores. The CLI, the sidecar and the estimators read
mechanisms only through this interface, so a new mechanism is one new module plus ``@register``.

Validation happens once, in the template :meth:`Mechanism.calibrate` (after scipy.stats: the public
method checks, the private one computes): (d, ε, L), the calibration name and every option against
its :class:`OptionSpec` are checked there, then the mechanism's own ``_calibrate`` receives clean
values. The options a mechanism declares are all the CLI knows about it: its flags, their help,
the sidecar's round trip and the property tests come from the declaration.

The base is what every mechanism is. What only some have, each asked for by one part of the house
(the audit's second route and law tests, the risk's levels, bcdp's per-feature table and its base
mechanisms' second moments), is in :mod:`ldpcli.mechanisms._hooks`; the two hooks of a spec (options
that name columns, copies that split a budget their own way) are :class:`ColumnOptions` and
:class:`SplitsCopies` here, beside the :class:`MechanismSpec` that asks for them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar, overload, runtime_checkable

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math._domains import FLOAT64_PRECISION, L2_BALL, Domain

M = TypeVar("M", bound="Mechanism")


_REGISTRY: dict[str, type[Mechanism]] = {}
#: The largest d any mechanism accepts (tested to 10⁷; some mechanisms set a lower limit).
MAX_D = 10**8
#: The largest public bound: L² and the errors must stay finite doubles.
MAX_NORM_BOUND = 1e150


#: What the registry and the command line know of a mechanism, given to :func:`register` (the math needs none of it).
REGISTRY_METADATA = ("name", "title", "calibrations", "baseline", "compared", "example_d")


@overload
def register(cls: type[M], /) -> type[M]: ...


@overload
def register(*, name: str, title: str, calibrations: tuple[str, ...], baseline: bool = ..., compared: bool = ...,
             example_d: int = ...) -> Callable[[type[M]], type[M]]: ...


def register(cls: type[M] | None = None, /, **metadata: Any) -> type[M] | Callable[[type[M]], type[M]]:
    """Class decorator: make a mechanism available under its name.

    ``@register(name=..., title=..., calibrations=(...), baseline=False, compared=True, example_d=8)``
    gives the registry's and the command line's metadata (:data:`REGISTRY_METADATA`: the registry name, the
    title ``ldp params`` prints, the calibrations, the first the default; a comparison-only baseline; whether
    the all-mechanism comparisons include it; a valid d for examples and the test battery), which the class
    then carries. A bare ``@register`` registers a class that sets them itself (plug-ins written for ldp 0.1).
    """
    if cls is not None:
        if metadata:
            raise TypeError("register takes a class or keyword arguments, not both")
        return _add(cls)
    unknown = sorted(set(metadata) - set(REGISTRY_METADATA))
    if unknown:
        raise TypeError(f"register() got unknown metadata {unknown}; it takes {', '.join(REGISTRY_METADATA)}")

    def decorate(target: type[M]) -> type[M]:
        for key, value in metadata.items():
            setattr(target, key, value)
        return _add(target)

    return decorate


def _add(cls: type[M]) -> type[M]:
    """Put ``cls`` in the registry under ``cls.name``; ValueError for a name taken."""
    if cls.name in _REGISTRY:
        raise ValueError(f"mechanism {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    """Remove a registered mechanism (for plug-ins and tests that register a throwaway one)."""
    _REGISTRY.pop(name, None)


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
        raise UsageError(f"`d`: d must be an integer >= 1, got {d!r}")
    if d > max_d:
        raise UsageError(f"`d`: d = {d} is above the {max_d:.0e} this mechanism supports")
    if not (isinstance(epsilon, (int, float, np.floating)) and math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"`epsilon`: epsilon must be a finite number > 0, got {epsilon!r}")
    if not (isinstance(norm_bound, (int, float, np.floating)) and math.isfinite(norm_bound) and norm_bound > 0):
        raise UsageError(f"`norm_bound`: norm bound must be a finite number > 0, got {norm_bound!r}")
    if norm_bound > MAX_NORM_BOUND:
        raise UsageError(
            f"`norm_bound`: {norm_bound!r} is above {MAX_NORM_BOUND:g} (its square overflows); rescale the data"
        )


def check_count(value: Any, what: str, minimum: int = 1) -> int:
    """An integer ≥ ``minimum`` (a row count, a number of trials), else a UsageError naming ``what``, the
    caller's parameter (``n``, ``trials``)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise UsageError(f"`{what}` must be >= {minimum} (an integer), got {value!r}")
    return int(value)


@dataclass(frozen=True)
class OptionSpec:
    """One calibration option of a mechanism: its type, range, default, help and an example.

    ``name`` is the keyword of ``calibrate`` (``eps_split``); the CLI spells it with dashes.
    ``low``/``high`` bound a number (``low_open``/``high_open``: strictly). A text option
    (``kind=str``) is one of ``choices`` (a base mechanism's name) or, with ``normalize``, any text
    that function accepts: it returns the canonical form stored in the spec and the sidecar (or
    raises a UsageError saying what is wrong). ``default`` None means the mechanism computes it
    (the help says how); ``required`` options have no default, and ``required_by`` names the
    calibrations that need the option given. ``example`` is a valid value that the CLI's help
    shows and the test battery uses.
    """

    name: str
    kind: type[int] | type[float] | type[str]
    help: str
    example: int | float | str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    default: int | float | str | None = None
    required: bool = False
    #: Calibrations that need the option given (it is optional with the others).
    required_by: tuple[str, ...] = ()
    #: The values a text option may take (empty: any text ``normalize`` accepts).
    choices: tuple[str, ...] = ()
    #: A text option's canonical form (a UsageError for text it does not accept).
    normalize: Callable[[str], str] | None = field(default=None, compare=False)

    @property
    def flag(self) -> str:
        """The command-line flag: ``--`` and the name with dashes."""
        return "--" + self.name.replace("_", "-")

    def range_text(self) -> str:
        """E.g. ``an integer in [1, 1048576]``, ``a finite number > 0`` or ``one of: a, b``."""
        if self.kind is str:
            return "one of: " + ", ".join(self.choices) if self.choices else "text"
        noun = "an integer" if self.kind is int else "a finite number"
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"{noun} in {left}{self.low:g}, {self.high:g}{right}"
        if self.low is not None:
            return f"{noun} {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{noun} {'<' if self.high_open else '<='} {self.high:g}"
        return noun

    def check(self, value: Any) -> int | float | str:
        """The value as ``kind`` if it is in range (integral floats from JSON count as integers)."""
        bad = UsageError(f"`{self.name}`: must be {self.range_text()}, got {value!r}")
        if self.kind is str:
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                raise bad
            return self.normalize(value) if self.normalize is not None else value
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise bad
        if not math.isfinite(value):
            raise bad
        if self.kind is int:
            if not float(value).is_integer():
                raise bad
            value = int(value)
        else:
            value = float(value)
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise bad
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            raise bad
        return value


@runtime_checkable
class ColumnOptions(Protocol):
    """A mechanism class with options that may name the data's columns (bcdp's ``feature_eps``)."""

    @classmethod
    def bind_options(
        cls, options: dict[str, Any], names: Sequence[str] | None, d: int, epsilon: float
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The options with the columns they name (``names``; None for a list column) resolved for
        rows of dimension d, and notes for the operator."""
        ...


@runtime_checkable
class SplitsCopies(Protocol):
    """A mechanism class whose copies of a row split its privacy otherwise than ε/copies (bcdp)."""

    @classmethod
    def copy_spec(cls, spec: MechanismSpec, copies: int) -> MechanismSpec:
        """The spec of one of ``copies`` independent releases of a row that together satisfy ``spec``."""
        ...


@dataclass(frozen=True)
class MechanismSpec:
    """What names a calibrated mechanism apart from the data's dimension: the public choices.

    ``ldp params``, ``privatize``, ``audit``, the comparison and the sidecar all build their
    mechanism from one of these: ``spec.calibrate(d)``.

    Parameters
    ----------
    name : str
        A registered mechanism (:func:`mechanism_names`).
    epsilon : float
        The privacy level ε asked for.
    calibration : str or None
        One of the mechanism's ``calibrations`` (None: its default, resolved by :meth:`validated`).
    norm_bound : float
        The public bound L of the rows' domain.
    options : Mapping
        The mechanism's own options (``Mechanism.options``: ``delta``, ``k``…).
    """

    name: str
    epsilon: float
    calibration: str | None = None
    norm_bound: float = 1.0
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def mechanism_class(self) -> type[Mechanism]:
        """The registered class (UsageError for an unknown name)."""
        return get_mechanism(self.name)

    def validated(self) -> MechanismSpec:
        """This spec with its calibration resolved and its options checked, before any data is read.

        Everything that does not need d is checked here (d is checked by :meth:`calibrate`).
        """
        cls = self.mechanism_class
        check_common(1, self.epsilon, self.norm_bound)
        calibration = cls._check_calibration(self.calibration)
        options = cls._check_option_values(dict(self.options), calibration)
        given = {name: value for name, value in options.items() if value is not None}
        return MechanismSpec(self.name, float(self.epsilon), calibration, float(self.norm_bound), given)

    def bind_columns(self, names: Sequence[str] | None, d: int) -> tuple[MechanismSpec, tuple[str, ...]]:
        """This spec with options that name the data's columns resolved for rows of dimension d.

        ``names`` are the coordinates' column names (None for a list column). Returns the spec and
        notes for the operator (e.g. a level clipped to ε). Only a mechanism with
        :class:`ColumnOptions` has such options; any other spec is returned as it is.
        """
        cls = self.mechanism_class
        if not isinstance(cls, ColumnOptions):
            return self, ()
        options, notes = cls.bind_options(dict(self.options), names, d, self.epsilon)
        return MechanismSpec(self.name, self.epsilon, self.calibration, self.norm_bound, options), notes

    def for_copies(self, copies: int) -> MechanismSpec:
        """The spec of each of ``copies`` independent releases of one row that together spend this
        spec's privacy (``ReleaseOptions.copies``).

        Basic composition: ``copies`` releases at ε/copies are ε-LDP together. A mechanism whose
        privacy is more than one ε (per-feature levels) splits its own way (:class:`SplitsCopies`).
        """
        copies = check_count(copies, "copies")
        if copies == 1:
            return self
        cls = self.mechanism_class
        if isinstance(cls, SplitsCopies):
            return cls.copy_spec(self, copies)
        return MechanismSpec(self.name, self.epsilon / copies, self.calibration, self.norm_bound, dict(self.options))

    def calibrate(self, d: int) -> Mechanism:
        """The mechanism for rows of dimension d."""
        return self.mechanism_class.calibrate(
            d, self.epsilon, norm_bound=self.norm_bound, calibration=self.calibration, **dict(self.options)
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict: name, epsilon, calibration, norm_bound, options."""
        return {
            "name": self.name,
            "epsilon": self.epsilon,
            "calibration": self.calibration,
            "norm_bound": self.norm_bound,
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MechanismSpec:
        """Inverse of :meth:`to_dict`; ValueError naming the first malformed field."""
        if not isinstance(data, Mapping):
            raise ValueError("the mechanism must be an object")
        name, epsilon, norm_bound = data.get("name"), data.get("epsilon"), data.get("norm_bound")
        calibration, options = data.get("calibration"), data.get("options", {})
        if not isinstance(name, str):
            raise ValueError("'name' must be a mechanism name")
        numbers: dict[str, float] = {}
        for key, value in (("epsilon", epsilon), ("norm_bound", norm_bound)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{key!r} must be a number")
            numbers[key] = float(value)
        if calibration is not None and not isinstance(calibration, str):
            raise ValueError("'calibration' must be a name")
        if not isinstance(options, Mapping) or not all(isinstance(key, str) for key in options):
            raise ValueError("'options' must be an object")
        return cls(name, numbers["epsilon"], calibration, numbers["norm_bound"], dict(options))


@dataclass(frozen=True)
class Mechanism(ABC):
    """A calibrated ε-LDP randomizer for d-dimensional rows.

    Subclasses implement ``_calibrate``, ``epsilon_exact``, ``expected_error``, ``expected_error_max``,
    ``parameters`` and ``privatize``, set ``domain`` and ``options`` where they are not the defaults, get
    their registry metadata from ``@register(name=..., title=..., calibrations=...)``, and may have the
    methods of :mod:`ldpcli.mechanisms._hooks` (``audit_epsilon``, ``law_tests``, ``risk_epsilons``, …;
    the table of docs/mechanisms.md).
    """

    d: int
    epsilon: float
    norm_bound: float
    calibration: str

    name: ClassVar[str]
    title: ClassVar[str]
    calibrations: ClassVar[tuple[str, ...]]
    #: The set a row must lie in, scaled by L = ``norm_bound`` (see :mod:`ldpcli.math._domains`). It
    #: compares equal to its name: ``l2-ball``, ``linf-box`` or ``interval``.
    domain: ClassVar[Domain] = L2_BALL
    #: The options of ``calibrate`` beyond (d, ε, L, calibration), by name (see :func:`declare`).
    #: Each is also a dataclass field holding its resolved value, reported by ``describe()`` under
    #: the same name, so a sidecar can re-create the mechanism exactly.
    options: ClassVar[dict[str, OptionSpec]] = {}
    #: A baseline kept for comparison (Laplace, Gaussian), not a recommended mechanism.
    baseline: ClassVar[bool] = False
    #: Privatizes vectors of any dimension (False for mechanisms of one scalar column).
    vector: ClassVar[bool] = True
    #: In the all-mechanism comparisons (``compare_mechanisms``, the default ``ldp sweep``,
    #: the ε solver): False for a mechanism that needs the user's own claims to calibrate (bcdp).
    compared: ClassVar[bool] = True
    #: The largest d the mechanism accepts.
    max_d: ClassVar[int] = MAX_D
    #: A valid (d, ε) for the registry-wide test battery and the CLI help's examples.
    example_d: ClassVar[int] = 8

    @classmethod
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

        Checks (d, ε, L), the calibration and ``options`` (see :attr:`options`; unknown or out
        of range ones are UsageErrors), then calls the mechanism's own ``_calibrate`` with every
        declared option (None where not given and without a default).
        """
        d, epsilon, norm_bound, calibration = cls._check_inputs(d, epsilon, norm_bound, calibration, options)
        return cls._calibrate(d, epsilon, norm_bound, calibration, **cls._check_option_values(options, calibration))

    @classmethod
    @abstractmethod
    def _calibrate(cls: type[M], d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any) -> M:
        """The mechanism's own calibration, on validated inputs (see :meth:`calibrate`)."""

    @classmethod
    def _check_inputs(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str | None, options: Mapping[str, Any]
    ) -> tuple[int, float, float, str]:
        """Validate (d, ε, L) and the calibration; return them as int/float/float/str.

        Unknown options, impossible (d, ε, L) (with d ≤ :attr:`max_d`) and unknown calibrations are
        UsageErrors; the calibration defaults to the first listed.
        """
        cls._check_options(options)
        check_common(d, epsilon, norm_bound, max_d=cls.max_d)
        return int(d), float(epsilon), float(norm_bound), cls._check_calibration(calibration)

    @classmethod
    def _check_options(cls, options: Mapping[str, Any]) -> None:
        """UsageError for an option this mechanism does not take (None values are ignored)."""
        unknown = sorted(name for name, value in options.items() if value is not None and name not in cls.options)
        if unknown:
            flags = ", ".join(f"`{name}`" for name in unknown)
            takes = ", ".join(f"`{name}`" for name in cls.options) or "none"
            raise UsageError(f"mechanism {cls.name!r} takes no option {flags}; its options: {takes}")

    @classmethod
    def _check_option_values(cls, options: Mapping[str, Any], calibration: str) -> dict[str, Any]:
        """Every declared option, checked against its spec: given, its default, or None."""
        cls._check_options(options)
        values: dict[str, Any] = {}
        for name, spec in cls.options.items():
            value = options.get(name)
            if value is None:
                if spec.required or calibration in spec.required_by:
                    scope = f" with `calibration` {calibration}" if calibration in spec.required_by else ""
                    raise UsageError(
                        f"mechanism {cls.name!r} needs `{name}` ({spec.range_text()}){scope}, e.g. "
                        f"`{name}`={spec.example!r}: {spec.help}"
                    )
                values[name] = spec.default
            else:
                values[name] = spec.check(value)
        return values

    def option_values(self) -> dict[str, Any]:
        """The resolved values of :attr:`options`, as ``calibrate`` keywords."""
        return {name: getattr(self, name) for name in self.options}

    @property
    def spec(self) -> MechanismSpec:
        """The public choices that re-create this mechanism: ``self.spec.calibrate(self.d) == self``."""
        return MechanismSpec(self.name, self.epsilon, self.calibration, self.norm_bound, self.option_values())

    @classmethod
    def _check_calibration(cls, calibration: str | None) -> str:
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
        """Privatize a batch: ``x`` is (n, d) float64 with rows in the domain; returns a new (n, d).

        Rows within the domain's slack beyond L count as on the boundary. ``x`` is never written
        to (it may be a read-only view of the file's buffer). Each output row is an unbiased
        estimate of its input row and depends on no other row.
        """

    @property
    def epsilon_asked(self) -> float:
        """The share of the asked ε that one use of this mechanism stands for: ``epsilon`` (a copy of
        ``ReleaseOptions.copies`` is calibrated at ε/copies, :meth:`MechanismSpec.for_copies`); a mechanism
        whose copies each keep the asked ε and split their privacy otherwise (:class:`SplitsCopies`) says its share."""
        return self.epsilon

    @property
    def delta_exact(self) -> float:
        """δ of (ε, δ)-DP: 0 for the pure ε-LDP mechanisms (the Gaussian baseline overrides it)."""
        return 0.0

    def project(self, x: np.ndarray, precision: float = FLOAT64_PRECISION) -> tuple[np.ndarray, int]:
        """Rows outside the domain moved onto it, and how many were clipped; ``x`` is never changed.

        ``l2-ball``: rows with ‖x‖₂ > L are scaled onto the sphere of radius L. ``linf-box``:
        coordinates are clamped to [−L, L]. ``interval``: values are clamped to [0, L]. The bound
        L is a public parameter chosen by the user, never computed from the data. Rows beyond L by
        less than the domain's slack for values of that ``precision`` (unit roundoff of the source
        type: 2⁻²⁴ for float32) are on the boundary: left as they are and not counted. Rows of
        values exact in float32 within float32's slack are moved but not counted
        (:meth:`ldpcli.math._domains.Domain.rounded`: float32 data saved as float64).
        """
        return self.domain.project(x, self.norm_bound, precision)

    def expected_error_mean(self, n: int) -> float:
        """Worst-case E‖x̄̂ − x̄‖² of the mean of n independently privatized rows: max error / n."""
        return self.expected_error_max / check_count(n, "n")

    def describe(self) -> dict[str, Any]:
        """The public description that the ``ldp params`` command prints as JSON and the sidecar stores.

        UsageError if a number in it is not a finite double (e.g. an error beyond 1e308).
        """
        where = f"{self.name} at d = {self.d}, ε = {self.epsilon:g}, L = {self.norm_bound:g}"
        advice = "not finite in double precision; rescale the data and use a smaller `norm_bound`"
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
            "domain": str(self.domain),
        }
        out.update(self.option_values())
        out.update(self.parameters())
        out["scale"] = self.scale
        out["expected_error"] = self.expected_error
        out["expected_error_max"] = self.expected_error_max
        return out


def declare(*specs: OptionSpec) -> dict[str, OptionSpec]:
    """The ``options`` class attribute of a mechanism, from its option specs in flag order."""
    return {spec.name: spec for spec in specs}
