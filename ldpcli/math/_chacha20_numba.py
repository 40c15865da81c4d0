"""The ChaCha20 stream of :mod:`ldpcli.math._chacha20`, compiled by numba (imported only when numba is installed).

The same bits as the numpy reference for the same (key, stream, row key, position), one row at a time:
on the calling thread (the default: a release already runs one key block per thread, and waking numba's
pool for every small draw costs more than the draw), or with ``parallel=True`` one row per ``prange``
iteration on numba's threads. Every value depends on its address alone, so the thread count and the rows
computed together change nothing. The rare branches of the ziggurat call the reference's own
:func:`~ldpcli.math._chacha20.exp_reduced` and :func:`~ldpcli.math._chacha20.log_reduced`, compiled
from the same source without ``fastmath`` (LLVM then neither contracts a × b + c into an FMA nor
reorders, so each operation rounds as numpy's does); the power-of-two scaling (``math.frexp``,
``math.ldexp``) is exact. Use :func:`words`, :func:`uniforms` and :func:`normals`, which take the
key as bytes and check their arguments as the reference does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import numba
import numpy as np

from ldpcli.math import _chacha20 as ref

#: The reference's own polynomials compiled (typed for doubles here: numba's stubs lose the TypeVar).
_Poly = Callable[[float, float], float]
_exp_reduced = cast(_Poly, numba.njit(cache=True, nogil=True, inline="always")(ref.exp_reduced))
_log_reduced = cast(_Poly, numba.njit(cache=True, nogil=True, inline="always")(ref.log_reduced))
_LN2_INV = ref._INV_LN2
_SQRT_HALF = ref._SQRT_HALF
_TWO_M53 = 2.0**-53
_LOW = np.uint64(0xFFFFFFFF)
_HIGH = np.uint64(32)


@numba.njit(cache=True, nogil=True, inline="always")
def _qr(a: int, b: int, c: int, d: int) -> tuple[int, int, int, int]:
    """RFC 8439 §2.1 on four uint32 words."""
    a = np.uint32(a + b)
    d = np.uint32(d ^ a)
    d = np.uint32((d << np.uint32(16)) | (d >> np.uint32(16)))
    c = np.uint32(c + d)
    b = np.uint32(b ^ c)
    b = np.uint32((b << np.uint32(12)) | (b >> np.uint32(20)))
    a = np.uint32(a + b)
    d = np.uint32(d ^ a)
    d = np.uint32((d << np.uint32(8)) | (d >> np.uint32(24)))
    c = np.uint32(c + d)
    b = np.uint32(b ^ c)
    b = np.uint32((b << np.uint32(7)) | (b >> np.uint32(25)))
    return a, b, c, d


#: Blocks computed side by side (consecutive counters of one row): 16 lanes of uint32 fill AVX2/AVX-512 registers.
LANES = 16


@numba.njit(cache=True, nogil=True)
def _blocks(
    k: np.ndarray, counters: np.ndarray, n0: int, n1: int, n2: int, init: np.ndarray, st: np.ndarray, out: np.ndarray,
) -> None:
    """``out[t, lane]`` (uint64, (8, LANES)) := word t of the ChaCha20 block of ``counters[lane]`` and one nonce
    under key words k, read as little-endian 64-bit words (scratch: ``init`` 16 and ``st`` (16, LANES) uint32).

    Always all :data:`LANES` blocks, the lane loop innermost with a constant trip count, so LLVM vectorises it
    whole (one quarter round on 8 or 16 blocks per instruction, no scalar remainder): 16 blocks cost less than
    a few blocks one at a time, so callers needing fewer compute 16 and use what they need.
    """
    lanes = LANES
    init[0], init[1], init[2], init[3] = 0x61707865, 0x3320646E, 0x79622D32, 0x6B206574
    init[4:12] = k
    init[13], init[14], init[15] = n0, n1, n2
    for j in range(16):
        for lane in range(lanes):
            st[j, lane] = init[j]
    for lane in range(lanes):
        st[12, lane] = counters[lane]
    for _ in range(10):
        for lane in range(lanes):
            x0, x1, x2, x3 = st[0, lane], st[1, lane], st[2, lane], st[3, lane]
            x4, x5, x6, x7 = st[4, lane], st[5, lane], st[6, lane], st[7, lane]
            x8, x9, x10, x11 = st[8, lane], st[9, lane], st[10, lane], st[11, lane]
            x12, x13, x14, x15 = st[12, lane], st[13, lane], st[14, lane], st[15, lane]
            x0, x4, x8, x12 = _qr(x0, x4, x8, x12)
            x1, x5, x9, x13 = _qr(x1, x5, x9, x13)
            x2, x6, x10, x14 = _qr(x2, x6, x10, x14)
            x3, x7, x11, x15 = _qr(x3, x7, x11, x15)
            x0, x5, x10, x15 = _qr(x0, x5, x10, x15)
            x1, x6, x11, x12 = _qr(x1, x6, x11, x12)
            x2, x7, x8, x13 = _qr(x2, x7, x8, x13)
            x3, x4, x9, x14 = _qr(x3, x4, x9, x14)
            st[0, lane], st[1, lane], st[2, lane], st[3, lane] = x0, x1, x2, x3
            st[4, lane], st[5, lane], st[6, lane], st[7, lane] = x4, x5, x6, x7
            st[8, lane], st[9, lane], st[10, lane], st[11, lane] = x8, x9, x10, x11
            st[12, lane], st[13, lane], st[14, lane], st[15, lane] = x12, x13, x14, x15
    for j in range(16):
        if j != 12:
            for lane in range(lanes):
                st[j, lane] += init[j]
    for lane in range(lanes):
        st[12, lane] += np.uint32(counters[lane])
    for t in range(8):
        for lane in range(lanes):
            out[t, lane] = np.uint64(st[2 * t, lane]) | (np.uint64(st[2 * t + 1, lane]) << np.uint64(32))


@numba.njit(cache=True, nogil=True)
def _words_row(k: np.ndarray, rows: np.ndarray, stream: int, out: np.ndarray, i: int) -> None:
    """Row i of :func:`words`: its blocks 16 at a time, read as little-endian 64-bit words."""
    count = out.shape[1]
    blocks = (count + 7) // 8
    st = np.empty((16, LANES), dtype=np.uint32)
    init = np.empty(16, dtype=np.uint32)
    buf = np.empty((8, LANES), dtype=np.uint64)
    counters = np.empty(LANES, dtype=np.uint32)
    row = rows[i]
    for first in range(0, blocks, LANES):
        lanes = min(LANES, blocks - first)
        for lane in range(LANES):
            counters[lane] = first + lane
        _blocks(k, counters, stream << 16, row & _LOW, row >> _HIGH, init, st, buf)
        for t in range(min(8 * lanes, count - 8 * first)):
            out[i, 8 * first + t] = buf[t % 8, t // 8]


@numba.njit(cache=True, nogil=True)
def _words(k: np.ndarray, rows: np.ndarray, stream: int, out: np.ndarray) -> None:
    for i in range(out.shape[0]):
        _words_row(k, rows, stream, out, i)


@numba.njit(cache=True, nogil=True, parallel=True)
def _words_parallel(k: np.ndarray, rows: np.ndarray, stream: int, out: np.ndarray) -> None:
    for i in numba.prange(out.shape[0]):
        _words_row(k, rows, stream, out, i)


@numba.njit(cache=True, nogil=True)
def _soft_exp(x: float) -> float:
    k = math.floor(x * _LN2_INV + 0.5)
    return math.ldexp(_exp_reduced(x, float(k)), int(k))


@numba.njit(cache=True, nogil=True)
def _soft_log(x: float) -> float:
    m, e = math.frexp(x)
    if m < _SQRT_HALF:
        m, e = m + m, e - 1
    return _log_reduced(m, float(e))


@numba.njit(cache=True, nogil=True, inline="always")
def _uniform(w: np.uint64) -> float:
    return float(np.int64(w >> np.uint64(11))) * _TWO_M53


@numba.njit(cache=True, nogil=True, inline="always")
def _extra(
    k: np.ndarray, stream: int, row: np.uint64, position: int, extra: np.ndarray, col: int, used: int, block: int,
    scratch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.uint64, int, int]:
    """(the next extra word of (row, position), used, block) from ``extra[:, col]``, which holds attempt block
    ``block``: the next attempt block there when its 8 words are spent (``scratch``: counters, init, state and
    an (8, LANES) output for :func:`_blocks`)."""
    if used == 8:
        block += 1
        counters, init, st, spare = scratch
        counters[0] = position
        _blocks(k, counters, (stream << 16) + 1 + block, row & _LOW, row >> _HIGH, init, st, spare)
        extra[:, col] = spare[:, 0]
        used = 0
    return extra[used, col], used + 1, block


@numba.njit(cache=True, nogil=True)
def _resolve(
    k: np.ndarray, stream: int, row: np.uint64, position: int, w: np.uint64, zw: np.ndarray, zk: np.ndarray,
    zf: np.ndarray, r: float, inv_r: float, extra: np.ndarray, col: int,
    scratch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> float:
    """The normal of a word that missed its layer's core (tail, wedge, new attempts), from the extra words
    of (row, position) in the reference's order (``_chacha20._resolve``); ``extra[:, col]`` holds attempt block 0."""
    used, block = 0, 0
    while True:
        layer = np.int64(w & np.uint64(255))
        bits = w >> np.uint64(11)
        x = float(np.int64(bits)) * zw[layer]
        negative = (w >> np.uint64(8)) & np.uint64(1)
        if bits < zk[layer]:
            return -x if negative else x
        if layer == 0:
            while True:
                e1, used, block = _extra(k, stream, row, position, extra, col, used, block, scratch)
                e2, used, block = _extra(k, stream, row, position, extra, col, used, block, scratch)
                a = -_soft_log(1.0 - _uniform(e1)) * inv_r
                b = -_soft_log(1.0 - _uniform(e2))
                if b + b > a * a:
                    return -(r + a) if negative else r + a
        e1, used, block = _extra(k, stream, row, position, extra, col, used, block, scratch)
        y = zf[layer] + _uniform(e1) * (zf[layer + 1] - zf[layer])
        if y < _soft_exp(-0.5 * x * x):
            return -x if negative else x
        w, used, block = _extra(k, stream, row, position, extra, col, used, block, scratch)


@numba.njit(cache=True, nogil=True)
def _normals_row(
    k: np.ndarray, rows: np.ndarray, stream: int, zw: np.ndarray, zk: np.ndarray, zf: np.ndarray, r: float,
    inv_r: float, out: np.ndarray, i: int,
) -> None:
    """Row i of :func:`normals`: the ziggurat's core on every word without branches (16 blocks at a time), the
    misses (about 1.5 %) listed; then their first attempt blocks 16 at a time, and :func:`_resolve` on each."""
    count = out.shape[1]
    blocks = (count + 7) // 8
    counters = np.empty(LANES, dtype=np.uint32)
    init = np.empty(16, dtype=np.uint32)
    st = np.empty((16, LANES), dtype=np.uint32)
    buf = np.empty((8, LANES), dtype=np.uint64)
    scratch = (counters, init, st, np.empty((8, LANES), dtype=np.uint64))
    missed_at = np.empty(count, dtype=np.int64)
    missed_word = np.empty(count, dtype=np.uint64)
    row = rows[i]
    missed = 0
    for first in range(0, blocks, LANES):
        lanes = min(LANES, blocks - first)
        for lane in range(LANES):
            counters[lane] = first + lane
        _blocks(k, counters, stream << 16, row & _LOW, row >> _HIGH, init, st, buf)
        for t in range(min(8 * lanes, count - 8 * first)):  # ±k·W[layer] (×±1 is exact)
            w = buf[t % 8, t // 8]
            layer = w & np.uint64(255)
            bits = w >> np.uint64(11)
            sign = 1.0 - 2.0 * float(np.int64((w >> np.uint64(8)) & np.uint64(1)))
            out[i, 8 * first + t] = float(np.int64(bits)) * zw[layer] * sign
            missed_at[missed] = 8 * first + t
            missed_word[missed] = w
            missed += bits >= zk[layer]
    for first in range(0, missed, LANES):
        lanes = min(LANES, missed - first)
        for lane in range(LANES):
            counters[lane] = missed_at[first + lane] if lane < lanes else 0
        _blocks(k, counters, (stream << 16) + 1, row & _LOW, row >> _HIGH, init, st, buf)
        for lane in range(lanes):
            at = missed_at[first + lane]
            out[i, at] = _resolve(k, stream, row, at, missed_word[first + lane], zw, zk, zf, r, inv_r, buf, lane,
                                  scratch)


@numba.njit(cache=True, nogil=True)
def _normals(
    keys: np.ndarray, rows: np.ndarray, stream: int, zw: np.ndarray, zk: np.ndarray, zf: np.ndarray, r: float,
    inv_r: float, out: np.ndarray,
) -> None:
    """Row i under key words ``keys[i]``, or ``keys[0]`` for every row when ``keys`` holds one key."""
    for i in range(out.shape[0]):
        _normals_row(keys[i % keys.shape[0]], rows, stream, zw, zk, zf, r, inv_r, out, i)


@numba.njit(cache=True, nogil=True, parallel=True)
def _normals_parallel(
    keys: np.ndarray, rows: np.ndarray, stream: int, zw: np.ndarray, zk: np.ndarray, zf: np.ndarray, r: float,
    inv_r: float, out: np.ndarray,
) -> None:
    for i in numba.prange(out.shape[0]):
        _normals_row(keys[i % keys.shape[0]], rows, stream, zw, zk, zf, r, inv_r, out, i)


def words(
    key: bytes, rows: np.ndarray | list[int], count: int, *, stream: int = 0, parallel: bool = False,
) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_words`, compiled: on this thread, or ``parallel`` on numba's threads."""
    rows = ref._check(rows, count, stream)
    out = np.empty((rows.shape[0], count), dtype=np.uint64)
    (_words_parallel if parallel else _words)(ref.key_words(key), rows, stream, out)
    return out


def uniforms(
    key: bytes, rows: np.ndarray | list[int], count: int, *, stream: int = 0, parallel: bool = False,
) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_uniforms`, compiled (the word → double map is one exact step)."""
    return ref.word_uniforms(words(key, rows, count, stream=stream, parallel=parallel))


def normals(
    key: ref.Keys, rows: np.ndarray | list[int], count: int, *, stream: int = 0,
    tables: ref.Ziggurat = ref.ZIGGURAT, parallel: bool = False,
) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_normals`, compiled: the same bits (``tables`` as there), on this
    thread or ``parallel`` on numba's threads; ``key`` one key, or an (n, 8) uint32 array of one key per row."""
    rows = ref._check(rows, count, stream, key)
    out = np.empty((rows.shape[0], count))
    keys = ref.key_words(key)[None, :] if isinstance(key, bytes) else np.ascontiguousarray(key)
    (_normals_parallel if parallel else _normals)(keys, rows, stream, tables.w, tables.k, tables.f, tables.r,
                                                  tables.inv_r, out)
    return out
