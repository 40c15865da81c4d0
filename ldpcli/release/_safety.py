"""The checks that stand between a user and an unsafe or wrong release.

Each function returns the sentence to show (or raises), so the file pipeline, the array API and the
CLI say the same thing in the same words:

- :func:`check_epsilon`: ε outside the range where ldp's guarantees are computed and tested
  ([0.01, 10⁴]) is refused unless forced; at ε = 10⁶ PrivUnit2 writes the data back almost exactly.
- :func:`near_exact_warning`: a release that an onlooker reverses, whatever ε is called. Three
  criteria, each computed for the mechanism at hand, not from a rule of thumb: each row is within a
  small RMS distance of its raw row (its own boundary error), the natural reconstruction recovers a
  row's direction to an expected cosine ≥ 0.9 (:mod:`ldpcli.risk._cosine`), or the reconstruction
  bound for a guess within cosine 0.9 of a row's direction reaches 1 (:mod:`ldpcli.risk._diffuse`).
- :func:`clip_warning` / :func:`check_clipping`: rows outside the public bound are moved onto it,
  so every estimate is of the clipped rows; past a small fraction this is said loudly, and past
  :data:`CLIP_REFUSE_FRACTION` (half the rows) the release is refused unless the caller accepts it
  (``fail_on_clip=1``; pipelines can refuse less, ``fail_on_clip=0``). The count is a statistic of the raw data: it is
  shown to the person who ran the job and never stored. Rows put outside only by the rounding of
  their values are not counted (:meth:`ldpcli.math._domains.Domain.rounded`), and both messages
  state that tolerance (:func:`clip_tolerance`).
- :func:`baseline_warning`: the two baselines are not for release (Gaussian is (ε, δ)-DP; Laplace
  adds floating-point noise to the data's own doubles, which is not DP bit for bit, Mironov 2012).
- :func:`unprivatized_warning`: kept columns are copied as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ldpcli.errors import DataError, LdpError, UsageError, counted
from ldpcli.math._domains import FLOAT32_PRECISION, FLOAT64_PRECISION
from ldpcli.mechanisms._base import Mechanism
from ldpcli.mechanisms._composition import composed_levels
from ldpcli.mechanisms._hooks import risk_epsilons, spending_note
from ldpcli.risk._cosine import expected_cosine
from ldpcli.risk._diffuse import diffuse_risk

#: The range of ε over which every quantity ldp reports is computed and tested.
EPSILON_MIN = 0.01
EPSILON_MAX = 1e4
#: A release is "essentially exact" when each row's RMS error is at most this fraction of L.
NEAR_EXACT_RELATIVE_RMS = 0.1
#: ... or when the natural reconstruction recovers a boundary row's direction to at least this expected cosine,
NEAR_EXACT_COSINE = 0.9
#: ... and ε alone no longer protects a row once the bound on guessing its direction to this cosine reaches 1.
NEAR_EXACT_ACCURACY = 0.9
#: Clipping more than this fraction of the rows is reported as a warning, not a note.
CLIP_WARN_FRACTION = 0.01
#: The default ``fail_on_clip``: a release that would clip more than this fraction of the rows is
#: refused (nothing is written). Past half the rows the bound describes the data no more: the release
#: and every estimate from it are of the bound, not of the rows (``fail_on_clip=1`` accepts it).
CLIP_REFUSE_FRACTION = 0.5


def check_epsilon(epsilon: float, *, force: bool = False, name: str = "epsilon") -> str | None:
    """Refuse ε outside [0.01, 10⁴] with a :class:`UsageError`, unless ``force``.

    With ``force`` an out-of-range ε is allowed and the warning to show is returned; None when ε
    is in range. ``name`` is the caller's keyword for ε (``epsilon``, ``eps``); messages and the
    warning name it between backticks (:mod:`ldpcli.errors`).
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        return None  # not a privacy level at all: the mechanism's validation says so
    if EPSILON_MIN <= epsilon <= EPSILON_MAX:
        return None
    where = "below" if epsilon < EPSILON_MIN else "above"
    text = (
        f"`{name}` = {epsilon:g} is {where} the supported range [{EPSILON_MIN:g}, {EPSILON_MAX:g}], where ldp's "
        "guarantees are computed and tested"
    )
    if not force:
        raise UsageError(f"{text}; choose ε in that range, or pass `force=True` to use it anyway")
    return text


def relative_rms(mechanism: Mechanism) -> float:
    """√(E‖Z − x‖²) / L for a row on the boundary (‖x‖ = L: a unit-normalised embedding with L = 1):
    a released row's RMS distance from its raw row, in units of L.

    The boundary error, not the worst case: the worst case of the sphere mechanisms is at x = 0,
    where the unbiased rounding of the norm alone costs L², however large ε is.
    """
    return math.sqrt(mechanism.expected_error) / mechanism.norm_bound


def near_exact_warning(mechanism: Mechanism, copies: int = 1) -> str | None:
    """A warning when the release gives its rows away (None otherwise), saying which criterion fired
    and its number:

    - a row on the boundary is released within RMS 0.1·L of itself (:func:`relative_rms`);
    - the natural reconstruction (``Release.attack``: the direction of the released row) recovers
      a boundary row's direction to an expected cosine ≥ 0.9 (:func:`ldpcli.risk._cosine.expected_cosine`,
      exact for the sphere and box mechanisms, not computed for bcdp and the baselines);
    - the reconstruction bound on guessing a row's direction (k = d) to cosine ≥ 0.9,
      e^ε·P(⟨Y, v0⟩ ≥ 0.9) at the release's conservative level (Bhowmick et al. 2018, Lemma 2.2),
      reaches 1: ε then rules out no such guess, whatever the mechanism. With ``copies`` outputs
      of each row the level is ``copies`` times the mechanism's (basic composition); the first
      two criteria are of one copy.

    The first two say that the release essentially publishes the data; the third alone, that ε
    guarantees nothing about the rows' directions at that accuracy (a bound, not an attack: whether
    one succeeds is not said). ε-LDP still holds as stated in every case.
    """
    rms = relative_rms(mechanism)
    cosine = expected_cosine(mechanism)
    level = composed_levels(risk_epsilons(mechanism), copies)[0].epsilon if mechanism.d >= 2 else None
    bound = None if level is None else diffuse_risk(level, k=mechanism.d, a=NEAR_EXACT_ACCURACY)
    found: list[str] = []
    if rms <= NEAR_EXACT_RELATIVE_RMS:
        found.append(f"each released row is within RMS {rms:.3g}·L of its raw row")
    if cosine is not None and cosine.value >= NEAR_EXACT_COSINE:
        found.append(
            f"an attacker who takes each released row's direction recovers the raw row's direction to expected "
            f"cosine {cosine.value:.3g} (a row on the boundary; ldp warns from {NEAR_EXACT_COSINE:g})"
        )
    publishes = bool(found)
    if bound is not None and not bound.guarantee:
        found.append(
            f"the bound on the chance of guessing a row's direction to cosine ≥ {NEAR_EXACT_ACCURACY:g} from its "
            f"output, e^{level:.4g} × {math.exp(bound.log_prior):.3g}, is ≥ 1 (Bhowmick et al. 2018, Lemma 2.2), so "
            "ε rules out no such guess"
        )
    if not found:
        return None
    verdict = ("the release essentially publishes the data; choose a smaller ε" if publishes
               else "the release guarantees nothing about the rows' directions at that accuracy (whether an attack "
               "reaches it is another matter); choose a smaller ε if they must stay protected")
    return f"at ε = {mechanism.epsilon:g} ({mechanism.name}, d = {mechanism.d}), {'; '.join(found)}: {verdict}"


def check_clip_fraction(fraction: float | None, name: str = "fail_on_clip") -> float | None:
    """``fraction`` as a float in [0, 1] (None or 1: no limit; the libraries' default is
    :data:`CLIP_REFUSE_FRACTION`); UsageError otherwise."""
    if fraction is None:
        return None
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction <= 1.0:
        raise UsageError(f"`{name}` must be a fraction of the rows in [0, 1], got {fraction!r}")
    return float(fraction)


def clip_tolerance(mechanism: Mechanism) -> str:
    """Which rows the clipped count takes in, with the relative tolerances of the mechanism's
    domain at its d (:meth:`ldpcli.math._domains.Domain.slack`): e.g. 9.3e-06 for float32 values
    and 1e-09 for float64 ones at d = 384 in the ℓ2 ball."""
    domain, d = mechanism.domain, mechanism.d
    return (
        f"counting only rows beyond L by more than the rounding of their values, a relative "
        f"{domain.slack(FLOAT32_PRECISION, d):.2g} for float32 values and float64 ones exact in float32, "
        f"{domain.slack(FLOAT64_PRECISION, d):.2g} for other float64 values"
    )


def clip_warning(n_clipped: int, n: int, mechanism: Mechanism) -> tuple[str, bool] | None:
    """(the sentence about clipped rows, whether it is loud) or None when no row was clipped.

    Loud above :data:`CLIP_WARN_FRACTION` of the rows: then the estimate of the mean is of the
    clipped rows and can be far from the raw mean (gradients of norm 10–100 clipped to L = 1 give
    a mean 40× too small, with tight error bars around it).
    """
    if n_clipped == 0:
        return None
    share = n_clipped / n
    were = "was" if n_clipped == 1 else "were"
    text = (
        f"{n_clipped} of {counted(n, 'row')} {were} outside the {mechanism.domain} of radius "
        f"L = {mechanism.norm_bound:g} and {were} moved onto it ({share:.1%} of the rows), {clip_tolerance(mechanism)}"
    )
    if share <= CLIP_WARN_FRACTION:
        return text + " (this count is shown here only, never stored)", False
    return (
        text + ": the release and every estimate from it are of the clipped rows, not of the raw ones. Choose "
        "a public bound L that your rows respect (never one computed from the data); this count is shown here "
        "only, never stored",
        True,
    )


def check_clipping(
    n_clipped: int, n: int, limit: float | None, label: str, mechanism: Mechanism, name: str = "fail_on_clip",
    why: str | None = None,
) -> None:
    """:class:`DataError` when more than ``limit`` of the rows were clipped (nothing is written then).

    The message gives the count, the domain and its L, the limit (and whether it is the default,
    :data:`CLIP_REFUSE_FRACTION`), and the two ways on: a public L the rows respect, or ``name`` set
    to 1 to release the clipped rows anyway. ``why``: a sentence that explains the clipping (an input
    that is already a release), added at the end.
    """
    if limit is None or n == 0 or n_clipped <= limit * n:
        return
    default = " (the default)" if limit == CLIP_REFUSE_FRACTION else ""
    raise DataError(
        f"{label}: {n_clipped} of {counted(n, 'row')} ({n_clipped / n:.1%}) {'was' if n_clipped == 1 else 'were'} "
        f"outside the {mechanism.domain} of radius "
        f"L = {mechanism.norm_bound:g} and would be moved onto it, more than `{name}` {limit:g}{default} allows, "
        f"{clip_tolerance(mechanism)}; nothing was written. Choose a public bound L that the rows respect "
        f"(`norm_bound`; never one computed from the data) or rescale the data, or set `{name}` to 1 to release "
        "the clipped rows anyway" + (f". {why}" if why else "")
    )


def baseline_warning(mechanism: Mechanism) -> str | None:
    """Why a baseline mechanism's release is not for publication (None for the others), with its
    worst-case error as a multiple of PrivUnit2's at the same (d, ε, L), computed, not assumed
    (the Laplace baseline beats PrivUnit2 at d ≤ 2 and large ε)."""
    if not type(mechanism).baseline:
        return None
    from ldpcli.mechanisms import PrivUnit2

    delta = getattr(mechanism, "delta", None)
    if delta is not None:
        guarantee = f"(ε, δ)-DP with δ = {delta:g}, not pure ε-LDP"
    else:
        guarantee = "ε-LDP in exact arithmetic only"
    guarantee += ", and it adds floating-point noise to the data's own doubles (Mironov 2012)"
    text = f"{mechanism.name} is a baseline for comparison, not for release: it is {guarantee}"
    try:
        reference = PrivUnit2.calibrate(mechanism.d, mechanism.epsilon, norm_bound=mechanism.norm_bound)
    except LdpError:
        return text
    ratio = mechanism.expected_error_max / reference.expected_error_max
    return text + f"; its worst-case error is {ratio:.3g}× privunit2's at this (d, ε)"


def release_warnings(
    mechanism: Mechanism, keep: Sequence[str], forced: str | None = None, extra: Sequence[str] = (), copies: int = 1,
) -> tuple[str, ...]:
    """Every sentence a release records and shows, each once: ε forced out of range (``forced``,
    from :func:`check_epsilon`), a release that spends less than the ε asked and why
    (:func:`~ldpcli.mechanisms._hooks.spending_note`), a baseline mechanism, a near-exact release (of
    ``copies`` outputs per row), the kept columns, and the caller's ``extra``. Used by the file
    pipeline and the array API alike."""
    texts = (forced, spending_note(mechanism), baseline_warning(mechanism), near_exact_warning(mechanism, copies),
             unprivatized_warning(keep), *extra)
    return tuple(dict.fromkeys(text for text in texts if text))


def unprivatized_warning(columns: Sequence[str]) -> str | None:
    """The sentence listing the kept columns, which are released as they are."""
    if not columns:
        return None
    names = ", ".join(repr(name) for name in columns)
    return f"released unprivatized (`keep`): {names}; keep only columns that are already public"
