"""One composition for every caller: :func:`compose` of accounting events at a δ, with the theorem that proves it.

The ledger's budget (its releases, :mod:`ldpcli.release._accounting`), the shuffle section of ``ldp params``,
the sidecar's shuffle claim and training's central layer all ask :func:`compose`; each number it states
carries the theorem behind it, and it is never above basic composition (docs/composition.md).

- **Local releases** (:class:`~ldpcli.accounting.LocalRelease`): basic composition (Σε_i, Σδ_i) always; at a
  δ the user gives, the smallest of the theorems that apply: Kairouz, Oh & Viswanath's optimal theorem
  (Thm 3.3) when every use has the same (ε₀, δ₀), else KOV's Thm 3.5, Dwork–Rothblum–Vadhan's Thm III.3 and
  dp-accounting's PLD of the (ε_i, δ_i) worst cases. KOV's bounds are stated at 1 − (1 − δ)·Π(1 − δ_i), DRV's
  and the PLD's at δ + Σδ_i.
- **Central guarantees** (:class:`~ldpcli.accounting.ShuffledRelease`, evaluated by amplification by shuffling,
  Feldman, McMillan & Talwar 2021; :class:`~ldpcli.accounting.CentralClaim`, a recorded pair): one is stated as
  it is; several are composed by basic composition and by the PLD of their (ε_i, δ_i) worst cases at
  δ = Σδ_i + ``delta`` (``delta`` 0 when None), the smaller ε said. When add/remove-one and replace-one pairs
  are mixed, the add/remove-one pairs are first restated for replace-one (group privacy,
  :func:`~ldpcli.accounting._theorems.replace_one`).
- **A Poisson-subsampled Gaussian** (:class:`~ldpcli.accounting.SubsampledGaussian`): dp-accounting's PLD
  accountant at ``delta`` (the claim), its RDP accountant beside it.

Local releases and central guarantees are not composed together (an unshuffled release also publishes its rows
in their order, which no ε covers), and a subsampled Gaussian is composed alone (with others, compose the pair it
recorded, a :class:`~ldpcli.accounting.CentralClaim`): both are UsageErrors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ldpcli.accounting._events import (
    CentralClaim,
    Composed,
    Event,
    LocalRelease,
    ShuffledRelease,
    SubsampledGaussian,
)
from ldpcli.accounting._pld import CentralEpsilon, gaussian_account, pld_epsilon, pld_theorem
from ldpcli.accounting._theorems import (
    BASIC,
    DRV,
    KOV_HETEROGENEOUS,
    KOV_OPTIMAL,
    basic_composition,
    check_delta,
    drv_epsilon,
    kov_heterogeneous_epsilon,
    optimal_homogeneous_epsilon,
    replace_one,
)
from ldpcli.errors import MissingDependency, UsageError
from ldpcli.math._shuffling import THEOREM as SHUFFLING
from ldpcli.math._shuffling import ShuffleBound, shuffle_bound
from ldpcli.mechanisms._composition import SPENT_RTOL

#: The result a subsampled Gaussian's claim rests on.
GAUSSIAN_PLD = "the PLD accountant of the Poisson-subsampled Gaussian (Abadi et al. 2016; dp-accounting)"
#: The looser bound stated beside it.
GAUSSIAN_RDP = ("the RDP accountant of the Poisson-subsampled Gaussian (Mironov, Talwar & Zhang 2019; Canonne, Kamath "
                "& Steinke 2020's conversion; dp-accounting)")


@dataclass(frozen=True)
class Guarantee:
    """An (ε, δ)-DP guarantee and the theorem that gives it."""

    epsilon: float
    delta: float
    theorem: str

    def to_dict(self) -> dict[str, Any]:
        """The guarantee as the ``ldp budget`` command prints it in JSON."""
        return {"epsilon": self.epsilon, "delta": self.delta, "theorem": self.theorem}


@dataclass(frozen=True)
class Composition:
    """What :func:`compose` states.

    ``guarantee``: the smallest valid (ε, δ) and its theorem (None when nothing can be stated: ``note`` says why);
    ``basic``: basic composition (None for a subsampled Gaussian, which has no pure ε); ``bounds``: every finite
    bound computed at the δ asked; ``note``: what was left out and why (empty when nothing was). Where a theorem
    says more than a pair: ``shuffles``, each shuffled release's :class:`~ldpcli.math._shuffling.ShuffleBound` (with
    its lower end and closed form), and ``gaussians``, a subsampled Gaussian's
    :class:`~ldpcli.accounting.CentralEpsilon` (with the RDP ε and its order).
    """

    guarantee: Guarantee | None
    basic: Guarantee | None
    bounds: tuple[Guarantee, ...] = ()
    note: str = ""
    shuffles: tuple[ShuffleBound, ...] = ()
    gaussians: tuple[CentralEpsilon, ...] = ()


def compose(events: Sequence[Event], delta: float | None = None) -> Composition:
    """The (ε, δ) of ``events`` on the same rows (each with fresh randomness), at the slack ``delta`` the user
    accepts on top of the events' own δ's (None: basic composition only, for local releases); the module's
    docstring says which theorems apply to which events. UsageError for no event, a mix of local and central
    events, a subsampled Gaussian among other events or without a ``delta``, or a ``delta`` outside (0, 1)."""
    flat = Composed(tuple(events)).flat() if events else ()
    if not flat:
        raise UsageError("`events` is empty: there is nothing to compose")
    local = [event for event in flat if isinstance(event, LocalRelease)]
    if local and len(local) < len(flat):
        raise UsageError("`events` mixes local releases with central guarantees: a release without a central "
                         "guarantee has only its local ε, so compose the local releases' ε apart")
    if local:
        return _compose_local(local, delta)
    gaussians = [event for event in flat if isinstance(event, SubsampledGaussian)]
    if gaussians:
        if len(flat) > 1:
            raise UsageError("a subsampled Gaussian composes alone here: compose the (ε, δ) it gives with the other "
                             "events as a `CentralClaim`")
        return _gaussian(gaussians[0], delta)
    return _compose_central(flat, delta)


def _compose_local(events: Sequence[LocalRelease], delta: float | None) -> Composition:
    """Local releases: basic composition, and at ``delta`` the smallest of KOV's, DRV's and the PLD's bounds over
    every use (never above basic composition, which then is what is said: :func:`_smaller`)."""
    pairs = [(event.epsilon, event.delta) for event in events for _ in range(event.uses)]
    basic = Guarantee(*basic_composition(pairs), BASIC)
    if delta is None:
        return Composition(basic, basic)
    delta = check_delta(delta)
    kov_delta = -math.expm1(math.log1p(-delta) + math.fsum(math.log1p(-d) for _, d in pairs))
    sum_delta = delta + basic.delta
    epsilons = [e for e, _ in pairs]
    bounds: tuple[Guarantee, ...]
    if len(set(pairs)) == 1:
        bounds = (Guarantee(optimal_homogeneous_epsilon(pairs[0][0], len(pairs), delta), kov_delta, KOV_OPTIMAL),)
    else:
        bounds = (Guarantee(kov_heterogeneous_epsilon(epsilons, delta), kov_delta, KOV_HETEROGENEOUS),
                  Guarantee(drv_epsilon(epsilons, delta), sum_delta, DRV),
                  Guarantee(pld_epsilon(pairs, sum_delta), sum_delta, pld_theorem()))
    finite = tuple(bound for bound in bounds if math.isfinite(bound.epsilon))
    return Composition(_smaller(min(bounds, key=lambda bound: bound.epsilon), basic), basic, finite)


def _smaller(bound: Guarantee, basic: Guarantee) -> Guarantee:
    """``bound`` when its ε is below basic composition's by more than :data:`~ldpcli.mechanisms._composition.SPENT_RTOL`
    relative, else ``basic``: closer is rounding (and the six digits ldp prints would show the same ε at a
    larger δ), while basic composition holds at the smaller δ Σδ_i."""
    return bound if bound.epsilon < basic.epsilon * (1.0 - SPENT_RTOL) else basic


def _gaussian(event: SubsampledGaussian, delta: float | None) -> Composition:
    """A subsampled Gaussian at ``delta``: the PLD accountant's ε (the claim) and the RDP accountant's beside it."""
    if delta is None:
        raise UsageError("a subsampled Gaussian has no pure ε: compose it at a `delta`")
    account = gaussian_account(event.sampling_rate, event.noise_multiplier, event.steps, delta)
    pld = Guarantee(account.epsilon_pld, delta, GAUSSIAN_PLD)
    return Composition(pld, None, (pld, Guarantee(account.epsilon_rdp, delta, GAUSSIAN_RDP)), gaussians=(account,))


def _compose_central(events: Sequence[Event], delta: float | None) -> Composition:
    """Central guarantees (shuffled releases, recorded claims): one as it is, several by basic composition and the
    PLD of their worst cases at Σδ_i + ``delta``, the smaller said; the pairs stated for one neighbouring relation."""
    claims: list[CentralClaim] = []
    shuffles: list[ShuffleBound] = []
    for event in events:
        if isinstance(event, ShuffledRelease):
            bound = shuffle_bound(event.epsilon0, event.n, event.delta)
            shuffles.append(bound)
            claims.append(CentralClaim(bound.epsilon_upper, event.delta, event.neighbouring, SHUFFLING))
        else:
            assert isinstance(event, CentralClaim)
            claims.append(event)
    mixed = len({claim.neighbouring for claim in claims}) > 1
    pairs = [replace_one(claim.epsilon, claim.delta, claim.neighbouring) if mixed else (claim.epsilon, claim.delta)
             for claim in claims]
    if len(pairs) == 1:
        one = Guarantee(pairs[0][0], pairs[0][1], claims[0].theorem)
        return Composition(one, one, shuffles=tuple(shuffles))
    of = " of the recorded central guarantees" if not shuffles else " of the central guarantees"
    basic = Guarantee(*basic_composition(pairs), f"{BASIC}{of}")
    if basic.delta >= 1.0:
        return Composition(None, basic, note="their δ's add up to 1 or more, a guarantee of nothing, so ldp states no "
                                             "central ε", shuffles=tuple(shuffles))
    target = basic.delta + (0.0 if delta is None else check_delta(delta))
    if target >= 1.0:  # a PLD bound at such a δ would say nothing: the sum, at its own δ, is what holds
        return Composition(basic, basic, shuffles=tuple(shuffles))
    try:
        pld = Guarantee(pld_epsilon(pairs, target), target, f"{pld_theorem()}{of}")
    except MissingDependency as exc:  # the sum needs no extra, and holds
        return Composition(basic, basic, note=f"the sum only: {exc}", shuffles=tuple(shuffles))
    bounds = (pld,) if math.isfinite(pld.epsilon) else ()
    return Composition(_smaller(pld, basic), basic, bounds, shuffles=tuple(shuffles))
