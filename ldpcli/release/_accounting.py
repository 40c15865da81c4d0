"""The ledger's releases composed: an input's local and central (ε, δ) for ``ldp budget``.

Each ledger entry becomes an accounting event (:mod:`ldpcli.accounting`), and :func:`ldpcli.accounting.compose`
states what they spend together, with the theorem that proves it (docs/composition.md):

- **local** (:func:`compose_local`): every release as a :class:`~ldpcli.accounting.LocalRelease` of its exact ε
  (and δ); basic composition, and at a δ the user gives the smallest of Kairouz, Oh & Viswanath's theorems
  (Thm 3.3 for equal ε's, Thm 3.5), Dwork, Rothblum & Vadhan's (Thm III.3) and dp-accounting's PLD. A release
  of c copies or e epochs is one entry of cε in the ledger, composed as one release of that ε (valid; its
  copies composed one by one could give a smaller total).
- **central** (:func:`compose_central`): shuffled releases (``ReleaseOptions.shuffle``,
  :attr:`ldpcli.release._ledger_file.LedgerEntry.shuffled`) and models trained with the central layer
  (``TrainingOptions.central``, :attr:`~ldpcli.release._ledger_file.LedgerEntry.central`) each recorded a central
  (ε, δ), read back here as a :class:`~ldpcli.accounting.CentralClaim`: one release keeps the (ε, δ) it
  recorded; several are composed by basic composition and by dp-accounting's PLD of their (ε_i, δ_i) worst
  cases, the smaller ε said (for one neighbouring relation: a training run's add/remove-one pair is restated
  for replace-one among shuffled releases).

The theorems live in :mod:`ldpcli.accounting`; their names are re-exported here, where the README and
docs/composition.md taught them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ldpcli.accounting import (
    ADD_OR_REMOVE_ONE,
    REPLACE_ONE,
    CentralClaim,
    Guarantee,
    LocalRelease,
    compose,
    drv_epsilon,
    kov_heterogeneous_epsilon,
    optimal_homogeneous_epsilon,
    pld_epsilon,
)
from ldpcli.accounting._compose import GAUSSIAN_PLD
from ldpcli.accounting._pld import PLD_DELTA_MARGIN, pld_interval
from ldpcli.accounting._theorems import BASIC, DRV, KOV_HETEROGENEOUS, KOV_OPTIMAL
from ldpcli.errors import DataError
from ldpcli.release._central_claim import CentralTrainingClaim
from ldpcli.release._ledger_file import LedgerEntry
from ldpcli.release._shuffle_claim import ShuffleClaim, read_shuffle_claim

__all__ = [
    "ADD_OR_REMOVE_ONE", "BASIC", "DRV", "KOV_HETEROGENEOUS", "KOV_OPTIMAL", "PLD_DELTA_MARGIN", "RECORDED", "TRAINED",
    "Guarantee", "LocalComposition", "compose_central", "compose_local", "drv_epsilon", "kov_heterogeneous_epsilon",
    "optimal_homogeneous_epsilon", "pld_epsilon", "pld_interval",
]

RECORDED = "amplification by shuffling (Feldman, McMillan & Talwar 2021), as the release recorded it"
TRAINED = f"{GAUSSIAN_PLD}, as the training run recorded it"


@dataclass(frozen=True)
class LocalComposition:
    """One input's local guarantees: ``basic`` (always), ``advanced`` at the user's δ (None without one),
    and ``bounds``, every finite bound computed at that δ (the smallest is ``advanced`` when below basic)."""

    basic: Guarantee
    advanced: Guarantee | None
    bounds: tuple[Guarantee, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The ``local`` section of the ``ldp budget`` command's JSON."""
        return {"basic": self.basic.to_dict(), "advanced": None if self.advanced is None else self.advanced.to_dict(),
                "bounds": [bound.to_dict() for bound in self.bounds]}


def compose_local(entries: Sequence[LedgerEntry], delta: float | None) -> LocalComposition:
    """The local (ε, δ) of ``entries`` (the releases of one input): :func:`ldpcli.accounting.compose` of one
    :class:`~ldpcli.accounting.LocalRelease` per entry, its exact ε and its δ. Basic composition, and at
    ``delta`` the smallest of the theorems (never above basic composition, which then is what is said).

    The user's ``delta`` is the slack the theorems spend on top of the releases' own δ_i: KOV's bounds
    are stated at 1 − (1 − δ)·Π(1 − δ_i), DRV's and the PLD's at δ + Σδ_i (at least as large).
    """
    composition = compose([LocalRelease(entry.epsilon_exact, entry.delta or 0.0) for entry in entries], delta)
    assert composition.basic is not None and composition.guarantee is not None
    return LocalComposition(composition.basic, None if delta is None else composition.guarantee, composition.bounds)


def _central_claim(entry: LedgerEntry) -> CentralClaim | None:
    """The central guarantee ``entry`` recorded (shuffled, or trained with the central layer) as an accounting event,
    None when it has none; DataError when the ledger's record lacks the numbers or names another relation (a
    shuffled release's record is checked as its sidecar's: :func:`_recorded_claim`)."""
    if entry.shuffled is not None:
        claim = _recorded_claim(entry)
        return CentralClaim(claim.epsilon_central_upper, claim.delta, REPLACE_ONE, RECORDED)
    record = entry.central
    if record is None:
        return None
    if isinstance(record, CentralTrainingClaim):
        epsilon, delta, relation = float(record.epsilon), float(record.delta), record.neighbouring
    else:  # an edited or older ledger's record, kept as stored
        relation = str(record.get("neighbouring"))
        try:
            epsilon, delta = float(record["epsilon"]), float(record["delta"])
        except (KeyError, TypeError, ValueError):
            epsilon, delta = math.nan, math.nan
    if not (0 < epsilon < math.inf and 0 <= delta < 1) or relation not in (REPLACE_ONE, ADD_OR_REMOVE_ONE):
        shown = record.to_dict() if isinstance(record, CentralTrainingClaim) else record
        raise DataError(f"a training run with the central layer in the ledger records no usable central guarantee "
                        f"({shown!r}): it needs a positive 'epsilon' and a 'delta' in [0, 1), for 'neighbouring' "
                        f"{ADD_OR_REMOVE_ONE!r}")
    return CentralClaim(epsilon, delta, relation, TRAINED)


def _recorded_claim(entry: LedgerEntry) -> ShuffleClaim:
    """The central claim a shuffled release's ledger entry records: its record, or the dict an edited or older
    ledger kept, checked as its sidecar's is (:func:`ldpcli.release._shuffle_claim.read_shuffle_claim`; no row
    count to hold its n to: the entry's rows are the input's); DataError naming the release's file when the
    ledger's copy is malformed."""
    if isinstance(entry.shuffled, ShuffleClaim):
        return entry.shuffled
    return read_shuffle_claim(
        entry.shuffled, None, where=f"{entry.output}: its ledger entry's 'shuffled'",
        remedy="the ledger was edited and records no usable central guarantee for this release; copy "
               "'release.shuffled' back from the release's sidecar",
    )


def _run_said(run: CentralTrainingClaim | dict[str, Any]) -> str:
    """A training run's z, q and T, for the note of :func:`compose_central` (as stored, for a ledger's dict)."""
    if isinstance(run, CentralTrainingClaim):
        return f"z = {run.noise_multiplier}, q = {run.sampling_rate}, T = {run.steps}"
    return f"z = {run.get('noise_multiplier')}, q = {run.get('sampling_rate')}, T = {run.get('steps')}"


def _central_said(entries: Sequence[LedgerEntry]) -> str:
    """What the releases with a central guarantee among ``entries`` were, for the note of :func:`compose_central`."""
    shuffled = [_recorded_claim(entry).n for entry in entries if entry.shuffled is not None]
    trained = [entry.central for entry in entries if entry.central is not None]
    if not trained:
        if len(shuffled) == 1:
            return f"shuffled among n = {shuffled[0]} reports by an honest shuffler"
        return f"{len(shuffled)} releases, each shuffled by an honest shuffler (n = {', '.join(map(str, shuffled))})"
    runs = "; ".join(map(_run_said, trained))
    model = (f"trained with the central layer ({runs}), whose server ran eq. (13) honestly and published only the "
             "model")
    if len(entries) == 1:
        said = f"a model {model}"
    else:
        shuffles = (f"{len(shuffled)} shuffled by an honest shuffler (n = {', '.join(map(str, shuffled))}), "
                    if shuffled else "")
        said = f"{len(entries)} releases: {shuffles}{len(trained)} {model}"
    if shuffled:
        return (f"{said}; for replacing one person's row: each training run's (ε, δ), for adding or removing one "
                "row, is counted as (2ε, (1 + e^ε)·δ) (replacing is removing, then adding)")
    return f"{said}; for adding or removing one row"


def compose_central(entries: Sequence[LedgerEntry], delta: float | None) -> tuple[Guarantee | None, str]:
    """The central (ε, δ) of ``entries`` when every one recorded a central guarantee, else None; and a sentence
    on it.

    A central guarantee is a shuffled release's (``ReleaseOptions.shuffle``, for replace-one neighbours) or a
    central training run's (``TrainingOptions.central``, for add/remove-one neighbours). One release: the
    (ε upper, δ) it recorded. Several: basic composition (Σε_i, Σδ_i), and dp-accounting's PLD of the
    (ε_i, δ_i) worst cases at δ = Σδ_i + ``delta`` (``delta`` 0 when None); the smaller ε is said, with its
    theorem (the sum, and the sentence says why, where dp-accounting is not installed: ``ldp budget`` needs
    no extra). Both need only that each release is (ε_i, δ_i)-DP for one neighbouring relation, however its
    pair was found (amplification by shuffling, a training run's accountant): the worst case of a pair
    dominates every mechanism with that guarantee (Kairouz, Oh & Viswanath 2015), adaptively composed. When
    shuffled releases and training runs are mixed, the runs' add/remove-one pairs are first stated for
    replace-one neighbours (group privacy, :func:`ldpcli.accounting._theorems.replace_one`) and the composition is for replace-one.

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
    composition = compose(claims, delta)
    said = _central_said(entries)
    return composition.guarantee, f"{said}; {composition.note}" if composition.note else said
