"""The claim of a release written in a uniformly random order (``ReleaseOptions.shuffle``; the order
itself is :mod:`ldpcli.release._shuffle`'s external sort), and the refusals of such a release.

**The claim** (:func:`shuffled_section`) is the sidecar's ``release.shuffled`` and the ledger entry's
``shuffled``: n, δ, the central ε (upper and lower bounds, and the closed form where it applies), the
theorem, and the trust assumptions in words (:func:`shuffle_assumptions`); a reader gets it back checked
as :class:`ShuffleClaim` (:meth:`ShuffleClaim.from_dict`).
"""


from __future__ import annotations

import contextlib
import decimal
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ldpcli.accounting import ShuffledRelease, compose
from ldpcli.errors import DataError, UsageError, counted
from ldpcli.math._shuffling import default_central_delta
from ldpcli.mechanisms import Mechanism
from ldpcli.mechanisms._composition import ReleaseCost


def check_shuffle(*, shuffle: bool, delta: float | None, keep: Sequence[str], copies: int) -> None:
    """The refusals of a shuffled release that need no row: UsageError for a ``shuffle_delta``
    without ``shuffle`` or outside (0, 1), columns kept beside the vectors (an id or a label would
    link each row back to its person) and several copies of each row (the bound counts one report per
    person)."""
    if not shuffle:
        if delta is not None:
            raise UsageError("`shuffle_delta` is the δ of a shuffled release's central claim: it needs `shuffle`")
        return
    if delta is not None and not (isinstance(delta, (int, float)) and not isinstance(delta, bool)
                                  and 0 < delta < 1):
        raise UsageError(f"`shuffle_delta` must be a number in (0, 1), got {delta!r}")
    if keep:
        raise UsageError(
            f"`shuffle` does not allow `keep` columns ({', '.join(keep)}): a column copied beside the privatized "
            "vector (an id, a label) would link each row back to its person and undo the shuffle; leave them out"
        )
    if copies != 1:
        raise UsageError(
            f"`shuffle` takes one report per person, but `copies` is {copies}: the shuffle bound counts one "
            "ε0-LDP report per row; release the copies without `shuffle`"
        )


def check_pure(mech: Mechanism, cost: ReleaseCost) -> None:
    """UsageError for reports that are not pure ε0-LDP: the shuffle bound is for pure ε0-LDP reports only.

    Refused, each with its own reason: a mechanism that is (ε0, δ0)-LDP itself (the Gaussian baseline),
    and a pure one made (ε0, δ)-LDP by its secure rendering (:mod:`ldpcli.mechanisms._rendering`: a grid
    or sign rendering's δ > 0; a finite one's is 0 and keeps a pure mechanism pure)."""
    delta, mechanism = cost.delta, mech.name
    rendering = getattr(mech, "rendering", None)  # `secure`'s, else None
    rendering_delta = rendering.delta if rendering is not None else 0.0
    if delta > 0 and rendering_delta > 0 and delta <= rendering_delta:
        raise UsageError(
            f"`shuffle` with `secure`: {mechanism}'s secure rendering adds δ = {rendering_delta:g} to its guarantee "
            "(each report is then (ε0, δ)-LDP), and the shuffle bound (Feldman, McMillan and Talwar 2021) holds for "
            "pure ε0-LDP reports only, so it gives these reports no central claim; drop `secure` to shuffle "
            f"{mechanism}'s reports, or `shuffle` to render them securely"
        )
    if delta > 0:
        raise UsageError(
            f"`shuffle`: {mechanism} is (ε0, δ0)-LDP with δ0 = {delta:g}, not pure ε0-LDP, and the shuffle bound "
            f"(Feldman, McMillan and Talwar 2021) is for pure ε0-LDP reports: it gives {mechanism} no shuffle claim; "
            "use a pure ε-LDP mechanism (privunit2, privunitg, …) or release without `shuffle`"
        )


def shuffle_delta(n: int, delta: float | None) -> float:
    """The δ of the central claim for ``n`` rows: ``delta``, or 1/n² by default. UsageError when
    n < 2 (a single report hides among no other) or δ ≥ 1/n
    (:func:`ldpcli.math._shuffling.check_central_delta`: such a δ protects no one)."""
    if n < 2:
        raise UsageError(f"`shuffle`: the release has {counted(n, 'row')}; a shuffle hides each report among the others, so "
                         "it needs at least 2 rows")
    return default_central_delta(n, delta, "shuffle_delta")


def tie_distance(n: int) -> float:
    """n²/2¹²⁹: a bound on the total variation distance between the order of n rows (the sort order of
    i.i.d. 128-bit keys, ties by position) and a uniformly random permutation: the probability that two of
    the n keys are equal is at most n(n − 1)/2 · 2⁻¹²⁸ (a union bound over the pairs)."""
    return float(n) ** 2 / 2.0**129


def _rounded_up(value: float) -> str:
    """A bound in three significant digits, rounded up (so still a bound)."""
    return f"{decimal.Context(prec=3, rounding=decimal.ROUND_CEILING).create_decimal(value):g}"


def shuffle_assumptions(reproducible: bool, n: int, epsilon: float) -> list[str]:
    """What the central claim of a shuffled release rests on, in words (the sidecar's ``assumptions``): ``n``
    the rows, ``epsilon`` the central ε claimed (for the order's distance from uniform, :func:`tie_distance`)."""
    slack = (1 + math.exp(epsilon)) * tie_distance(n)
    said = [
        "an honest shuffler: it drops no report, adds none, and keeps the order secret; here ldp's own process "
        "on the data owner's machine was the shuffler, so the owner must never publish the unshuffled output or "
        "the order (or anything that reveals the input position of a row)",
        "one report per person: each row is one person's only report in this release (no person has two rows)",
        "identical shapes: every report has the same length and type, so none can be told apart by its form",
        "the order was drawn from a cryptographically secure generator (ChaCha20, seeded from the operating "
        "system), so it cannot be predicted",
        f"the order sorts the rows by keys of 128 random bits (equal keys by position): it is within "
        f"n²/2¹²⁹ ≤ {_rounded_up(tie_distance(n))} of a uniformly random order in total variation, so the claim, "
        f"the bound's for a uniform order, holds for this one with δ larger by at most (1 + e^ε)·n²/2¹²⁹ ≤ "
        f"{_rounded_up(slack)}",
    ]
    if reproducible:
        said[3] = ("seeded run: the order was drawn from ChaCha20 keyed by the seed, so whoever knows the seed "
                    "can recompute it and the central claim does not hold against them; not for release")
    return said


def shuffled_section(epsilon0: float, n: int, delta: float, *, reproducible: bool) -> ShuffleClaim:
    """``release.shuffled``: the central (ε, δ) of ``n`` shuffled ε0-LDP reports and what it rests on.

    The numbers and the theorem are :func:`ldpcli.accounting.compose`'s of one
    :class:`~ldpcli.accounting.ShuffledRelease`, :func:`ldpcli.math._shuffling.shuffle_bound`'s (Feldman, McMillan and
    Talwar 2021, Thm 3.2 evaluated numerically; Thm 3.1's closed form): ``epsilon_central_upper`` is a
    certified upper bound on the central ε at ``delta`` (the claim); ``epsilon_central_lower`` is a value
    the reduction's exact ε is at least (how much tighter the method could not be, never a claim);
    ``epsilon_central_closed_form`` is None where Thm 3.1's condition fails. ``epsilon_local`` is ε0.
    The record written is its :meth:`ShuffleClaim.to_dict`.
    """
    (shuffled,) = compose([ShuffledRelease(epsilon0, n, delta)]).shuffles
    bound = shuffled.to_dict()
    return ShuffleClaim(
        n, delta, epsilon0, bound["epsilon_upper"], bound["epsilon_lower"], bound["epsilon_closed_form"],
        bound["theorem"], tuple(shuffle_assumptions(reproducible, n, bound["epsilon_upper"])),
    )


@dataclass(frozen=True, slots=True)
class ShuffleClaim:
    """A shuffled release's central claim, as a release writes it (``PrivatizeResult.shuffled``, the sidecar's
    ``release.shuffled``, the ledger entry's ``shuffled``: :meth:`to_dict`) and as a reader gets it back
    (``Sidecar.shuffled``, ``Release.shuffled``: :meth:`from_dict`):
    the n shuffled ε0-LDP reports are (``epsilon_central_upper``, ``delta``)-DP centrally, under
    ``assumptions`` (:func:`shuffled_section` says what each number is)."""

    n: int
    delta: float
    epsilon_local: float
    epsilon_central_upper: float
    epsilon_central_lower: float
    epsilon_central_closed_form: float | None
    theorem: str
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON record (``release.shuffled``), its keys in this order: ``from_dict(to_dict())`` is the claim."""
        return {
            "n": self.n,
            "delta": self.delta,
            "epsilon_local": self.epsilon_local,
            "epsilon_central_upper": self.epsilon_central_upper,
            "epsilon_central_lower": self.epsilon_central_lower,
            "epsilon_central_closed_form": self.epsilon_central_closed_form,
            "theorem": self.theorem,
            "assumptions": list(self.assumptions),
        }

    @classmethod
    def from_dict(cls, data: Any, n: int | None = None) -> ShuffleClaim:
        """The claim ``release.shuffled`` records, checked: ValueError saying what is wrong (every missing
        field at once, else the first field that has the wrong type or range: n ≥ 2, 0 < δ < 1/n,
        0 < ε_local, 0 ≤ lower ≤ upper, closed form None or > 0, a theorem, at least one assumption).
        ``n``: the rows of the release it came with, which the record's n must equal; None where no row
        count comes with it (a ledger entry counts the input's rows). Readers call :func:`read_shuffle_claim`."""
        if not isinstance(data, Mapping):
            raise ValueError("is not an object")
        missing = [name for name in _REQUIRED if name not in data]
        if missing:
            listed = ", ".join(repr(name) for name in missing)
            raise ValueError(f"field {listed} is missing" if len(missing) == 1 else f"fields {listed} are missing")
        count = int(_number(data, "n", integer=True))
        delta, local = _number(data, "delta"), _number(data, "epsilon_local")
        upper, lower = _number(data, "epsilon_central_upper"), _number(data, "epsilon_central_lower")
        closed = None if data.get("epsilon_central_closed_form") is None else _number(data, "epsilon_central_closed_form")
        if n is not None and count != n:
            raise ValueError(f"field 'n' is {count} but the release has {counted(n, 'row')}")
        if count < 2 or not 0 < delta < 1 / count:
            raise ValueError(f"field 'delta' is {delta!r}, outside (0, 1/n) for n = {count}")
        if not local > 0:
            raise ValueError("field 'epsilon_local' must be > 0")
        if not 0 <= lower <= upper or upper <= 0:
            raise ValueError(f"field 'epsilon_central_upper' ({upper!r}) must be > 0 and at least "
                             f"'epsilon_central_lower' ({lower!r}), which must be >= 0")
        if closed is not None and not closed > 0:
            raise ValueError("field 'epsilon_central_closed_form' must be null or > 0")
        theorem, assumptions = data.get("theorem"), data.get("assumptions")
        if not isinstance(theorem, str) or not theorem:
            raise ValueError("field 'theorem' is missing or not a text")
        if (not isinstance(assumptions, list) or not assumptions
                or not all(isinstance(item, str) and item for item in assumptions)):
            raise ValueError("field 'assumptions' is missing or not a list of texts")
        return cls(count, delta, local, upper, lower, closed, theorem, tuple(assumptions))


#: The fields every ``release.shuffled`` has (``epsilon_central_closed_form`` may be absent or null).
_REQUIRED = ("n", "delta", "epsilon_local", "epsilon_central_upper", "epsilon_central_lower", "theorem", "assumptions")


def read_shuffle_claim(data: Any, n: int | None, *, where: str, remedy: str) -> ShuffleClaim:
    """The one reading of a recorded shuffle claim, for every reader (a sidecar, a ledger entry): ``data``
    checked by :meth:`ShuffleClaim.from_dict` (``n`` as there), or DataError ``"{where} {what is wrong};
    {remedy}"`` on one line, ``where`` naming the file and the record."""
    try:
        return ShuffleClaim.from_dict(data, n)
    except ValueError as exc:
        raise DataError(f"{where} {exc}; {remedy}") from exc


def _number(data: Mapping[str, Any], name: str, *, integer: bool = False) -> float:
    """``data[name]`` when it is a finite number as a float, or an int when ``integer`` (a bool is neither),
    else ValueError naming the field."""
    value = data.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        if integer:
            return value
        with contextlib.suppress(OverflowError):
            return float(value)
    if isinstance(value, float) and not integer and math.isfinite(value):
        return value
    raise ValueError(f"field {name!r} is missing or not a finite {'integer' if integer else 'number'}")
