"""The numba-compiled kernels behind :mod:`ldpcli.math._kernels` (imported only when numba is installed).

Each kernel computes what its numpy reference computes (:mod:`ldpcli.math._sphere` for the cap
sampler of PrivUnit2 and the hemisphere mechanism, the ``privatize`` of :mod:`ldpcli.mechanisms._privunitg`,
:mod:`ldpcli.mechanisms._gaussian_sign` and :mod:`ldpcli.mechanisms._hypercube`), one row at a time
while the row is in cache, drawing from the same ``numpy.random.Generator`` in the same order
(numba's Generator methods reproduce numpy's draws bit for bit). Sums are taken left to right
instead of numpy's pairwise and SIMD order, so results agree with the reference to rounding, not
bit for bit. The hypercube sampler is the exception: from a Generator it draws each row's agreeing positions
from fewer numbers than the numpy reference's d keys a row, so it agrees with its reference in law only; given
the reference's own uniforms and keys (any other generator, such as the ChaCha20 stream) it computes the
reference's output bit for bit. ``nogil``: the pipeline's threads privatize blocks side by side.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

#: 2⁻⁵³: the step of the grid of uniform doubles.
_TWO_M53 = 2.0**-53


def _normal(source: object, i: int, j: int) -> float:
    """The normal of row i, coordinate j: drawn from ``source`` (a Generator) or read from it (an array
    the caller filled beforehand, in row order). Compiled only, through its overload."""
    raise NotImplementedError


@overload(_normal, inline="always")
def _normal_impl(source, i, j):
    if isinstance(source, types.Array):
        return lambda source, i, j: source[i, j]
    return lambda source, i, j: source.standard_normal()


def _uniform(source: object, i: int, j: int) -> float:
    """The uniform double of row i, coordinate j: drawn from ``source`` (a Generator's ``random``) or read from
    it (an array the caller filled beforehand: the doubles, or 64-bit words w mapped to (w >> 11)·2⁻⁵³, the
    ChaCha20 stream's ``random`` of those words). Compiled only, through its overload."""
    raise NotImplementedError


@overload(_uniform, inline="always")
def _uniform_impl(source, i, j):
    if isinstance(source, types.Array) and source.dtype == types.uint64:
        return lambda source, i, j: np.float64(source[i, j] >> np.uint64(11)) * _TWO_M53
    if isinstance(source, types.Array):
        return lambda source, i, j: source[i, j]
    return lambda source, i, j: source.random()


def _draws(source: object) -> bool:
    """Whether ``source`` can give new normals (a Generator) rather than only the row's given ones (an array)."""
    raise NotImplementedError


@overload(_draws, inline="always")
def _draws_impl(source):
    draws = not isinstance(source, types.Array)
    return lambda source: draws


@numba.njit(cache=True, nogil=True)
def _row_norm(x: np.ndarray, i: int) -> float:
    """‖x_i‖₂ without overflow or underflow in the squares (``spheremath.row_norms``)."""
    d = x.shape[1]
    ss = 0.0
    for j in range(d):
        ss += x[i, j] * x[i, j]
    norm = math.sqrt(ss)
    if math.isfinite(norm) and norm >= 1e-150:
        return norm
    biggest = 0.0
    for j in range(d):
        biggest = max(biggest, abs(x[i, j]))
    if biggest == 0.0:
        return 0.0
    ss = 0.0
    for j in range(d):
        v = x[i, j] / biggest
        ss += v * v
    return biggest * math.sqrt(ss)


@numba.njit(cache=True, nogil=True)
def _rounding_divisor(x: np.ndarray, i: int, flip: float, radius: float) -> float:
    """±‖x_i‖: the divisor that rounds row i to u = ±x_i/‖x_i‖ (``spheremath.round_to_sphere``), 0 for a zero row."""
    norm = _row_norm(x, i)
    if norm == 0.0:
        return 0.0
    return norm if flip < (1.0 + norm / radius) / 2.0 else -norm


@numba.njit(cache=True, nogil=True)
def rounded_cap_directions(
    x: np.ndarray, flips: np.ndarray, radius: float, t: np.ndarray, r: np.ndarray, scale: float,
    source: object, out: np.ndarray, redo: np.ndarray,
) -> None:
    """``spheremath.rounded_cap_directions`` after the flips and cosines are drawn, into ``out``.

    Per row: the norm; u = ±x/‖x‖ (sign by ``flips``); d normals g (:func:`_normal` of ``source``: a
    Generator, or ``out`` itself filled with the rows' normals) with ‖g‖² and ⟨g, u⟩ accumulated as
    they are read; the explicit double projection when ‖w‖² < ‖g‖²/4; then scale·(t·u + r·w) =
    a·g + b·u in place. A zero row becomes scale·g/‖g‖. When the projection leaves nothing (g
    parallel to u to the last bit: probability 0 for d ≥ 2) a Generator gives the row new normals;
    with given normals the row is marked in ``redo`` and left for the caller.
    """
    n, d = x.shape
    for i in range(n):
        denom = _rounding_divisor(x, i, flips[i], radius)
        gg = 0.0
        if denom == 0.0:
            for j in range(d):
                v = _normal(source, i, j)
                out[i, j] = v
                gg += v * v
            factor = scale / math.sqrt(gg)
            for j in range(d):
                out[i, j] *= factor
            continue
        gu = 0.0
        for j in range(d):
            v = _normal(source, i, j)
            out[i, j] = v
            gg += v * v
            gu += v * (x[i, j] / denom)
        ww = gg - gu * gu
        if ww < 0.25 * gg:  # most of g along u: project explicitly, twice
            while True:
                for _ in range(2):
                    c = 0.0
                    for j in range(d):
                        c += out[i, j] * (x[i, j] / denom)
                    for j in range(d):
                        out[i, j] -= c * (x[i, j] / denom)
                gu = 0.0
                ww = 0.0
                for j in range(d):
                    ww += out[i, j] * out[i, j]
                if ww > 0.0 or not _draws(source):
                    break
                for j in range(d):  # g exactly parallel to u: probability 0, draw again
                    out[i, j] = _normal(source, i, j)
            if ww == 0.0:
                redo[i] = True
                continue
        a = scale * r[i] / math.sqrt(ww)
        b = scale * t[i] - a * gu
        for j in range(d):
            out[i, j] = a * out[i, j] + b * (x[i, j] / denom)


@numba.njit(cache=True, nogil=True)
def gaussian_about_cosines(
    x: np.ndarray, flips: np.ndarray, radius: float, z: np.ndarray, scale: float, source: object,
    out: np.ndarray, zero: np.ndarray,
) -> None:
    """PrivUnitG's rows after the rounding flips and the cosines z are drawn (Asi et al. 2022, Alg. 2):
    scale·(g + (z_i − ⟨g, u⟩)·u) = scale·(z_i·u + g⊥) with d normals g per row (:func:`_normal` of
    ``source``: a Generator, or ``out`` filled with them), into ``out``.

    A zero row gets its raw normals and ``zero[i] = True``: the caller gives it its norm
    (``privunitg.finish_zero_rows``).
    """
    n, d = x.shape
    for i in range(n):
        denom = _rounding_divisor(x, i, flips[i], radius)
        if denom == 0.0:
            for j in range(d):
                out[i, j] = _normal(source, i, j)
            zero[i] = True
            continue
        gu = 0.0
        for j in range(d):
            v = _normal(source, i, j)
            out[i, j] = v
            gu += v * (x[i, j] / denom)
        b = z[i] - gu
        for j in range(d):
            out[i, j] = (out[i, j] + (x[i, j] / denom) * b) * scale


@numba.njit(cache=True, nogil=True)
def gaussian_with_private_sign(
    x: np.ndarray, flips: np.ndarray, radius: float, keep: np.ndarray, scale: float, source: object,
    out: np.ndarray,
) -> None:
    """gaussian-sign's rows after the rounding flips and the kept signs are drawn (Błasiok et al.
    2019, Def. 5.5, corrected): ±scale·g with d normals g (:func:`_normal` of ``source``: a Generator,
    or ``out`` filled with them), + exactly when (⟨g, u⟩ ≥ 0) == keep_i.

    A zero row's u is uniform and independent of g, so (⟨g, u⟩ ≥ 0) is a fair coin independent of
    g: it is taken from the row's unused rounding flip (flip < ½), with no direction drawn.
    """
    n, d = x.shape
    for i in range(n):
        denom = _rounding_divisor(x, i, flips[i], radius)
        along = 0.0
        for j in range(d):
            v = _normal(source, i, j)
            out[i, j] = v
            if denom != 0.0:
                along += v * (x[i, j] / denom)
        positive = flips[i] < 0.5 if denom == 0.0 else along >= 0.0
        sign = scale if positive == keep[i] else -scale
        for j in range(d):
            out[i, j] *= sign


#: 2⁵³: a uniform double of numpy's generators is k·2⁻⁵³ with k uniform on [0, 2⁵³), so 53 random bits.
_TWO_53 = 1 << 53


@numba.njit(cache=True, nogil=True)
def _below(k: int, rng: np.random.Generator) -> int:
    """An integer uniform on [0, k), exactly: the 53 bits of one uniform double, redrawn at or
    above the largest multiple of k (probability < k/2⁵³)."""
    limit = _TWO_53 - _TWO_53 % k
    while True:
        bits = np.int64(rng.random() * _TWO_53)
        if bits < limit:
            return bits % k


@numba.njit(cache=True, nogil=True)
def _uniform_subset(mask: np.ndarray, size: int, rng: np.random.Generator) -> None:
    """``mask`` := the indicator of a uniformly random ``size``-subset of its d positions, exactly.

    The smaller side m = min(size, d − size) is drawn and inverted if needed. Near d/2
    (m ≥ 3d/8): a subset uniform over all 2^d from d random bits (53 per uniform double), then
    uniformly random members removed (or non-members added) one at a time until it has m; given
    its size a uniform subset is uniform among the subsets of that size, and removing a uniform
    member of a uniform k-subset leaves a uniform (k − 1)-subset, so the result is uniform among
    m-subsets. Each step finds its member by rejection, ≤ 8/3 tries on average here. Farther from
    d/2: Floyd's algorithm, m exact draws (Bentley & Floyd 1987, "A sample of brilliance").
    """
    d = mask.shape[0]
    small = min(size, d - size)
    if 8 * small >= 3 * d:
        count = 0
        bits = np.int64(0)
        left = 0
        for j in range(d):
            if left == 0:
                bits = np.int64(rng.random() * _TWO_53)
                left = 53
            mask[j] = (bits & 1) == 1
            count += bits & 1
            bits >>= 1
            left -= 1
        while count != small:
            j = _below(d, rng)
            if mask[j] == (count > small):
                mask[j] = count < small
                count += 1 if count < small else -1
    else:
        mask[:] = False
        for j in range(d - small, d):
            t = _below(j + 1, rng)
            if mask[t]:
                mask[j] = True
            else:
                mask[t] = True
    if small != size:
        for j in range(d):
            mask[j] = not mask[j]


#: A key's bucket is its top 8 bits: the cut is found by counting keys per bucket, then sorting one bucket.
_BUCKET_SHIFT = 24


@numba.njit(cache=True, nogil=True)
def _key_subset(mask: np.ndarray, keys: np.ndarray, i: int, size: int, counts: np.ndarray, scratch: np.ndarray) -> bool:
    """``mask`` := {j: keys[i, j] ≤ k_(size)}, the ``size`` smallest of row i's d keys, as the numpy reference
    marks them (``ldpcli.math._subsets.uniform_subsets``): none for size 0, all for size d. False, ``mask``
    unset, when the row ties at its cut (k_(size) = k_(size+1), 0 < size < d): the caller draws its keys again.

    The cut is a value, found by selection: the keys counted per bucket of their top 8 bits (``counts``,
    256 of them), the bucket holding the size-th smallest sorted (``scratch``; about d/256 keys). When the
    cut is that bucket's largest key, k_(size+1) lies in a later bucket, so it is larger: no tie."""
    d = mask.shape[0]
    if size == 0 or size == d:
        mask[:] = size == d
        return True
    counts[:] = 0
    for j in range(d):
        counts[keys[i, j] >> _BUCKET_SHIFT] += 1
    below = 0
    bucket = 0
    while below + counts[bucket] < size:
        below += counts[bucket]
        bucket += 1
    m = 0
    for j in range(d):
        if keys[i, j] >> _BUCKET_SHIFT == bucket:
            scratch[m] = keys[i, j]
            m += 1
    scratch[:m].sort()
    rank = size - below  # k_(size) is the rank-th smallest of the bucket, 1 ≤ rank ≤ m
    cut = scratch[rank - 1]
    if rank < m and scratch[rank] == cut:
        return False
    for j in range(d):
        mask[j] = keys[i, j] <= cut
    return True


@numba.njit(cache=True, nogil=True)
def _vertex_row(x: np.ndarray, i: int, mask: np.ndarray, half_over_l: float, value: float, source: object,
                out: np.ndarray) -> None:
    """Row i of the ±value vertices given its agreeing positions ``mask``: d uniforms u_j (:func:`_uniform` of
    ``source``), s_j = +1 when u_j < x_j/(2L) + ½, and z_j = +1 exactly when (s_j = +1) == (j agrees)."""
    twice = 2.0 * value
    for j in range(x.shape[1]):
        disagree = (_uniform(source, i, j) < x[i, j] * half_over_l + 0.5) != mask[j]  # s_j = +1 xor j agrees
        out[i, j] = value - twice * disagree  # without a branch: the bits are fair coins


@numba.njit(cache=True, nogil=True)
def hypercube_vertices(
    x: np.ndarray, agree: np.ndarray, half_over_l: float, value: float, rng: np.random.Generator, out: np.ndarray,
) -> None:
    """The threshold-κ channel's ±value vertices (Bhowmick et al. 2018, Alg. 2), one row at a time:
    the agreeing positions, a uniform ``agree[i]``-subset (:func:`_uniform_subset`), then the row's
    d uniforms (:func:`_vertex_row`).

    The same law as the numpy reference's agreeing sets (the A smallest of d random keys,
    ``ldpcli.math._subsets.uniform_subsets``), from fewer draws (about d/53 + O(√d) instead of d keys near
    A = d/2), so the two agree in law, not draw for draw.
    """
    n, d = x.shape
    mask = np.empty(d, dtype=np.bool_)
    for i in range(n):
        _uniform_subset(mask, agree[i], rng)
        _vertex_row(x, i, mask, half_over_l, value, rng, out)


@numba.njit(cache=True, nogil=True)
def hypercube_vertices_given(
    x: np.ndarray, agree: np.ndarray, half_over_l: float, value: float, uniforms: np.ndarray, keys: np.ndarray,
    out: np.ndarray, tied: np.ndarray,
) -> None:
    """The numpy reference's vertices (``privatize`` of ``ldpcli.mechanisms._hypercube``) from its own draws,
    bit for bit: row i agrees on the ``agree[i]`` smallest of its 32-bit ``keys`` (:func:`_key_subset`) and
    rounds with its ``uniforms`` (doubles, or the stream's words: :func:`_uniform`; :func:`_vertex_row`). A row whose keys tie at its cut is marked in ``tied``
    and left for the caller, which draws its keys again as the reference does."""
    n, d = x.shape
    mask = np.empty(d, dtype=np.bool_)
    counts = np.empty(256, dtype=np.int64)
    scratch = np.empty(d, dtype=keys.dtype)
    for i in range(n):
        if _key_subset(mask, keys, i, agree[i], counts, scratch):
            _vertex_row(x, i, mask, half_over_l, value, uniforms, out)
        else:
            tied[i] = True
