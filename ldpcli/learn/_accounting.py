"""The central layer's noise: the smallest noise multiplier z for a central ε, and the layer's claim.

The central layer (:mod:`ldpcli.learn._central`) runs T steps of the Poisson-subsampled Gaussian
mechanism (Abadi et al. 2016, Sec. 3.1; Bhowmick et al. 2018, Sec. 3.1 and eq. (13)): the accounting
event :class:`ldpcli.accounting.SubsampledGaussian`. Its (ε, δ) is :func:`ldpcli.accounting.compose`'s:
dp-accounting's PLD accountant (the claim) and its RDP accountant beside it
(:mod:`ldpcli.accounting._pld` cites both). This module finds the z a target ε needs
(:func:`solve_noise_multiplier`) and states the claim at a z (:func:`central_epsilon`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ldpcli.accounting import ADD_OR_REMOVE_ONE, SubsampledGaussian, compose
from ldpcli.accounting._pld import (
    HEADLINE,
    MIN_NOISE_MULTIPLIER,
    CentralEpsilon,
    accountant_name,
    check_gaussian,
    epsilon_pld,
    epsilon_rdp,
    gaussian_account,
    moments_accountant_epsilon,
)
from ldpcli.errors import UsageError, counted

__all__ = [
    "HEADLINE", "MIN_NOISE_MULTIPLIER", "NEIGHBOURING", "CentralEpsilon", "accountant_name", "central_epsilon",
    "epsilon_pld", "epsilon_rdp", "moments_accountant_epsilon", "solve_noise_multiplier", "solved_central_epsilon",
]

#: The neighbouring relation of every claim here (dp-accounting's ``ADD_OR_REMOVE_ONE``), as the sidecar and the
#: ledger record it (``ldp budget`` reads it back to compose the claim).
NEIGHBOURING = ADD_OR_REMOVE_ONE
#: Smallest and largest noise multipliers the solver searches.
_Z_RANGE = (MIN_NOISE_MULTIPLIER, 1e4)
#: The solver stops when its bracket [lo, hi] has hi/lo below 1 + this.
_Z_RTOL = 5e-4
#: The noise-multiplier search bisects once this many probes in a row have not halved its bracket.
_PATIENCE = 3


def central_epsilon(sampling_rate: float, noise_multiplier: float, steps: int, delta: float) -> CentralEpsilon:
    """Both accountants' ε at δ for T steps at z = ``noise_multiplier``:
    :func:`ldpcli.accounting.compose` of one :class:`~ldpcli.accounting.SubsampledGaussian`."""
    (account,) = compose([SubsampledGaussian(noise_multiplier, sampling_rate, steps)], delta).gaussians
    return account


def _smallest(gap: Callable[[float], float], lo: float, hi: float, gap_hi: float, tol: float,
              gap_lo: float | None = None) -> float:
    """The smallest u in [``lo``, ``hi``], to ``tol``, with ``gap(u)`` ≤ 0, for a ``gap`` that falls as u grows:
    gap(u) ≤ 0 was evaluated, and gap(u − ``tol``) > 0 was too unless u is ``lo``. ``gap_hi`` = gap(``hi``) ≤ 0
    is given, and so is ``gap_lo`` = gap(``lo``) > 0 when known; else gap(``lo``) is evaluated only if the
    search gets there.

    A safeguarded secant search: the bracket [a, b] keeps gap(b) ≤ 0 (evaluated) and gap(a) > 0 (evaluated,
    or a = ``lo`` not evaluated yet). Each probe is the root of the line through the last two evaluations
    (through (b, gap(b)) with slope −1 at first: ε ∝ 1/z in log-log, the Gaussian's large-z law), kept
    ``tol``/2 inside the bracket, so that once the line is that accurate two probes close the bracket. When
    :data:`_PATIENCE` probes in a row did not halve the bracket, the next is its midpoint, so the bracket
    halves at least every :data:`_PATIENCE` + 1 probes whatever ``gap`` does; on ε_PLD(z) the search makes
    3 to 7 probes where a bisection of a bracket of a factor 2 makes 11
    (benchmarks/central_solver.py).
    """
    a, b = lo, hi
    a_known = gap_lo is not None
    points = [(hi + 1.0, gap_hi - 1.0), (hi, gap_hi)]  # the first line: slope −1 through (hi, gap_hi)
    widths = [hi - lo]
    while b - a > tol:
        (u0, g0), (u1, g1) = points[-2:]
        slope = (g1 - g0) / (u1 - u0) if u1 != u0 else math.nan
        probe = u1 - g1 / slope if slope < 0 else math.nan
        if not math.isfinite(probe) or (len(widths) > _PATIENCE and widths[-1] > widths[-1 - _PATIENCE] / 2):
            probe = (a + b) / 2
        elif probe <= a and not a_known:
            probe = a
        else:
            probe = min(max(probe, a + tol / 2), b - tol / 2)
        value = gap(probe)
        points.append((probe, value))
        if value > 0:
            a, a_known = probe, True
        elif probe == lo:
            return lo
        else:
            b = probe
        widths.append(b - a)
    if not a_known and gap(a) <= 0:  # the bracket closed on the low end, not evaluated yet: is it itself enough?
        return a
    return b


def _solve(epsilon: float, sampling_rate: float, steps: int, delta: float) -> tuple[float, float]:
    """(z, ε_PLD(z)) for :func:`solve_noise_multiplier` and :func:`solved_central_epsilon`."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"`central_epsilon` must be a finite number > 0, got {epsilon!r}")
    floor, ceiling = _Z_RANGE
    check_gaussian(sampling_rate, ceiling, steps, delta)
    at_ceiling = epsilon_rdp(sampling_rate, ceiling, steps, delta)[0]
    if at_ceiling > epsilon:
        raise UsageError(f"`central_epsilon` {epsilon:g} at `central_delta` {delta:g} needs a noise multiplier above "
                         f"{ceiling:g} over {counted(steps, 'step')} at `sampling_rate` {sampling_rate:g}; ask for a larger ε or "
                         "δ, or sample less")
    target, tol = math.log(epsilon), math.log1p(_Z_RTOL)
    found: dict[float, float] = {}  # ε_PLD by z, as evaluated

    def log_gap(value: float) -> float:
        return math.log(value) - target if value > 0 else -math.inf

    def rdp_gap(u: float) -> float:
        return log_gap(epsilon_rdp(sampling_rate, math.exp(u), steps, delta)[0])

    def z_of(u: float) -> float:  # exp(log(floor)) may round below the floor
        return max(floor, math.exp(u))

    def pld_gap(u: float) -> float:
        z = z_of(u)
        found[z] = epsilon_pld(sampling_rate, z, steps, delta)
        return log_gap(found[z])

    # the RDP accountant (cheap, looser: its z is at least the answer, as a rule) gives the PLD search its start
    start = _smallest(rdp_gap, math.log(floor), math.log(ceiling), log_gap(at_ceiling), tol)
    gap_start = pld_gap(start)
    low, gap_low = math.log(floor), None
    while gap_start > 0:  # the PLD above the RDP bound: search upward from there
        low, gap_low, start = start, gap_start, start + math.log(2.0)
        gap_start = pld_gap(start)
    z = z_of(_smallest(pld_gap, low, start, gap_start, tol, gap_low))
    return z, found[z]


def solve_noise_multiplier(epsilon: float, sampling_rate: float, steps: int, delta: float) -> float:
    """The smallest z (to a relative 5e-4) whose PLD ε at δ after T steps is ≤ ``epsilon``.

    A search in log z on :func:`epsilon_pld`, which falls as z grows (:func:`_smallest`): the answer z was
    evaluated with ε_PLD(z) ≤ ``epsilon``, so its ε never exceeds the target (a certified upper bound), and
    z/(1 + 5e-4) was evaluated above it unless z is the floor :data:`MIN_NOISE_MULTIPLIER`. The search starts
    from the z that the cheaper RDP accountant needs (a looser bound, so as a rule a z at least as large as
    the answer; searched upward when it is not), and evaluates each z once: 4 to 8 PLD evaluations on the
    settings of benchmarks/central_solver.py, where the bisection it replaced made 13.
    """
    return _solve(epsilon, sampling_rate, steps, delta)[0]


def solved_central_epsilon(epsilon: float, sampling_rate: float, steps: int, delta: float) -> CentralEpsilon:
    """:func:`central_epsilon` at the z :func:`solve_noise_multiplier` finds for ``epsilon``, reusing the PLD ε
    the search computed at that z (no evaluation twice)."""
    z, pld = _solve(epsilon, sampling_rate, steps, delta)
    return gaussian_account(sampling_rate, z, steps, delta, pld)
