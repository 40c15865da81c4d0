"""Keyed randomness: one generator per block of rows, named by (run, input, block index).

Every row's noise comes from the generator of the *key block* it falls in: rows
[b·B, (b + 1)·B) of an input, with B = :func:`key_block_rows` (d) depending on d alone. The
generator is that of ``SeedSequence(root, spawn_key=(*input key, b))``, so the output for a given
seed does not depend on how the rows are batched, how many threads privatize them, or which
engine or partitioning runs them: only on the seed, the input, the row's position and the ``rng``:

- ``rng="chacha20"`` (the default): ldp's own counter-based ChaCha20 stream (:mod:`ldpcli.math._chacha20`, RFC 8439,
  20 rounds, no extra package), each block's :class:`~ldpcli.math._counter_rng.CounterGenerator` keyed by
  HMAC-SHA256 of the block's spawn key under the root's entropy (:func:`ldpcli.math._chacha20.secure_key`):
  cryptographic, and the same bits from the numpy reference and the compiled stream.
- ``rng="pcg64"`` (the opt-out, for simulations): ``PCG64`` seeded by that ``SeedSequence``. Statistically
  excellent but not cryptographic: whoever sees enough of a block's output can in principle compute
  the generator's state and predict the rest of the block.
- ``rng="secure"``: randomgen's ChaCha20 keyed the same way (:func:`ldpcli.math._bitgen.secure_generator`):
  with the root a 256-bit secret from the OS, every block's stream (under either ChaCha20 generator) is
  indistinguishable from independent uniform bits, even given every other block's output (HMAC-SHA256
  and ChaCha20 are PRFs). The costs are measured in ``benchmarks/rng.py`` and ``benchmarks/chacha_release.py``.

- **Unseeded runs** (the default, and the only ones fit for release) take the root from 256 bits of
  OS entropy (:func:`root_seed`); the input key adds nothing there and is not computed.
- **Seeded runs** key the input by the SHA-256 of its bytes, the vector columns and the mechanism
  spec, so one ``seed`` on two different inputs (two shards, two column sets, two ε) gives
  independent noise instead of the same noise twice. The same bytes with the same options give the
  same output on any machine, whatever the file is called.

Neither the seed nor anything derived from it (the key, the root's state) is written anywhere.

This module is the one home of keyed randomness; the rest of the house asks it for generators:

- :func:`root_seed` (seed) → the run's root ``SeedSequence``;
- :func:`check_rng` (rng) → the generator's name checked (``"pcg64"``, ``"chacha20"`` or ``"secure"``);
- :func:`keyed_generator` (root, *key, rng=) → the generator of ``SeedSequence(root, spawn_key=(*root's, *key))``,
  one independent stream per key (a key block of a file, a sweep's grid point, a training stream);
- :func:`digest_key` (a SHA-256 digest) → the eight 32-bit words of a key that names content;
- :func:`input_key` and :func:`block_generators` for the key blocks of an input;
- :func:`rng_from` (a Generator, a seed or None) → the generator of a library call on arrays;
- :func:`randomness_record` (rng, seeded=) → the sidecar's ``release._randomness``: which generator
  ran and where its entropy came from, never the seed or a key.

Draws that a privacy claim rests on besides the noise (the permutation of a shuffled release, the
Poisson sample of private training) call :func:`ldpcli.math._bitgen.secure_generator` directly: with
no seed it is ChaCha20 keyed from the OS, whatever ``rng`` the noise uses.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np

from ldpcli._version import __version__
from ldpcli.errors import UsageError
from ldpcli.io._atomic import file_sha256
from ldpcli.math._bitgen import ENTROPY_FROM_OS, ENTROPY_FROM_USER, ROUNDS, describe_generator, secure_generator
from ldpcli.math._chacha20 import KEY_BYTES, release_key, secure_key
from ldpcli.math._counter_rng import CounterGenerator
from ldpcli.mechanisms._base import MechanismSpec

#: The generators of the key blocks, by the name ``rng`` gives: numpy's PCG64 (the opt-out for simulations: fast,
#: not cryptographic), ldp's counter-based ChaCha20 stream (a release's default: cryptographic, no extra package) and
#: randomgen's ChaCha20 (:mod:`ldpcli.math._bitgen`: cryptographic, needs randomgen).
RNG_NAMES = ("pcg64", "chacha20", "secure")
#: A release's generator unless the user opts out: ldp's ChaCha20 stream (cryptographic, no extra package).
DEFAULT_RNG = "chacha20"
#: The generator of the keyed streams that no release's claim rests on (a sweep's simulated releases, the
#: training noise of ``ldp train``): PCG64, unless the caller asks for another.
SIMULATION_RNG = "pcg64"
#: Values (rows × d) in one key block: 8 MiB of float64, the batch a default run privatizes at once
#: (``Resources.memory`` of 256 MiB), so that run makes one mechanism call per batch and no extra copy.
KEY_BLOCK_VALUES = 2**20
#: Rows of a key block for short rows (d < 64, where 8 MiB would be over 16384 rows): small
#: enough that even a small file splits into many blocks (and threads), large enough (≥ 512·d
#: values) that a generator and a mechanism call per block cost little.
SHORT_ROW_BLOCK = 512
#: ``release.randomness.bit_generator`` of ldp's own stream (randomgen's is "ChaCha").
STREAM_BIT_GENERATOR = "ChaCha20"


def key_block_rows(d: int) -> int:
    """B: the rows of one key block for dimension d: 2²⁰/d rows for d ≥ 64 (1 for d ≥ 2²⁰), 512 below."""
    return SHORT_ROW_BLOCK if d < 64 else max(1, KEY_BLOCK_VALUES // d)


def root_seed(seed: int | None) -> np.random.SeedSequence:
    """The run's root: from ``seed``, or from 256 bits of OS entropy (:func:`secrets.token_bytes`) when
    it is None: the secret that keys every block's ChaCha20 under ``rng="secure"``."""
    if seed is None:
        return np.random.SeedSequence(int.from_bytes(secrets.token_bytes(KEY_BYTES), "little"))
    return np.random.SeedSequence(seed)


def check_rng(rng: str) -> str:
    """``rng`` if it names a generator of :data:`RNG_NAMES`; UsageError otherwise."""
    if rng not in RNG_NAMES:
        raise UsageError(f"`rng` must be one of {', '.join(RNG_NAMES)}, got {rng!r}")
    return rng


def keyed_generator(root: np.random.SeedSequence, *key: int, rng: str = SIMULATION_RNG) -> np.random.Generator:
    """The generator of the stream named ``key`` under ``root``: the same draws every time it is made.

    Its ``SeedSequence`` is ``SeedSequence(root.entropy, spawn_key=(*root.spawn_key, *key))``.
    ``rng="pcg64"`` (the default here: :data:`SIMULATION_RNG`; a release passes its own): ``PCG64`` of it; streams with different keys are independent (numpy's
    ``SeedSequence`` hashes the entropy and the key together), and with no key it is the root's own
    stream (``numpy.random.default_rng(seed)`` for a root from ``seed``). ``rng="secure"``: ChaCha20
    keyed by HMAC-SHA256 of the spawn key under the entropy (:func:`ldpcli.math._bitgen.secure_generator`).
    ``rng="chacha20"``: ldp's ChaCha20 stream under that same key (:class:`~ldpcli.math._counter_rng.CounterGenerator`).
    """
    child = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, *key))
    choice = check_rng(rng)
    if choice == "chacha20":  # typed as the Generator whose methods the mechanisms call on it
        return cast(np.random.Generator, CounterGenerator(secure_key(child)))
    if choice == "secure":
        return secure_generator(child)
    return np.random.Generator(np.random.PCG64(child))


#: :class:`RandomnessRecord`'s fields holding a text, and those holding a bool, as JSON stores them.
_TEXT_FIELDS = ("bit_generator", "package", "version", "entropy", "kernel")
_BOOL_FIELDS = ("cryptographic",)


@dataclass(frozen=True, slots=True)
class RandomnessRecord:
    """What a release states of the generator that drew its noise (a sidecar's ``release.randomness``, a central
    training claim's ``randomness``): the ``bit_generator`` ("ChaCha20" of package "ldp", "ChaCha" of randomgen,
    numpy's "PCG64"), its ``package`` and ``version``, ChaCha's ``rounds``, whether it is ``cryptographic``, where
    its ``entropy`` came from, and the ``kernel`` that ran the samplers (a sidecar's, :mod:`ldpcli.math._kernels`).
    Never a seed, a key or a state. A field that older sidecars lack is None, and :meth:`to_dict` leaves it out.
    """

    bit_generator: str
    package: str | None = None
    version: str | None = None
    rounds: int | None = None
    cryptographic: bool | None = None
    entropy: str | None = None
    kernel: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, its keys in the fields' order, the fields that are None left out."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if getattr(self, name) is not None}

    def with_kernel(self, kernel: str) -> RandomnessRecord:
        """The record with the kernel that ran the samplers."""
        return replace(self, kernel=kernel)

    @classmethod
    def from_dict(cls, data: Any) -> RandomnessRecord:
        """The record an object :meth:`to_dict` wrote holds: ValueError naming the first field that is not one
        of the record's, is missing (``bit_generator``) or has the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError("is not an object")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"field {unknown[0]!r} is not part of a randomness record")
        if not isinstance(data.get("bit_generator"), str):
            raise ValueError("field 'bit_generator' is missing or not a text")
        for name in _TEXT_FIELDS:
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"field {name!r} is not a text")
        for name in _BOOL_FIELDS:
            if data.get(name) is not None and not isinstance(data[name], bool):
                raise ValueError(f"field {name!r} is not true or false")
        rounds = data.get("rounds")
        if rounds is not None and (not isinstance(rounds, int) or isinstance(rounds, bool)):
            raise ValueError("field 'rounds' is not an integer")
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


def randomness_record(rng: str, *, seeded: bool) -> RandomnessRecord:
    """What a release records of its ``rng`` (:func:`ldpcli.math._bitgen.describe_generator`): the bit generator,
    its package and version, ChaCha's rounds, whether it is cryptographic, and where its entropy came
    from ("from the OS", or "chosen by the user: not for release" for a seeded run). Never the seed or a key (the generator described is keyed
    by a fixed public seed, and only its kind is read). ldp's own stream is "ChaCha20" of package "ldp"."""
    if check_rng(rng) == "chacha20":
        return RandomnessRecord(STREAM_BIT_GENERATOR, "ldp", __version__, ROUNDS, True,
                                ENTROPY_FROM_USER if seeded else ENTROPY_FROM_OS)
    return RandomnessRecord.from_dict(describe_generator(keyed_generator(np.random.SeedSequence(0), rng=rng),
                                                         seeded=seeded))


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
    root: np.random.SeedSequence, key: tuple[int, ...], first_row: int, rows: int, d: int, *, rng: str = DEFAULT_RNG
) -> Iterator[tuple[slice, np.random.Generator]]:
    """(rows of the batch, generator ``rng``) for each key block of a batch that starts at ``first_row``.

    The batch must start on a block boundary (the reader's batches are multiples of
    :func:`key_block_rows`); its last block may be short (the end of the input).
    """
    block = key_block_rows(d)
    if first_row % block:
        raise ValueError(f"a batch starting at row {first_row} is not aligned to key blocks of {block} rows")
    for start in range(0, rows, block):
        yield slice(start, min(rows, start + block)), keyed_generator(root, *key, (first_row + start) // block, rng=rng)


def rng_from(rng: np.random.Generator | CounterGenerator | int | None) -> tuple[np.random.Generator, bool | None]:
    """(the generator, whether the output is reproducible) for a call given ``rng``.

    None: ldp's ChaCha20 stream keyed by 256 bits from the OS (:class:`~ldpcli.math._counter_rng.CounterGenerator`
    of :func:`~ldpcli.math._chacha20.release_key`: cryptographic, not reproducible); a ``numpy.random.Generator``
    or a ``CounterGenerator``: itself (reproducible only if the caller seeded it: unknown here, None); a
    non-negative int: the root stream of that seed (``numpy.random.default_rng(seed)``, reproducible).
    """
    if rng is None:
        return cast(np.random.Generator, CounterGenerator(release_key())), False
    if isinstance(rng, (np.random.Generator, CounterGenerator)):
        return cast(np.random.Generator, rng), None
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng)), True
    raise TypeError(f"rng must be a numpy.random.Generator, a CounterGenerator, a non-negative int seed or None, "
                    f"got {rng!r}")
