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

**The key.** :func:`ldpcli.math._chacha20.secure_key` (seed): 32 bytes from the operating system, or
HMAC-SHA256-derived from a seed's ``SeedSequence`` (the key of every block of rows, the same for this generator
and ldp's own ChaCha20 stream). A seeded generator is only as secret as its seed: seeded runs are for tests and
reproductions, never for release.

- :func:`secure_generator` (seed) → a ``numpy.random.Generator`` on ChaCha20, keyed as above;
- :func:`describe_generator` (generator, seeded=) → what a sidecar records of a generator: never its key or seed;
- :func:`require_randomgen` → :class:`~ldpcli.errors.MissingDependency` with the install line.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import numpy as np

from ldpcli.errors import MissingDependency, install_hint
from ldpcli.math._chacha20 import secure_key

#: The secure generator: randomgen's class and its rounds (20: full ChaCha20).
SECURE_BIT_GENERATOR = "ChaCha"
ROUNDS = 20
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


def secure_generator(seed: int | np.random.SeedSequence | None = None) -> np.random.Generator:
    """A ``numpy.random.Generator`` on ChaCha20 (20 rounds) keyed by :func:`ldpcli.math._chacha20.secure_key` (``seed``).

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
