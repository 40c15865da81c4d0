"""A privacy lower bound from samples: a (1 − β) lower confidence bound ε_lb on the privacy loss.

For every event E and inputs x, x′, an (ε, δ)-LDP mechanism has P(E | x) ≤ e^ε·P(E | x′) + δ. So
with p_lo a lower confidence bound on P(E | x) and p_up an upper one on P(E | x′),

    ε_lb = log((p_lo − δ)/p_up)

is below the mechanism's true level whenever both bounds hold. ``ldp audit`` fails when ε_lb is
above the claimed ``epsilon_exact``: no honest mechanism can make it so except with probability β.

Construction (``privacy_lower_bound``):

1. Inputs from the domain, in pairs. ℓ2 ball: u (a seeded direction, ‖u‖ = L) against −u, against
   a vector at 90° and against one at 22.5°. ℓ∞ box: a vertex s against −s, against s with half
   its coordinates flipped and against s with one flipped. Interval: 0 against r_max. (d = 1
   leaves only the first pair; an unknown domain uses its audit points: boundary against zero and
   against the interior point.) With ``bits``, the ℓ2 ball adds the pair L·e₁ (a coordinate axis)
   against L·(1, …, 1)/√d (the diagonal): outputs near an axis have one large coordinate and
   small ones, outputs near the diagonal d coordinates of one size, and the rounding of the norm
   and of the coordinates differs between the two more than between random directions (PrivUnit2
   at d = 2, ε = 0.5, 20000 trials, seeds 0–7: ε_lb from 0.39 to 1.62 without this pair, from
   1.56 to 2.23 with it).
2. Each input is privatized N times (``lower_bound_trials``). The first half of each sample
   chooses the event; the second half, independent of the choice, measures it.
3. Events, for the ordered pair (x, x′) (both orders are tried): thresholds {f ≥ t} and
   {f ≤ t} on f = ⟨z, x − x′⟩, ⟨z, x⟩, ⟨z, x′⟩ and ‖z‖; atoms {z = v} for the most frequent
   outputs of x (d ≤ 64: discrete mechanisms); and, when x's first 2d outputs span a subspace of
   rank < d (2 ≤ d ≤ 256 and N ≥ 8d), the event {z within relative 1e−9 of that span} — honest
   outputs span R^d, a sampler that puts all outputs of an input on one circle does not. The event
   with the largest bound on the first half (the same formula, so that small counts are not
   chosen) is kept.
   The features and the atoms are first rounded down to a grid of relative step ``RESOLUTION``
   = 1e−9 of their scale (the scale from the mechanism's public numbers: ‖x‖ and
   √(L² + expected_error_max), never from the samples). This keeps the bound about the mechanism
   and not about the last bits of its floating-point arithmetic, which do depend on the input (the
   rounding of a constant ‖Z‖ differs with the direction of x; Mironov 2012 showed such a leak in
   floating-point Laplace): an event that sees those bits shows ε_lb far above ε for sphere
   mechanisms whose law is ε-LDP, at small d (ε_lb = 2.23 against ε = 0.5 for PrivUnit2 at d = 2, 20000 trials,
   from the event "the computed ‖z‖ is one of three doubles"). Leaks below that resolution are
   outside this audit,
   unless ``bits`` is set: then events on the raw bit patterns of the outputs (the doubles of ‖z‖
   and of the first coordinates, their last bits, exponents and exact zeros,
   :mod:`ldpcli.audit._bits`) are candidates too, chosen on the first half like the others. They
   measure the release as a file holds it, bit for bit, and find that leak.
4. On the second half, Clopper–Pearson bounds at level β/(2K) each (K ordered pairs, two bounds
   each: Bonferroni), so that all 2K bounds hold together with probability ≥ 1 − β and the
   reported maximum over pairs and orders is a valid (1 − β) lower confidence bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ldpcli.audit._bits import LabelSet, best_label_set, bit_label_names, bit_labels, describe_labels
from ldpcli.math._domains import INTERVAL, L2_BALL, LINF_BOX
from ldpcli.math._lazy import special
from ldpcli.mechanisms import Mechanism

#: Atoms {z = v} are tried for d up to this (a row is compared as its bytes).
ATOM_MAX_D = 64
#: The subspace event is tried for d up to this (the span of 2d rows per input, from a d × d Gram matrix).
SUBSPACE_MAX_D = 256
#: The subspace event: ‖z − Proj z‖ ≤ this × ‖z‖.
SUBSPACE_RTOL = 1e-9
#: Gram eigenvalues below this × the largest count as zero (singular values below 1e−6 × the largest).
SPAN_EIGEN_RTOL = 1e-12
#: Atoms tried per ordered pair (the most frequent outputs of x in the first half).
ATOMS = 16
#: Features and atoms are rounded down to this relative resolution (module docstring, step 3).
RESOLUTION = 1e-9
#: The angle of the "small angle" input (22.5°).
SMALL_ANGLE = math.pi / 8.0
#: Values privatized per chunk (rows × d), bounding memory.
_CHUNK_VALUES = 4_000_000

#: What privatizes a batch of rows (n × d) of one input: ``mech.privatize`` by default, or another
#: rendering of the same mechanism (the audit of a release's own doubles needs the one it writes).
Privatize = Callable[[np.ndarray, np.random.Generator], np.ndarray]


@dataclass
class PairBound:
    """The bound of one ordered pair (x, x′)."""

    x: str
    x_prime: str
    epsilon_lb: float
    event: str
    hits_x: int
    hits_x_prime: int
    trials: int  # second-half rows per input

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LowerBound:
    """ε_lb with its confidence, the event that achieved it, and every ordered pair's bound."""

    epsilon: float
    confidence: float
    event: str
    trials: int  # rows per input (half choose the event, half measure it)
    delta: float
    #: The largest ε_lb these trials can give at all: every second-half row of x in the event, none of x′'s.
    reach: float = math.inf
    #: Whether events on the raw bits of the outputs were tried (:mod:`ldpcli.audit._bits`).
    bits: bool = False
    pairs: list[PairBound] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon_lower_bound": self.epsilon,
            "confidence": self.confidence,
            "event": self.event,
            "trials_per_input": self.trials,
            "delta": self.delta,
            "reach": self.reach,
            "bits": self.bits,
            "pairs": [pair.to_dict() for pair in self.pairs],
        }


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


def lower_bound_inputs(mech: Mechanism, rng: np.random.Generator,
                       bits: bool = False) -> tuple[list[tuple[str, np.ndarray]], list[tuple[int, int]]]:
    """The named inputs and the pairs (indices into them) of the module docstring (``bits``: with the axis
    against the diagonal in the ℓ2 ball)."""
    d, bound = mech.d, mech.norm_bound
    if mech.domain == L2_BALL:
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        inputs = [("u", bound * u), ("−u", -bound * u)]
        if d >= 2:
            w = rng.standard_normal(d)
            for _ in range(2):
                w -= np.dot(w, u) * u
            w /= np.linalg.norm(w)
            small = math.cos(SMALL_ANGLE) * u + math.sin(SMALL_ANGLE) * w
            inputs += [("u at 90°", bound * w), ("u at 22.5°", bound * small / np.linalg.norm(small))]
            if bits:
                axis = np.zeros(d)
                axis[0] = bound
                pairs = [(0, i) for i in range(1, len(inputs))] + [(len(inputs), len(inputs) + 1)]
                inputs += [("e₁", axis), ("the diagonal", np.full(d, bound / math.sqrt(d)))]
                return inputs, pairs
    elif mech.domain == LINF_BOX:
        s = np.where(rng.random(d) < 0.5, -1.0, 1.0)
        inputs = [("s", bound * s), ("−s", -bound * s)]
        if d >= 2:
            half = s.copy()
            half[: d // 2] *= -1.0
            one = s.copy()
            one[0] *= -1.0
            inputs.append((f"s with {d // 2} of {d} signs flipped", bound * half))
            if d // 2 != 1:
                inputs.append(("s with one sign flipped", bound * one))
    elif mech.domain == INTERVAL:
        inputs = [("0", np.zeros(d)), ("r_max", np.full(d, bound))]
    else:
        points = mech.domain.test_points(d, bound, rng)
        inputs = [(name, x) for name, x, _ in points]
        return inputs, [(0, i) for i in range(1, len(inputs))]
    return inputs, [(0, i) for i in range(1, len(inputs))]


# ---------------------------------------------------------------------------------------------
# Clopper–Pearson
# ---------------------------------------------------------------------------------------------


def cp_lower(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided Clopper–Pearson (Biometrika 1934) lower bound on p from k successes in n, level α (0 for k = 0):
    the α quantile of Beta(k, n − k + 1)."""
    k = np.asarray(k, dtype=float)
    safe = np.maximum(k, 1.0)
    return np.where(k > 0, special.betaincinv(safe, n - safe + 1.0, alpha), 0.0)


def cp_upper(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper bound on p from k successes in n, level α (1 for k = n)."""
    k = np.asarray(k, dtype=float)
    safe = np.minimum(k, n - 1.0)
    return np.where(k < n, special.betainccinv(safe + 1.0, n - safe, alpha), 1.0)


def log_ratio_bound(k_x: np.ndarray | int, n_x: int, k_y: np.ndarray | int, n_y: int, alpha: float,
                    delta: float) -> np.ndarray:
    """log((p_lo(E | x) − δ)/p_up(E | x′)), −inf where p_lo ≤ δ."""
    low = cp_lower(k_x, n_x, alpha) - delta
    up = cp_upper(k_y, n_y, alpha)
    with np.errstate(divide="ignore"):
        return np.where(low > 0.0, np.log(np.maximum(low, 1e-300)) - np.log(up), -np.inf)


# ---------------------------------------------------------------------------------------------
# Samples
# ---------------------------------------------------------------------------------------------


@dataclass
class _Sample:
    """What is kept of one input's N outputs: projections on every input, norms, atom labels and
    membership in the rank-deficient spans."""

    proj: np.ndarray  # (N, m): ⟨z, x_j⟩ for every input x_j
    norms: np.ndarray  # (N,)
    keys: np.ndarray | None  # (N,) bytes of the row rounded to the atom grid (d ≤ ATOM_MAX_D)
    build: np.ndarray | None  # the first rows, kept for the span
    bits: np.ndarray | None = None  # (N, F) int64: the bit labels (``bits.bit_labels``), when asked for
    in_span: dict[int, np.ndarray] = field(default_factory=dict)  # basis index -> (N,) bool


def _features(z: np.ndarray, xs: np.ndarray, atom_step: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    proj = z @ xs.T
    norms = np.sqrt(np.einsum("ij,ij->i", z, z))
    keys = None
    if atom_step is not None:
        cells = np.ascontiguousarray(np.floor(z / atom_step))
        keys = cells.view(np.dtype((np.void, 8 * z.shape[1]))).ravel().copy()
    return proj, norms, keys


def _span_basis(rows: np.ndarray) -> np.ndarray | None:
    """An orthonormal basis (r × d) of the span of ``rows``, or None when it is all of R^d.

    From the eigenvectors of the Gram matrix (d × d, cheap): eigenvalues below
    ``SPAN_EIGEN_RTOL`` × the largest count as 0. Their eigenvectors are accurate to ~1e−16 when a
    gap separates them, which is what a rank-deficient sampler shows (zero directions ≈ 1e−32).
    """
    gram = rows.T @ rows
    values, vectors = np.linalg.eigh(gram)
    top = float(values[-1]) if values.size else 0.0
    if top <= 0.0:
        return vectors[:, :0].T
    keep = values > SPAN_EIGEN_RTOL * top
    return None if bool(np.all(keep)) else vectors[:, keep].T


def _in_span(z: np.ndarray, basis: np.ndarray) -> np.ndarray:
    resid = z - (z @ basis.T) @ basis
    return np.einsum("ij,ij->i", resid, resid) <= (SUBSPACE_RTOL**2) * np.einsum("ij,ij->i", z, z)


def _privatize_rows(privatize: Privatize, d: int, x: np.ndarray, rows: int,
                    rng: np.random.Generator) -> list[np.ndarray]:
    chunk = max(1, _CHUNK_VALUES // d)
    out = []
    done = 0
    while done < rows:
        size = min(chunk, rows - done)
        out.append(privatize(np.tile(x, (size, 1)), rng))
        done += size
    return out


# ---------------------------------------------------------------------------------------------
# Choosing and measuring events
# ---------------------------------------------------------------------------------------------


@dataclass
class _Event:
    description: str
    score: float
    kind: str  # "threshold", "atom", "span", "bits"
    feature: int = 0  # the feature of a threshold, the label of a bits event
    upper: bool = True
    threshold: float = 0.0
    atom: Any = None
    basis: int = -1
    labels: LabelSet | None = None


@dataclass
class _Scales:
    """The grid steps of the features (module docstring, step 3): public numbers only."""

    proj: float  # ⟨z, x⟩ and ⟨z, x − x′⟩
    norm: float  # ‖z‖


def _feature(sample: _Sample, which: int, i_x: int, i_y: int, rows: slice, scales: _Scales) -> np.ndarray:
    """Feature ``which`` (``_FEATURE_NAMES``) of the rows, rounded down to its grid (in grid units)."""
    proj = sample.proj[rows]
    if which == 0:
        value, step = proj[:, i_x] - proj[:, i_y], scales.proj
    elif which == 1:
        value, step = proj[:, i_x], scales.proj
    elif which == 2:
        value, step = proj[:, i_y], scales.proj
    else:
        value, step = sample.norms[rows], scales.norm
    return np.floor(value / step)


_FEATURE_NAMES = ("⟨z, x − x′⟩", "⟨z, x⟩", "⟨z, x′⟩", "‖z‖")


def _best_threshold(fx: np.ndarray, fy: np.ndarray, alpha: float, delta: float) -> tuple[float, bool, float]:
    """(score, upper, t) of the best {f ≥ t} or {f ≤ t} on the first half."""
    sx, sy = np.sort(fx), np.sort(fy)
    pooled = np.concatenate([sx, sy])
    ranks = np.unique(np.concatenate([np.geomspace(1, sx.size, 40).astype(int) - 1, [0]]))
    cands = np.unique(np.concatenate([
        np.quantile(pooled, np.linspace(0.0, 1.0, 257)), sx[ranks], sx[::-1][ranks],
    ]))
    best = (-math.inf, True, 0.0)
    for upper in (True, False):
        if upper:
            kx = sx.size - np.searchsorted(sx, cands, side="left")
            ky = sy.size - np.searchsorted(sy, cands, side="left")
        else:
            kx = np.searchsorted(sx, cands, side="right")
            ky = np.searchsorted(sy, cands, side="right")
        scores = log_ratio_bound(kx, sx.size, ky, sy.size, alpha, delta)
        i = int(np.argmax(scores))
        if scores[i] > best[0]:
            best = (float(scores[i]), upper, float(cands[i]))
    return best


def _choose_event(samples: list[_Sample], i_x: int, i_y: int, half: int, n_build: int, alpha: float, delta: float,
                  names: list[str], scales: _Scales, atom_step: float | None, bit_names: list[str]) -> _Event:
    sx, sy = samples[i_x], samples[i_y]
    first = slice(0, half)
    best = _Event("none", -math.inf, "threshold")
    for which, fname in enumerate(_FEATURE_NAMES):
        score, upper, t = _best_threshold(_feature(sx, which, i_x, i_y, first, scales),
                                          _feature(sy, which, i_x, i_y, first, scales), alpha, delta)
        if score > best.score:
            step = scales.norm if which == 3 else scales.proj
            shown = (t + (0.0 if upper else 1.0)) * step  # {⌊f/h⌋ ≥ t} = {f ≥ t·h}, {⌊f/h⌋ ≤ t} = {f < (t + 1)·h}
            best = _Event(f"{fname} {'≥' if upper else '<'} {shown:.9g}", score, "threshold", which, upper, t)
    if sx.keys is not None and sy.keys is not None:
        values, counts = np.unique(sx.keys[first], return_counts=True)
        top = np.argsort(counts)[::-1][:ATOMS]
        for i in top:
            if counts[i] < 3:
                break
            kx = int(counts[i])
            ky = int(np.count_nonzero(sy.keys[first] == values[i]))
            score = float(log_ratio_bound(kx, half, ky, half, alpha, delta))
            if score > best.score:
                assert atom_step is not None
                value = np.frombuffer(values[i].tobytes(), dtype=np.float64) * atom_step
                text = np.array2string(value, precision=6, threshold=6)
                best = _Event(f"z = {text} (to {RESOLUTION:g} relative)", score, "atom", atom=values[i])
    if i_x in sx.in_span:
        kx = int(np.count_nonzero(sx.in_span[i_x][n_build:half]))
        ky = int(np.count_nonzero(sy.in_span[i_x][first]))
        score = float(log_ratio_bound(kx, half - n_build, ky, half, alpha, delta))
        if score > best.score:
            best = _Event(f"z in the span of {n_build} first-half outputs of x = {names[i_x]} (rank < d)", score,
                          "span", basis=i_x)
    if sx.bits is not None and sy.bits is not None:
        def score_of(k_x: np.ndarray, n_x: int, k_y: np.ndarray, n_y: int, tried: int) -> np.ndarray:
            return log_ratio_bound(k_x, n_x, k_y, n_y, alpha / tried, delta)

        for label, name in enumerate(bit_names):
            score, labels = best_label_set(sx.bits[first, label], sy.bits[first, label], score_of)
            if score > best.score:
                best = _Event(describe_labels(name, labels), score, "bits", label, labels=labels)
    return best


def _hits(sample: _Sample, event: _Event, i_x: int, i_y: int, rows: slice, scales: _Scales) -> int:
    if event.kind == "atom":
        assert sample.keys is not None
        return int(np.count_nonzero(sample.keys[rows] == event.atom))
    if event.kind == "span":
        return int(np.count_nonzero(sample.in_span[event.basis][rows]))
    if event.kind == "bits":
        assert sample.bits is not None and event.labels is not None
        return int(np.count_nonzero(event.labels.contains(sample.bits[rows, event.feature])))
    f = _feature(sample, event.feature, i_x, i_y, rows, scales)
    return int(np.count_nonzero(f >= event.threshold if event.upper else f <= event.threshold))


# ---------------------------------------------------------------------------------------------
# The bound
# ---------------------------------------------------------------------------------------------


def privacy_lower_bound(mech: Mechanism, *, trials: int, beta: float, rng: np.random.Generator, bits: bool = False,
                        privatize: Privatize | None = None) -> LowerBound:
    """ε_lb from ``trials`` outputs of each input (module docstring); valid with probability ≥ 1 − β.

    ``bits``: also try events on the raw bit patterns of the outputs (:mod:`ldpcli.audit._bits`).
    ``privatize``: what renders a batch of one input's rows, ``mech.privatize`` by default; another
    rendering of the same mechanism (one that snaps its outputs to a grid, say) is audited as given.
    """
    render = mech.privatize if privatize is None else privatize
    inputs, pairs = lower_bound_inputs(mech, rng, bits)
    names = [name for name, _ in inputs]
    xs = np.array([x for _, x in inputs])
    d = mech.d
    half = trials // 2
    keep_keys = d <= ATOM_MAX_D
    n_build = min(trials // 4, 2 * d)
    use_span = 2 <= d <= SUBSPACE_MAX_D and n_build >= 2 * d
    delta = float(mech.delta_exact)
    out_scale = math.sqrt(mech.norm_bound**2 + mech.expected_error_max)  # RMS ‖Z‖ at worst, a public number
    in_scale = max(float(np.linalg.norm(x)) for _, x in inputs) or mech.norm_bound
    scales = _Scales(RESOLUTION * out_scale * in_scale, RESOLUTION * out_scale)
    atom_step = RESOLUTION * out_scale if keep_keys else None

    # Phase 1: the first rows of each input (kept whole when the span event is tried), then the bases.
    heads = []
    for _, x in inputs:
        rows = n_build if use_span else 0
        heads.append(np.concatenate(_privatize_rows(render, d, x, rows, rng)) if rows else np.empty((0, d)))
    bases = {i: b for i, head in enumerate(heads) if use_span and (b := _span_basis(head)) is not None}
    # Phase 2: the rest, reduced to features as they come.
    samples = []
    for i, (_, x) in enumerate(inputs):
        blocks = [heads[i]] + _privatize_rows(render, d, x, trials - heads[i].shape[0], rng)
        parts = [_features(z, xs, atom_step) for z in blocks if z.shape[0]]
        sample = _Sample(
            np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts if p[2] is not None]) if keep_keys else None,
            heads[i], np.concatenate([bit_labels(z) for z in blocks if z.shape[0]]) if bits else None,
        )
        for j, basis in bases.items():
            sample.in_span[j] = np.concatenate([_in_span(z, basis) for z in blocks if z.shape[0]])
        samples.append(sample)

    ordered = [(a, b) for a, b in pairs] + [(b, a) for a, b in pairs]
    alpha = beta / (2.0 * len(ordered))  # two one-sided bounds per ordered pair: Bonferroni
    second = slice(half, trials)
    n_eval = trials - half
    reach = float(log_ratio_bound(n_eval, n_eval, 0, n_eval, alpha, delta))
    result = LowerBound(0.0, 1.0 - beta, "none: no event separates the inputs at this confidence", trials, delta, reach,
                        bits)
    bit_names = bit_label_names(d) if bits else []
    for i_x, i_y in ordered:
        event = _choose_event(samples, i_x, i_y, half, n_build if i_x in bases else 0, alpha, delta, names, scales,
                              atom_step, bit_names)
        kx = _hits(samples[i_x], event, i_x, i_y, second, scales)
        ky = _hits(samples[i_y], event, i_x, i_y, second, scales)
        bound = float(log_ratio_bound(kx, n_eval, ky, n_eval, alpha, delta)) if event.score > -math.inf else -math.inf
        shown = max(bound, 0.0)
        result.pairs.append(PairBound(names[i_x], names[i_y], shown, event.description, kx, ky, n_eval))
        if shown > result.epsilon:
            result.epsilon = shown
            result.event = (f"{event.description}, x = {names[i_x]}, x′ = {names[i_y]}: "
                            f"{kx}/{n_eval} against {ky}/{n_eval}")
    return result
