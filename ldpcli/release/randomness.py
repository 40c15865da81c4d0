"""Keyed randomness: one generator per block of rows, named by (run, input, block index).

Every row's noise comes from the generator of the *key block* it falls in: rows
[b·B, (b + 1)·B) of an input, with B = :func:`key_block_rows` (d) depending on d alone. The
generator is ``PCG64(SeedSequence(root, spawn_key=(*input key, b)))``, so the output for a given
seed does not depend on how the rows are batched, how many threads privatize them, or (later) which
engine or partitioning runs them: only on the seed, the input and the row's position.

- **Unseeded runs** (the default, and the only ones fit for release) take the root from OS entropy
  (``SeedSequence()``); the input key adds nothing there and is not computed.
- **Seeded runs** key the input by the SHA-256 of its bytes, the vector columns and the mechanism
  spec, so one ``--seed`` on two different inputs (two shards, two column sets, two ε) gives
  independent noise instead of the same noise twice. The same bytes with the same options give the
  same output on any machine, whatever the file is called.

Neither the seed nor anything derived from it (the key, the root's state) is written anywhere.

This module is the one home of keyed randomness; the rest of the house asks it for generators:

- :func:`root_seed` (seed) → the run's root ``SeedSequence``;
- :func:`keyed_generator` (root, *key) → ``PCG64(SeedSequence(root, spawn_key=(*root's, *key)))``,
  one independent stream per key (a key block of a file, a sweep's grid point, a training stream);
- :func:`digest_key` (a SHA-256 digest) → the eight 32-bit words of a key that names content;
- :func:`input_key` and :func:`block_generators` for the key blocks of an input;
- :func:`rng_from` (a Generator, a seed or None) → the generator of a library call on arrays.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence

import numpy as np

from ldpcli.io.atomic import file_sha256
from ldpcli.mechanisms.base import MechanismSpec

#: The bit generator of every key block (recorded in the sidecar's ``release.randomness``).
BIT_GENERATOR = "PCG64"
#: Values (rows × d) in one key block: 8 MiB of float64, the batch a default run privatizes at once
#: (``--memory 256MB``), so that run makes one mechanism call per batch and no extra copy.
KEY_BLOCK_VALUES = 2**20
#: Rows of a key block for short rows (d < 64, where 8 MiB would be over 16384 rows): small
#: enough that even a small file splits into many blocks (and threads), large enough (≥ 512·d
#: values) that a generator and a mechanism call per block cost little.
SHORT_ROW_BLOCK = 512


def key_block_rows(d: int) -> int:
    """B: the rows of one key block for dimension d: 2²⁰/d rows for d ≥ 64 (1 for d ≥ 2²⁰), 512 below."""
    return SHORT_ROW_BLOCK if d < 64 else max(1, KEY_BLOCK_VALUES // d)


def root_seed(seed: int | None) -> np.random.SeedSequence:
    """The run's root: from ``seed``, or from OS entropy when it is None."""
    return np.random.SeedSequence(seed)


def keyed_generator(root: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """The generator of the stream named ``key`` under ``root``: the same draws every time it is made.

    ``PCG64(SeedSequence(root.entropy, spawn_key=(*root.spawn_key, *key)))``: streams with different
    keys are independent (numpy's ``SeedSequence`` hashes the entropy and the key together), and
    with no key it is the root's own stream (``numpy.random.default_rng(seed)`` for a root from ``seed``).
    """
    child = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, *key))
    return np.random.Generator(np.random.PCG64(child))


def digest_key(digest: bytes) -> tuple[int, ...]:
    """The key that a SHA-256 digest names: its 32 bytes as eight little-endian 32-bit words."""
    return tuple(int(word) for word in np.frombuffer(digest, dtype="<u4"))


def input_key(path: str | os.PathLike[str], columns: Sequence[str], spec: MechanismSpec) -> tuple[int, ...]:
    """Eight 32-bit words naming one input of a seeded run: its bytes, its vector columns, the spec."""
    digest = hashlib.sha256()
    digest.update(bytes.fromhex(file_sha256(path)))
    digest.update(json.dumps({"columns": list(columns), "spec": spec.to_dict()}, sort_keys=True).encode())
    return digest_key(digest.digest())


def block_generators(
    root: np.random.SeedSequence, key: tuple[int, ...], first_row: int, rows: int, d: int
) -> Iterator[tuple[slice, np.random.Generator]]:
    """(rows of the batch, generator) for each key block of a batch that starts at ``first_row``.

    The batch must start on a block boundary (the reader's batches are multiples of
    :func:`key_block_rows`); its last block may be short (the end of the input).
    """
    block = key_block_rows(d)
    if first_row % block:
        raise ValueError(f"a batch starting at row {first_row} is not aligned to key blocks of {block} rows")
    for start in range(0, rows, block):
        yield slice(start, min(rows, start + block)), keyed_generator(root, *key, (first_row + start) // block)


def rng_from(rng: np.random.Generator | int | None) -> tuple[np.random.Generator, bool | None]:
    """(the generator, whether the output is reproducible) for a call given ``rng``.

    None: a generator from OS entropy (not reproducible); a ``numpy.random.Generator``: itself
    (reproducible only if the caller seeded it: unknown here, None); a non-negative int: the root
    stream of that seed (``numpy.random.default_rng(seed)``, reproducible).
    """
    if rng is None:
        return np.random.default_rng(), False
    if isinstance(rng, np.random.Generator):
        return rng, None
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng)), True
    raise TypeError(f"rng must be a numpy.random.Generator, a non-negative int seed or None, got {rng!r}")
