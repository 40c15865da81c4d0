"""Seed-compressed reports: PrivUnit2 and PrivUnitG released as one 64- or 128-bit seed per row.

Feldman & Talwar 2021 ("Lossless Compression of Efficient Private Local Randomizers", arXiv 2102.12099),
Alg. 1 with the reference law ρ of the base randomizer R: draw a fresh uniformly random seed s, expand it
to G(s) (:mod:`ldpcli.math._seed_prg`; G(s) ~ ρ for an ideal generator) and accept it with probability
(dR_x/dρ)(G(s))/M, M = sup dR_x/dρ; the report is the accepted seed itself. For the two bases the
density ratio takes two values (docs/errata.md §5 for PrivUnit2's):

- **PrivUnit2**, ρ uniform on S^{d−1} (the direction G(s)/‖G(s)‖): p/P on x's cap {v: ⟨v, u⟩ ≥ γ},
  (1 − p)/(1 − P) off it, u the unbiased rounding of x to the sphere (Bhowmick et al. 2018, Alg. 1);
- **PrivUnitG**, ρ = N(0, I_d) (G(s) itself, the output being s_out·G(s)): p/(1 − q) on the half-space
  {g: ⟨g, u⟩ ≥ c}, (1 − p)/q off it (Asi et al. 2022, Alg. 2, c = Φ⁻¹(q)).

So a candidate in the set is always accepted and one off it with probability e^{−ε₀}, ε₀ the base's
``epsilon_exact``, and a try succeeds with probability 1/M whatever x (M = p/P, resp. p/(1 − q)).

**The fallback** (the issue's trap avoided: the report is never an index into public candidates). After T
tries without acceptance the report is one more fresh seed, a draw of ρ; T is the least number of tries
with f = (1 − 1/M)^T ≤ :data:`FALLBACK_TARGET`. The report's law is then exactly the mixture
(1 − f)·R_x + f·ρ (summing the geometric series of Alg. 1 to T terms), so:

- **unbiased**: ρ has mean 0 (both references are symmetric), so the decoded vector divided by (1 − f)
  has mean x;
- **exact ε** (with respect to an ideal generator): the density ratio of the mixture lies in
  [(1 − f)M·e^{−ε₀} + f, (1 − f)M + f], so ε = ε₀ + log1p(e^r) − log1p(e^{r+ε₀}), r = log(f/((1 − f)M))
  (:func:`compressed_epsilon`, ≤ ε₀);
- **exact error**: with Z = D(s)/(1 − f), E‖Z − x‖² = E_b + (E_b + L²)·f/(1 − f) + f·E_ρ/(1 − f)², E_b the
  base's expected error and E_ρ = E‖D(s)‖² under ρ ((L/m)² for PrivUnit2, s_out²·d for PrivUnitG).

The set is tested in floating point on the decoded vector itself (a zero G(s), decoded as e₁, is tested as
e₁), so the report's law is a function of the decoded outputs; the computational assumption
(:data:`ldpcli.math._seed_prg.ASSUMPTION`) carries ε from the ideal generator to ChaCha20.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.errors import UsageError
from ldpcli.math import _logspace as logspace
from ldpcli.math import _seed_prg as prg
from ldpcli.math import _sphere as sm
from ldpcli.mechanisms._base import Mechanism, check_count
from ldpcli.mechanisms._privunit import PrivUnit2
from ldpcli.mechanisms._privunitg import PrivUnitG

#: The largest expected number of tries per row a compressed report may need (M = p/P): beyond it the
#: encoder would spend more than ~10⁵·d normals per row.
MAX_EXPECTED_TRIES = 1e5
#: The fallback probability f that the number of tries T is chosen to stay under.
FALLBACK_TARGET = 1e-12
#: Candidate normals held at once by the encoder (32 MB of doubles).
_BUDGET = 1 << 22

#: One round of candidates: (pending row indices, candidates per row) → ((p, b, w) seeds, (p, b) in-set flags).
Candidates = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def fallback_tries(log_ratio: float, target: float = FALLBACK_TARGET) -> tuple[int, float]:
    """(T, log f): the least T with f = (1 − 1/M)^T ≤ ``target``, M = e^``log_ratio`` ≥ 1."""
    if log_ratio <= 0.0:  # M = 1: every try succeeds
        return 1, -math.inf
    log_miss = logspace.log1mexp(-log_ratio)  # log(1 − 1/M)
    tries = max(1, math.ceil(math.log(target) / log_miss))
    while tries > 1 and (tries - 1) * log_miss <= math.log(target):  # the ceiling's rounding, one way
        tries -= 1
    while tries * log_miss > math.log(target):  # …or the other
        tries += 1
    return tries, tries * log_miss


def compressed_epsilon(epsilon: float, log_ratio: float, log_f: float) -> float:
    """ε of the mixture (1 − f)·R_x + f·ρ, R_x's density ratio to ρ taking the values M and M·e^{−ε}
    (the module docstring): ε + log1p(e^r) − log1p(e^{r+ε}), r = log f − log(1 − f) − log M."""
    if log_f == -math.inf:
        return epsilon
    r = log_f - logspace.log1mexp(log_f) - log_ratio
    return epsilon + logspace.softplus(r) - logspace.softplus(r + epsilon)


def select_seeds(
    n: int, tries: int, keep_logit: float, candidates: Candidates, fallback: Callable[[np.ndarray], np.ndarray],
    rng: np.random.Generator, per_round: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Feldman & Talwar's Alg. 1 for n rows at once: (the (n, w) reports, the tries each row spent).

    Each round gives every pending row ``per_round`` fresh candidates (fewer where T is near); a
    candidate is accepted if in the row's set, else with probability expit(``keep_logit``) = e^{−ε₀}
    (:func:`ldpcli.math._logspace.bernoulli_logit`, exact in the tails); a row takes its first accepted
    candidate, and a row still pending after ``tries`` tries takes ``fallback`` (a fresh seed of ρ).
    Candidates after a row's first acceptance are drawn but discarded: they do not change its law.
    """
    chosen: np.ndarray | None = None
    used = np.full(n, tries, dtype=np.int64)
    pending = np.arange(n)
    spent = 0
    while pending.size and spent < tries:
        b = min(per_round, tries - spent)
        seeds, in_set = candidates(pending, b)
        if chosen is None:
            chosen = np.empty((n, seeds.shape[2]), dtype=np.uint64)
        accept = in_set | logspace.bernoulli_logit(keep_logit, in_set.size, rng).reshape(in_set.shape)
        hit = accept.any(axis=1)
        first = accept.argmax(axis=1)[hit]
        rows = pending[hit]
        chosen[rows] = seeds[hit, first]
        used[rows] = spent + first + 1
        pending = pending[~hit]
        spent += b
    assert chosen is not None
    if pending.size:
        chosen[pending] = fallback(pending)
    return chosen, used


def seed_law(in_set: np.ndarray, epsilon: float, tries: int) -> np.ndarray:
    """The exact law of :func:`select_seeds`' report over a finite seed domain, each seed equally likely
    as a candidate and ``in_set[j]`` whether seed j is in the row's set: a_j·(1 − f)/(β·N) + f/N with
    a_j = 1 in the set and e^{−ε} off it, β = mean(a) the chance a try succeeds, f = (1 − β)^T."""
    a = np.where(in_set, 1.0, math.exp(-epsilon))
    beta = float(a.mean())
    f = (1.0 - beta) ** tries
    return a * (1.0 - f) / (beta * a.size) + f / a.size


@dataclass(frozen=True)
class SeedReports:
    """A PrivUnit2 or PrivUnitG whose report is one seed per row (the module docstring): build with
    :meth:`build`, then :meth:`encode` rows to seeds and :meth:`decode` seeds to unbiased vectors.

    ``tries`` is T, ``log_fallback`` log f; everything else is the base mechanism's.
    """

    base: PrivUnit2 | PrivUnitG
    bits: int
    tries: int
    log_fallback: float

    @classmethod
    def build(cls, base: Mechanism, bits: int = 64, *, max_expected_tries: float = MAX_EXPECTED_TRIES) -> SeedReports:
        """Seed reports of ``base`` (a calibrated PrivUnit2 or PrivUnitG) of ``bits`` = 64 or 128.

        UsageError for another mechanism, a secure rendering (the decoder renders nothing), another length,
        and where the expected tries per row p/P exceed ``max_expected_tries`` (the message gives them and
        what to do).
        """
        if not isinstance(base, PrivUnit2 | PrivUnitG):
            raise UsageError(f"compressed reports exist for privunit2 and privunitg, not {base.name}")
        if getattr(base, "rendering", None) is not None:  # a secure release's (ldpcli.mechanisms._rendering)
            raise UsageError("compressed reports release seeds, which have no secure rendering: drop `secure`")
        if bits not in prg.SEED_BITS:
            raise UsageError(f"`report_bits` must be 64 or 128, got {bits}")
        log_ratio = _log_ratio(base)
        if log_ratio > math.log(max_expected_tries):
            raise UsageError(
                f"compressed reports of {base.name} at d = {base.d}, ε = {base.epsilon:g} need "
                f"{math.exp(log_ratio):.3g} tries per row on average (the cap is {max_expected_tries:.3g}): "
                "choose a smaller `epsilon`, or release the rows uncompressed"
            )
        tries, log_f = fallback_tries(log_ratio)
        return cls(base, bits, tries, log_f)

    @property
    def words(self) -> int:
        """uint64 words per report (1 or 2)."""
        return self.bits // 64

    @property
    def log_ratio(self) -> float:
        """log M, M = sup dR_x/dρ = p/P (PrivUnit2) or p/(1 − q) (PrivUnitG): the expected tries without cap."""
        return _log_ratio(self.base)

    @property
    def fallback_probability(self) -> float:
        """f = (1 − 1/M)^T: the chance a row's report is the fallback seed."""
        return math.exp(self.log_fallback)

    @property
    def expected_tries(self) -> float:
        """E[min(tries to acceptance, T)] = (1 − f)·M: the candidates a row expands on average."""
        return -math.expm1(self.log_fallback) * math.exp(self.log_ratio)

    @property
    def epsilon_exact(self) -> float:
        """The report's ε with respect to an ideal generator (:func:`compressed_epsilon`; ≤ the base's)."""
        return compressed_epsilon(self.base.epsilon_exact, self.log_ratio, self.log_fallback)

    @property
    def _reference_second_moment(self) -> float:
        """E‖D(s)‖² for s of the reference law: (L/m)² for PrivUnit2, s_out²·d for PrivUnitG."""
        if isinstance(self.base, PrivUnit2):
            return self.base.expected_error_max
        return self.base.output_scale**2 * self.base.d

    @property
    def _fallback_error(self) -> float:
        """What the fallback adds to E‖Z − x‖² at every x: (E_b + L²)·f/(1 − f) + f·E_ρ/(1 − f)²."""
        f = self.fallback_probability
        one_minus_f = -math.expm1(self.log_fallback)
        return self.base.expected_error_max * f / one_minus_f + f * self._reference_second_moment / one_minus_f**2

    @property
    def expected_error(self) -> float:
        """E‖Z − x‖² for ‖x‖ = L: the base's plus :attr:`_fallback_error` (the module docstring)."""
        return self.base.expected_error + self._fallback_error

    @property
    def expected_error_max(self) -> float:
        """E‖Z‖² at x = 0: the base's plus :attr:`_fallback_error`."""
        return self.base.expected_error_max + self._fallback_error

    def expected_error_mean(self, n: int) -> float:
        """Worst-case E‖x̄̂ − x̄‖² of the mean of n decoded reports: :attr:`expected_error_max` / n."""
        return self.expected_error_max / check_count(n, "n")

    def describe(self) -> dict[str, Any]:
        """The public description of the reports: length, generator, assumption, T, f, ε and errors."""
        return {
            "kind": "seed",
            "bits": self.bits,
            "bytes_per_report": self.bits // 8,
            "prg": prg.PRG,
            "reference": "Feldman & Talwar 2021, Alg. 1",
            "assumption": prg.ASSUMPTION,
            "tries": self.tries,
            "expected_tries": self.expected_tries,
            "fallback_probability": self.fallback_probability,
            "epsilon_exact": self.epsilon_exact,
            "expected_error": self.expected_error,
            "expected_error_max": self.expected_error_max,
        }

    def _in_set(self, g: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Whether each candidate row of ``g`` (…, d) lies in the set about its unit row ``u`` (…, d)."""
        dots = np.vecdot(g, u)
        if isinstance(self.base, PrivUnitG):
            return dots >= self.base.threshold
        norms = np.sqrt(np.vecdot(g, g))
        zero = norms == 0.0
        if zero.any():  # decoded as e₁: tested as e₁
            dots = np.where(zero, u[..., 0], dots)
            norms = np.where(zero, 1.0, norms)
        return dots >= self.base.gamma * norms

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The (n, words) uint64 reports of the rows of ``x`` (‖x‖ ≤ L): each row rounded to a unit u
        without bias (:func:`ldpcli.math._sphere.round_to_sphere`), then :func:`select_seeds`."""
        x = np.asarray(x, dtype=np.float64)
        n, d = x.shape
        per_round = max(1, min(self.tries, math.ceil(math.exp(self.log_ratio) / 4), _BUDGET // d))
        chunk = max(1, _BUDGET // (per_round * d))
        keep_logit = -self.base.epsilon_exact - logspace.log1mexp(-self.base.epsilon_exact)  # logit(e^{−ε₀})
        out = np.empty((n, self.words), dtype=np.uint64)
        for start in range(0, n, chunk):
            u = sm.round_to_sphere(x[start:start + chunk], self.base.norm_bound, rng)

            def candidates(rows: np.ndarray, b: int, u: np.ndarray = u) -> tuple[np.ndarray, np.ndarray]:
                seeds = prg.random_seeds(rng, rows.size * b, self.words)
                g = prg.expand(seeds, d).reshape(rows.size, b, d)
                return seeds.reshape(rows.size, b, self.words), self._in_set(g, u[rows][:, None, :])

            out[start:start + chunk] = select_seeds(
                u.shape[0], self.tries, keep_logit, candidates,
                lambda rows: prg.random_seeds(rng, rows.size, self.words), rng, per_round)[0]
        return out

    @property
    def correction(self) -> float:
        """1/(1 − f): the factor that makes D(s) unbiased (1 when there is no fallback)."""
        return 1.0 / -math.expm1(self.log_fallback) if self.log_fallback > -math.inf else 1.0

    def expand(self, reports: np.ndarray) -> np.ndarray:
        """D(s) of (n, words) uint64 ``reports``, the (n, d) vectors whose law is the mixture
        (1 − f)·R_x + f·ρ: (L/m)·G(s)/‖G(s)‖ (a zero G(s) read as e₁) for PrivUnit2 and s_out·G(s) for
        PrivUnitG. Each row is a function of its seed alone, whatever the batch."""
        g = prg.expand(np.asarray(reports, dtype=np.uint64).reshape(-1, self.words), self.base.d)
        if isinstance(self.base, PrivUnitG):
            g *= self.base.output_scale
            return g
        norms = np.sqrt(np.vecdot(g, g))
        zero = norms == 0.0
        g[zero] = 0.0
        g[zero, 0] = 1.0
        norms[zero] = 1.0
        g *= ((self.base.norm_bound * self.base.scale) / norms)[:, None]
        return g

    def decode(self, reports: np.ndarray) -> np.ndarray:
        """The (n, d) unbiased vectors of (n, words) uint64 ``reports``: :meth:`expand` times
        :attr:`correction`, D(s)/(1 − f)."""
        out = self.expand(reports)
        out *= self.correction
        return out

    def privatize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """:meth:`decode` of :meth:`encode`: the vectors the reports stand for."""
        return self.decode(self.encode(x, rng))


def _log_ratio(base: PrivUnit2 | PrivUnitG) -> float:
    """log M: log p − log P for PrivUnit2, log p − log(1 − q) for PrivUnitG (≥ 0 for every calibration)."""
    log_reference = base.log_cap_probability if isinstance(base, PrivUnit2) else base.log_one_minus_q
    return max(0.0, logspace.log_expit(base.logit_p) - log_reference)
