"""The exact law of a mechanism's output, as goodness-of-fit tests: the pieces ``law_tests`` share.

``ldp audit`` checks more than the mean and the squared error: each mechanism's ``law_tests(x, z)``
(:class:`ldpcli.mechanisms._hooks.LawTested`) compares statistics of its privatized rows with their exact
laws under the calibrated parameters. This module holds the tests themselves and the laws that several mechanisms
share:

- :func:`ks_uniform`: the one-sample Kolmogorov–Smirnov test of probability-integral-transformed
  values against Uniform(0, 1), with the exact p-value (``scipy.stats.kstest(method="exact")``,
  the exact finite-n law of the KS distance; valid for a continuous law).
- :func:`counts_test`: a pmf over cells: exact binomial test when the cells pool to two, else
  Pearson's χ² after pooling adjacent cells to an expected count of at least 5 (asymptotic).
- :func:`binomial_test`: the exact two-sided binomial test (``scipy.stats.binomtest``).
- :func:`deterministic`: a check that holds or not (support, constant norm): p-value 1 or 0.
- :func:`sphere_tests`: PrivUnit2 (Bhowmick et al. 2018, Alg. 1) and the hemisphere mechanism (Duchi
  et al. 2014, App. C.2; and the direction of the separated mechanism, Eq. 22): the output is L·V/m with V uniform on a cap {⟨v, u_s⟩ ≥ γ} (probability p) or on its
  complement, u_s = ±u the unbiased rounding of x (sign + with probability (1 + ‖x‖/L)/2). With
  S = (1 − ⟨V, u_s⟩)/2 ~ Beta(α, α) restricted to [0, s_γ] or [s_γ, 1], α = (d − 1)/2, the law of
  S₊ = ‖V − u‖²/4 is the exact two-component mixture
  π₊·F(S₊) + π₋·(1 − F(1 − S₊)) with F the cap/complement mixture CDF below (computed from
  S₊ and S₋ = ‖V + u‖²/4 directly, so that no 1 − t cancels). Given S, the direction of
  V⊥ = V − ⟨V, u⟩u is uniform on the unit sphere of u⊥, so for fixed unit w ⊥ u the cosine
  ⟨V⊥/‖V⊥‖, w⟩ has the cosine law of dimension d − 1: (1 − c)/2 ~ Beta((d − 2)/2, (d − 2)/2)
  (d = 2: a fair sign). At x = 0 the law of V is rotation invariant: (1 − ⟨V, e⟩)/2 ~ Beta(α, α)
  for fixed e. d = 1 is randomized response: one exact binomial test.

Fixed directions are seeded constants that depend on d (and on u, which comes from the input), never
on the outputs, so each test's p-value is valid as it stands.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ldpcli.errors import counted
from ldpcli.math import _logspace as logspace
from ldpcli.math import _sphere as sm
from ldpcli.math._lazy import special


class LawTest(NamedTuple):
    """One goodness-of-fit test of a mechanism's output against its exact law (``LawTested.law_tests``).

    ``statistic`` is the test's own (KS distance, χ², a count); ``p_value`` its p-value under the
    exact law (exact where the docstring of the test says so). A deterministic check (every output
    on the support, a constant norm) has p-value 1 when it holds and 0 when it does not. A test
    that cannot be run at these parameters is returned with ``skipped`` set and ``note`` saying
    why; it counts neither as a pass nor in the Bonferroni family.
    """

    name: str
    statistic: float
    p_value: float
    note: str = ""
    skipped: bool = False


#: Fixed directions tested per input (orthogonal part, or the whole direction at x = 0).
DIRECTIONS = 3
#: Cells are pooled until each expects at least this many rows (χ² tests).
MIN_EXPECTED = 5.0
#: The seed of the fixed test directions (a constant: the directions never depend on the outputs).
_DIRECTION_SEED = 0x1A5_0015
#: Below this, the cap of a sphere mechanism is too thin for its outputs to resolve in double
#: precision (‖V − u‖ ≈ 2√s_γ < 2e−10): the cosine and orthogonal tests are skipped, and say so.
MIN_RESOLVED_CAP = 1e-20
#: Below this, the cap probability is not representable by ``betainc`` (the CDF is then skipped).
MIN_CAP_PROBABILITY = 1e-280


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def skipped(name: str, why: str) -> LawTest:
    """A test that cannot be run here: reported, not counted."""
    return LawTest(name, 0.0, 1.0, f"skipped: {why}", True)


def deterministic(name: str, bad: int, n: int, what: str) -> LawTest:
    """A check that holds or not: p-value 1 when no row is ``bad``, else 0 (statistic: the bad rows)."""
    note = f"{bad} of {counted(n, 'row')} {what}" if bad else f"all {counted(n, 'row')}"
    return LawTest(name, float(bad), 0.0 if bad else 1.0, note)


def ks_uniform(name: str, cdf_values: np.ndarray, note: str = "") -> LawTest:
    """Exact one-sample KS test of F(X) against Uniform(0, 1) (F the exact continuous CDF of X)."""
    from scipy import stats

    u = np.clip(np.asarray(cdf_values, dtype=float), 0.0, 1.0)
    if u.size == 0:
        return skipped(name, "no rows")
    res = stats.kstest(u, "uniform", method="exact")
    return LawTest(name, float(res.statistic), float(min(1.0, max(0.0, res.pvalue))), note or f"KS, exact, n = {u.size}")


def binomial_test(name: str, k: int, n: int, p: float, note: str = "") -> LawTest:
    """Exact two-sided binomial test of k successes in n trials at probability p (statistic: k/n)."""
    from scipy import stats

    if n == 0:
        return skipped(name, "no rows")
    p = min(1.0, max(0.0, p))
    value = float(stats.binomtest(int(k), int(n), p).pvalue)
    return LawTest(name, k / n, min(1.0, max(0.0, value)), note or f"binomial, exact, {k} of {n} at p = {p:.6g}")


def _greedy_groups(expected: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Consecutive cells pooled from the left until each group expects >= MIN_EXPECTED rows.

    Returns (the groups as index arrays, the leftover cells at the end that expect less).
    """
    cum = np.cumsum(expected)
    groups: list[np.ndarray] = []
    start, before = 0, 0.0
    while start < expected.size:
        end = int(np.searchsorted(cum, before + MIN_EXPECTED * (1.0 - 1e-12)))
        if end >= expected.size:
            break
        groups.append(np.arange(start, end + 1))
        start, before = end + 1, float(cum[end])
    return groups, np.arange(start, expected.size)


def _multinomial_p(observed: np.ndarray, expected: np.ndarray) -> tuple[float, float, str]:
    """(statistic, p-value, method) for groups that each expect >= MIN_EXPECTED rows."""
    from scipy import stats

    n = float(observed.sum())
    if observed.size <= 1 or n == 0:
        return 0.0, 1.0, "one group"
    if observed.size == 2:
        k = int(round(observed[0]))
        return k / n, float(stats.binomtest(k, int(round(n)), float(expected[0] / expected.sum())).pvalue), "binomial, exact"
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    return chi2, float(stats.chi2.sf(chi2, observed.size - 1)), f"χ², {observed.size - 1} df (asymptotic)"


def counts_test(name: str, observed: np.ndarray, probs: np.ndarray) -> LawTest:
    """Observed counts per cell against exact cell probabilities (cells in a natural order).

    Rows in a cell of probability 0 fail at once (p-value 0). Cells expecting at least
    :data:`MIN_EXPECTED` rows stay alone; the others are pooled in order into groups that do, and
    what is left of them (expecting fewer) forms one *rare* group. The groups are tested by an exact
    binomial test (two groups) or Pearson's χ² (more, asymptotic); the rare group's count by an
    exact binomial test, and the groups given it by the above: the p-value is then twice the
    smaller of the two (Bonferroni within the test), so a rare outcome can neither be lost in a big
    cell nor make the χ² blow up.
    """
    from scipy import stats

    observed = np.asarray(observed, dtype=float)
    probs = np.clip(np.asarray(probs, dtype=float), 0.0, None)
    n = float(observed.sum())
    if n == 0:
        return skipped(name, "no rows")
    impossible = float(observed[probs == 0.0].sum())
    if impossible:
        return LawTest(name, impossible, 0.0, f"{counted(int(impossible), 'row')} in cells of probability 0")
    probs = probs / probs.sum()
    expected = n * probs
    large = np.flatnonzero(expected >= MIN_EXPECTED)
    small = np.flatnonzero(expected < MIN_EXPECTED)
    pooled, rare = _greedy_groups(expected[small])
    groups = [np.array([i]) for i in large] + [small[g] for g in pooled]
    obs = np.array([observed[g].sum() for g in groups])
    exp = np.array([expected[g].sum() for g in groups])
    rare_cells = small[rare]
    if rare_cells.size == 0 or len(groups) == 0:
        if len(groups) == 0:  # everything rare: the whole law expects < MIN_EXPECTED rows per cell
            obs, exp = np.array([n]), np.array([n])
        stat, p_value, how = _multinomial_p(obs, exp)
        return LawTest(name, stat, min(1.0, max(0.0, p_value)), f"{how}, {counted(len(groups), 'group')}, n = {int(n)}")
    o_rare = int(round(observed[rare_cells].sum()))
    p_rare = float(probs[rare_cells].sum())
    p_of_rare = float(stats.binomtest(o_rare, int(round(n)), min(1.0, p_rare)).pvalue)
    main_exp = exp * (obs.sum() / exp.sum()) if obs.sum() > 0 else exp
    stat, p_main, how = _multinomial_p(obs, main_exp)
    p_value = min(1.0, 2.0 * min(p_of_rare, p_main))
    note = (f"{how} over {counted(len(groups), 'group')}, and exact binomial of the rare cells ({counted(o_rare, 'row')}, "
            f"expected {n * p_rare:.3g}); p = 2·min, n = {int(n)}")
    return LawTest(name, stat, max(0.0, p_value), note)


def homogeneity_test(name: str, agree: np.ndarray) -> LawTest:
    """Exchangeability of the columns of a 0/1 matrix whose rows are uniform given their sums.

    Given row sums A_i, a uniformly placed set of A_i ones has per-column counts c_j with
    E c_j = S/d (S = Σ A_i) and covariance V·(I − 11ᵀ/d)·d/(d − 1), V = Σ A_i(d − A_i)/d². So
    (d − 1)/(d·V)·Σ_j (c_j − S/d)² is χ² with d − 1 degrees of freedom in the limit (asymptotic).
    """
    from scipy import stats

    n, d = agree.shape
    if d < 2 or n == 0:
        return skipped(name, "needs d >= 2")
    a = agree.sum(axis=1).astype(float)
    v = float(np.sum(a * (d - a))) / d**2
    if v == 0.0:
        return LawTest(name, 0.0, 1.0, "every row all agreeing or all disagreeing: nothing to test")
    c = agree.sum(axis=0).astype(float)
    stat = (d - 1) / (d * v) * float(np.sum((c - a.sum() / d) ** 2))
    return LawTest(name, stat, float(stats.chi2.sf(stat, d - 1)), f"χ² homogeneity, {d - 1} df, n = {n} (asymptotic)")


# ---------------------------------------------------------------------------------------------
# Geometry shared by the sphere mechanisms
# ---------------------------------------------------------------------------------------------


def unit_rows(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(z/‖z‖ row by row, ‖z‖); zero rows stay zero."""
    norms = np.sqrt(np.einsum("ij,ij->i", z, z))
    return z / np.where(norms > 0.0, norms, 1.0)[:, None], norms


def fixed_directions(d: int, k: int = DIRECTIONS, orthogonal_to: np.ndarray | None = None) -> np.ndarray:
    """k seeded unit vectors of R^d (a constant of d), orthogonal to ``orthogonal_to`` if given.

    d = 2 with a direction u to avoid: the one unit vector (−u₂, u₁). Fewer than k rows when the
    space is smaller than k.
    """
    if orthogonal_to is not None and d == 2:
        u = orthogonal_to
        return np.array([[-u[1], u[0]]]) / math.hypot(u[0], u[1])
    room = d - (1 if orthogonal_to is not None else 0)
    k = max(0, min(k, room))
    g = np.random.default_rng([_DIRECTION_SEED, d]).standard_normal((k, d))
    if orthogonal_to is not None:
        u = orthogonal_to / np.linalg.norm(orthogonal_to)
        for _ in range(2):
            g -= np.outer(g @ u, u)
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def orthogonal_parts(v: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(V⊥ = V − ⟨V, u⟩u row by row, projected twice, and ‖V⊥‖) for unit u."""
    w = v.copy()
    for _ in range(2):
        w -= np.outer(w @ u, u)
    return w, np.sqrt(np.einsum("ij,ij->i", w, w))


def cosine_law_cdf(c: np.ndarray, dim: int) -> np.ndarray:
    """P(⟨W, e⟩ ≤ c) for W uniform on S^{dim−1} (dim ≥ 2): 1 − I_{(1−c)/2}(a, a), a = (dim − 1)/2."""
    a = (dim - 1) / 2.0
    s = np.clip((1.0 - c) / 2.0, 0.0, 1.0)
    return 1.0 - special.betainc(a, a, s)


def uniform_direction_tests(v: np.ndarray, d: int, what: str = "direction") -> list[LawTest]:
    """V uniform on S^{d−1} (d ≥ 2): the cosine with each fixed direction e_k has the cosine law (KS)."""
    out = []
    for i, e in enumerate(fixed_directions(d)):
        # ‖v − e‖²/4 = (1 − cos)/2, clipped: a v within rounding of −e gives 1 + 2⁻⁵², where betainc is nan
        half_gap = np.clip(np.einsum("ij,ij->i", v - e, v - e) / 4.0, 0.0, 1.0)
        cdf = 1.0 - special.betainc((d - 1) / 2.0, (d - 1) / 2.0, half_gap)
        out.append(ks_uniform(f"{what} uniform: cos to e{i + 1}", cdf))
    return out


def orthogonal_uniform_tests(v: np.ndarray, u: np.ndarray, what: str = "V⊥") -> list[LawTest]:
    """The direction of V⊥ uniform on the unit sphere of u⊥ (d ≥ 2), whatever the cosine ⟨V, u⟩.

    d ≥ 3: for fixed unit w_k ⊥ u, ⟨V⊥/‖V⊥‖, w_k⟩ has the cosine law of dimension d − 1 (KS).
    d = 2: u⊥ is a line, the sign of ⟨V, w⟩ is fair (exact binomial).
    """
    d = v.shape[1]
    perp, norms = orthogonal_parts(v, u)
    keep = norms > 0.0
    if d == 2:
        w = fixed_directions(2, orthogonal_to=u)[0]
        side = (v[keep] @ w) > 0.0
        return [binomial_test(f"{what} sign fair (d = 2)", int(side.sum()), int(keep.sum()), 0.5)]
    unit = perp[keep] / norms[keep, None]
    out = []
    for i, w in enumerate(fixed_directions(d, orthogonal_to=u)):
        out.append(ks_uniform(f"{what} direction uniform: cos to w{i + 1} ⊥ u",
                              cosine_law_cdf(unit @ w, d - 1)))
    return out


def rounding_weights(x: np.ndarray, norm_bound: float) -> tuple[np.ndarray | None, float]:
    """(u = x/‖x‖ or None for x = 0, ρ = min(‖x‖/L, 1)): u_s = +u with probability (1 + ρ)/2."""
    norm = float(np.sqrt(np.dot(x, x)))
    if norm == 0.0:
        return None, 0.0
    return x / norm, min(1.0, norm / norm_bound)


def _cap_mixture_cdf(
    s: np.ndarray, s_c: np.ndarray, a: float, s_gamma: float, log_p_cap: float, logit_p: float
) -> np.ndarray:
    """P(S ≤ s) for S = (1 − ⟨V, u_s⟩)/2, V on the cap (prob. p) or its complement; ``s_c`` = 1 − s.

    Cap side (s ≤ s_γ): p·I_s(a, a)/P. Complement: 1 − (1 − p)·I_{1−s}(a, a)/(1 − P) (symmetry of
    Beta(a, a)), so neither tail cancels.
    """
    p, q = math.exp(logspace.log_expit(logit_p)), math.exp(logspace.log_expit(-logit_p))  # p and 1 − p
    big_p = math.exp(log_p_cap)
    big_pc = -math.expm1(log_p_cap)
    out = np.empty_like(s)
    cap = s <= s_gamma
    out[cap] = np.minimum(p * special.betainc(a, a, s[cap]) / big_p, p)
    out[~cap] = 1.0 - np.minimum(q * special.betainc(a, a, s_c[~cap]) / big_pc, q)
    return out


def sphere_tests(
    x: np.ndarray, z: np.ndarray, *, norm_bound: float, radius: float, s_gamma: float, log_p_cap: float,
    logit_p: float, what: str = "",
) -> list[LawTest]:
    """The exact law of L·V/m for PrivUnit2 and the hemisphere mechanism (module docstring).

    ``radius`` = ‖Z‖ (every output), ``s_gamma`` = (1 − γ)/2, ``log_p_cap`` = log P(⟨W, u⟩ ≥ γ)
    for W uniform, ``logit_p`` the logit of the probability of the cap. d = 1: randomized response.
    """
    n, d = z.shape
    v, norms = unit_rows(z)
    off = int(np.count_nonzero(np.abs(norms - radius) > 1e-9 * radius))
    out = [deterministic(f"{what}‖Z‖ = {radius:.6g}", off, n, "off the norm")]
    u, rho = rounding_weights(x, norm_bound)
    if d == 1:
        ref = 1.0 if u is None else float(u[0])
        agree = int(np.count_nonzero(z[:, 0] * ref > 0.0))
        p, q = math.exp(logspace.log_expit(logit_p)), math.exp(logspace.log_expit(-logit_p))
        prob = 0.5 if u is None else (1.0 + rho) / 2.0 * p + (1.0 - rho) / 2.0 * q
        out.append(binomial_test(f"{what}sign ~ randomized response", agree, n, prob))
        return out
    if u is None:
        return out + uniform_direction_tests(v, d, what=f"{what}direction")
    if s_gamma < MIN_RESOLVED_CAP:
        why = f"cap (1 − γ)/2 = {s_gamma:.3g} below {MIN_RESOLVED_CAP:g}: not resolved by double-precision outputs"
        return out + [skipped(f"{what}⟨Z, u⟩/‖Z‖ ~ cap mixture", why), skipped(f"{what}V⊥ direction uniform", why)]
    a = (d - 1) / 2.0
    s_plus = np.clip(np.einsum("ij,ij->i", v - u, v - u) / 4.0, 0.0, 1.0)
    s_minus = np.clip(np.einsum("ij,ij->i", v + u, v + u) / 4.0, 0.0, 1.0)
    name = f"{what}⟨Z, u⟩/‖Z‖ ~ cap mixture" + ("" if rho >= 1.0 - 1e-12 else " × rounding ±u")
    if log_p_cap < math.log(MIN_CAP_PROBABILITY):
        out.append(skipped(name, f"cap probability e^{log_p_cap:.4g} below {MIN_CAP_PROBABILITY:g}"))
    else:
        plus = _cap_mixture_cdf(s_plus, s_minus, a, s_gamma, log_p_cap, logit_p)
        if rho >= 1.0:
            cdf = plus
        else:
            minus = _cap_mixture_cdf(s_minus, s_plus, a, s_gamma, log_p_cap, logit_p)
            cdf = (1.0 + rho) / 2.0 * plus + (1.0 - rho) / 2.0 * (1.0 - minus)
        out.append(ks_uniform(name, cdf))
    return out + orthogonal_uniform_tests(v, u, what=f"{what}V⊥")


# ---------------------------------------------------------------------------------------------
# Branches of the sphere mechanisms' output (the audit's conditional tests of the mean and error)
# ---------------------------------------------------------------------------------------------


class SphereBranch(NamedTuple):
    """One region of the sphere of a sphere mechanism's output, for one input (:func:`sphere_branches`).

    ``probability`` = P(V in the region | x), ``cosine`` = E[⟨V, u⟩ | region, x] and ``gap`` =
    E[1 − ⟨V, u⟩ | region, x] (kept apart, so that 1 − cosine does not cancel).
    """

    name: str
    probability: float
    cosine: float
    gap: float


def _sphere_cut(cap_logit: float) -> float:
    """The cap logit of the region cut: the cap's own, or that of s = ``MIN_RESOLVED_CAP`` if thinner."""
    floor = math.log1p(-MIN_RESOLVED_CAP) - math.log(MIN_RESOLVED_CAP)
    return min(cap_logit, floor)


def sphere_branches(
    x: np.ndarray, *, norm_bound: float, d: int, cap_logit: float, log_p_cap: float, logit_p: float
) -> list[SphereBranch]:
    """The output of PrivUnit2 (Bhowmick et al. 2018, Alg. 1) as three regions of the sphere, exactly.

    With t = ⟨V, u⟩ (u = ``branch_axis(x)``) and the rounding u_s = ±u taken with
    weights w± = (1 ± ρ)/2, ρ = ‖x‖/L, V has density w₊·f(t) + w₋·f(−t) against the uniform law,
    f = p/P on the cap {t ≥ γ} and (1 − p)/(1 − P) off it (γ ≥ 0). That density is constant on each
    of the regions ``top`` {s ≤ s_c}, ``bottom`` {s ≥ 1 − s_c} and ``middle`` (between), with
    s = (1 − t)/2 and s_c = s_γ = (1 − γ)/2, so V is uniform on each: the region of a row is a function
    of the row, and its probability and conditional E[1 − t] are, with S = (1 − W)/2 ~ Beta(α, α)
    for W uniform (α = (d − 1)/2), U(c) = P(S ≤ c) = I_c(α, α) and G(c) = E[(1 − W); S ≤ c] =
    I_c(α + 1, α) (``sm.log_cap_gap_fraction``):

        top:    mass w₊·p + (w₊·(U_c − P) + w₋·U_c)·b,          ∫(1 − t) = w₊·p·J/P + (w₊·(G_c − J) + w₋·G_c)·b
        bottom: top with w₊ and w₋ exchanged, 1 − t ↦ 1 + t (∫(1 − t) = 2·mass − that of the mirror)
        middle: mass (1 − 2U_c)·b,                               ∫(1 − t) = mass (the band is symmetric)

    with b = (1 − p)/(1 − P), J = G(s_γ). A cap thinner than ``MIN_RESOLVED_CAP`` cannot be told from
    its surroundings in double precision (‖V − u‖ ≈ 2√s); the cut s_c is then raised to it and the
    regions take the complement's thin rim with them (the U_c − P and G_c − J terms). d = 1
    (randomized response): the two outputs ±u, probabilities w₊p + w₋(1 − p) and w₋p + w₊(1 − p).
    At x = 0 (d ≥ 2) the rounding direction is uniform on the sphere and so is V: one branch.
    """
    _, rho = rounding_weights(x, norm_bound)
    w_plus, w_minus = (1.0 + rho) / 2.0, (1.0 - rho) / 2.0
    p, q = math.exp(logspace.log_expit(logit_p)), math.exp(logspace.log_expit(-logit_p))
    if d >= 2 and rho == 0.0:  # x = 0: the rounding direction is uniform, and so is V
        return [SphereBranch("the whole sphere (x = 0)", 1.0, 0.0, 1.0)]
    if d == 1:
        return [SphereBranch("+u", w_plus * p + w_minus * q, 1.0, 0.0),
                SphereBranch("−u", w_minus * p + w_plus * q, -1.0, 2.0)]
    cut = _sphere_cut(cap_logit)
    big_p, log_1mp_cap = math.exp(log_p_cap), logspace.log1mexp(log_p_cap)
    u_c = big_p if cut == cap_logit else math.exp(sm.log_cap_probability(cut, d))
    j = math.exp(sm.log_cap_gap_fraction(cap_logit, d))
    g_c = j if cut == cap_logit else math.exp(sm.log_cap_gap_fraction(cut, d))
    b = math.exp(logspace.log_expit(-logit_p) - log_1mp_cap)
    cap_gap = math.exp(logspace.log_expit(logit_p) + sm.log_cap_gap_fraction(cap_logit, d) - log_p_cap)  # p·J/P

    def side(near: float, far: float) -> tuple[float, float]:
        """(mass, ∫(1 − t')) of {s' ≤ s_c} for t' the cosine to the rounding sign of weight ``near``."""
        mass = near * p + (near * (u_c - big_p) + far * u_c) * b
        gap = near * cap_gap + (near * (g_c - j) + far * g_c) * b
        return mass, gap

    top_mass, top_gap = side(w_plus, w_minus)
    bottom_mass, mirror_gap = side(w_minus, w_plus)
    bottom_gap = 2.0 * bottom_mass - mirror_gap
    middle_mass = max(0.0, 1.0 - 2.0 * u_c) * b
    out = [SphereBranch("top: ⟨V, u⟩ ≥ γ" if cut == cap_logit else "top: the cap and its unresolved rim",
                        top_mass, 1.0 - top_gap / top_mass if top_mass > 0 else 1.0,
                        top_gap / top_mass if top_mass > 0 else 0.0),
           SphereBranch("middle: |⟨V, u⟩| < γ", middle_mass, 0.0, 1.0),
           SphereBranch("bottom: ⟨V, u⟩ ≤ −γ", bottom_mass,
                        1.0 - bottom_gap / bottom_mass if bottom_mass > 0 else -1.0,
                        bottom_gap / bottom_mass if bottom_mass > 0 else 2.0)]
    return out


def sphere_output_branches(
    x: np.ndarray, *, norm_bound: float, d: int, cap_logit: float, log_p_cap: float, logit_p: float, log_m: float,
    log_one_minus_m: float,
) -> list[tuple[str, float, np.ndarray, float]]:
    """(name, probability, E[Z | region], E[‖Z − x‖² | region]) for each region of :func:`sphere_branches`,
    for Z = (L/m)·V (PrivUnit2, and the hemisphere mechanism at γ = 0).

    E[Z | region] = (L/m)·E[t | region]·u and, for x = ρL·u, ‖Z − x‖² = (L/m)²·((1 − ρm)² + 2ρm·(1 − t)),
    a sum of positive terms (1 − ρm = (1 − ρ) + ρ(1 − m)), so that no cancellation loses the error
    when m → 1.
    """
    axis = branch_axis(x)
    rho = min(1.0, float(np.linalg.norm(x)) / norm_bound)
    m = math.exp(log_m)
    short = (1.0 - rho) + rho * math.exp(log_one_minus_m)  # 1 − ρm
    radius = norm_bound * math.exp(-log_m)
    return [(b.name, b.probability, radius * b.cosine * axis, radius**2 * (short * short + 2.0 * rho * m * b.gap))
            for b in sphere_branches(x, norm_bound=norm_bound, d=d, cap_logit=cap_logit, log_p_cap=log_p_cap,
                                     logit_p=logit_p)]


def branch_axis(x: np.ndarray) -> np.ndarray:
    """u = x/‖x‖, the axis of the regions of :func:`sphere_branches`; at x = 0 a fixed unit vector (any
    axis will do there: the law is rotation invariant)."""
    u, _ = rounding_weights(x, 1.0)
    if u is not None:
        return u
    return fixed_directions(x.shape[0], 1)[0] if x.shape[0] >= 2 else np.ones(1)


def sphere_branch_labels(x: np.ndarray, z: np.ndarray, cap_logit: float) -> np.ndarray:
    """The region of :func:`sphere_branches` of each row: 0 top, 1 middle, 2 bottom (d = 1: 0 for +u, 1
    for −u; x = 0, d ≥ 2: 0, the one branch).

    Read from s₊ = ‖V − u‖²/4 and s₋ = ‖V + u‖²/4 (V = Z/‖Z‖), each compared with the cut s_c, so
    that neither region needs 1 − t to be formed.
    """
    u = branch_axis(x)
    if z.shape[1] >= 2 and not np.any(x):
        return np.zeros(z.shape[0], dtype=np.int64)
    if z.shape[1] == 1:
        return (z[:, 0] * u[0] < 0.0).astype(np.int64)
    v, _ = unit_rows(z)
    s_cut = math.exp(logspace.log_expit(-_sphere_cut(cap_logit)))
    s_plus = np.einsum("ij,ij->i", v - u, v - u) / 4.0
    s_minus = np.einsum("ij,ij->i", v + u, v + u) / 4.0
    return np.where(s_plus <= s_cut, 0, np.where(s_minus <= s_cut, 2, 1)).astype(np.int64)
