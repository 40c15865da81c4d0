"""Google's ``dp-accounting`` (the optional extra ``central``, imported on first use): privacy loss distributions
of worst-case (ε_i, δ_i) pairs, and the PLD and RDP accountants of the Poisson-subsampled Gaussian.

**Pairs** (:func:`pld_epsilon`): the privacy loss distribution (PLD) of each (ε_i, δ_i)'s worst case (loss +∞ with
probability δ_i, ±ε_i otherwise: the dominating pair of every (ε_i, δ_i)-DP mechanism, Kairouz, Oh & Viswanath
2015), composed and read at a δ; discretised pessimistically, so an upper bound (docs/composition.md).

**The Poisson-subsampled Gaussian** (:func:`epsilon_pld`, :func:`epsilon_rdp`): T steps, each including each row
independently with probability q and adding N(0, (zρ)² I) to a sum of contributions of norm at most ρ, are the
T-fold self-composition ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)), T)`` for
add/remove-one-row neighbours (Abadi et al. 2016, Sec. 3.1; Bhowmick et al. 2018, Sec. 3.1 and eq. (13)).
dp-accounting turns that event into (ε, δ) two ways, both upper bounds on the ε the run achieves at δ:

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
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ldpcli.accounting._theorems import PLD_MAX_EPSILON
from ldpcli.errors import MissingDependency, UsageError, install_hint

#: The PLD accountant's finest discretisation of the privacy loss (dp-accounting's default), and the number of
#: steps that the composed loss's range Σε_i may span before the step grows (:func:`pld_interval`).
PLD_INTERVAL = 1e-4
PLD_STEPS = 100_000
#: The PLD's δ is asked at (1 − this)·δ. Its floating-point computation is not exactly pessimistic: for 20000
#: randomized responses at ε = 0.2 its ε at δ = 1e-6 is 2e-6 below the exact one (Thm 3.3), a δ 3.5e-13 too
#: small (tests/accounting/test_composition_theorems.py); this margin covers such errors with room to spare.
PLD_DELTA_MARGIN = 1e-3
#: The smallest noise multiplier the layer takes: below it ε is in the hundreds (z = 0.3, q = 0.1, 100
#: steps, δ = 1e-6: ε = 117), no protection, and the PLD's grid of losses grows like 1/z² (38 GiB at z = 10⁻³).
MIN_NOISE_MULTIPLIER = 0.3


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


def _gaussian_dp() -> Any:
    """The ``dp_accounting`` package for the subsampled Gaussian's accountants."""
    return dp_accounting("the central layer's accountant")


def accountant_name() -> str:
    """``dp-accounting <version>``: the accountant a claim was computed with."""
    _gaussian_dp()
    return f"dp-accounting {importlib.metadata.version('dp-accounting')}"


def _event(sampling_rate: float, noise_multiplier: float, steps: int) -> Any:
    dp = _gaussian_dp()
    step = dp.PoissonSampledDpEvent(sampling_rate, dp.GaussianDpEvent(noise_multiplier))
    return dp.SelfComposedDpEvent(step, steps)


def check_gaussian(sampling_rate: float, noise_multiplier: float, steps: int, delta: float | None,
                   floor: float = MIN_NOISE_MULTIPLIER) -> None:
    """UsageError, naming the parameter, for a rate outside (0, 1], a z below ``floor`` (or not > 0), no step, or a
    ``delta`` outside (0, 1) (None: no δ to check)."""
    if not (isinstance(sampling_rate, (int, float)) and 0.0 < sampling_rate <= 1.0):
        raise UsageError(f"`sampling_rate` must be in (0, 1], got {sampling_rate!r}")
    if not (isinstance(noise_multiplier, (int, float)) and math.isfinite(noise_multiplier)
            and noise_multiplier >= floor and noise_multiplier > 0):
        least = (f"≥ {floor:g} (below it the central ε is in the hundreds)" if floor > 0
                 else "> 0")
        raise UsageError(f"`noise_multiplier` must be a finite number {least}, got {noise_multiplier!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise UsageError(f"the central layer needs at least one step, got {steps!r}")
    if delta is not None and not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
        raise UsageError(f"`central_delta` must be in (0, 1), got {delta!r}")


def epsilon_pld(sampling_rate: float, noise_multiplier: float, steps: int, delta: float) -> float:
    """ε at δ of T Poisson-subsampled Gaussian steps by the PLD accountant (pessimistic: an upper bound).

    ε is read at (1 − :data:`PLD_DELTA_MARGIN`)·δ: the accountant's floating-point δ is
    not exactly pessimistic (it can come out 3.5e-7 relative below the exact δ), and the margin covers that.
    """
    check_gaussian(sampling_rate, noise_multiplier, steps, delta)
    dp = _gaussian_dp()
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
    check_gaussian(sampling_rate, noise_multiplier, steps, delta, floor=0.0)
    accountant = _gaussian_dp().rdp.RdpAccountant()
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


#: The accountant whose ε a claim states.
HEADLINE = "pld"


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



def gaussian_account(sampling_rate: float, noise_multiplier: float, steps: int, delta: float,
                     pld: float | None = None) -> CentralEpsilon:
    """:class:`CentralEpsilon` of T Poisson-subsampled Gaussian steps at z = ``noise_multiplier``: the PLD ε
    ``pld`` when the caller computed it already (:func:`epsilon_pld` of the same arguments; the noise solver's
    evaluation at its answer), else computed here, and the RDP accountant's ε computed here."""
    if pld is None:
        pld = epsilon_pld(sampling_rate, noise_multiplier, steps, delta)
    rdp, order = epsilon_rdp(sampling_rate, noise_multiplier, steps, delta)
    return CentralEpsilon(sampling_rate, float(noise_multiplier), steps, delta, pld, rdp, order, accountant_name())
