"""A report's seed and its expansion: the pseudo-random generator behind seed-compressed reports.

A seed-compressed report (Feldman & Talwar 2021, "Lossless Compression of Efficient Private Local
Randomizers", Alg. 1) is a seed s whose expansion G(s) is the privatized vector. Here s is 64 or 128
bits (one or two uint64 words) and G(s) ∈ ℝ^d is d standard normals:

- **the key**: ChaCha20's 256-bit key holds s in its first 2 or 4 words (the seed's little-endian 32-bit
  halves) and a public tag in the rest (:func:`seed_key_words`; the tag names the seed's length, so a 64-bit
  and a 128-bit seed never share a key);
- **the stream**: the normals of stream :data:`SEED_STREAM`, row key 0, positions 0..d−1 of that key, by the
  ziggurat of :mod:`ldpcli.math._chacha20` (numba's kernel or the numpy reference: the same bits);
- **the reference laws**: G(s)/‖G(s)‖ is uniform on the sphere S^{d−1}, and G(s) is N(0, I_d) when s is
  uniform and ChaCha20 a PRF (PrivUnit2's and PrivUnitG's references, :mod:`ldpcli.mechanisms._compressed`).

The computational assumption, in one sentence (:data:`ASSUMPTION`): ChaCha20 under a uniformly random key
is a pseudo-random function, so the expansion of a uniformly random seed cannot be told from true
randomness by any efficient test. ε-LDP holds exactly for an ideal generator and, under that assumption,
against every efficient adversary (Feldman & Talwar 2021). Nothing here is secret but the seed.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ldpcli.math import _counter_rng

#: The 16-bit stream of a seed's normals (a stream of its own, so no other draw of ldp shares its blocks).
SEED_STREAM = 0x5EED
#: Seed lengths a report may have, in bits.
SEED_BITS = (64, 128)
#: The pseudo-random generator, in words (what a sidecar states).
PRG = ("ChaCha20 (RFC 8439) keyed by the seed and a public tag; the decoded vector is d standard normals "
       f"of stream {SEED_STREAM:#06x}, row 0 (ldp's ziggurat)")
#: The computational assumption behind a seed report, in one sentence.
ASSUMPTION = ("ChaCha20 under a uniformly random key is a pseudo-random function, so no efficient test tells the "
              "expansion of a uniformly random seed from true randomness (Feldman & Talwar 2021)")


def _tag_words(bits: int) -> np.ndarray:
    """The public key words after a seed of ``bits``: SHA-256 of a tag naming the length, as uint32 words."""
    digest = hashlib.sha256(f"ldp/seed-report/v1/{bits}".encode()).digest()
    return np.frombuffer(digest, dtype="<u4")[: 8 - bits // 32].astype(np.uint32)


def seed_key_words(seeds: np.ndarray) -> np.ndarray:
    """(n, 8) uint32 ChaCha20 key words of (n, w) uint64 seeds (w = 1 or 2): the seed, then the public tag."""
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    if seeds.ndim != 2 or seeds.shape[1] * 64 not in SEED_BITS:
        raise ValueError(f"seeds must be an (n, 1) or (n, 2) uint64 array, got shape {seeds.shape}")
    w = seeds.shape[1]
    keys = np.empty((seeds.shape[0], 8), dtype=np.uint32)
    keys[:, : 2 * w] = seeds.view("<u4").reshape(seeds.shape[0], 2 * w)
    keys[:, 2 * w:] = _tag_words(64 * w)
    return keys


def expand(seeds: np.ndarray, d: int) -> np.ndarray:
    """G(s): the (n, d) standard normals of each seed's stream (the module docstring)."""
    keys = seed_key_words(seeds)
    return _counter_rng.normals(keys, np.zeros(keys.shape[0], dtype=np.uint64), d, stream=SEED_STREAM)


def random_seeds(rng: np.random.Generator, count: int, words: int) -> np.ndarray:
    """(count, words) uint64 seeds, uniform on all 2^(64·words) values, from ``rng``."""
    return np.asarray(rng.integers(0, 1 << 64, size=(count, words), dtype=np.uint64), dtype=np.uint64)
