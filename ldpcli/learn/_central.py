"""The central layer of ``ldp train``: the server side of Bhowmick et al. (2018), Sec. 3.1, eq. (13).

Each of T steps the server draws a batch 𝓑 by Poisson sampling (each training row independently
with probability q), lets each sampled row release its privatized gradient Δ̂_i through the local
mechanism (unchanged: :mod:`ldpcli.learn._sgd`), projects every release onto the ℓ2 ball of radius ρ,
proj_ρ(v) = min{ρ/‖v‖₂, 1}·v, and moves with

    ĝ = (1/(qN)) (Σ_{i∈𝓑} proj_ρ(Δ̂_i) + Z),   Z ~ N(0, (zρ)² I_p),   θ ← θ − η·ĝ     (13)

(the paper writes the step as Δ̂ = (η/(qN))(Σ proj_ρ(Δ̂_i) + Z); its noise standard deviation on
the average is σ = zρ/(qN)). N is the number of training rows and qN the expected batch, a public
divisor (not |𝓑|), so ĝ is unbiased for the mean projected release over all N rows: E over 𝓑 and Z of
ĝ = (1/N)Σ_i proj_ρ(Δ̂_i). Inside the ball proj_ρ is the identity, so where every release has norm ≤ ρ,
ĝ is unbiased for the mean gradient, as the local layer's average is.

**Central guarantee.** Adding or removing one row changes the sum Σ proj_ρ(Δ̂_i) by one vector of
norm ≤ ρ, whatever that row's release was, so each step is the Poisson-subsampled Gaussian mechanism
with noise multiplier z (Abadi et al. 2016) and the T steps are accounted by
:mod:`ldpcli.learn._accounting` (PLD for the claim, RDP beside it). The model is post-processing of
the noisy sums, so it is (ε, δ)-DP for add/remove-one-row neighbours: this protects against whoever
sees the model (its users), provided the server runs (13) honestly (draws the batches and the noise
as stated and publishes only the model). The row count N is public (the sidecar states it) and is not
protected. The local guarantee against the server is unchanged: each row's ε is its number of uses
times ε; with Poisson sampling that number is random, and the claim uses the largest over all rows.

**Sampling.** A step's batch includes each of the N rows independently with probability q, drawn by the
geometric gaps between included rows (:func:`poisson_schedule`), at a cost of O(qN) uniforms a step. The schedule of all T steps is drawn before training
(it depends on no row's data), so the largest number of uses is known, and the ledger checked, before
any gradient is released. The schedule and the noise Z come from ldp's ChaCha20 stream
(:func:`ldpcli.release._randomness.keyed_generator` with ``rng="chacha20"``, no extra package) keyed from the
run's 256-bit root from the OS: whoever sees the model or some
draws cannot predict the others (a seeded run is reproducible, and only as secret as its seed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.learn._accounting import (
    HEADLINE,
    NEIGHBOURING,
    CentralEpsilon,
    central_epsilon,
    solved_central_epsilon,
)
from ldpcli.learn._losses import Loss
from ldpcli.learn._sgd import Iterate, StepRule
from ldpcli.math._domains import L2_BALL
from ldpcli.mechanisms._base import Mechanism
from ldpcli.release._central_claim import CentralTrainingClaim
from ldpcli.release._randomness import DEFAULT_RNG, randomness_record

#: δ of the central claim unless given: Bhowmick et al.'s (Sec. 5), below 1/N for any N < 10⁹.
DEFAULT_DELTA = 1e-9
#: What the central guarantee protects against, and what it assumes (the sidecar's ``protects_against``).
PROTECTS_AGAINST = (
    "whoever sees the model (its users, anyone it is published to): the model is (ε, δ)-DP for adding or removing "
    "one training row, provided the server runs eq. (13) honestly (samples each row with probability q, projects "
    "each release onto the ball of radius ρ, adds the Gaussian noise, and publishes only the model); the row count "
    "is public; it does not protect against the server, which sees each row's locally private release (the local "
    "guarantee covers that)"
)


@dataclass(frozen=True)
class CentralOptions:
    """The central layer of a training run (Bhowmick et al. 2018, eq. (13)).

    Parameters
    ----------
    central_radius : float
        ρ: every privatized gradient is projected onto the ℓ2 ball of this radius.
    sampling_rate : float
        q in (0, 1]: each step includes each training row independently with probability q. The run
        takes T = ⌈epochs/q⌉ steps, so each row is used ``epochs`` times on average.
    noise_multiplier : float or None
        z: the noise on the step's sum is N(0, (zρ)² I). Give it, or ``central_epsilon``.
    central_epsilon : float or None
        The target ε: z is solved as the smallest whose PLD ε at ``central_delta`` is at most it.
    central_delta : float
        δ of the claim (default :data:`DEFAULT_DELTA`).
    """

    central_radius: float
    sampling_rate: float
    noise_multiplier: float | None = None
    central_epsilon: float | None = None
    central_delta: float = DEFAULT_DELTA

    def validated(self) -> CentralOptions:
        """Itself, or a :class:`~ldpcli.errors.UsageError` naming the first impossible value."""
        rho, q = self.central_radius, self.sampling_rate
        if not (isinstance(rho, (int, float)) and math.isfinite(rho) and rho > 0):
            raise UsageError(f"`central_radius` must be a finite number > 0, got {rho!r}")
        if not (isinstance(q, (int, float)) and 0.0 < q <= 1.0):
            raise UsageError(f"`sampling_rate` must be in (0, 1], got {q!r}")
        if (self.noise_multiplier is None) == (self.central_epsilon is None):
            raise UsageError("the central layer needs exactly one of `noise_multiplier` (z) and `central_epsilon` "
                             "(z is then solved)")
        if not (isinstance(self.central_delta, (int, float)) and 0.0 < self.central_delta < 1.0):
            raise UsageError(f"`central_delta` must be in (0, 1), got {self.central_delta!r}")
        return self

    def steps(self, epochs: int) -> int:
        """T = ⌈epochs/q⌉: each row is expected in ``epochs`` steps."""
        return max(1, math.ceil(epochs / self.sampling_rate - 1e-9))

    def layer(self, steps: int) -> CentralLayer:
        """The layer of a run of ``steps`` steps: z given or solved, and both accountants' ε."""
        if self.noise_multiplier is not None:
            account = central_epsilon(self.sampling_rate, self.noise_multiplier, steps, self.central_delta)
        else:
            assert self.central_epsilon is not None
            account = solved_central_epsilon(self.central_epsilon, self.sampling_rate, steps, self.central_delta)
        return CentralLayer(float(self.central_radius), account, self.central_epsilon)


def central_options(central_radius: float | None = None, sampling_rate: float | None = None,
                    noise_multiplier: float | None = None, central_epsilon: float | None = None,
                    central_delta: float | None = None) -> CentralOptions | None:
    """The layer's options from separate values (the command line's): None when none is given,
    else a validated :class:`CentralOptions`, or a UsageError naming what is missing."""
    given = (central_radius, sampling_rate, noise_multiplier, central_epsilon, central_delta)
    if all(value is None for value in given):
        return None
    if central_radius is None or sampling_rate is None:
        raise UsageError("the central layer needs both `central_radius` (ρ) and `sampling_rate` (q)")
    return CentralOptions(central_radius, sampling_rate, noise_multiplier, central_epsilon,
                          DEFAULT_DELTA if central_delta is None else central_delta).validated()


@dataclass(frozen=True)
class CentralLayer:
    """The central layer as run: ρ, and the accounted (ε, δ) of its T steps at (q, z)."""

    radius: float
    account: CentralEpsilon
    target_epsilon: float | None = None

    @property
    def noise_multiplier(self) -> float:
        return self.account.noise_multiplier

    @property
    def sampling_rate(self) -> float:
        return self.account.sampling_rate

    @property
    def steps(self) -> int:
        return self.account.steps

    def noise_std(self, rows: int) -> float:
        """σ = zρ/(qN): the standard deviation of each coordinate of the noise in ĝ (eq. (13) over η)."""
        return self.noise_multiplier * self.radius / (self.sampling_rate * rows)

    def statement(self) -> str:
        """The central claim in words."""
        a = self.account
        return (f"Central: each privatized gradient was projected onto the ℓ2 ball of radius ρ = {self.radius:g} and "
                f"{'its one step' if a.steps == 1 else f'each of the {a.steps} steps'} added Gaussian noise "
                f"N(0, (zρ)²) with z = {a.noise_multiplier:.6g} to the "
                f"sum of its Poisson sample (each row with probability q = {a.sampling_rate:g}), Bhowmick et al. 2018 "
                f"eq. (13). By {a.accountant} the model is (ε = {a.epsilon_pld:.4g}, δ = {a.delta:g})-DP by the PLD "
                f"accountant (the claim; an upper bound) and (ε = {a.epsilon_rdp:.4g}, δ = {a.delta:g}) by the RDP "
                f"accountant (a looser upper bound), for {NEIGHBOURING} neighbours. It protects against {PROTECTS_AGAINST}.")

    def section(self, rows: int, *, seeded: bool, rng: str = DEFAULT_RNG) -> CentralTrainingClaim:
        """The ``central`` section of the sidecar, the JSON output and the ledger entry (its
        :meth:`~ldpcli.release._central_claim.CentralTrainingClaim.to_dict`; ``seeded``: the run had a seed; ``rng``:
        the generator of its samples and noise)."""
        a = self.account
        return CentralTrainingClaim(
            radius=self.radius, noise_multiplier=a.noise_multiplier, sampling_rate=a.sampling_rate,
            steps=a.steps, delta=a.delta, epsilon_pld=a.epsilon_pld, epsilon_rdp=a.epsilon_rdp,
            rdp_order=a.rdp_order, epsilon=a.epsilon, claim=HEADLINE,
            target_epsilon=self.target_epsilon, noise_std=self.noise_std(rows), expected_batch=a.sampling_rate * rows,
            accountant=a.accountant, neighbouring=NEIGHBOURING, protects_against=PROTECTS_AGAINST,
            statement=self.statement(),
            randomness=randomness_record(rng, seeded=seeded),
        )


def project_releases(released: np.ndarray, radius: float) -> np.ndarray:
    """proj_ρ of every row: min{ρ/‖v‖₂, 1}·v (eq. (13)); rows inside the ball are returned unchanged."""
    return L2_BALL.nearest(released, radius)


def noisy_mean(released: np.ndarray, radius: float, noise_multiplier: float, expected_rows: float,
               rng: np.random.Generator) -> np.ndarray:
    """ĝ = (1/(qN))(Σ_i proj_ρ(Δ̂_i) + Z), Z ~ N(0, (zρ)² I): eq. (13) divided by the step η.

    ``released`` is the (|𝓑|, p) array of the batch's releases (possibly no rows) and ``expected_rows``
    is qN. Unbiased over Z for (1/(qN))Σ proj_ρ(Δ̂_i)."""
    total = project_releases(released, radius).sum(axis=0)
    return (total + rng.normal(0.0, noise_multiplier * radius, total.shape)) / expected_rows


def poisson_schedule(rows: int, rate: float, steps: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The row indices (ascending) of each of ``steps`` Poisson samples of ``rows`` rows at ``rate`` (the module's
    "Sampling"), drawn from ``rng``'s uniforms alone, so that ldp's ChaCha20 stream draws them as well as numpy's."""
    log_keep = math.log1p(-rate) if rate < 1 else -math.inf  # at rate 1 every gap is 0: every row is in
    return [_poisson_sample(rows, log_keep, rate, rng) for _ in range(steps)]


def _poisson_sample(rows: int, log_keep: float, rate: float, rng: np.random.Generator) -> np.ndarray:
    """One Poisson sample by its gaps: the rows skipped before each included one are i.i.d. geometric,
    G = ⌊log U / log(1 − q)⌋ for U uniform on (0, 1] (P(G ≥ g) = (1 − q)^g: the geometric law by inversion,
    Devroye 1986, Ch. X.2), so each row is in independently with probability q; O(qN) uniforms."""
    picks: list[np.ndarray] = []
    last = -1
    while True:
        expected = (rows - 1 - last) * rate
        chunk = int(expected + 6.0 * math.sqrt(expected)) + 16
        gaps = np.minimum(np.floor(np.log(1.0 - rng.random(chunk)) / log_keep), rows)  # capped: no overflow
        positions = last + np.cumsum(gaps.astype(np.int64) + 1)
        inside = positions[positions < rows]
        picks.append(inside)
        if inside.size < chunk:
            return np.concatenate(picks)
        last = int(positions[-1])


def most_uses(schedule: Sequence[np.ndarray], rows: int) -> int:
    """The largest number of steps any row is in."""
    counts = np.zeros(rows, dtype=np.int64)
    for batch in schedule:
        counts[batch] += 1
    return int(counts.max()) if rows else 0


def central_steps(
    loss: Loss,
    mechanism: Mechanism,
    layer: CentralLayer,
    private: Iterate,
    baseline: Iterate | None,
    X: np.ndarray,
    t: np.ndarray,
    schedule: Sequence[np.ndarray],
    rule: StepRule,
    rng: np.random.Generator,
    noise_rng: np.random.Generator,
    on_rows: Callable[[int], None] | None = None,
) -> int:
    """The steps of eq. (13), one per batch of ``schedule``: the batch's gradients at the private θ are
    clipped and privatized by ``mechanism`` (with ``rng``, as in :func:`ldpcli.learn._sgd.run_steps`),
    and the private iterate steps with :func:`noisy_mean` (noise from ``noise_rng``). ``baseline``
    takes the exact mean gradient of the same batch (no step for an empty batch). Returns the
    number of gradients clipped."""
    expected = layer.sampling_rate * len(t)
    clipped = 0
    for batch in schedule:
        eta = rule.eta(private.steps + 1)
        Xb, tb = X[batch], t[batch]
        if len(batch):
            gradients, moved = mechanism.project(loss.gradients(private.theta, Xb, tb))
            clipped += moved
            released = mechanism.privatize(gradients, rng)
        else:
            released = np.zeros((0, private.theta.size))
        private.step(loss.project_gradient(noisy_mean(released, layer.radius, layer.noise_multiplier, expected,
                                                      noise_rng)), eta)
        if baseline is not None and len(batch):
            baseline.step(loss.mean_gradient(baseline.theta, Xb, tb), eta)
        if on_rows is not None:
            on_rows(len(batch))
    return clipped
