"""A report's seed and its expansion: per-row ChaCha20 keys give the bits of the one-key stream, the numba kernel
the numpy reference's, the seed's key is the seed then the public tag, and the expansion is N(0, I_d)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from helpers import bonferroni_z
from scipy import stats

from ldpcli.math import _chacha20 as ref
from ldpcli.math import _kernels
from ldpcli.math import _seed_prg as prg

numba_only = pytest.mark.skipif(not _kernels._numba_installed(), reason="numba is not installed (pip install 'ldp[fast]')")


def test_a_row_of_per_row_keys_is_the_one_key_stream() -> None:
    keys = prg.seed_key_words(np.array([[1], [2 ** 63 + 5], [7]], dtype=np.uint64))
    rows = np.array([0, 3, 9], dtype=np.uint64)
    together = ref.stream_normals(keys, rows, 300, stream=prg.SEED_STREAM)
    for i in range(3):
        alone = ref.stream_normals(keys[i].astype("<u4").tobytes(), rows[i:i + 1], 300, stream=prg.SEED_STREAM)
        assert together[i].tobytes() == alone[0].tobytes()


@numba_only
@pytest.mark.parametrize("parallel", [False, True])
def test_numba_gives_the_reference_bits_with_per_row_keys(parallel: bool) -> None:
    from ldpcli.math import _chacha20_numba as fast

    seeds = prg.random_seeds(np.random.default_rng(1), 64, 2)
    keys = prg.seed_key_words(seeds)
    rows = np.zeros(64, dtype=np.uint64)
    # enough positions that the ziggurat's rare branches (the extra blocks) are taken
    want = ref.stream_normals(keys, rows, 2000, stream=prg.SEED_STREAM)
    assert fast.normals(keys, rows, 2000, stream=prg.SEED_STREAM, parallel=parallel).tobytes() == want.tobytes()


def test_the_key_is_the_seed_then_the_tag() -> None:
    seed = np.array([[0x0123456789ABCDEF]], dtype=np.uint64)
    key = prg.seed_key_words(seed)[0]
    assert key[0] == 0x89ABCDEF and key[1] == 0x01234567
    tag = hashlib.sha256(b"ldp/seed-report/v1/64").digest()
    assert key[2:].astype("<u4").tobytes() == tag[:24]
    with pytest.raises(ValueError, match="uint64"):
        prg.seed_key_words(np.zeros((2, 3), dtype=np.uint64))
    with pytest.raises(ValueError, match="per-row keys"):
        ref.stream_normals(np.zeros((2, 8), dtype=np.uint32), [0], 4)


def test_the_expansion_is_standard_normal() -> None:
    """Each coordinate of G(s) over 4000 seeds × 50 positions: KS against N(0, 1), and uncorrelated seeds."""
    z = prg.expand(prg.random_seeds(np.random.default_rng(2), 4000, 1), 50)
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-6
    corr = np.corrcoef(z[:, :10], rowvar=False)[np.triu_indices(10, 1)]
    assert np.abs(corr).max() < bonferroni_z(1e-6, 45) / np.sqrt(4000)
