"""What a mechanism may have beyond the base: the audit's, the risk's and the per-feature hooks.

:class:`~ldpcli.mechanisms._base.Mechanism` is what every mechanism is (calibrate, privatize, ε,
its errors, describe). The methods here are what some mechanisms also have, each asked for by one
part of the house. A mechanism has one by defining the method (no base class to inherit: the
protocols are structural and ``runtime_checkable``); the callers ask through the adapter functions
below, which say what a mechanism without the method gives.

- The audit (:mod:`ldpcli.audit._claims`): :class:`PrivacyRoute` (``audit_epsilon``, a second route
  to the exact privacy level) and :class:`LawTested` (``law_tests``, goodness-of-fit tests of the
  output's exact law). Without them the audit reports the check as unavailable, not failed.
- The reconstruction risk (:mod:`ldpcli.risk._section`, ``ldp attack``): :class:`RiskLevels`
  (``risk_epsilons``, the levels that bound reconstruction). Without it: ``epsilon_exact``.
- Per-feature privacy (:mod:`ldpcli.mechanisms._bcdp`): :class:`SecondMoments` of a base mechanism's
  output, which bcdp combines into its exact worst-case error, and :class:`FeatureSection`, the
  per-feature table that ``ldp params`` prints and the sidecar stores, and :class:`SpendingNote`,
  why a release spends less than the ε asked (every release shows it). The spec-level hooks of bcdp
  (options that name columns, copies that split a budget) are in :mod:`ldpcli.mechanisms._base`
  beside :class:`~ldpcli.mechanisms._base.MechanismSpec`, which asks for them.
- Arrays on a device (:mod:`ldpcli.release._arrays`, :mod:`ldpcli.math._devices`): :class:`RoundedCap`
  (``cap_cosines``, the per-row draws of a mechanism that releases L·scale·(t·u + r·w)). Without
  it a device array is refused, naming the mechanisms that have it.

A mechanism that has a method but cannot answer for its calibrated parameters (the law of a sum of
releases, a calibration without a second route) raises NotImplementedError from it, saying why; the
adapters raise the same for a mechanism without the method.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ldpcli.math._lawtests import LawTest
from ldpcli.mechanisms._base import Mechanism, get_mechanism, mechanism_names

# --------------------------------------------------------------------------- the audit


@runtime_checkable
class PrivacyRoute(Protocol):
    """A mechanism whose exact privacy level can be recomputed by a second route."""

    def audit_epsilon(self) -> tuple[float, str]:
        """The exact privacy level recomputed by a second route, independent of the calibration code.

        Returns (ε, a one-line description of the route). ``ldp audit`` compares it with
        ``epsilon_exact``.
        """
        ...


@runtime_checkable
class LawTested(Protocol):
    """A mechanism with goodness-of-fit tests of its output against the output's exact law."""

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """Goodness-of-fit tests of ``z`` against the exact law of the output for the input ``x``.

        ``x`` is one input row (shape (d,), in the domain), ``z`` the (n, d) privatized copies of
        it. Each test compares a statistic of the rows (a cosine, an agreement count, a grid value, a
        standardised noise) with its exact law under the calibrated parameters and returns its
        p-value; ``ldp audit`` applies a Bonferroni correction over all tests of all inputs. The
        tests must not depend on ``z`` for their choice (fixed directions are seeded constants).
        """
        ...


class OutputBranch(NamedTuple):
    """One branch of a mechanism's output for a fixed input x (:class:`Branched`).

    ``probability`` is P(branch | x); ``mean`` (shape (d,)) is E[Z | branch, x] and ``error`` is
    E[‖Z − x‖² | branch, x], all exact for the calibrated parameters.
    """

    name: str
    probability: float
    mean: np.ndarray
    error: float


@runtime_checkable
class Branched(Protocol):
    """A mechanism whose output, for a fixed input, is a mixture of branches that the output identifies."""

    def output_branches(self, x: np.ndarray) -> list[OutputBranch]:
        """The branches of the output for the input ``x`` (shape (d,), in the domain).

        They partition the output space, so their probabilities sum to 1, Σ P_b·mean_b = E[Z | x]
        and Σ P_b·error_b = E‖Z − x‖². ``ldp audit`` tests the branch counts against the
        probabilities, and the mean and the error given the counts.
        """
        ...

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """For each row of ``z`` (the (n, d) privatized copies of ``x``), the index of its branch in
        ``output_branches(x)``, read from the output alone (shape (n,), integers)."""
        ...


def output_branches(mech: Mechanism, x: np.ndarray) -> list[OutputBranch] | None:
    """``mech.output_branches(x)``; None for a mechanism without branches (:class:`Branched`) or one
    that cannot split its output for this input or these parameters (NotImplementedError)."""
    if not isinstance(mech, Branched):
        return None
    try:
        return mech.output_branches(x)
    except NotImplementedError:
        return None


def branch_labels(mech: Mechanism, x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``mech.branch_labels(x, z)`` for a mechanism with branches (:class:`Branched`)."""
    if not isinstance(mech, Branched):
        raise NotImplementedError(f"mechanism {mech.name!r} has no branches")
    return mech.branch_labels(x, z)


def audit_epsilon(mech: Mechanism) -> tuple[float, str]:
    """``mech.audit_epsilon()``; NotImplementedError for a mechanism without a second route."""
    if not isinstance(mech, PrivacyRoute):
        raise NotImplementedError(f"mechanism {mech.name!r} has no second route to its privacy level")
    return mech.audit_epsilon()


def law_tests(mech: Mechanism, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
    """``mech.law_tests(x, z)``; NotImplementedError for a mechanism without tests of its law."""
    if not isinstance(mech, LawTested):
        raise NotImplementedError(f"mechanism {mech.name!r} has no tests of its output's law")
    return mech.law_tests(x, z)


# --------------------------------------------------------------------------- the reconstruction risk


class RiskEpsilon(NamedTuple):
    """A privacy level that bounds reconstruction (:func:`risk_epsilons`), and when it applies.

    Bhowmick et al. 2018, Lemma 2.2: if the release is ε-LDP, the chance of reconstructing f(X)
    after seeing any output is at most e^ε times the prior's. ``epsilon`` is None when the
    mechanism gives no such per-output guarantee (an (ε, δ) mechanism with δ > 0: Sec. 4.4.1, "these
    weakenings can never actually protect against a reconstruction breach for all possible
    observations z"). ``conservative`` marks the level that holds with no assumption on the prior.
    """

    name: str
    epsilon: float | None
    applies: str
    conservative: bool


@runtime_checkable
class RiskLevels(Protocol):
    """A mechanism whose levels that bound reconstruction are not (only) its ``epsilon_exact``."""

    def risk_epsilons(self) -> list[RiskEpsilon]:
        """The levels that bound reconstruction from this release, the conservative one first.

        ``separated`` adds the direction's ε₁, under a stated assumption on the prior; the
        Gaussian baseline has no per-output level.
        """
        ...


def risk_epsilons(mech: Mechanism) -> list[RiskEpsilon]:
    """The levels that bound reconstruction from ``mech``'s release, the conservative one first.

    Every pure ε-LDP mechanism: ``epsilon_exact``, for every target f(X) and every prior
    (Bhowmick et al. 2018, Lemma 2.2); a mechanism with more structure says more (:class:`RiskLevels`).
    """
    if isinstance(mech, RiskLevels):
        return mech.risk_epsilons()
    return [RiskEpsilon("release", mech.epsilon_exact, "any target and any prior (Lemma 2.2: the release is "
                        f"{mech.epsilon_exact:.6g}-LDP)", True)]


# --------------------------------------------------------------------------- per-feature privacy (bcdp)


@runtime_checkable
class SecondMoments(Protocol):
    """A rotation-equivariant ℓ2 mechanism that reports its output's second moments."""

    def second_moments(self) -> tuple[float, float]:
        """(E⟨Z, u⟩², E⟨Z, w⟩²) for the unit direction u of the (rounded) input and any unit w ⊥ u.

        For a mechanism that rounds its input to ±L·u without bias and is rotation-equivariant, the
        second-moment matrix of the output is E[ZZᵀ] = a·uuᵀ + b·(I − uuᵀ) for every input in the
        ball, whatever its norm: this gives (a, b), and a + (d − 1)·b = E‖Z‖².
        """
        ...


def second_moments(mech: Mechanism) -> tuple[float, float]:
    """``mech.second_moments()`` (:class:`SecondMoments`); NotImplementedError for a mechanism whose
    output covariance has no such form."""
    if not isinstance(mech, SecondMoments):
        raise NotImplementedError(f"mechanism {mech.name!r} does not report its output's second moments")
    return mech.second_moments()


@runtime_checkable
class FeatureSection(Protocol):
    """A mechanism whose features have different guarantees and errors (bcdp)."""

    def feature_section(self) -> dict[str, Any]:
        """Per-feature guarantees and errors: ``ldp params`` prints it and the sidecar stores it as
        its ``features`` section."""
        ...


def feature_section(mech: Mechanism) -> dict[str, Any] | None:
    """``mech.feature_section()`` for a mechanism whose features differ, else None."""
    return mech.feature_section() if isinstance(mech, FeatureSection) else None


@runtime_checkable
class SpendingNote(Protocol):
    """A mechanism that can spend less than the ε asked (bcdp: the levels and q bind its total budget)."""

    def spending_note(self) -> str | None:
        """The sentence saying the ε actually spent (``epsilon_exact``), of the ε asked, and why; None
        when the release spends the ε asked. Every release shows and records it."""
        ...


def spending_note(mech: Mechanism) -> str | None:
    """``mech.spending_note()`` for a mechanism that can spend less than asked, else None."""
    return mech.spending_note() if isinstance(mech, SpendingNote) else None


# --------------------------------------------------------------------------- arrays on a device


@runtime_checkable
class RoundedCap(Protocol):
    """A mechanism that releases L·scale·(t·u + r·w): u the unbiased rounding of the row to the unit
    sphere, a cosine t per row (r = √(1 − t²)) and w uniform on the sphere orthogonal to u (PrivUnit2,
    duchi-l2: ``ldpcli.math._sphere.rounded_cap_directions``)."""

    @property
    def scale(self) -> float:
        """The output's norm over L."""
        ...

    def cap_cosines(self, rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(t, r) for ``rows`` rows: the per-row scalar draws, made on the host with numpy."""
        ...


def rounded_cap(mech: Mechanism) -> RoundedCap:
    """``mech`` as a :class:`RoundedCap`; NotImplementedError naming the registered mechanisms that are."""
    if not isinstance(mech, RoundedCap):
        able = [name for name in mechanism_names() if callable(getattr(get_mechanism(name), "cap_cosines", None))]
        raise NotImplementedError(f"mechanism {mech.name!r} has no device path; the mechanisms with one: "
                                  f"{', '.join(able)}")
    return mech


# --------------------------------------------------------------------------- the secure rendering


@runtime_checkable
class FiniteOutputs(Protocol):
    """A mechanism each of whose output coordinates is one of finitely many public doubles (the
    hypercube mechanisms' ±L·B, the scalar mechanisms' grid values), so that the released double is
    a function of the sampled discrete choice only (:mod:`ldpcli.mechanisms._rendering`,
    docs/floating-point.md)."""

    @property
    def output_count(self) -> int:
        """How many values an output coordinate can take."""
        ...

    def output_value(self, index: np.ndarray) -> np.ndarray:
        """The double released for each discrete choice ``index`` (integers in [0, output_count)),
        computed from the public parameters only: ``privatize`` releases exactly these doubles."""
        ...


def finite_outputs(mech: Mechanism) -> FiniteOutputs | None:
    """``mech`` as a :class:`FiniteOutputs` when its outputs take finitely many values, else None."""
    return mech if isinstance(mech, FiniteOutputs) else None


@runtime_checkable
class PrivateSign(Protocol):
    """A mechanism that releases ±s·Z for d normals Z, + exactly when (⟨Z, U⟩ ≥ 0) equals a kept sign
    (gaussian-sign): the released magnitudes are a function of Z alone, the input only decides a sign."""

    @property
    def gaussian_scale(self) -> float:
        """s, the factor of the normals in the output."""
        ...

    def kept_signs(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """The per-row kept signs (True: the sign of ⟨Z, U⟩ is kept), drawn after the rounding uniforms."""
        ...


@runtime_checkable
class DirectionTimesMagnitude(Protocol):
    """A mechanism whose output is the product of a direction's and a magnitude's outputs (separated):
    the secure rendering renders the direction securely and multiplies by the magnitude's public value."""

    @property
    def direction(self) -> Mechanism:
        """The direction's mechanism (on the unit ball)."""
        ...

    @property
    def magnitude(self) -> Mechanism:
        """The magnitude's mechanism (finitely many public values)."""
        ...

    def privatize_parts(self, x: np.ndarray, rng: np.random.Generator, direction: Any) -> np.ndarray:
        """``privatize`` with the direction's sampler ``direction(u, rng)`` given."""
        ...


# --------------------------------------------------------------------------- the analyst's checks


class PinnedLaw(NamedTuple):
    """What a mechanism's law fixes about every output row, whatever its input (:func:`pinned_law`).

    ``norm``: every output row has this ℓ2 norm (L·scale: PrivUnit2, duchi-l2, the hypercube mechanisms),
    within ``norm_slack`` more (a grid rendering's √d·g: each coordinate rounded to gℤ moves by less
    than g), else None. ``values``: the sorted finite set of doubles every output coordinate is one of
    (:class:`FiniteOutputs`: ±c for the hypercube mechanisms, the scalar mechanisms' grid), else None.
    """

    norm: float | None
    norm_slack: float
    values: np.ndarray | None


def pinned_law(mech: Mechanism) -> PinnedLaw:
    """What ``mech``'s law pins about each output row (:class:`PinnedLaw`): a constant norm when it has a
    :attr:`~ldpcli.mechanisms._base.Mechanism.scale`, a finite set of coordinate values when it has
    :class:`FiniteOutputs`; nothing (both None) for the others (PrivUnitG, gaussian-sign, separated, the
    baselines, bcdp), whose outputs are unbounded or of no single norm."""
    finite = finite_outputs(mech)
    values = None if finite is None else np.unique(finite.output_value(np.arange(finite.output_count)))
    scale = mech.scale
    rendering = getattr(mech, "rendering", None)  # a secure release's (ldpcli.mechanisms._rendering)
    grid = rendering.grid if rendering is not None and rendering.kind == "grid" else None
    slack = 0.0 if grid is None else float(np.sqrt(mech.d)) * float(grid)
    return PinnedLaw(None if scale is None else mech.norm_bound * float(scale), slack, values)


def second_moment_max(mech: Mechanism) -> float:
    """sup over the domain of E‖Z‖², the output's mean squared norm: E‖Z‖² = E‖Z − x‖² + ‖x‖² for an
    unbiased Z (the cross term E⟨Z − x, x⟩ is 0), so it is at most ``expected_error_max`` plus the
    domain's largest ‖x‖²: L² on the ℓ2 ball, d·L² on the box [−L, L]^d and on [0, L]^d."""
    radius_sq = mech.norm_bound**2 * (1 if str(mech.domain) == "l2-ball" else mech.d)
    return float(mech.expected_error_max) + radius_sq
