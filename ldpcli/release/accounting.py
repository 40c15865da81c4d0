"""Composition that is not only a sum: the (ε, δ) of a person's repeated releases at a δ the user gives.

Basic composition (:mod:`ldpcli.mechanisms.composition`) adds the ε of the releases; it is exact in the
worst case at δ = 0, and at any δ > 0 it is loose. At a δ the user accepts, :func:`compose_local` states
the smallest ε that one of these theorems proves, and says which (every number carries its theorem):

- **all the releases have the same (ε₀, δ₀)**: the optimal composition theorem of Kairouz, Oh &
  Viswanath (2015, *The composition theorem for differential privacy*, Thm 3.3), exact: no valid
  bound is smaller (:func:`optimal_homogeneous_epsilon`);
- **different ε's**: the smallest of KOV's heterogeneous bound (Thm 3.5, :func:`kov_heterogeneous_epsilon`),
  Dwork, Rothblum & Vadhan's advanced composition (2010, *Boosting and differential privacy*, Thm III.3,
  :func:`drv_epsilon`), and the privacy-loss-distribution accountant of Google's ``dp-accounting``
  composing each release's worst case for its (ε_i, δ_i) (:func:`pld_epsilon`; pessimistic
  discretisation, so an upper bound).

Never more than basic composition: it is valid at δ = Σδ_i, below any δ the user gives on top.
The releases' own δ_i (the Gaussian baseline) add up: every bound here is stated at the user's δ
plus (at most) Σδ_i. A release of c copies or e epochs is one entry of cε in the ledger, composed as
one release of that ε (valid; its copies composed one by one could give a smaller total).

Shuffled releases (``privatize --shuffle``, :attr:`ldpcli.release.ledger_file.LedgerEntry.shuffled`) and
models trained with the central layer (``train --central-radius``, :attr:`~ldpcli.release.ledger_file.LedgerEntry.central`)
have a central guarantee as well, which :func:`compose_central` composes: one release keeps the
(ε, δ) it recorded; several are composed by basic composition and by dp-accounting's PLD of their
(ε_i, δ_i) worst cases, the smaller ε said (for one neighbouring relation: a training run's add/remove-one
pair is restated for replace-one among shuffled releases).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.errors import DataError, MissingDependency, UsageError, install_hint
from ldpcli.math.lazy import special
from ldpcli.mechanisms.composition import SPENT_RTOL
from ldpcli.release.ledger_file import LedgerEntry
from ldpcli.release.shuffle import ShuffleClaim, read_shuffle_claim

BASIC = "basic composition (Dwork & Roth 2014, Thm 3.16)"
KOV_OPTIMAL = "optimal composition (Kairouz, Oh & Viswanath 2015, Thm 3.3)"
KOV_HETEROGENEOUS = "heterogeneous composition (Kairouz, Oh & Viswanath 2015, Thm 3.5)"
DRV = "advanced composition (Dwork, Rothblum & Vadhan 2010, Thm III.3)"
RECORDED = "amplification by shuffling (Feldman, McMillan & Talwar 2021), as the release recorded it"
TRAINED = ("the PLD accountant of the Poisson-subsampled Gaussian (Abadi et al. 2016; dp-accounting), as the training "
           "run recorded it")
#: The neighbouring relations of the central guarantees: a shuffled release's (n reports, one person's replaced)
#: and a training run's with the central layer (``ldpcli.learn.accounting.NEIGHBOURING``).
REPLACE_ONE = "replace one row"
ADD_OR_REMOVE_ONE = "add/remove one row"
#: The PLD accountant's finest discretisation of the privacy loss (dp-accounting's default), and the number of
#: steps that the composed loss's range Σε_i may span before the step grows (:func:`pld_interval`).
PLD_INTERVAL = 1e-4
PLD_STEPS = 100_000
#: The PLD's δ is asked at (1 − this)·δ. Its floating-point computation is not exactly pessimistic: for 20000
#: randomized responses at ε = 0.2 its ε at δ = 1e-6 is 2e-6 below the exact one (Thm 3.3), a δ 3.5e-13 too
#: small (tests/accounting/test_composition_theorems.py); this margin covers such errors with room to spare.
PLD_DELTA_MARGIN = 1e-3
#: The largest ε_i the PLD accountant is given: dp-accounting computes e^ε_i, which overflows a double past 709.78
#: (``ldp budget --delta`` on releases at ε = 1000 stopped with an OverflowError); above it the PLD states no bound.
PLD_MAX_EPSILON = 700.0
#: The optimal ε is computed to about 1e-14 relative; it is stated this much larger, so rounding never states less.
ROUND_UP = 1e-12


@dataclass(frozen=True)
class Guarantee:
    """An (ε, δ)-DP guarantee and the theorem that gives it."""

    epsilon: float
    delta: float
    theorem: str

    def to_dict(self) -> dict[str, Any]:
        """The guarantee as ``ldp budget --json`` prints it."""
        return {"epsilon": self.epsilon, "delta": self.delta, "theorem": self.theorem}


def _check_delta(delta: float) -> float:
    """``delta`` as a float when it is in (0, 1); UsageError otherwise (NaN included)."""
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise UsageError(f"`delta` must be a number in (0, 1), not {delta!r}")
    return float(delta)


def optimal_homogeneous_epsilon(epsilon: float, k: int, delta: float) -> float:
    """The smallest ε' such that every k-fold composition of ε-DP mechanisms is (ε', δ)-DP (exact).

    Kairouz, Oh & Viswanath (2015), Thm 3.3: the composition is ((k − 2i)ε, δ_i)-DP for i = 0, …, ⌊k/2⌋
    with δ_i = Σ_{ℓ<i} C(k, ℓ)(e^{(k−ℓ)ε} − e^{(k−2i+ℓ)ε}) / (1 + e^ε)^k, and no better: k-fold randomized
    response reaches it. Between those points the exact δ(ε') is the same hockey-stick sum
    δ(ε') = Σ_ℓ C(k, ℓ) max(0, e^{(k−ℓ)ε} − e^{ε'+ℓε}) / (1 + e^ε)^k, which on the piece where the terms
    ℓ < L are the positive ones is A_L − e^{ε'}·B_L, with A_L = P(ℓ < L) for ℓ ~ Bin(k, 1/(1 + e^ε)) and
    B_L = P(ℓ < L) for ℓ ~ Bin(k, e^ε/(1 + e^ε)). So ε' = log((A_L − δ)/B_L) on the piece where δ(ε')
    crosses δ, rounded up by :data:`ROUND_UP` relative. Everything is in log space: finite at ε = 10⁴ and
    at k = 10⁵ (both tested).
    """
    delta = _check_delta(delta)
    if not (epsilon > 0 and math.isfinite(epsilon)) or k < 1:
        raise ValueError("`epsilon` must be positive and finite and `k` at least 1")
    ell = np.arange(k + 1, dtype=float)
    log_binom = special.gammaln(k + 1.0) - special.gammaln(ell + 1.0) - special.gammaln(k - ell + 1.0)
    log_one = -math.log1p(math.exp(-epsilon))  # log(e^ε / (1 + e^ε))
    log_zero = -epsilon + log_one  # log(1 / (1 + e^ε))
    log_a = np.logaddexp.accumulate(log_binom + (k - ell) * log_one + ell * log_zero)  # log A_{L}, L = ℓ + 1
    log_b = np.logaddexp.accumulate(log_binom + ell * log_one + (k - ell) * log_zero)
    log_delta = math.log(delta)
    for piece in range(1, k // 2 + 2):
        low, high = max((k - 2 * piece) * epsilon, 0.0), (k - 2 * piece + 2) * epsilon
        log_a_l, log_b_l = float(log_a[piece - 1]), float(log_b[piece - 1])
        # δ at the piece's low end, A_L − e^{low}·B_L (≥ 0 there)
        log_at_low = log_a_l + _log1mexp(low + log_b_l - log_a_l)
        if log_at_low > log_delta or low == 0.0:
            if log_a_l <= log_delta:
                return low
            crossing = log_a_l + _log1mexp(log_delta - log_a_l) - log_b_l
            return min(max(crossing * (1.0 + ROUND_UP), low), high)
    raise AssertionError("unreachable: the last piece reaches ε' = 0")  # pragma: no cover


def _log1mexp(x: float) -> float:
    """log(1 − e^x) for x ≤ 0 (−inf at x = 0), accurate at both ends."""
    if x >= 0.0:
        return -math.inf
    return math.log(-math.expm1(x)) if x > -0.693 else math.log1p(-math.exp(x))


def kov_heterogeneous_epsilon(epsilons: Sequence[float], delta: float) -> float:
    """Kairouz, Oh & Viswanath (2015), Thm 3.5: releases of ε_i-DP mechanisms compose to (ε̃, δ̃)-DP with

    ε̃ = min{ Σε_i,  Σ ε_i·tanh(ε_i/2) + √(2 Σε_i² · log(e + √(Σε_i²)/δ̃)),
             Σ ε_i·tanh(ε_i/2) + √(2 Σε_i² · log(1/δ̃)) }

    (tanh(ε/2) = (e^ε − 1)/(e^ε + 1)); with (ε_i, δ_i)-DP mechanisms the δ is 1 − (1 − δ̃)·Π(1 − δ_i)
    (:func:`compose_local` states it).
    """
    delta = _check_delta(delta)
    eps = np.asarray(epsilons, dtype=float)
    drift = float(np.sum(eps * np.tanh(eps / 2.0)))
    squares = float(np.sum(eps * eps))
    spread = min(math.log(math.e + math.sqrt(squares) / delta), -math.log(delta))
    return min(math.fsum(eps), drift + math.sqrt(2.0 * squares * spread))


def drv_epsilon(epsilons: Sequence[float], delta: float) -> float:
    """Dwork, Rothblum & Vadhan (2010), Thm III.3 (advanced composition), for releases of ε_i-DP mechanisms:
    (ε', δ' + Σδ_i)-DP with ε' = √(2 ln(1/δ') Σε_i²) + Σ ε_i(e^{ε_i} − 1).

    The theorem is stated for k equal ε; its proof (Azuma's inequality on the privacy loss, whose i-th
    step is bounded by ε_i and has mean at most ε_i(e^{ε_i} − 1), Dwork & Roth 2014, Thm 3.20) gives
    this form for different ε_i. KOV's Thm 3.5 is never larger; both are shown.
    """
    delta = _check_delta(delta)
    eps = np.asarray(epsilons, dtype=float)
    with np.errstate(over="ignore"):
        drift = float(np.sum(eps * np.expm1(eps)))
    return math.sqrt(2.0 * math.log(1.0 / delta) * float(np.sum(eps * eps))) + drift


def dp_accounting(purpose: str) -> Any:
    """The ``dp_accounting`` package with its ``pld`` and ``rdp`` modules loaded (the optional extra ``central``),
    or :class:`~ldpcli.errors.MissingDependency` saying that ``purpose`` needs it and how to install it."""
    try:
        import dp_accounting as package
        import dp_accounting.pld  # noqa: F401
        import dp_accounting.rdp  # noqa: F401
    except ImportError:
        raise MissingDependency(f"{purpose} needs dp-accounting (Google's differential privacy accounting "
                                f"library): {install_hint('central')}") from None
    return package


def _dp_accounting() -> Any:
    """dp-accounting's PLD module, imported on first use."""
    return dp_accounting("composing privacy loss distributions").pld.privacy_loss_distribution


def pld_theorem() -> str:
    """The name of the PLD accountant's result, with dp-accounting's version."""
    from importlib.metadata import version

    _dp_accounting()
    return f"privacy loss distributions (dp-accounting {version('dp-accounting')}, pessimistic)"


def pld_interval(guarantees: Sequence[tuple[float, float]]) -> float:
    """The discretisation step of the PLD of ``guarantees``: :data:`PLD_INTERVAL`, or Σε_i/:data:`PLD_STEPS`
    when that is larger, so that the cost of each composition stays bounded whatever the total (on a loaded
    2-core machine: 100 distinct ε's in [0.05, 2] composed in 3.5 s, 300 in [0.01, 0.2] in 1.8 s). Each release's loss is rounded up by less than one step, so the ε of k releases
    is above the exact value by less than k steps."""
    return max(PLD_INTERVAL, math.fsum(epsilon for epsilon, _ in guarantees) / PLD_STEPS)


def pld_epsilon(guarantees: Sequence[tuple[float, float]], delta: float) -> float:
    """The ε at total δ ``delta`` of the composition of mechanisms that are (ε_i, δ_i)-DP, by dp-accounting.

    Each (ε_i, δ_i) becomes the privacy loss distribution of its worst case
    (``from_privacy_parameters``: loss ∞ with probability δ_i, ±ε_i otherwise, the dominating pair of
    every (ε_i, δ_i)-DP mechanism, Kairouz et al. 2015), rounded up to multiples of :func:`pld_interval`;
    equal ones are self-composed, and ε is read at (1 − :data:`PLD_DELTA_MARGIN`)·``delta``. The result is an
    upper bound on the exact ε (inf when ``delta`` is not above the δ the releases leave, 1 − Π(1 − δ_i), and
    inf, no bound computed, when an ε_i is above :data:`PLD_MAX_EPSILON`).
    """
    pld_module = _dp_accounting()
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    if not guarantees:
        raise ValueError("`guarantees` is empty")
    if max(eps for eps, _ in guarantees) > PLD_MAX_EPSILON:
        return math.inf
    composed, step = None, pld_interval(guarantees)
    for (eps, dlt), count in Counter(guarantees).items():
        one = pld_module.from_privacy_parameters(DifferentialPrivacyParameters(eps, dlt),
                                                 value_discretization_interval=step)
        part = one.self_compose(count) if count > 1 else one
        composed = part if composed is None else composed.compose(part)
    assert composed is not None
    return float(composed.get_epsilon_for_delta(delta * (1.0 - PLD_DELTA_MARGIN)))


@dataclass(frozen=True)
class LocalComposition:
    """One input's local guarantees: ``basic`` (always), ``advanced`` at the user's δ (None without one),
    and ``bounds``, every finite bound computed at that δ (the smallest is ``advanced`` when below basic)."""

    basic: Guarantee
    advanced: Guarantee | None
    bounds: tuple[Guarantee, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """``local`` of ``ldp budget --json``."""
        return {"basic": self.basic.to_dict(), "advanced": None if self.advanced is None else self.advanced.to_dict(),
                "bounds": [bound.to_dict() for bound in self.bounds]}


def compose_local(entries: Sequence[LedgerEntry], delta: float | None) -> LocalComposition:
    """The local (ε, δ) of ``entries`` (the releases of one input): basic composition, and at ``delta``
    the smallest of the module's theorems (never above basic composition, which then is what is said).

    The user's ``delta`` is the slack the theorems spend on top of the releases' own δ_i: KOV's bounds
    are stated at 1 − (1 − δ)·Π(1 − δ_i), DRV's and the PLD's at δ + Σδ_i (at least as large).
    """
    pairs = [(entry.epsilon_exact, entry.delta or 0.0) for entry in entries]
    basic = Guarantee(math.fsum(e for e, _ in pairs), math.fsum(d for _, d in pairs), BASIC)
    if delta is None:
        return LocalComposition(basic, None)
    delta = _check_delta(delta)
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
    return LocalComposition(basic, _smaller(min(bounds, key=lambda bound: bound.epsilon), basic), finite)


def _smaller(bound: Guarantee, basic: Guarantee) -> Guarantee:
    """``bound`` when its ε is below basic composition's by more than :data:`~ldpcli.mechanisms.composition.SPENT_RTOL`
    relative, else ``basic``: closer is rounding (and the six digits ldp prints would show the same ε at a
    larger δ), while basic composition holds at the smaller δ Σδ_i."""
    return bound if bound.epsilon < basic.epsilon * (1.0 - SPENT_RTOL) else basic


def _replace_one(epsilon: float, delta: float, neighbouring: str) -> tuple[float, float]:
    """An (ε, δ) central guarantee for ``neighbouring`` data sets, stated for replace-one neighbours.

    An add/remove-one (ε, δ)-DP mechanism M is (2ε, (1 + e^ε)δ)-DP for replace-one neighbours: replacing row x
    of D by x' is removing x (giving D₀) and adding x', so P[M(D) ∈ S] ≤ e^ε P[M(D₀) ∈ S] + δ ≤
    e^ε (e^ε P[M(D') ∈ S] + δ) + δ (group privacy for a group of two; Dwork & Roth 2014, Thm 2.2 for δ = 0).
    """
    if neighbouring == REPLACE_ONE:
        return epsilon, delta
    if delta == 0:
        return 2.0 * epsilon, 0.0
    if epsilon > PLD_MAX_EPSILON:  # (1 + e^ε)δ ≥ 1 anyway, without overflowing
        return 2.0 * epsilon, 1.0
    return 2.0 * epsilon, min(1.0, (1.0 + math.exp(epsilon)) * delta)


def _central_claim(entry: LedgerEntry) -> tuple[float, float, str] | None:
    """The central guarantee ``entry`` recorded (shuffled, or trained with the central layer): (ε upper, δ, the
    neighbouring relation), None when it has none; DataError when the ledger's record lacks the numbers or
    names another relation (a shuffled release's record is checked as its sidecar's: :func:`_recorded_claim`)."""
    if entry.shuffled is not None:
        claim = _recorded_claim(entry)
        return claim.epsilon_central_upper, claim.delta, REPLACE_ONE
    if entry.central is None:
        return None
    record, relation = entry.central, str(entry.central.get("neighbouring"))
    try:
        epsilon, delta = float(record["epsilon"]), float(record["delta"])
    except (KeyError, TypeError, ValueError):
        epsilon, delta = math.nan, math.nan
    if not (0 < epsilon < math.inf and 0 <= delta < 1) or relation not in (REPLACE_ONE, ADD_OR_REMOVE_ONE):
        raise DataError(f"a training run with the central layer in the ledger records no usable central guarantee "
                        f"({record!r}): it needs a positive 'epsilon' and a 'delta' in [0, 1), for 'neighbouring' "
                        f"{ADD_OR_REMOVE_ONE!r}")
    return epsilon, delta, relation


def _recorded_claim(entry: LedgerEntry) -> ShuffleClaim:
    """The central claim a shuffled release's ledger entry records, checked as its sidecar's is
    (:func:`ldpcli.release.shuffle.read_shuffle_claim`; no row count to hold its n to: the entry's rows are
    the input's); DataError naming the release's file when the ledger's copy is malformed."""
    return read_shuffle_claim(
        entry.shuffled, None, where=f"{entry.output}: its ledger entry's 'shuffled'",
        remedy="the ledger was edited and records no usable central guarantee for this release; copy "
               "'release.shuffled' back from the release's sidecar",
    )


def _central_said(entries: Sequence[LedgerEntry]) -> str:
    """What the releases with a central guarantee among ``entries`` were, for the note of :func:`compose_central`."""
    shuffled = [entry.shuffled for entry in entries if entry.shuffled is not None]
    trained = [entry.central for entry in entries if entry.central is not None]
    if not trained:
        if len(shuffled) == 1:
            return f"shuffled among n = {shuffled[0]['n']} reports by an honest shuffler"
        return f"{len(shuffled)} releases, each shuffled by an honest shuffler (n = {', '.join(str(s['n']) for s in shuffled)})"
    runs = "; ".join(f"z = {run.get('noise_multiplier')}, q = {run.get('sampling_rate')}, T = {run.get('steps')}"
                     for run in trained)
    model = (f"trained with the central layer ({runs}), whose server ran eq. (13) honestly and published only the "
             "model")
    if len(entries) == 1:
        said = f"a model {model}"
    else:
        shuffles = (f"{len(shuffled)} shuffled by an honest shuffler (n = {', '.join(str(s['n']) for s in shuffled)}), "
                    if shuffled else "")
        said = f"{len(entries)} releases: {shuffles}{len(trained)} {model}"
    if shuffled:
        return (f"{said}; for replacing one person's row: each training run's (ε, δ), for adding or removing one "
                "row, is counted as (2ε, (1 + e^ε)·δ) (replacing is removing, then adding)")
    return f"{said}; for adding or removing one row"


def compose_central(entries: Sequence[LedgerEntry], delta: float | None) -> tuple[Guarantee | None, str]:
    """The central (ε, δ) of ``entries`` when every one recorded a central guarantee, else None; and a sentence
    on it.

    A central guarantee is a shuffled release's (``privatize --shuffle``, for replace-one neighbours) or a
    central training run's (``train --central-radius``, for add/remove-one neighbours). One release: the
    (ε upper, δ) it recorded. Several: basic composition (Σε_i, Σδ_i), and dp-accounting's PLD of the
    (ε_i, δ_i) worst cases at δ = Σδ_i + ``delta`` (``delta`` 0 when None); the smaller ε is said, with its
    theorem (the sum, and the sentence says why, where dp-accounting is not installed: ``ldp budget`` needs
    no extra). Both need only that each release is (ε_i, δ_i)-DP for one neighbouring relation, however its
    pair was found (amplification by shuffling, a training run's accountant): the worst case of a pair
    dominates every mechanism with that guarantee (Kairouz, Oh & Viswanath 2015), adaptively composed. When
    shuffled releases and training runs are mixed, the runs' add/remove-one pairs are first stated for
    replace-one neighbours (:func:`_replace_one`) and the composition is for replace-one.

    A mix with a release that has no central guarantee gets None: an unshuffled release is only ε-LDP, its
    rows in their order and with the columns it kept, and ldp states a central ε only for what an honest
    shuffler, or an honest server of eq. (13), released.
    """
    claims = [claim for claim in map(_central_claim, entries) if claim is not None]
    if not claims:
        return None, ""
    if len(claims) < len(entries):
        were = "was" if len(claims) == 1 else "were"
        trained = any(entry.central is not None for entry in entries)
        shuffled = any(entry.shuffled is not None for entry in entries)
        kind = ("shuffled" if not trained else "trained with the central layer" if not shuffled
                else "shuffled or trained with the central layer")
        return None, (f"{len(claims)} of its {len(entries)} releases {were} {kind}: a release without a central "
                      "guarantee has only its local ε (an unshuffled release also publishes its rows in their order "
                      "and the columns it kept, which no ε covers), so ldp states no central ε for these releases "
                      "together")
    said = _central_said(entries)
    mixed = len({relation for _, _, relation in claims}) > 1
    pairs = [_replace_one(*claim) if mixed else claim[:2] for claim in claims]
    if len(pairs) == 1:
        recorded = RECORDED if entries[0].shuffled is not None else TRAINED
        return Guarantee(pairs[0][0], pairs[0][1], recorded), said
    basic = Guarantee(math.fsum(e for e, _ in pairs), math.fsum(d for _, d in pairs),
                      f"{BASIC} of the recorded central guarantees")
    if basic.delta >= 1.0:
        return None, f"{said}; their δ's add up to 1 or more, a guarantee of nothing, so ldp states no central ε"
    target = basic.delta + (0.0 if delta is None else _check_delta(delta))
    if target >= 1.0:  # a PLD bound at such a δ would say nothing: the sum, at its own δ, is what holds
        return basic, said
    try:
        pld = Guarantee(pld_epsilon(pairs, target), target, f"{pld_theorem()} of the recorded central guarantees")
    except MissingDependency as exc:  # the budget itself needs no extra: the sum holds
        return basic, f"{said}; the sum only: {exc}"
    return _smaller(pld, basic), said
