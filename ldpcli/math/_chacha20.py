"""One counter-based cryptographic stream for all noise: ChaCha20 (RFC 8439), addressed by (row key, position).

This is the numpy reference; :mod:`ldpcli.math._chacha20_numba` computes the same bits compiled
(``pip install 'ldp[fast]'``). Nothing here depends on how many rows are computed at once, in which
order or on how many threads: every output value is a function of (key, stream, row key, position)
alone. The page ``docs/explanation/random-stream.md`` states the same specification in words.

**The block function.** ChaCha20 exactly as RFC 8439 §2.3 (Bernstein 2008, "ChaCha, a variant of
Salsa20"; 20 rounds, 10 column and 10 diagonal double rounds): a 4×4 state of 32-bit words
``"expand 32-byte k"`` ‖ key (8 words, little-endian) ‖ block counter (1 word) ‖ nonce (3 words),
and the output is the rounds' result plus the input state. :func:`chacha20_blocks` computes many
blocks at once, shaped (n_blocks, 16), each quarter round on whole columns of uint32.

**The key.** One 256-bit key per release: :func:`release_key` (None) is 32 bytes of
:func:`os.urandom`. With a seed it is ``SHA-256("ldp-seed-v1" ‖ encode(seed))`` (``encode``: the
injective length-prefixed little-endian bytes of a block's key, below): reproducible, and
exactly as secret as the seed, so never for release.

**A block's key.** :func:`secure_key` (seed). With no seed, 32 bytes from the operating system
(:func:`secrets.token_bytes`). With a seed (an int, or a ``numpy.random.SeedSequence`` with its spawn key: how keyed randomness names a
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
from another's. A seeded key is only as secret as its seed: seeded runs are for tests and
reproductions, never for release.

**Addressing.** A draw is named by a 16-bit ``stream`` (which kind of noise: normals of a
direction, rounding flips, ...: chosen by the caller), a 64-bit ``row`` key and a ``position``
within the row. Its 64-bit word is word ``position mod 8`` (the keystream's bytes 8·(position mod 8)
onwards, read little-endian) of the block with

    nonce = (stream·2¹⁶ + 0, row mod 2³², row div 2³²),   counter = position div 8,

so one block gives 8 consecutive positions (positions < 2³⁵). The extra words a rejection sampler
needs at (row, position) come from the blocks with nonce ``(stream·2¹⁶ + 1 + b, row mod 2³², row div
2³²)`` and counter = position (b = 0, 1, ...: 8 extra words each; positions < 2³² here), taken in
order. Two different (stream, attempt-block, row, counter) never share a block, so all words are
disjoint pieces of one PRF's output: indistinguishable from independent uniform bits for a key
drawn from the OS.

**Uniforms.** A word w gives the double (w >> 11)·2⁻⁵³ ∈ [0, 1): all 2⁵³ multiples of 2⁻⁵³
equally likely, the same grid as numpy's ``Generator.random`` (so ``u < p`` tests stay exact on
it). Where a logarithm needs (0, 1] the sampler uses 1 − u, which is exact on that grid.

**Normals.** The Marsaglia–Tsang ziggurat (Marsaglia & Tsang 2000, "The ziggurat method for
generating random variables", J. Stat. Softw. 5(8)) with 256 layers of equal area, tables built
once in Python (:data:`ZIGGURAT`) and used by both paths: word w gives the layer i = w & 255, the
sign (bit 8) and a 53-bit integer k = w >> 11; x = k·W[i]. When k < K[i] (about 99 % of words) x
is inside the layer's core and ±x is the normal, from the position's own word. Otherwise: in the
base layer (i = 0) Marsaglia's tail sampler (a = −log(u₁)/r, b = −log(u₂), accept when 2b > a²,
return r + a), in the others the wedge test F[i] + u·(F[i+1] − F[i]) < exp(−x²/2), and on
rejection a new word; all from the position's extra words. The exp and log of these rare branches
are computed by :func:`soft_exp` and :func:`soft_log` from +, −, ×, ÷ and exact power-of-two
scaling (fdlibm's e_exp.c and e_log.c polynomials, Horner in a fixed order), never by the
platform's libm: numpy's SIMD loops and LLVM's libm may differ by an ulp, these do not. So the
numpy and numba paths agree bit for bit, and the law is the exact ziggurat's law (to the 53-bit
grid and the < 1 ulp error of exp/log in the rare wedge and tail tests).

- :func:`release_key` (seed) → 32 bytes; :func:`secure_key` (seed) → a block's 32 bytes; :func:`key_words` (key) → its
  eight uint32 words;
- :func:`chacha20_blocks` (key, counters, nonces) → (n, 16) uint32 keystream blocks;
- :func:`stream_words` (key, rows, count, stream=) → (n, count) uint64 words of positions 0..count−1;
- :func:`stream_uniforms` (key, rows, count, stream=) → (n, count) doubles in [0, 1);
- :func:`stream_normals` (key, rows, count, stream=) → (n, count) standard normals;
- :func:`ldpcli.math._counter_rng.normals` and :func:`ldpcli.math._counter_rng.uniforms`: the same, by the compiled kernel
  when :mod:`ldpcli.math._kernels` chooses numba, else by this reference: the same bits either way.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
from collections.abc import Iterable
from typing import NamedTuple, TypeVar

import numpy as np

#: "expand 32-byte k" as four little-endian words (RFC 8439 §2.3).
CONSTANTS = np.array([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574], dtype=np.uint32)
#: Domain separation of a seed's key: a new tag, new keys.
SEED_TAG = b"ldp-seed-v1"
#: A ChaCha20 key's size (256 bits).
KEY_BYTES = 32
#: Domain separation: the message of every derived block key starts with this tag (a new tag, new keys).
KEY_TAG = b"ldp/chacha20-key/v1"
#: 64-bit words per 64-byte block; streams and attempt blocks are 16-bit fields of nonce word 0.
WORDS_PER_BLOCK = 8
MAX_STREAM = 1 << 16
#: Positions a row can address: the main blocks' 32-bit counter × 8, the extra words' counter = position.
MAX_POSITIONS = 1 << 32
#: Blocks the numpy reference computes at once (16 columns of 2¹⁵ words: 2 MiB of state).
_CHUNK_BLOCKS = 1 << 15
_TWO_M53 = 2.0**-53
#: A double or an array of them: what :func:`exp_reduced` and :func:`log_reduced` compute on.
Real = TypeVar("Real", float, np.ndarray)
#: One key for every row (32 bytes), or one key per row: an (n, 8) uint32 array of key words (a seed's
#: expansion, :mod:`ldpcli.math._seed_prg`, keys each row by its own seed).
Keys = bytes | np.ndarray


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
    """The 32-byte ChaCha20 key of a block of rows (``seed``; :func:`ldpcli.math._bitgen.secure_generator` keys
    randomgen's ChaCha with it too): see the module's docstring.

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


def release_key(seed: int | bytes | None = None) -> bytes:
    """The release's 256-bit key: :func:`os.urandom` (32) with no seed, else SHA-256(SEED_TAG ‖ encode(seed)).

    A seeded key is reproducible and only as secret as the seed: for tests and reproductions, not releases.
    """
    if seed is None:
        return os.urandom(KEY_BYTES)
    if isinstance(seed, bytes):
        return hashlib.sha256(SEED_TAG + _encode([len(seed)]) + seed).digest()
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return hashlib.sha256(SEED_TAG + _encode([int(seed)])).digest()
    raise TypeError(f"`seed` must be a non-negative int, bytes or None, got {seed!r}")


def key_words(key: bytes) -> np.ndarray:
    """The eight little-endian uint32 words of a 32-byte key (state words 4..11)."""
    if len(key) != KEY_BYTES:
        raise ValueError(f"a ChaCha20 key has {KEY_BYTES} bytes, got {len(key)}")
    return np.frombuffer(key, dtype="<u4").astype(np.uint32)


def _rotl(x: np.ndarray, n: int, tmp: np.ndarray) -> None:
    """x := x rotated left by n bits, in place (uint32)."""
    np.left_shift(x, np.uint32(n), out=tmp)
    np.right_shift(x, np.uint32(32 - n), out=x)
    np.bitwise_or(x, tmp, out=x)


def _quarter_round(s: list[np.ndarray], a: int, b: int, c: int, d: int, tmp: np.ndarray) -> None:
    """RFC 8439 §2.1 on columns a, b, c, d of the state, in place (+ wraps mod 2³² in uint32)."""
    for x, y, z, n in ((a, b, d, 16), (c, d, b, 12), (a, b, d, 8), (c, d, b, 7)):
        np.add(s[x], s[y], out=s[x])
        np.bitwise_xor(s[z], s[x], out=s[z])
        _rotl(s[z], n, tmp)


def _select(key: Keys, sel: np.ndarray | slice) -> Keys:
    """The keys of the rows ``sel``: the one key itself, or those rows of a per-row key array."""
    return key if isinstance(key, bytes) else key[sel]


def chacha20_blocks(key: Keys, counters: np.ndarray, nonces: np.ndarray) -> np.ndarray:
    """The ChaCha20 blocks (RFC 8439 §2.3) of ``counters`` (n,) and ``nonces`` (n, 3) under ``key`` (one key, or
    one row of key words per block): (n, 16) uint32."""
    counters = np.asarray(counters, dtype=np.uint32)
    nonces = np.asarray(nonces, dtype=np.uint32).reshape(-1, 3)
    n = counters.shape[0]
    init = np.empty((16, n), dtype=np.uint32)
    init[0:4] = CONSTANTS[:, None]
    init[4:12] = key_words(key)[:, None] if isinstance(key, bytes) else np.asarray(key, dtype=np.uint32).T
    init[12] = counters
    init[13:16] = nonces.T
    work = init.copy()
    s = list(work)
    tmp = np.empty(n, dtype=np.uint32)
    for _ in range(10):
        for a, b, c, d in ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
                           (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)):
            _quarter_round(s, a, b, c, d, tmp)
    work += init
    return np.ascontiguousarray(work.T)


def _nonces(stream: int, attempt_block: int, rows: np.ndarray) -> np.ndarray:
    """(n, 3) nonces (stream·2¹⁶ + attempt block, row low word, row high word)."""
    out = np.empty((rows.shape[0], 3), dtype=np.uint32)
    out[:, 0] = stream * MAX_STREAM + attempt_block
    out[:, 1] = rows & np.uint64(0xFFFFFFFF)
    out[:, 2] = rows >> np.uint64(32)
    return out


def _check(rows: np.ndarray | list[int], count: int, stream: int, key: Keys = b"") -> np.ndarray:
    rows = np.asarray(rows, dtype=np.uint64).reshape(-1)
    if not isinstance(key, bytes) and (key.dtype != np.uint32 or key.shape != (rows.shape[0], 8)):
        raise ValueError(f"per-row keys must be a ({rows.shape[0]}, 8) uint32 array, got {key.dtype} {key.shape}")
    if not 0 <= stream < MAX_STREAM:
        raise ValueError(f"`stream` must be in [0, {MAX_STREAM}), got {stream}")
    if not 0 <= count <= MAX_POSITIONS:
        raise ValueError(f"a row addresses at most {MAX_POSITIONS} positions, asked for {count}")
    return rows


def _as_words(blocks: np.ndarray) -> np.ndarray:
    """(n, 16) uint32 blocks → (n, 8) uint64: keystream bytes read as little-endian 64-bit words."""
    low = blocks[:, 0::2].astype(np.uint64)
    return low | (blocks[:, 1::2].astype(np.uint64) << np.uint64(32))


def stream_words(key: Keys, rows: np.ndarray | list[int], count: int, *, stream: int = 0) -> np.ndarray:
    """(n, count) uint64: the words of positions 0..count−1 of each row key in ``rows`` (main blocks)."""
    rows = _check(rows, count, stream, key)
    per_row = -(-count // WORDS_PER_BLOCK)
    out = np.empty((rows.shape[0], per_row * WORDS_PER_BLOCK), dtype=np.uint64)
    step = max(1, _CHUNK_BLOCKS // max(1, per_row))
    for start in range(0, rows.shape[0], step):
        chunk = rows[start:start + step]
        counters = np.tile(np.arange(per_row, dtype=np.uint32), chunk.shape[0])
        nonces = np.repeat(_nonces(stream, 0, chunk), per_row, axis=0)
        keys = key if isinstance(key, bytes) else np.repeat(key[start:start + step], per_row, axis=0)
        out[start:start + step] = _as_words(chacha20_blocks(keys, counters, nonces)).reshape(chunk.shape[0], -1)
    return out[:, :count]


def word_uniforms(words: np.ndarray) -> np.ndarray:
    """(w >> 11)·2⁻⁵³: doubles in [0, 1) on the grid of numpy's ``Generator.random``."""
    return (words >> np.uint64(11)).astype(np.float64) * _TWO_M53


def stream_uniforms(key: Keys, rows: np.ndarray | list[int], count: int, *, stream: int = 0) -> np.ndarray:
    """(n, count) doubles in [0, 1): :func:`word_uniforms` of :func:`stream_words`."""
    return word_uniforms(stream_words(key, rows, count, stream=stream))


# --- exp and log from IEEE basic operations (fdlibm 5.3, e_exp.c and e_log.c; < 1 ulp) -------------

_LN2_HI = 6.93147180369123816490e-01  # its low 32 bits are zero: k·_LN2_HI is exact for |k| < 2²⁰
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_SQRT_HALF = 0.70710678118654752440
_P1, _P2, _P3 = 1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05
_P4, _P5 = -1.65339022054652515390e-06, 4.13813679705723846039e-08
_LG1, _LG2, _LG3 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01
_LG4, _LG5 = 2.222219843214978396e-01, 1.818357216161805012e-01
_LG6, _LG7 = 1.531383769920937332e-01, 1.479819860511658591e-01


def exp_reduced(x: Real, k: Real) -> Real:
    """exp(x)·2⁻ᵏ for k = floor(x/ln 2 + ½) (fdlibm e_exp.c): +, −, ×, ÷ only, so every path rounds alike.

    Shared verbatim by the numpy path (on arrays) and the numba path (compiled from this function).
    """
    hi = x - k * _LN2_HI
    lo = k * _LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
    return 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)


def log_reduced(m: Real, e: Real) -> Real:
    """log(m·2ᵉ) for m in [√½, √2) (fdlibm e_log.c): +, −, ×, ÷ only; shared by both paths like :func:`exp_reduced`."""
    f = m - 1.0
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
    t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    return e * _LN2_HI - ((hfsq - (s * (hfsq + t2 + t1) + e * _LN2_LO)) - f)


def soft_exp(x: np.ndarray) -> np.ndarray:
    """exp(x) within 1 ulp for −708 ≤ x ≤ 709 (normal results), from :func:`exp_reduced` and exact scaling."""
    x = np.asarray(x, dtype=np.float64)
    k = np.floor(x * _INV_LN2 + 0.5)
    return np.ldexp(exp_reduced(x, k), k.astype(np.int64))


def soft_log(x: np.ndarray) -> np.ndarray:
    """log(x) within 1 ulp for positive normal x, from exact frexp and :func:`log_reduced`."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    low = m < _SQRT_HALF
    return log_reduced(np.where(low, m + m, m), (e - low).astype(np.float64))


# --- the ziggurat ------------------------------------------------------------------------------------

class Ziggurat(NamedTuple):
    """Marsaglia–Tsang tables for 256 layers of f(x) = exp(−x²/2) (module docstring).

    ``x[i]`` the layer's width (x[0] = v/f(r) the base layer's, x[1] = r, x[256] = 0), ``w[i] =
    x[i]·2⁻⁵³``, ``k[i] = ⌊2⁵³·x[i+1]/x[i]⌋`` (the core's bound on the 53-bit integer), ``f[i] =
    f(x[i])`` (f[0] = 0), ``r`` and its inverse.
    """

    x: np.ndarray
    w: np.ndarray
    k: np.ndarray
    f: np.ndarray
    r: float
    inv_r: float


def _ziggurat(layers: int = 256, r: float = 3.6541528853610088, v: float = 4.92867323399e-3) -> Ziggurat:
    """The tables, computed once (Marsaglia & Tsang 2000, §2 and the constants of their 256-layer normal)."""
    def pdf(t: float) -> float:
        return math.exp(-0.5 * t * t)

    x = np.zeros(layers + 1)
    x[0], x[1] = v / pdf(r), r
    for i in range(1, layers - 1):
        x[i + 1] = math.sqrt(-2.0 * math.log(pdf(x[i]) + v / x[i]))
    f = np.array([0.0] + [pdf(t) for t in x[1:]])
    k = np.array([int(2.0**53 * (x[i + 1] / x[i])) for i in range(layers)], dtype=np.uint64)
    return Ziggurat(x=x, w=x[:layers] * _TWO_M53, k=k, f=f, r=r, inv_r=1.0 / r)


ZIGGURAT = _ziggurat()


class _Extras:
    """The extra words of pending (row, position)s, handed out in order (8 per attempt block)."""

    def __init__(self, key: Keys, stream: int, rows: np.ndarray, positions: np.ndarray) -> None:
        self.key, self.stream, self.rows, self.positions = key, stream, rows, positions
        self.words = np.zeros((rows.shape[0], WORDS_PER_BLOCK), dtype=np.uint64)
        self.used = np.full(rows.shape[0], WORDS_PER_BLOCK, dtype=np.int64)
        self.block = np.full(rows.shape[0], -1, dtype=np.int64)

    def take(self, sel: np.ndarray) -> np.ndarray:
        """The next extra word of each pending index in ``sel`` (fetching attempt blocks as they run out)."""
        empty = sel[self.used[sel] == WORDS_PER_BLOCK]
        for b in np.unique(self.block[empty] + 1):
            group = empty[self.block[empty] + 1 == b]
            blocks = chacha20_blocks(_select(self.key, group), self.positions[group].astype(np.uint32),
                                     _nonces(self.stream, 1 + int(b), self.rows[group]))
            self.words[group] = _as_words(blocks)
            self.block[group], self.used[group] = b, 0
        out = self.words[sel, self.used[sel]]
        self.used[sel] += 1
        return out


def _signed(words: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    return np.where((words >> np.uint64(8)) & np.uint64(1), -magnitude, magnitude)


def _resolve(words: np.ndarray, extras: _Extras, z: Ziggurat) -> np.ndarray:
    """The normals of words that missed their layer's core: tail, wedge and new attempts (module docstring)."""
    out = np.empty(words.shape[0])
    pending = np.arange(words.shape[0])
    words = words.copy()
    while pending.size:
        w = words[pending]
        layer = (w & np.uint64(255)).astype(np.int64)
        bits = w >> np.uint64(11)
        x = bits.astype(np.float64) * z.w[layer]
        core = bits < z.k[layer]
        out[pending[core]] = _signed(w[core], x[core])
        tail = pending[~core & (layer == 0)]
        tail_words = words[tail]
        while tail.size:
            a = -soft_log(1.0 - word_uniforms(extras.take(tail))) * z.inv_r
            b = -soft_log(1.0 - word_uniforms(extras.take(tail)))
            ok = b + b > a * a
            out[tail[ok]] = _signed(tail_words[ok], z.r + a[ok])
            tail, tail_words = tail[~ok], tail_words[~ok]
        wedge = ~core & (layer != 0)
        sel, layer, x = pending[wedge], layer[wedge], x[wedge]
        y = z.f[layer] + word_uniforms(extras.take(sel)) * (z.f[layer + 1] - z.f[layer])
        ok = y < soft_exp(-0.5 * x * x)
        out[sel[ok]] = _signed(words[sel[ok]], x[ok])
        pending = sel[~ok]
        words[pending] = extras.take(pending)
    return out


def stream_normals(
    key: Keys, rows: np.ndarray | list[int], count: int, *, stream: int = 0, tables: Ziggurat = ZIGGURAT,
) -> np.ndarray:
    """(n, count) standard normals at positions 0..count−1 of each row key (the ziggurat of the module docstring).

    ``tables``: :data:`ZIGGURAT`; other tables only in tests, to drive the rare branches.
    """
    rows = _check(rows, count, stream, key)
    words = stream_words(key, rows, count, stream=stream)
    z = tables
    layer = (words & np.uint64(255)).astype(np.intp)
    bits = words >> np.uint64(11)
    out = _signed(words, bits.astype(np.float64) * z.w[layer])
    miss_row, miss_pos = np.nonzero(bits >= z.k[layer])
    if miss_row.size:
        extras = _Extras(_select(key, miss_row), stream, rows[miss_row], miss_pos.astype(np.uint64))
        out[miss_row, miss_pos] = _resolve(words[miss_row, miss_pos], extras, z)
    return out

