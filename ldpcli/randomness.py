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
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence

import numpy as np

from ldpcli.io.atomic import file_sha256
from ldpcli.mechanisms.base import MechanismSpec

#: Values (rows × d) in one key block: 2 MiB of float64, large enough that the per-block cost of a
#: generator and a mechanism call (~0.1 ms) is lost in the block's own work, small enough to stay
#: in cache (blocks of this size privatize faster than whole batches; benchmarks/ measure it).
KEY_BLOCK_VALUES = 2**18
#: At most this many rows per block, so that small-d files still split into many blocks.
KEY_BLOCK_MAX_ROWS = 512


def key_block_rows(d: int) -> int:
    """B: the rows of one key block for dimension d (1 for d ≥ 2¹⁸, 512 for d ≤ 512)."""
    return max(1, min(KEY_BLOCK_MAX_ROWS, KEY_BLOCK_VALUES // d))


def root_seed(seed: int | None) -> np.random.SeedSequence:
    """The run's root: from ``seed``, or from OS entropy when it is None."""
    return np.random.SeedSequence(seed)


def input_key(path: str | os.PathLike[str], columns: Sequence[str], spec: MechanismSpec) -> tuple[int, ...]:
    """Eight 32-bit words naming one input of a seeded run: its bytes, its vector columns, the spec."""
    digest = hashlib.sha256()
    digest.update(bytes.fromhex(file_sha256(path)))
    digest.update(json.dumps({"columns": list(columns), "spec": spec.to_dict()}, sort_keys=True).encode())
    words = np.frombuffer(digest.digest(), dtype="<u4")
    return tuple(int(word) for word in words)


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
        index = (first_row + start) // block
        child = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, *key, index))
        yield slice(start, min(rows, start + block)), np.random.Generator(np.random.PCG64(child))
