"""The one home of keyed randomness (ldpcli.release._randomness): its streams never change for a seed."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ldpcli.release._randomness import (
    DEFAULT_RNG,
    block_generators,
    digest_key,
    key_block_rows,
    keyed_generator,
    rng_from,
    root_seed,
)


def test_a_keyed_stream_is_pinned_for_a_seed() -> None:
    """Every seeded output (files, sweeps, training) is drawn from these streams: a change here changes them all."""
    assert keyed_generator(root_seed(7), 1, 2).integers(0, 2**32, 3).tolist() == [2567386825, 2056838993, 1432915386]


def test_the_root_stream_is_numpys_default_for_the_seed() -> None:
    ours = keyed_generator(root_seed(7)).integers(0, 2**32, 5)
    assert np.array_equal(ours, np.random.default_rng(7).integers(0, 2**32, 5))


def test_streams_with_different_keys_differ() -> None:
    root = root_seed(3)
    draws = {tuple(keyed_generator(root, *key).integers(0, 2**32, 4)) for key in ((0,), (1,), (0, 0), (1, 0))}
    assert len(draws) == 4


def test_a_digest_is_eight_little_endian_words() -> None:
    digest = hashlib.sha256(b"ldp").digest()
    words = digest_key(digest)
    assert len(words) == 8 and words[0] == int.from_bytes(digest[:4], "little")


def test_key_blocks_are_keyed_by_their_index() -> None:
    root, key, d = root_seed(11), (5, 6), 8
    block = key_block_rows(d)
    blocks = list(block_generators(root, key, block, 2 * block + 1, d))
    assert [part for part, _ in blocks] == [slice(0, block), slice(block, 2 * block), slice(2 * block, 2 * block + 1)]
    for index, (_, rng) in enumerate(blocks, start=1):
        assert rng.random() == keyed_generator(root, *key, index, rng=DEFAULT_RNG).random()
    with pytest.raises(ValueError, match="not aligned"):
        next(block_generators(root, key, 1, 10, d))


def test_rng_from_a_seed_a_generator_or_none() -> None:
    seeded, reproducible = rng_from(5)
    assert reproducible is True and seeded.random() == np.random.default_rng(5).random()
    given = np.random.default_rng(1)
    assert rng_from(given) == (given, None)
    assert rng_from(None)[1] is False
    for bad in (-1, True, 1.5):
        with pytest.raises(TypeError, match="rng must be"):
            rng_from(bad)  # type: ignore[arg-type]
