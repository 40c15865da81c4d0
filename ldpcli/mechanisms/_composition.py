"""The privacy cost of a release: what k uses of one calibrated mechanism on each row spend.

Every place that states a release's total (the sidecar's ``epsilon_total``, the ledger's entry, the
trained model's ``epsilon_per_row``, the reconstruction section of a release of several copies, the
regression over two copies, the ``wrote`` line) asks :func:`release_cost`; nothing multiplies ε by a
count of copies or epochs by hand.

Basic (sequential) composition: if M₁, …, M_k are ε_i-LDP (resp. (ε_i, δ_i)-LDP) and each is run on
the same row with independent randomness, the k outputs together are (Σε_i)-LDP (resp.
(Σε_i, Σδ_i)-LDP) (Dwork and Roth 2014, *The Algorithmic Foundations of Differential Privacy*,
Theorem 3.16; Kasiviswanathan et al. 2011, Sec. 2 for the local model). For pure ε-LDP the sum is
tight in the worst case, so ldp never states a smaller total. A row released ``copies`` times side
by side, or used once per epoch for ``epochs`` epochs, is k = copies × epochs runs of one mechanism:
kε, and kδ. Releases recorded one after the other in the budget ledger compose the same way
(:func:`total_cost`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ldpcli.mechanisms._base import Mechanism, check_count
from ldpcli.mechanisms._hooks import RiskEpsilon

#: An exact ε below (1 − this)·the ε asked is a release that spends less than asked; closer, rounding.
SPENT_RTOL = 1e-6


@dataclass(frozen=True)
class ReleaseCost:
    """What a release spends on each row, by basic composition.

    Parameters
    ----------
    epsilon : float
        The ε asked for, summed over the uses (what the user chose).
    epsilon_exact : float
        The mechanism's exact worst-case ε, summed over the uses: the privacy loss the budget counts.
    delta : float
        δ summed over the uses (0 for a pure ε-LDP mechanism).
    """

    epsilon: float
    epsilon_exact: float
    delta: float = 0.0

    @property
    def spends_less(self) -> bool:
        """The exact ε is below the ε asked by more than rounding (:data:`SPENT_RTOL`): every place that
        states the release's ε then states the exact one, the ε spent (bcdp when its levels bind;
        privunit2 with Bhowmick's sufficient conditions)."""
        return self.epsilon_exact < self.epsilon * (1.0 - SPENT_RTOL)


def release_cost(mechanism: Mechanism, *, copies: int = 1, epochs: int = 1) -> ReleaseCost:
    """The cost of running ``mechanism`` ``copies`` × ``epochs`` times on each row.

    ``copies``: independent outputs of each row released side by side (``ReleaseOptions.copies``, whose
    mechanism is already the per-copy one, :meth:`ldpcli.mechanisms.MechanismSpec.for_copies`);
    ``epochs``: uses of each row in training (``TrainingOptions.epochs``). By basic composition (the
    module's references) k = copies × epochs runs of an ε-LDP mechanism are kε-LDP, and δ adds
    likewise. The ε asked is k times each use's share of it (:attr:`~ldpcli.mechanisms.Mechanism.epsilon_asked`:
    bcdp's copies each keep the asked ε, so two copies asked ε = 2 record 2, not 4). ``UsageError`` for
    a count that is not an integer ≥ 1.
    """
    uses = check_count(copies, "copies") * check_count(epochs, "epochs")
    return ReleaseCost(uses * mechanism.epsilon_asked, uses * mechanism.epsilon_exact, uses * mechanism.delta_exact)


def total_cost(costs: Iterable[ReleaseCost]) -> ReleaseCost:
    """The cost of several releases of the same rows (the ledger's spend): by basic composition, the
    sums of their ε, exact ε and δ (``math.fsum``, so the order of the releases does not matter)."""
    items = list(costs)
    return ReleaseCost(
        math.fsum(cost.epsilon for cost in items), math.fsum(cost.epsilon_exact for cost in items),
        math.fsum(cost.delta for cost in items),
    )


def composed_levels(levels: Sequence[RiskEpsilon], uses: int) -> list[RiskEpsilon]:
    """Reconstruction levels (:meth:`ldpcli.mechanisms.Mechanism.risk_epsilons`) of ``uses`` independent
    outputs of one row: each level's ε times ``uses`` (basic composition), the reason said in ``applies``.

    A level with no per-output ε (an (ε, δ) mechanism) stays without one. One use: the levels as they are.
    """
    if uses == 1:
        return list(levels)
    return [level._replace(
        epsilon=None if level.epsilon is None else uses * level.epsilon,
        applies=f"{level.applies}; times {uses} copies of each row (basic composition)",
    ) for level in levels]
