"""The central accountant of ``ldp train``: dp-accounting for the Poisson-subsampled Gaussian.

The central layer (:mod:`ldpcli.learn.central`) runs T steps of one mechanism: each step includes
each row independently with probability q (Poisson sampling) and adds N(0, (zρ)² I) to the sum of
the step's rows' contributions, each of norm at most ρ. Under add/remove-one-row neighbours that
sum has ℓ2 sensitivity ρ, so one step is the Poisson-subsampled Gaussian mechanism with noise
multiplier z (Abadi et al. 2016, Sec. 3.1; Bhowmick et al. 2018, Sec. 3.1 and eq. (13)), and T
steps are its T-fold self-composition:
``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)), T)``.

Google's ``dp-accounting`` (imported on first use: the optional extra ``central``) turns that event
into (ε, δ) two ways, both upper bounds on the ε the run achieves at δ:

- **PLD** (``dp_accounting.pld.PLDAccountant``; Koskela, Jälkö, Honkela 2020; Doroshenko et al.
  2022, "Connect the Dots"): the privacy loss distribution, discretised pessimistically, so its ε is
  an upper bound that is close to exact. It is the headline claim.
- **RDP** (``dp_accounting.rdp.RdpAccountant``; Mironov 2017; Mironov, Talwar, Zhang 2019 for the
  subsampled Gaussian): Rényi DP at a set of orders, converted to (ε, δ) by the improved conversion
  of Canonne, Kamath, Steinke 2020 (Prop. 12 of arXiv:2004.00010 v4). Also an upper bound, looser.

:func:`moments_accountant_epsilon` is the conversion of Abadi et al.'s moments accountant (their
Thm. 2's tail bound; Mironov 2017, Prop. 3): ε = min_α RDP_α + log(1/δ)/(α − 1), over the same RDP
values. It is the bound Bhowmick et al. (2018, Sec. 5) state their ε_cent with (docs/errata.md §21).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ldpcli.errors import UsageError, counted
from ldpcli.release.accounting import ADD_OR_REMOVE_ONE, PLD_DELTA_MARGIN
from ldpcli.release.accounting import dp_accounting as load_dp_accounting

#: The neighbouring relation of every claim here (dp-accounting's ``ADD_OR_REMOVE_ONE``), as the sidecar and the
#: ledger record it (``ldp budget`` reads it back to compose the claim).
NEIGHBOURING = ADD_OR_REMOVE_ONE
#: The accountant whose ε a claim states.
HEADLINE = "pld"
#: The smallest noise multiplier the layer takes: below it ε is in the hundreds (z = 0.3, q = 0.1, 100
#: steps, δ = 1e-6: ε = 117), no protection, and the PLD's grid of losses grows like 1/z² (38 GiB at z = 10⁻³).
MIN_NOISE_MULTIPLIER = 0.3
#: Smallest and largest noise multipliers the solver searches.
_Z_RANGE = (MIN_NOISE_MULTIPLIER, 1e4)
#: The solver stops when its bracket [lo, hi] has hi/lo below 1 + this.
_Z_RTOL = 5e-4
#: The noise-multiplier search bisects once this many probes in a row have not halved its bracket.
_PATIENCE = 3


def dp_accounting() -> Any:
    """The ``dp_accounting`` package, or :class:`~ldpcli.errors.MissingDependency` naming the install line."""
    return load_dp_accounting("the central layer's accountant")


def accountant_name() -> str:
    """``dp-accounting <version>``: the accountant a claim was computed with."""
    dp_accounting()
    return f"dp-accounting {importlib.metadata.version('dp-accounting')}"


def _event(sampling_rate: float, noise_multiplier: float, steps: int) -> Any:
    dp = dp_accounting()
    step = dp.PoissonSampledDpEvent(sampling_rate, dp.GaussianDpEvent(noise_multiplier))
    return dp.SelfComposedDpEvent(step, steps)


def _check(sampling_rate: float, noise_multiplier: float, steps: int, delta: float,
           floor: float = MIN_NOISE_MULTIPLIER) -> None:
    if not (isinstance(sampling_rate, (int, float)) and 0.0 < sampling_rate <= 1.0):
        raise UsageError(f"`sampling_rate` must be in (0, 1], got {sampling_rate!r}")
    if not (isinstance(noise_multiplier, (int, float)) and math.isfinite(noise_multiplier)
            and noise_multiplier >= floor and noise_multiplier > 0):
        least = (f"≥ {floor:g} (below it the central ε is in the hundreds)" if floor > 0
                 else "> 0")
        raise UsageError(f"`noise_multiplier` must be a finite number {least}, got {noise_multiplier!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise UsageError(f"the central layer needs at least one step, got {steps!r}")
    if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
        raise UsageError(f"`central_delta` must be in (0, 1), got {delta!r}")


def epsilon_pld(sampling_rate: float, noise_multiplier: float, steps: int, delta: float) -> float:
    """ε at δ of T Poisson-subsampled Gaussian steps by the PLD accountant (pessimistic: an upper bound).

    ε is read at (1 − :data:`~ldpcli.release.accounting.PLD_DELTA_MARGIN`)·δ: the accountant's floating-point δ is
    not exactly pessimistic (it can come out 3.5e-7 relative below the exact δ), and the margin covers that.
    """
    _check(sampling_rate, noise_multiplier, steps, delta)
    dp = dp_accounting()
    accountant = dp.pld.PLDAccountant()
    accountant.compose(_event(sampling_rate, noise_multiplier, steps))
    return float(accountant.get_epsilon(delta * (1.0 - PLD_DELTA_MARGIN)))


@contextlib.contextmanager
def _quiet_orders() -> Iterator[None]:
    """dp-accounting logs (through absl) each fractional RDP order whose series does not converge and
    leaves it out; the bound over the remaining orders is still an upper bound, so those lines are kept quiet."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _rdp_accountant(sampling_rate: float, noise_multiplier: float, steps: int, delta: float) -> Any:
    """The RDP accountant after the T steps; any z > 0 (the RDP of a small z costs no more than a large one's)."""
    _check(sampling_rate, noise_multiplier, steps, delta, floor=0.0)
    accountant = dp_accounting().rdp.RdpAccountant()
    with _quiet_orders():
        accountant.compose(_event(sampling_rate, noise_multiplier, steps))
    return accountant


def epsilon_rdp(sampling_rate: float, noise_multiplier: float, steps: int, delta: float) -> tuple[float, float]:
    """(ε, the optimal order α) at δ by the RDP accountant and its improved conversion (an upper bound)."""
    epsilon, order = _rdp_accountant(sampling_rate, noise_multiplier, steps, delta).get_epsilon_and_optimal_order(delta)
    return float(epsilon), float(order)


def moments_accountant_epsilon(sampling_rate: float, noise_multiplier: float, steps: int,
                               delta: float) -> tuple[float, float]:
    """(ε, α) by the moments accountant's conversion: min over the RDP orders α of
    RDP_α + log(1/δ)/(α − 1) (Abadi et al. 2016, Thm. 2; Mironov 2017, Prop. 3), dp-accounting's
    RDP values at its default orders. Looser than :func:`epsilon_rdp`; for the paper's settings."""
    accountant = _rdp_accountant(sampling_rate, noise_multiplier, steps, delta)
    bounds = [(float(r) + math.log(1.0 / delta) / (float(a) - 1.0), float(a))
              for a, r in zip(accountant.orders, accountant.rdp) if a > 1]
    return min(bounds)


@dataclass(frozen=True)
class CentralEpsilon:
    """The two accountants' ε at δ for T Poisson-subsampled Gaussian steps, and which one is claimed."""

    sampling_rate: float
    noise_multiplier: float
    steps: int
    delta: float
    epsilon_pld: float
    epsilon_rdp: float
    rdp_order: float
    accountant: str

    @property
    def epsilon(self) -> float:
        """The claimed ε: the PLD accountant's (:data:`HEADLINE`)."""
        return self.epsilon_pld


def central_epsilon(sampling_rate: float, noise_multiplier: float, steps: int, delta: float) -> CentralEpsilon:
    """Both accountants' ε at δ (:func:`epsilon_pld`, :func:`epsilon_rdp`)."""
    return _account(sampling_rate, noise_multiplier, steps, delta,
                    epsilon_pld(sampling_rate, noise_multiplier, steps, delta))


def _account(sampling_rate: float, noise_multiplier: float, steps: int, delta: float, pld: float) -> CentralEpsilon:
    """:class:`CentralEpsilon` at z = ``noise_multiplier`` given its PLD ε ``pld`` (:func:`epsilon_pld` of the
    same arguments, computed by the caller), with the RDP accountant's ε computed here."""
    rdp, order = epsilon_rdp(sampling_rate, noise_multiplier, steps, delta)
    return CentralEpsilon(sampling_rate, float(noise_multiplier), steps, delta, pld, rdp, order, accountant_name())


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
    _check(sampling_rate, ceiling, steps, delta)
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
    return _account(sampling_rate, z, steps, delta, pld)
