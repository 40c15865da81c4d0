"""Hypercube-vertex mechanisms for the ℓ∞ box: PrivUnit∞ and the Duchi et al. ℓ∞ mechanism.

Both round a row x (|x_j| ≤ L) without bias to a vertex s ∈ {±1}^d (s_j = +1 with probability
(1 + x_j/L)/2, so E[s] = x/L) and release a scaled vertex Z = L·B·z, z ∈ {±1}^d, drawn from a
*threshold-κ channel* (Bhowmick et al. 2018, Alg. 2 / Eq. 18; Duchi et al. 2014, Prop. 4.6 and
Lemma E.2): z is uniform on the "cap" {z: ⟨z, s⟩ > κ} with probability p and uniform on its
complement {z: ⟨z, s⟩ ≤ κ} (ties go to the complement) otherwise.

Write A for the number of coordinates where z agrees with s, so ⟨z, s⟩ = 2A − d. The cap is
{A ≥ a₀} with a₀ = ⌈(d + κ + 1)/2⌉ (Alg. 2 and Thm 2; docs/errata.md §8), and A ~ Binomial(d, ½) for z
uniform on the cube. With P = N_in/2^d = P(A ≥ a₀) (the ``side_probability``):

- Privacy (Bhowmick et al. Thm 2 proof, made exact): q(z|s) takes the two values p/N_in and
  (1 − p)/N_out, and every z is in the cap of some s and outside the cap of another (s = z and
  s = −z), so the exact worst-case likelihood ratio is e^{ε_exact} = [p/N_in]/[(1 − p)/N_out],
  i.e. ε_exact = logit(p) − logit(P), for p ≥ P. The tight choice logit(p) = ε + logit(P) is the
  channel q ∝ e^ε on the cap, 1 off it: the threshold-k channel of Duchi et al. Lemma 5.8 / E.2,
  with normaliser e^ε·N_in + N_out = (e^ε − 1)·N_in + 2^d (docs/errata.md §13).
- Unbiasedness (Bhowmick et al. Lemma 4.2 proof): E[z | s] = c·s with
  c = E[z_j s_j] = t·(p/P − (1 − p)/(1 − P)), t = C(d − 1, a₀ − 1)/2^d (a telescoping binomial
  sum), so B = 1/c and E[Z | x] = x. At the tight p, c = (e^ε − 1)·t/(1 + (e^ε − 1)·P).
- 1 − c = E[1 − z_j s_j] = p·P'/P + (1 − p)(1 − P')/(1 − P) with P' = P(Binomial(d − 1, ½) ≥ a₀)
  (from (d − a)·C(d, a) = d·C(d − 1, a)): a sum of positive terms, so the error keeps full
  relative precision when c → 1 (small d, large ε).
- ‖Z‖² = d·L²·B² for every output, so E‖Z − x‖² = d·L²·B² − ‖x‖²: ``expected_error`` =
  L²·d·(B² − 1) at a vertex, ``expected_error_max`` = L²·d·B² at x = 0, ``scale`` = B·√d.

Every binomial quantity is carried in log space: log C(d, a)/2^d by Loader's saddle-point form
(Stirling-series remainders plus the deviance bd0, accurate to a few ulps of |log pmf| for every
a even at d = 10^6); tail sums and the ratios t/P, P'/P as sums of the weights C(d, a)/C(d, a₀) ≤ 1,
so c and 1 − c keep ~1e−14 relative accuracy even where P is e^{−1000}. Probabilities that can
be tiny (the side of the channel, the far tails of A) are sampled exactly: the side by
``spheremath.bernoulli_logit``, A by inverting its log survival function at an Exp(1) variate
built with full relative precision in its tail (so an agreement count of probability e^{−500} is
drawn at that rate, never at 0), the agreeing coordinates as an exact uniform subset
(``uniform_subsets``: the A smallest of d random keys, redrawn on a tie at the cut).

``privunit-inf`` (calibration ``optimal``) takes the tight p and the a₀ ∈ {⌊d/2⌋ + 1, …, d}
(κ ∈ {0, …, d − 1}) of least error, found by a vectorized scan over every admissible a₀ and a
precise re-evaluation of the best candidates. ``duchi-linf`` (calibration ``classic``) is the
same channel at κ = 0 (a₀ = ⌊d/2⌋ + 1): for odd d this is (49) as printed (P = ½, so
p = e^ε/(1 + e^ε)); for even d the printed p = e^ε/(1 + e^ε) is not ε-DP (an extra
log(N_out/N_in), log 3 at d = 2) and its printed B is biased, so the tight p is used (docs/errata.md §12).
d = 1 is randomized response in both: p = e^ε/(1 + e^ε), B = (e^ε + 1)/(e^ε − 1).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from ldpcli.math import _logspace as logspace
from ldpcli.math._binomial import log_binomial_pmf, sample_agreements
from ldpcli.math._counter_rng import CounterGenerator
from ldpcli.math._domains import LINF_BOX
from ldpcli.math._kernels import compiled
from ldpcli.math._lawtests import LawTest
from ldpcli.math._subsets import keyed_rows, uniform_subsets
from ldpcli.mechanisms._base import Mechanism, register
from ldpcli.mechanisms._hooks import OutputBranch
from ldpcli.mechanisms._threshold_channel import (
    ChannelLogs,
    agree_min_from_kappa,
    agreement_with_sign_pmf,
    channel_logs,
    kappa_from_agree_min,
    optimal_channel,
)

#: Rows privatized per chunk: about this many coordinates at a time (bounds temporary memory).
_CHUNK_ELEMENTS = 1 << 20
#: Largest d: calibration scans every threshold, O(d) time and memory (4 GB at d = 10⁸).
_MAX_D = 10**7
#: Largest d for which the audit counts the cap exactly with integers.
_EXACT_AUDIT_MAX_D = 1 << 11  # 0.1 s; the sums grow as d² digits
#: Largest d for which the law test of an input inside the box computes its exact law (O(d³)).
_LAW_DP_MAX_D = 512


# ---------------------------------------------------------------------------------------------
# The mechanisms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _HypercubeThreshold(Mechanism):
    """A tight threshold-κ hypercube channel on the ℓ∞ box (shared by both registered mechanisms)."""

    agree_min: int  # a₀: the cap is {z: z agrees with s in ≥ a₀ coordinates} = {⟨z, s⟩ > κ}
    logit_p: float
    log_side: float
    log_side_c: float
    log_c: float
    log_one_minus_c: float

    domain = LINF_BOX
    max_d = _MAX_D
    options = {}  # noqa: RUF012 - the base class declares it a ClassVar
    baseline = False
    vector = True

    @classmethod
    def _build(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, agree_min: int,
        logs: ChannelLogs | None = None,
    ) -> Any:
        """The mechanism with cap {A ≥ a₀} and the tight p (``logs`` if already computed)."""
        if logs is None:
            logs = channel_logs(d, epsilon, agree_min)
        return cls(
            d, epsilon, norm_bound, calibration, agree_min,
            logs.logit_p, logs.log_side, logs.log_side_c, logs.log_c, logs.log_one_minus_c,
        )

    def audit_epsilon(self) -> tuple[float, str]:
        """ε = log[(p/N_in)/((1 − p)/N_out)] with the cap size counted by a second route.

        d ≤ 2048: N_in = Σ_{a ≥ a₀} C(d, a) in exact integer arithmetic (no log-space binomial
        code), the two point masses p/N_in and (1 − p)/N_out then being the pmf of every output
        (z is in the cap of s = z and outside the cap of s = −z). Larger d: the binomial tail from
        scipy's incomplete-beta-based ``bdtrc`` (an independent implementation), in log space.
        """
        log_q_in, log_q_out = logspace.log_expit(self.logit_p), logspace.log_expit(-self.logit_p)
        if self.d <= _EXACT_AUDIT_MAX_D:
            n_in = sum(math.comb(self.d, a) for a in range(self.agree_min, self.d + 1))
            n_out = 2**self.d - n_in
            eps = (log_q_in - math.log(n_in)) - (log_q_out - math.log(n_out)) if n_out else log_q_in - log_q_out
            return eps, "cap size by exact integer binomial sums; the two point masses of the output pmf"
        from scipy import special  # only audits need it

        side = float(special.bdtrc(self.agree_min - 1, self.d, 0.5))  # P(A ≥ a₀), A ~ Binomial(d, 1/2)
        if not 0.0 < side < 1.0:
            raise NotImplementedError(
                f"the cap probability at d = {self.d}, κ = {self.kappa} is below double precision for the "
                "second route (bdtrc); only the calibration's log-space value is available"
            )
        eps = (log_q_in - math.log(side)) - (log_q_out - math.log1p(-side))
        return eps, "cap probability by scipy's binomial tail (bdtrc); the two point masses of the output pmf"

    @property
    def kappa(self) -> int:
        """The threshold κ ≥ 0 of ⟨z, s⟩ > κ (the least one defining this channel)."""
        return kappa_from_agree_min(self.d, self.agree_min)

    @property
    def p(self) -> float:
        """The probability of drawing from the cap."""
        return math.exp(logspace.log_expit(self.logit_p))

    @property
    def B(self) -> float:  # noqa: N802 - the papers' name
        """The debiasing factor: Z = L·B·z, B = 1/c."""
        return math.exp(-self.log_c)

    @property
    def side_probability(self) -> float:
        """P = N_in/2^d = P(⟨W, s⟩ > κ) for W uniform on the cube (may underflow; see the log)."""
        return math.exp(self.log_side)

    @property
    def epsilon_exact(self) -> float:
        """logit(p) − logit(P): the exact worst-case log-likelihood ratio (module docstring)."""
        return self.logit_p - (self.log_side - self.log_side_c)

    @property
    def scale(self) -> float:
        """B·√d: the output's ℓ2 norm for L = 1."""
        return math.exp(0.5 * math.log(self.d) - self.log_c)

    @property
    def expected_error(self) -> float:
        """L²·d·(B² − 1) = L²·d·(1 − c)(1 + c)/c²: E‖Z − x‖² at a vertex x of the box."""
        c = math.exp(self.log_c)
        return self.norm_bound**2 * math.exp(
            math.log(self.d) + self.log_one_minus_c + math.log1p(c) - 2.0 * self.log_c
        )

    @property
    def expected_error_max(self) -> float:
        """L²·d·B², attained at x = 0 (in general E‖Z − x‖² = L²·d·B² − ‖x‖²)."""
        return self.norm_bound**2 * math.exp(math.log(self.d) - 2.0 * self.log_c)

    def parameters(self) -> dict[str, Any]:
        """κ, a₀, p (and its logit), B, and the cap's probability P (and its log)."""
        return {
            "kappa": self.kappa,
            "min_agreements": self.agree_min,
            "p": self.p,
            "p_logit": self.logit_p,
            "B": self.B,
            "side_probability": self.side_probability,
            "log_side_probability": self.log_side,
        }

    def agreement_pmf(self) -> np.ndarray:
        """P(A = a), a = 0, …, d: the law of the number of coordinates where z agrees with s.

        C(d, a)/2^d times p/P on the cap {a ≥ a₀} and (1 − p)/(1 − P) off it (module docstring).
        """
        lp = log_binomial_pmf(self.d, 0)
        a = np.arange(self.d + 1)
        cap = logspace.log_expit(self.logit_p) - self.log_side
        rest = logspace.log_expit(-self.logit_p) - self.log_side_c
        return np.exp(lp + np.where(a >= self.agree_min, cap, rest))

    def law_tests(self, x: np.ndarray, z: np.ndarray) -> list[LawTest]:
        """Every output a vertex of the cube scaled by L·B; the agreement count against its exact pmf.

        At a vertex x = L·s (the rounding is then s itself): A = #{j: z_j = s_j} against
        ``agreement_pmf`` (χ² after pooling, or exact binomial when d = 1) — a per-coordinate
        flipping sampler with the same marginals gives Binomial(d, (1 + c)/2) instead — and the
        agreeing positions exchangeable (χ² homogeneity across coordinates, asymptotic). At x = 0
        the rounded vertex is uniform, so z is uniform on the cube: #{j: z_j = +1} ~ Binomial(d, ½)
        and exchangeable. Elsewhere (d ≤ 512): the agreement count with r = sign(x), whose exact
        law mixes the channel's pmf with the independent roundings (``agreement_with_sign_pmf``).
        """
        from ldpcli.math import _lawtests as lawtests

        n, d = z.shape
        value = self.norm_bound * self.B
        off = int(np.count_nonzero(np.any(np.abs(np.abs(z) - value) > 1e-12 * value, axis=1)))
        tests = [lawtests.deterministic(f"Z ∈ {{±L·B}}^d, L·B = {value:.6g}", off, n, "off the scaled cube")]
        pos = z > 0.0
        q = np.clip((1.0 + x / self.norm_bound) / 2.0, 0.0, 1.0)  # P(s_j = +1)
        if np.all((q == 0.0) | (q == 1.0)):
            agree = pos == (q == 1.0)
            counts = np.bincount(agree.sum(axis=1), minlength=d + 1)
            tests.append(lawtests.counts_test("agreements with x/L ~ channel pmf", counts,
                                               self.agreement_pmf()))
            if d >= 2:
                tests.append(lawtests.homogeneity_test("agreement positions exchangeable", agree))
        elif np.all(q == 0.5):
            counts = np.bincount(pos.sum(axis=1), minlength=d + 1)
            tests.append(lawtests.counts_test("#{z_j > 0} ~ Binomial(d, ½)", counts,
                                               np.exp(log_binomial_pmf(d, 0))))
            if d >= 2:
                tests.append(lawtests.homogeneity_test("coordinates exchangeable", pos))
        elif d <= _LAW_DP_MAX_D:
            r = q >= 0.5
            counts = np.bincount((pos == r).sum(axis=1), minlength=d + 1)
            probs = agreement_with_sign_pmf(self.agreement_pmf(), np.where(r, q, 1.0 - q))
            tests.append(lawtests.counts_test("agreements with sign(x) ~ exact pmf", counts, probs))
        else:
            tests.append(lawtests.skipped("agreements with sign(x) ~ exact pmf", f"exact law computed for d <= {_LAW_DP_MAX_D}"))
        return tests

    def output_branches(self, x: np.ndarray) -> list[OutputBranch]:
        """At a vertex x = L·s: the agreement count A = a, a = 0, …, d, each a branch.

        P(A = a) = ``agreement_pmf``; given A = a the agreeing positions are a uniform a-subset, so
        E[Z | a] = L·B·s·(2a − d)/d, and ‖Z − x‖² = L²·(a(B − 1)² + (d − a)(B + 1)²) exactly, with
        B − 1 = (1 − c)/c kept from log(1 − c). Elsewhere the rounding mixes in: NotImplementedError.
        """
        if not np.all(np.abs(x) == self.norm_bound):
            raise NotImplementedError("the output is split into branches at a vertex of the box only")
        d, bound = self.d, self.norm_bound
        s = np.sign(x)
        b_minus = math.exp(self.log_one_minus_c - self.log_c)  # B − 1
        b_plus = math.exp(-self.log_c) + 1.0  # B + 1
        return [OutputBranch(f"{a} of {d} agree", float(p), bound * self.B * s * ((2 * a - d) / d),
                             bound**2 * (a * b_minus**2 + (d - a) * b_plus**2))
                for a, p in enumerate(self.agreement_pmf())]

    def branch_labels(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The agreement count #{j: sign z_j = sign x_j} of each row."""
        return np.count_nonzero((z > 0.0) == (x > 0.0), axis=1)

    output_count = 2  # each coordinate is −L·B or +L·B

    def output_value(self, index: np.ndarray) -> np.ndarray:
        """−L·B for index 0 and +L·B for index 1: ``privatize`` releases exactly these two doubles
        (2·L·B − L·B and 0 − L·B are exact), whatever the input (docs/floating-point.md)."""
        value = self.norm_bound * self.B
        return np.where(np.asarray(index) == 1, value, -value)

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Round each row to a vertex s, draw z from the channel, return L·B·z row by row. numpy's
        draws: all rows' sides and counts A, then per chunk the s uniforms and ``uniform_subsets``'s keys.
        Compiled, from a numpy Generator: one pass per row, the same law from fewer draws (not draw for
        draw); from any other generator: the same draws as numpy's, and its output bit for bit."""
        n, d = x.shape
        in_cap = logspace.bernoulli_logit(self.logit_p, n, rng)
        agree = sample_agreements(d, self.agree_min, in_cap, rng)
        value = self.norm_bound * self.B
        half_over_l = 0.5 / self.norm_bound
        out = np.empty((n, d))
        kernels = compiled(rng, given_draws=True)
        if kernels is not None:
            x = np.ascontiguousarray(x, dtype=np.float64)
            if isinstance(rng, np.random.Generator):
                kernels.hypercube_vertices(x, agree, half_over_l, value, rng, out)
                return out
        step = max(1, _CHUNK_ELEMENTS // d)
        for start in range(0, n, step):
            rows = slice(start, min(n, start + step))
            if kernels is not None:  # the chunk's uniforms (the stream's words), then its keys, as below
                shape = x[rows].shape
                uniforms = rng.random_raw(shape[0] * d).reshape(shape) if isinstance(rng, CounterGenerator) \
                    else rng.random(shape)
                keyed_rows(uniforms.shape[0], d, rng, functools.partial(
                    _given_vertices, kernels, x[rows], agree[rows], half_over_l, value, uniforms, out[rows]))
                continue
            # s_j = +1 with probability (1 + x_j/L)/2, so E[s] = x/L.
            threshold = x[rows] * half_over_l
            threshold += 0.5
            s_pos = rng.random(threshold.shape) < threshold
            # z agrees with s on a uniformly random set of A coordinates (exact: ``uniform_subsets``).
            mask = uniform_subsets(agree[rows], d, rng)
            np.equal(s_pos, mask, out=mask)  # z_j = +1 iff (s_j = +1) == (j agrees)
            block = out[rows]
            np.multiply(mask, 2.0 * value, out=block)
            block -= value  # exactly ±value
        return out


def _given_vertices(
    kernels: ModuleType, x: np.ndarray, agree: np.ndarray, half_over_l: float, value: float, uniforms: np.ndarray,
    out: np.ndarray, which: np.ndarray | None, keys: np.ndarray,
) -> np.ndarray:
    """``keyed_rows``'s ``mark`` for the compiled sampler: the rows ``which`` (None: all) of ``out`` from
    their ``uniforms`` and new ``keys`` (``hypercube_vertices_given``); returns which of them tie at their cut."""
    if which is not None:
        x, agree, uniforms = x[which], agree[which], uniforms[which]
    target = out if which is None else np.empty(x.shape)
    tied = np.zeros(x.shape[0], dtype=bool)
    kernels.hypercube_vertices_given(x, agree, half_over_l, value, uniforms, keys, target, tied)
    if which is not None:
        out[which] = target
    return tied


@register(
    name="privunit-inf",
    title="PrivUnit∞ (Bhowmick et al. 2018, Alg. 2; optimal threshold κ, exact ε)",
    calibrations=("optimal",),
)
@dataclass(frozen=True)
class PrivUnitInf(_HypercubeThreshold):
    """PrivUnit∞ with the error-minimising threshold κ and tight p (see the module docstring)."""

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> PrivUnitInf:
        """PrivUnit∞ at exact level ε: the κ of least error (Duchi et al. Prop. 4.6) with tight p."""
        agree_min, logs = optimal_channel(d, epsilon)
        return cls._build(d, epsilon, norm_bound, calibration, agree_min, logs)


@register(
    name="duchi-linf",
    title="Duchi–Jordan–Wainwright ℓ∞ hypercube mechanism (2014, App. C.1 eq. (49); even d per docs/errata.md §12)",
    calibrations=("classic",),
)
@dataclass(frozen=True)
class DuchiLinf(_HypercubeThreshold):
    """Duchi et al. (49): the threshold-0 channel, tight p (corrected for even d, docs/errata.md §12)."""

    @classmethod
    def _calibrate(
        cls, d: int, epsilon: float, norm_bound: float, calibration: str, **options: Any
    ) -> DuchiLinf:
        """(49) at level ε: cap {⟨z, s⟩ > 0}, p = e^ε N_in/(e^ε N_in + N_out) (= e^ε/(1 + e^ε) for odd d)."""
        return cls._build(d, epsilon, norm_bound, calibration, agree_min_from_kappa(d, 0))
