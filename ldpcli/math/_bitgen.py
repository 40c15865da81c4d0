"""Cryptographically secure randomness: ChaCha20 generators with 256-bit keys (randomgen, imported lazily).

numpy's default bit generator, PCG64, is fast and statistically excellent but not cryptographic:
whoever sees enough of its output can in principle compute its 128-bit state, and with it every
other draw of the run (the noise of rows they did not see). A privacy guarantee that rests on the
randomness being unpredictable (the noise of a release, the shuffle of a shuffled release, the
Poisson sample of private training) wants a generator whose output reveals nothing about the rest:
a stream cipher in counter mode.

**The generator.** ``randomgen.ChaCha`` with 20 rounds (Bernstein 2008, "ChaCha, a variant of
Salsa20"; the cipher of RFC 8439), a 256-bit key and a 128-bit block counter from 0. ChaCha20 keyed
uniformly at random is a pseudorandom function: no feasible computation tells its output from
uniform bits, or recovers the key from it. We chose it over randomgen's ``AESCounter`` by measurement
and by what the key can be: on this machine (with AES-NI) AES-CTR drew normals about as fast as PCG64
and ChaCha20 about 2× slower (``benchmarks/rng.py``), but ``AESCounter`` takes a 128-bit key only,
falls back without AES-NI to table-driven software AES (slower and open to cache-timing attacks),
while ChaCha20 is constant-time on every CPU, takes the 256-bit key asked for, and is the generator
of the operating systems' own CSPRNGs (Linux ``getrandom``, OpenBSD ``arc4random``). The release's
cost is measured in ``benchmarks/rng.py`` and stated in the README ("Randomness").

**The key.** With no seed, 32 bytes from the operating system (:func:`secrets.token_bytes`). With a
seed (an int, or a ``numpy.random.SeedSequence`` with its spawn key: how keyed randomness names a
block of rows, :mod:`ldpcli.release._randomness`), the key is

    HMAC-SHA256(key = encode(entropy), message = TAG ‖ encode(spawn key))

where encode writes each integer as its length and its little-endian bytes (an injective encoding,
so two different (entropy, spawn key) pairs never hash the same message under the same key). HMAC-
SHA256 is a PRF (Bellare 2006, "New proofs for NMAC and HMAC"): when the entropy is a secret of 256
bits (a run's root drawn from the OS, :func:`ldpcli.release._randomness.root_seed`), the keys of
different spawn keys are indistinguishable from independent uniform 256-bit keys, and so, ChaCha20
being a PRF, the streams of different blocks are indistinguishable from independent uniform bits,
even to someone who sees all but one of them. We do not key ChaCha through ``SeedSequence``'s own
``generate_state`` (what ``ChaCha(seed=...)`` does): its mixing is a fast non-cryptographic hash of a
128-bit pool, which neither carries 256 bits of entropy nor makes one block's key unpredictable
from another's. A seeded generator is only as secret as its seed: seeded runs are for tests and
reproductions, never for release.

- :func:`secure_generator` (seed) → a ``numpy.random.Generator`` on ChaCha20, keyed as above;
- :func:`secure_key` (seed) → its 32-byte key (never written anywhere);
- :func:`describe_generator` (generator, seeded=) → what a sidecar records of a generator: never its key or seed;
- :func:`require_randomgen` → :class:`~ldpcli.errors.MissingDependency` with the install line.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import numpy as np

from ldpcli.errors import MissingDependency, install_hint

#: The secure generator: randomgen's class, its rounds (20: full ChaCha20) and its key size.
SECURE_BIT_GENERATOR = "ChaCha"
ROUNDS = 20
KEY_BYTES = 32
#: Domain separation: the message of every derived key starts with this tag (a new tag, new keys).
KEY_TAG = b"ldp/chacha20-key/v1"
#: ``describe_generator``'s ``entropy``: where the generator's key or state came from, in words.
ENTROPY_FROM_OS = "from the OS"
ENTROPY_FROM_USER = "chosen by the user: not for release"


def require_randomgen() -> ModuleType:
    """The ``randomgen`` package; :class:`MissingDependency` naming ``pip install 'ldp[secure]'`` if absent."""
    try:
        import randomgen
    except ImportError:
        raise MissingDependency(
            "cryptographically secure randomness (ChaCha20) needs the randomgen package, which is not "
            f"installed: {install_hint('secure')}"
        ) from None
    return randomgen


def _encode(numbers: Iterable[int]) -> bytes:
    """Each non-negative integer as one byte of length and its little-endian bytes (injective)."""
    out = bytearray()
    for number in numbers:
        raw = int(number).to_bytes(max(1, (int(number).bit_length() + 7) // 8), "little")
        if len(raw) > 255:
            raise ValueError(f"an integer of {len(raw)} bytes is too long to key a generator")
        out += bytes([len(raw)]) + raw
    return bytes(out)


def secure_key(seed: int | np.random.SeedSequence | None = None) -> bytes:
    """The 32-byte ChaCha20 key of :func:`secure_generator` (``seed``): see the module's docstring.

    None: :func:`secrets.token_bytes` (the OS). An int: the key of ``SeedSequence(seed)``. A
    ``SeedSequence``: HMAC-SHA256 of its spawn key under its entropy, so every spawned child
    (``seq.spawn``, or ``SeedSequence(entropy, spawn_key=...)``) has its own independent key.
    """
    if seed is None:
        return secrets.token_bytes(KEY_BYTES)
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        if seed < 0:
            raise ValueError(f"`seed` must be a non-negative integer, got {seed}")
        seed = np.random.SeedSequence(int(seed))
    if not isinstance(seed, np.random.SeedSequence):
        raise TypeError(f"`seed` must be an int, a numpy.random.SeedSequence or None, got {seed!r}")
    entropy = seed.entropy
    assert entropy is not None  # numpy's SeedSequence always fills it (from the OS when not given)
    words = [entropy] if isinstance(entropy, (int, np.integer)) else list(entropy)
    return hmac.digest(_encode(words), KEY_TAG + _encode(seed.spawn_key), hashlib.sha256)


def secure_generator(seed: int | np.random.SeedSequence | None = None) -> np.random.Generator:
    """A ``numpy.random.Generator`` on ChaCha20 (20 rounds) keyed by :func:`secure_key` (``seed``).

    Without a seed its 256-bit key comes from the OS: the generator for every draw a privacy claim
    rests on (a release's noise under ``rng="secure"``, a shuffle's permutation, Poisson sampling).
    With one it is reproducible, and exactly as secret as the seed. MissingDependency (with
    ``pip install 'ldp[secure]'``) when randomgen is not installed.
    """
    randomgen = require_randomgen()
    key = int.from_bytes(secure_key(seed), "little")
    return np.random.Generator(randomgen.ChaCha(key=key, counter=0, rounds=ROUNDS))


def describe_generator(generator: np.random.Generator, *, seeded: bool) -> dict[str, Any]:
    """What a release records of ``generator``: never its key, seed or state.

    ``bit_generator`` (the class: "PCG64", "ChaCha"), ``package`` and ``version`` (numpy's or
    randomgen's), ``rounds`` (ChaCha only), ``cryptographic`` (True only for ChaCha with at least 20
    rounds), and ``entropy``: "from the OS" or, when ``seeded`` (the caller gave a seed), "chosen by
    the user: not for release".
    """
    bit_generator = generator.bit_generator
    kind = type(bit_generator)
    package = kind.__module__.split(".")[0]
    record: dict[str, Any] = {
        "bit_generator": kind.__name__,
        "package": package,
        "version": str(getattr(sys.modules[package], "__version__", "unknown")),
    }
    rounds = bit_generator.state["state"].get("rounds") if kind.__name__ == SECURE_BIT_GENERATOR else None
    if rounds is not None:
        record["rounds"] = int(rounds)
    record["cryptographic"] = bool(package == "randomgen" and rounds is not None and rounds >= ROUNDS)
    record["entropy"] = ENTROPY_FROM_USER if seeded else ENTROPY_FROM_OS
    return record
