"""The statistical tests of ``ldp audit``: the mean and the squared error of the output of one input.

N privatized copies Z_1..Z_N of a fixed input x are checked for unbiasedness (a z-test per
coordinate) and for their squared error E‖Z − x‖² (a z-test of the sample mean), at the common
Bonferroni threshold z* of the audit's statistics family, each with its estimated standard error.

Branches. A mechanism whose output is a mixture of branches told apart by the output
(:class:`ldpcli.mechanisms._hooks.Branched`: PrivUnit2's and Duchi ℓ2's regions of the sphere, the
hypercube's agreement counts at a vertex, the scalar grid's values, separated's products of both)
gives each branch b its
exact probability P_b, conditional mean m_b and conditional error e_b. A branch of probability
8e−7 is never seen in 20000 rows, yet carries 2(1 − p)·L² of PrivUnit2's error at ε = 100, d = 16:
an unconditional test then fails an honest mechanism (z = −49). Here the tests are conditional on the
counts k_b, which the output shows:

1. the counts against the probabilities (``lawtests.counts_test``: exact binomial tests for the
   rare branches, Pearson's χ² among the others), one test of the family;
2. the rows of the branches expected at least ``MIN_BRANCH_ROWS`` times (alone, or pooled with rare
   neighbours of comparable spread: ``z_tested``, chosen before the rows are seen): given the
   counts they are independent draws from their branches, so the sample mean has expectation
   Σ_b (k_b/n_f)·m_b (n_f = Σ_b k_b over those branches) and variance Σ_b k_b·σ²_b/n_f², estimated
   by Σ_b Σ_i (Z_i − m_b)²/n_f² (unbiased, as the m_b are known); likewise the mean squared error
   against Σ_b (k_b/n_f)·e_b, two-sided for every input;
3. the rows of the other branches, too rare for a normal approximation, are bounded without one: Chebyshev's inequality for its rows' mean, P(‖Σ(Z_i − m_b)‖² ≥ k_b·v_b/α)
   ≤ α with v_b = E‖Z − m_b‖² = e_b − ‖m_b − x‖², and Markov's for their squared errors,
   P(Σ‖Z_i − x‖² ≥ k_b·e_b/α) ≤ α (together one test of the family, whose α is split between two
   bounds per branch, whether seen or not);
4. the branches must agree with the mechanism's claims, deterministically: Σ P_b = 1 (else the
   counts fail), Σ P_b·m_b = x (else the input is biased) and Σ P_b·e_b = ``expected_error``
   (boundary) or ≤ ``expected_error_max`` (else the error fails), to ``CLAIMS_RTOL`` (and, for
   the error, 2δ·√(L² + expected_error_max): the boundary point's norm is L only up to rounding,
   which moves PrivUnit2's error L²/m² − ‖x‖² by 2e−16·L², 1.5% of it at d = 2, ε = 50).

A mechanism without branches is tested as one branch: its mean against x, its error against
``expected_error`` on the boundary (two-sided) and against ``expected_error_max`` elsewhere (one-sided).

Floating point. Rows are accumulated as deviations from their expected means (Σ(Z − m_b), not
ΣZ − n·m_b), so the sums carry no rounding of the size of m_b. Each output value itself is rounded:
deviations below δ = ``RESOLUTION_ULPS``·u·√(L² + expected_error_max) (u = 2⁻⁵³) per coordinate, and
2δ√e + δ² + d·u·e of the squared error (the last from summing d squares), are below what
double-precision outputs resolve, and are not counted
against the mechanism (PrivUnit2 at ε = 700, d = 16: E‖Z − x‖² = 3e−36 on the cap, far below the
rounding of outputs of norm 1).

Power. With z_P = Φ⁻¹(power), each test detects with probability ``power`` a deviation of
(z* + z_P)·se (plus the resolution): ``mean_effect`` is that shift of one coordinate of E[Z] relative
to ‖x‖, ``mean_effect_sd`` in units of the coordinate's standard deviation, and ``error_effect`` the
relative deviation of E‖Z − x‖² (for the one-sided test, an excess). With branches these are
deviations of the means and errors given the branch counts; a bug that only moves rows from one
branch to another (a biased rounding moves PrivUnit2's rows between its caps, each still uniform)
changes the counts instead, and the counts test sees it, with a power not stated here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpcli.errors import counted
from ldpcli.math import _lawtests as lawtests
from ldpcli.math._lazy import special
from ldpcli.mechanisms import Mechanism
from ldpcli.mechanisms import _hooks as hooks

#: Output values are trusted to this many units in the last place of the output's RMS norm.
RESOLUTION_ULPS = 8.0
#: A branch (or a pool of rare ones, ``z_tested``) expected fewer times is bounded (Chebyshev, Markov)
#: rather than z-tested.
MIN_BRANCH_ROWS = 100
#: Rare branches are pooled only with branches whose spread E‖Z − m_b‖² is within this factor.
SPREAD_RATIO = 4.0
#: The branches' numbers must reproduce the mechanism's claims to this relative tolerance.
CLAIMS_RTOL = 1e-9
_UNIT_ROUNDOFF = 2.0**-53


@dataclass
class BranchCount:
    """One branch of the output of one input: its exact numbers, how often it was seen and how it was tested."""

    name: str
    probability: float
    rows: int
    error: float  # E[‖Z − x‖² | branch]
    test: str  # "z-test", "bounded" (seen too rarely for one) or "unseen"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class InputCheck:
    """The statistical checks on one fixed input."""

    name: str
    trials: int
    max_abs_z: float
    z_threshold: float
    unbiased: bool
    mean_squared_error: float  # observed, over the rows of the z-tested branches
    predicted: float  # what it is compared with: Σ (k_b/n)·e_b given the branches, or the claim
    comparison: str  # "equal" or "at most"
    error_z: float
    error_ok: bool
    error_se: float  # the standard error of the mean squared error (within branches)
    claimed: float  # the mechanism's claim: expected_error (boundary: equal) or expected_error_max (at most)
    resolution: float  # δ of the module docstring
    power: float
    mean_effect: float | None  # relative to ‖x‖ (None at x = 0)
    mean_effect_sd: float
    error_effect: float
    branches: list[BranchCount] = field(default_factory=list)
    counts_p_value: float | None = None  # the branch counts' test (None: no branches)
    counts_ok: bool = True
    rare_ok: bool = True  # the bounds on rarely seen branches hold
    notes: list[str] = field(default_factory=list)
    boundary: bool = True  # whether ``claimed`` is an equality (the boundary) or a bound

    @property
    def ok(self) -> bool:
        return self.unbiased and self.error_ok and self.counts_ok and self.rare_ok

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "branches"}
        out["branches"] = [b.to_dict() for b in self.branches]
        out["ok"] = self.ok
        for key, value in out.items():  # JSON has no inf or nan: a test that could not be made, or no limit
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
        return out


def tests_per_input(mech: Mechanism, branches: list[hooks.OutputBranch] | None) -> int:
    """The tests one input adds to the statistics family: d means, the error, and with branches the
    counts and the bounds on rarely seen branches (one share of the family, split among 2 per branch)."""
    return mech.d + 1 + (0 if branches is None else 2)


def z_tested(branches: list[hooks.OutputBranch], x: np.ndarray, trials: int) -> np.ndarray:
    """Which branches the z-tests take (the others are bounded): a choice made before looking at the rows.

    A branch expected at least ``MIN_BRANCH_ROWS`` times in ``trials`` rows is z-tested. Rarer ones are
    pooled, in their order, with rare neighbours of comparable spread E‖Z − m_b‖² (within a factor
    ``SPREAD_RATIO``) until the pool is expected that often, and then z-tested with it: many small
    branches of one law (the agreement counts of the hypercube at large d, the values of a fine grid)
    keep the tests' power. A rare branch whose spread dwarfs its neighbours' (PrivUnit2's band next to
    a thin cap) would dominate a z-test with a row or two, and is bounded instead.
    """
    probs = np.array([b.probability for b in branches])
    expected = trials * probs
    spread = np.array([max(b.error - float(np.sum((b.mean - x) ** 2)), 0.0) for b in branches])
    tested = expected >= MIN_BRANCH_ROWS
    pool: list[int] = []

    def close() -> None:
        if pool and float(expected[pool].sum()) >= MIN_BRANCH_ROWS:
            tested[pool] = True
        pool.clear()

    for b in range(len(branches)):
        if tested[b]:
            close()
            continue
        if pool:
            low, high = float(spread[pool].min()), float(spread[pool].max())
            if max(high, spread[b]) > SPREAD_RATIO * min(low, spread[b]):
                close()
        pool.append(b)
        if float(expected[pool].sum()) >= MIN_BRANCH_ROWS:
            close()
    close()
    return tested


def resolution(mech: Mechanism) -> float:
    """δ = ``RESOLUTION_ULPS``·u·√(L² + expected_error_max): the rounding of one output value, at most."""
    return RESOLUTION_ULPS * _UNIT_ROUNDOFF * math.sqrt(mech.norm_bound**2 + mech.expected_error_max)


def error_resolution(error: float, delta: float, d: int) -> float:
    """What rounding may move a mean of ‖Z − x‖² ≈ ``error`` by: 2δ√e + δ² from the outputs' own
    rounding (δ per coordinate, ``resolution``), and d·u·e from summing d squares."""
    error = max(error, 0.0)
    return 2.0 * math.sqrt(error) * delta + delta * delta + d * _UNIT_ROUNDOFF * error


def _shrink(value: float, tol: float) -> float:
    """``value`` moved towards 0 by ``tol`` (0 inside [−tol, tol])."""
    return math.copysign(max(abs(value) - tol, 0.0), value)


def _z(value: float, tol: float, se: float) -> float:
    shrunk = _shrink(value, tol)
    if se > 0.0:
        return shrunk / se
    return 0.0 if shrunk == 0.0 else math.copysign(math.inf, shrunk)


def rounding_allowance(mech: Mechanism) -> float:
    """The bound on E‖R − Ẑ‖² that a secure rendering's (``secure=True``) unbiased rounding adds to every row (d·g²/4,
    docs/floating-point.md §2), 0 for the default rendering.

    The rounding leaves the means unchanged but adds Σ_j g²·f_j(1 − f_j) ∈ [0, d·g²/4] to a row's E‖Z − x‖², an amount
    that depends on the row: the tests below accept any mean error in that interval, not one value.
    """
    rendering = getattr(mech, "rendering", None)
    return float(getattr(rendering, "added_error", 0.0))


class Accumulator:
    """Per-branch sums of deviations from the expected branch means and errors, fed chunk by chunk."""

    def __init__(self, mech: Mechanism, x: np.ndarray, branches: list[hooks.OutputBranch] | None,
                 claimed: float) -> None:
        self.mech, self.x, self.branches = mech, x, branches
        means = [x] if branches is None else [b.mean for b in branches]
        errors = [claimed] if branches is None else [b.error for b in branches]
        self.means = np.array(means, dtype=float)
        self.errors = np.array(errors, dtype=float)
        k, d = self.means.shape
        self.rows = np.zeros(k, dtype=np.int64)
        self.dev = np.zeros((k, d))
        self.dev_sq = np.zeros((k, d))
        self.err_dev = np.zeros(k)
        self.err_dev_sq = np.zeros(k)
        self.err_sum = np.zeros(k)

    def add(self, z: np.ndarray) -> None:
        """Add a chunk of privatized copies of x."""
        labels = (np.zeros(z.shape[0], dtype=np.int64) if self.branches is None
                  else np.asarray(hooks.branch_labels(self.mech, self.x, z), dtype=np.int64))
        sq = np.einsum("ij,ij->i", z - self.x, z - self.x)
        for b in np.unique(labels):
            rows = labels == b
            dev = z[rows] - self.means[b]
            err = sq[rows] - self.errors[b]
            self.rows[b] += int(rows.sum())
            self.dev[b] += dev.sum(axis=0)
            self.dev_sq[b] += np.einsum("ij,ij->j", dev, dev)
            self.err_dev[b] += float(err.sum())
            self.err_dev_sq[b] += float(np.dot(err, err))
            self.err_sum[b] += float(sq[rows].sum())


def check_input(
    acc: Accumulator, name: str, boundary: bool, z_star: float, alpha_each: float, power: float
) -> InputCheck:
    """The tests of the module docstring on the accumulated rows of one input."""
    mech, x, branches = acc.mech, acc.x, acc.branches
    claimed = mech.expected_error if boundary else mech.expected_error_max
    delta = resolution(mech)
    rows = acc.rows
    n = int(rows.sum())
    tested = np.ones(1, dtype=bool) if branches is None else z_tested(branches, x, n)
    n_f = int(rows[tested].sum())
    k = rows[tested].astype(float)
    z_power = float(special.ndtri(power))
    if n_f:
        # Given the counts, Σ_b Σ_i (Z_i − m_b) has variance Σ_b k_b·σ²_b, estimated without bias by
        # Σ_b Σ_i (Z_i − m_b)² since the m_b are known: branches seen once or twice need no variance of their own.
        diff = acc.dev[tested].sum(axis=0) / n_f
        se = np.sqrt(acc.dev_sq[tested].sum(axis=0)) / n_f
        zs = np.array([_z(float(v), delta, float(s)) for v, s in zip(diff, se, strict=True)])
        max_abs_z = float(np.max(np.abs(zs)))
        expected = float(np.dot(k, acc.errors[tested])) / n_f
        observed = float(acc.err_sum[tested].sum()) / n_f
        err_diff = float(acc.err_dev[tested].sum()) / n_f
        se_e = math.sqrt(float(acc.err_dev_sq[tested].sum())) / n_f
        tol_e = error_resolution(observed, delta, mech.d)
        # E[err_diff] lies in [0, added] against the branches' exact errors (the core's), in [−added, 0] against
        # the claimed error (which includes the rendering's bound): test the distance from that interval
        added = rounding_allowance(mech)
        low, high = (0.0, added) if branches is not None else (-added, 0.0)
        error_z = _z(err_diff - min(max(err_diff, low), high), tol_e, se_e)
        # each coordinate's sd over the tested rows: within the branches, plus between their means
        seen = k > 0
        branch_means = acc.means[tested][seen] + acc.dev[tested][seen] / k[seen, None]
        grand = (k[seen, None] * branch_means).sum(axis=0) / n_f
        within = (acc.dev_sq[tested][seen] - acc.dev[tested][seen] ** 2 / k[seen, None]).sum(axis=0)
        between = (k[seen, None] * (branch_means - grand) ** 2).sum(axis=0)
        pooled_sd = np.sqrt(np.maximum(within + between, 0.0) / max(n_f - 1, 1))
        reach = (z_star + z_power) * se + delta
        norm = float(np.linalg.norm(x))
        mean_effect = float(np.max(reach)) / norm if norm > 0.0 else None
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_effect_sd = float(np.max(np.where(pooled_sd > 0, reach / pooled_sd, 0.0)))
        error_effect = ((z_star + z_power) * se_e + tol_e) / expected if expected > 0 else math.inf
    else:
        max_abs_z, expected, observed, error_z, se_e = 0.0, claimed, math.nan, 0.0, math.inf
        mean_effect, mean_effect_sd, error_effect = None, math.inf, math.inf
    two_sided = boundary or branches is not None
    check = InputCheck(
        name, n, max_abs_z, z_star, max_abs_z <= z_star, observed, expected, "equal" if two_sided else "at most",
        float(error_z), bool(abs(error_z) <= z_star if two_sided else error_z <= z_star), se_e, claimed, delta, power,
        mean_effect, mean_effect_sd, error_effect, boundary=boundary,
    )
    if branches is not None:
        _branch_checks(check, acc, branches, tested, boundary, claimed, delta, alpha_each)
    return check


def _branch_checks(check: InputCheck, acc: Accumulator, branches: list[hooks.OutputBranch], tested: np.ndarray,
                   boundary: bool, claimed: float, delta: float, alpha_each: float) -> None:
    """Steps 1, 3 and 4 of the module docstring, recorded on ``check``; ``tested`` marks the branches that the
    z-tests of :func:`check_input` covered (:func:`z_tested`)."""
    x, rows = acc.x, acc.rows
    probs = np.array([b.probability for b in branches])
    added = rounding_allowance(acc.mech)
    for b, branch in enumerate(branches):
        seen = int(rows[b])
        test = "z-test" if tested[b] else ("bounded" if seen else "unseen")
        check.branches.append(BranchCount(branch.name, float(branch.probability), seen, float(branch.error), test))
        if test != "bounded":
            continue
        alpha_bound = alpha_each / (2 * len(branches))  # the bounds' share, split (Bonferroni)
        error_max = branch.error + added  # with a secure rendering's rounding
        spread = max(error_max - float(np.sum((branch.mean - x) ** 2)), 0.0)  # E‖Z − m_b‖²
        dev = float(np.linalg.norm(acc.dev[b]))
        mean_bound = math.sqrt(seen * spread / alpha_bound) + seen * delta
        tol_e = error_resolution(error_max, delta, acc.mech.d)
        error_bound = seen * (error_max / alpha_bound + tol_e)
        if dev > mean_bound:
            check.rare_ok = False
            check.notes.append(f"branch {branch.name!r} ({counted(seen, 'row')}): ‖Σ(Z − m_b)‖ = {dev:.4g} > Chebyshev bound "
                               f"{mean_bound:.4g}")
        if acc.err_sum[b] > error_bound:
            check.rare_ok = False
            check.notes.append(f"branch {branch.name!r} ({counted(seen, 'row')}): Σ‖Z − x‖² = {acc.err_sum[b]:.4g} > Markov "
                               f"bound {error_bound:.4g}")
    if len(branches) > 1:
        counts = lawtests.counts_test("branch counts", rows.astype(float), probs)
        check.counts_p_value = float(counts.p_value)
        check.counts_ok = bool(counts.p_value > alpha_each)
        if not check.counts_ok:
            check.notes.append(f"branch counts {rows.tolist()} against probabilities {probs.tolist()}: "
                               f"p = {counts.p_value:.3g} ({counts.note})")
    total = float(probs.sum())
    mean = (probs[:, None] * np.array([b.mean for b in branches])).sum(axis=0)
    error = float(np.dot(probs, [b.error for b in branches]))
    scale = math.sqrt(acc.mech.norm_bound**2 + acc.mech.expected_error_max)
    if abs(total - 1.0) > CLAIMS_RTOL:
        check.counts_ok = False
        check.notes.append(f"the branch probabilities sum to {total!r}, not 1")
    gap = float(np.max(np.abs(mean - x)))
    if gap > CLAIMS_RTOL * scale:
        check.unbiased = False
        check.notes.append(f"the branch means average to E[Z] = x + a vector of size {gap:.3g}: biased")
    # the boundary point's norm is L only to rounding, and E‖Z − x‖² moves with ‖x‖²: 2δ·scale ≥ 16u·(L² + …)
    slack = CLAIMS_RTOL * claimed + 2.0 * delta * scale
    # the branches' errors are the core's; the claim adds the rendering's rounding bound (0 by default)
    if (not claimed - added - slack <= error <= claimed + slack) if boundary else (error > claimed + slack):
        check.error_ok = False
        check.notes.append(f"the branch errors average to {error!r}, the mechanism claims "
                           f"{'' if boundary else 'at most '}{claimed!r}")
