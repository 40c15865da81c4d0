"""Privacy accounting in one home: typed events, one :func:`compose`, and the theorems as pure functions.

An **event** says what was released (:class:`LocalRelease`, :class:`ShuffledRelease`,
:class:`SubsampledGaussian`, a recorded :class:`CentralClaim`, a :class:`Composed` set); :func:`compose` states
their (ε, δ) at a δ with the theorem that proves it (a :class:`Composition` of :class:`Guarantee`\\ s). ``ldp
budget``, ``ldp params --shuffle``, the shuffle claim of ``privatize --shuffle`` and ``ldp train``'s central layer
all call it. The theorems: basic composition (Dwork & Roth 2014, Thm 3.16), Kairouz–Oh–Viswanath's optimal and
heterogeneous composition (2015, Thm 3.3 and 3.5), Dwork–Rothblum–Vadhan's advanced composition (2010, Thm III.3),
dp-accounting's privacy loss distributions and RDP (the optional extra ``central``, imported on first use), and
amplification by shuffling (Feldman, McMillan & Talwar 2021, evaluated in :mod:`ldpcli.math.shuffling`).

What one release of a mechanism costs (``release_cost``) stays with the mechanisms
(:mod:`ldpcli.mechanisms.composition`); the ledger's records are read in :mod:`ldpcli.release.accounting`.

>>> from ldpcli.accounting import LocalRelease, compose
>>> compose([LocalRelease(0.1)] * 100, 1e-6).guarantee.epsilon < 10
True
"""

from ldpcli.accounting._compose import Composition, Guarantee, compose
from ldpcli.accounting._events import (
    CentralClaim,
    Composed,
    Event,
    LocalRelease,
    ShuffledRelease,
    SubsampledGaussian,
    event_from_dict,
)
from ldpcli.accounting._pld import CentralEpsilon, epsilon_pld, epsilon_rdp, moments_accountant_epsilon, pld_epsilon
from ldpcli.accounting._theorems import (
    ADD_OR_REMOVE_ONE,
    REPLACE_ONE,
    basic_composition,
    drv_epsilon,
    kov_heterogeneous_epsilon,
    optimal_homogeneous_epsilon,
)
from ldpcli.math.shuffling import ShuffleBound, shuffle_bound

__all__ = [
    "ADD_OR_REMOVE_ONE",
    "REPLACE_ONE",
    "CentralClaim",
    "CentralEpsilon",
    "Composed",
    "Composition",
    "Event",
    "Guarantee",
    "LocalRelease",
    "ShuffleBound",
    "ShuffledRelease",
    "SubsampledGaussian",
    "basic_composition",
    "compose",
    "drv_epsilon",
    "epsilon_pld",
    "epsilon_rdp",
    "event_from_dict",
    "kov_heterogeneous_epsilon",
    "moments_accountant_epsilon",
    "optimal_homogeneous_epsilon",
    "pld_epsilon",
    "shuffle_bound",
]
