"""Uniformly random subsets of a given size, row by row, exactly: each row's subset is the set of
its A smallest of d independent uniform 32-bit keys, redrawn on a tie at the cut
(:func:`uniform_subsets`). The ℓ∞ mechanisms (:mod:`ldpcli.mechanisms._hypercube`) draw the
coordinates where their output agrees with the rounded vertex this way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ldpcli.math._counter_rng import CounterGenerator

#: Rows at least this long find their agreeing set's cut by selection, not sorting (``_cut_keys``; measured crossover).
_PARTITION_MIN_D = 2048


def _uniform_keys(rows: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """A (rows, d) array of independent uniform 32-bit keys (uint32): the halves of ⌈rows·d/2⌉
    raw words (``random_raw``, about 1 ns a key with PCG64, half the cost of ``integers``) where
    the raw word is 64 uniform bits, numpy's PCG64 (ldp's default) and randomgen's ChaCha
    (``rng="secure"``, :mod:`ldpcli.math._bitgen`); and the ChaCha20 stream's :class:`~ldpcli.math._counter_rng.CounterGenerator`;
    for any other generator (MT19937's raw word, for one, is 32 bits wide) ``rng.integers(0, 2³², dtype=uint32)``, the same law."""
    size = rows * d
    if isinstance(rng, CounterGenerator):
        return rng.random_raw((size + 1) // 2).view(np.uint32)[:size].reshape(rows, d)
    bitgen = rng.bit_generator
    if type(bitgen) is np.random.PCG64 or (
        type(bitgen).__name__ == "ChaCha" and type(bitgen).__module__.startswith("randomgen.")
    ):
        return bitgen.random_raw((size + 1) // 2).view(np.uint32)[:size].reshape(rows, d)
    return rng.integers(0, 1 << 32, size=(rows, d), dtype=np.uint32)


def _cut_keys(keys: np.ndarray, agree: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the cut k_(A) and the key after it k_(A+1) (order statistics, 1-based) for
    A = ``agree``; rows with A = d get k_(d) twice (every key is ≤ it), rows with A = 0 stand-ins.

    Rows shorter than ``_PARTITION_MIN_D``: one vectorised sort of the chunk (1.5–2.5 ns a key).
    Longer rows, few to a chunk: per row an O(d) selection of k_(A) (``np.partition``) and the
    minimum above it (0.6–1.4 ns a key, a sort 2.7–4). Both return the same values from the same
    keys, so the route never changes an output.
    """
    rows, d = keys.shape
    below = np.clip(agree - 1, 0, d - 1)
    above = np.clip(agree, 1, d - 1) if d > 1 else below
    if d < _PARTITION_MIN_D:
        ordered = np.sort(keys, axis=1)
        index = np.arange(rows)
        return ordered[index, below], ordered[index, above]
    cut = np.empty(rows, dtype=keys.dtype)
    after = np.empty(rows, dtype=keys.dtype)
    for i in range(rows):
        part = np.partition(keys[i], below[i])
        cut[i] = part[below[i]]
        after[i] = part[above[i]] if above[i] == below[i] else part[below[i] + 1:].min()
    return cut, after


def uniform_subsets(agree: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    """A (rows, d) boolean array whose row i marks a uniformly random ``agree[i]``-subset of the
    d positions, independently across rows: exactly, from 32-bit keys.

    Row i draws d independent uniform keys k_1, …, k_d (:func:`_uniform_keys`) and marks
    {j: k_j ≤ k_(A)}, A = ``agree[i]`` (:func:`_cut_keys`; none for A = 0, all for A = d). Why the
    law is exact: let E be the event k_(A) < k_(A+1) (no tie at the cut; always true for
    A ∈ {0, d}). On E the marked set S(k) is the set of the A smallest keys, of size exactly A.
    For a permutation π of the positions, k∘π has the law of k (i.i.d. keys), E depends only on
    the multiset of keys (so E(k∘π) = E(k)), and S(k∘π) = π⁻¹(S(k)). So the law of S given E is
    invariant under every permutation, and the permutations act transitively on the A-subsets:
    S given E is uniform over the C(d, A) subsets. A row whose keys tie at its cut
    (k_(A) = k_(A+1), 0 < A < d) draws all d of its keys again, until it does not: rejection
    sampling, so the accepted keys have the law of the keys given E, whatever the number of
    tries. Ties elsewhere in the row do not matter. A tie at the cut has probability about d/2³²
    (adjacent order statistics of d keys lie about 2³²/d apart): 2·10⁻⁴ at d = 10⁶.

    Draw order: the keys of all rows (row by row), then, while some rows tie at their cut, the
    keys of those rows again (in row order). This replaced a per-row shuffle (``rng.permuted``,
    19–20 ns a value on the project's 2-core machine, against 2–5 ns here, keys included).
    """
    keys = _uniform_keys(agree.shape[0], d, rng)
    cut, after = _cut_keys(keys, agree)
    redo = np.flatnonzero((agree > 0) & (agree < d) & (cut == after))
    while redo.size:
        keys[redo] = _uniform_keys(redo.size, d, rng)
        cut[redo], after[redo] = _cut_keys(keys[redo], agree[redo])
        redo = redo[cut[redo] == after[redo]]
    mask = keys <= cut[:, None]
    mask[agree == 0] = False
    return mask


def keyed_rows(rows: int, d: int, rng: np.random.Generator,
               mark: Callable[[np.ndarray | None, np.ndarray], np.ndarray]) -> None:
    """The keys of :func:`uniform_subsets` in its draw order, for a caller that marks each row's subset itself
    (the compiled hypercube sampler): ``mark(None, keys)`` with the d keys of all ``rows`` rows, then, while
    some rows tie at their cut, ``mark(tied, keys)`` with the new keys of those rows (their indices ``tied``, in
    row order). ``mark`` returns which of the rows it was given tie at their cut (a boolean array)."""
    tied = np.flatnonzero(mark(None, _uniform_keys(rows, d, rng)))
    while tied.size:
        tied = tied[mark(tied, _uniform_keys(tied.size, d, rng))]
