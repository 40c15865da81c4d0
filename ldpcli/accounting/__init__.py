"""Privacy accounting in one home: typed events, one :func:`compose`, and the theorems as pure functions.

An **event** says what was released (:class:`LocalRelease`, :class:`ShuffledRelease`, :class:`SubsampledGaussian`, a
recorded :class:`CentralClaim`, a :class:`Composed` set); :func:`compose` states their (ε, δ) at a δ with the
theorem that proves it (a :class:`Composition` of :class:`Guarantee`\\ s). The ledger's budget, the shuffle section
of ``ldp params``, the shuffle claim of a shuffled release and training's central layer all call it. The theorems:
basic composition (Dwork & Roth 2014, Thm 3.16), Kairouz–Oh–Viswanath's optimal and heterogeneous composition (2015,
Thm 3.3 and 3.5), Dwork–Rothblum–Vadhan's advanced composition (2010, Thm III.3), dp-accounting's privacy loss
distributions and RDP (the optional extra ``central``, imported on first use), and amplification by shuffling
(Feldman, McMillan & Talwar 2021, evaluated in :mod:`ldpcli.math._shuffling`).

What one release of a mechanism costs (``release_cost``) stays with the mechanisms
(:mod:`ldpcli.mechanisms._composition`); the ledger's records are read in :mod:`ldpcli.release._accounting`.

>>> from ldpcli.accounting import LocalRelease, compose
>>> compose([LocalRelease(0.1)] * 100, 1e-6).guarantee.epsilon < 10
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.accounting._compose import Composition as Composition
    from ldpcli.accounting._compose import Guarantee as Guarantee
    from ldpcli.accounting._compose import compose as compose
    from ldpcli.accounting._events import CentralClaim as CentralClaim
    from ldpcli.accounting._events import Composed as Composed
    from ldpcli.accounting._events import Event as Event
    from ldpcli.accounting._events import LocalRelease as LocalRelease
    from ldpcli.accounting._events import ShuffledRelease as ShuffledRelease
    from ldpcli.accounting._events import SubsampledGaussian as SubsampledGaussian
    from ldpcli.accounting._events import event_from_dict as event_from_dict
    from ldpcli.accounting._pld import MIN_NOISE_MULTIPLIER as MIN_NOISE_MULTIPLIER
    from ldpcli.accounting._pld import CentralEpsilon as CentralEpsilon
    from ldpcli.accounting._pld import epsilon_pld as epsilon_pld
    from ldpcli.accounting._pld import epsilon_rdp as epsilon_rdp
    from ldpcli.accounting._pld import moments_accountant_epsilon as moments_accountant_epsilon
    from ldpcli.accounting._pld import pld_epsilon as pld_epsilon
    from ldpcli.accounting._theorems import ADD_OR_REMOVE_ONE as ADD_OR_REMOVE_ONE
    from ldpcli.accounting._theorems import REPLACE_ONE as REPLACE_ONE
    from ldpcli.accounting._theorems import basic_composition as basic_composition
    from ldpcli.accounting._theorems import drv_epsilon as drv_epsilon
    from ldpcli.accounting._theorems import kov_heterogeneous_epsilon as kov_heterogeneous_epsilon
    from ldpcli.accounting._theorems import optimal_homogeneous_epsilon as optimal_homogeneous_epsilon
    from ldpcli.math._shuffling import Grid as Grid
    from ldpcli.math._shuffling import ShuffleBound as ShuffleBound
    from ldpcli.math._shuffling import closed_form_epsilon as closed_form_epsilon
    from ldpcli.math._shuffling import delta_upper as delta_upper
    from ldpcli.math._shuffling import grid_of as grid_of
    from ldpcli.math._shuffling import shuffle_bound as shuffle_bound

__getattr__, __dir__, __all__ = attach(__name__, __file__)
