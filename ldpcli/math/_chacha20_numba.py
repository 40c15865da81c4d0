"""The ChaCha20 stream of :mod:`ldpcli.math._chacha20`, compiled by numba (imported only when numba is installed).

The same bits as the numpy reference for the same (key, stream, row key, position), one row per
``prange`` iteration: every value depends on its address alone, so the thread count and the rows
computed together change nothing. The rare branches of the ziggurat call the reference's own
:func:`~ldpcli.math._chacha20.exp_reduced` and :func:`~ldpcli.math._chacha20.log_reduced`, compiled
from the same source without ``fastmath`` (LLVM then neither contracts a × b + c into an FMA nor
reorders, so each operation rounds as numpy's does); the power-of-two scaling (``math.frexp``,
``math.ldexp``) is exact. Use :func:`words`, :func:`uniforms` and :func:`normals`, which take the
key as bytes and check their arguments as the reference does.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ldpcli.math import _chacha20 as ref

_exp_reduced = numba.njit(cache=True, nogil=True, inline="always")(ref.exp_reduced)
_log_reduced = numba.njit(cache=True, nogil=True, inline="always")(ref.log_reduced)
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


@numba.njit(cache=True, nogil=True)
def _block(k: np.ndarray, counter: int, n0: int, n1: int, n2: int, out: np.ndarray) -> None:
    """``out`` (8 uint64) := the ChaCha20 block of (key words k, counter, nonce) read as little-endian words."""
    i0, i1, i2, i3 = np.uint32(0x61707865), np.uint32(0x3320646E), np.uint32(0x79622D32), np.uint32(0x6B206574)
    i12, i13, i14, i15 = np.uint32(counter), np.uint32(n0), np.uint32(n1), np.uint32(n2)
    x0, x1, x2, x3 = i0, i1, i2, i3
    x4, x5, x6, x7, x8, x9, x10, x11 = k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7]
    x12, x13, x14, x15 = i12, i13, i14, i15
    for _ in range(10):
        x0, x4, x8, x12 = _qr(x0, x4, x8, x12)
        x1, x5, x9, x13 = _qr(x1, x5, x9, x13)
        x2, x6, x10, x14 = _qr(x2, x6, x10, x14)
        x3, x7, x11, x15 = _qr(x3, x7, x11, x15)
        x0, x5, x10, x15 = _qr(x0, x5, x10, x15)
        x1, x6, x11, x12 = _qr(x1, x6, x11, x12)
        x2, x7, x8, x13 = _qr(x2, x7, x8, x13)
        x3, x4, x9, x14 = _qr(x3, x4, x9, x14)
    s = (x0 + i0, x1 + i1, x2 + i2, x3 + i3, x4 + k[0], x5 + k[1], x6 + k[2], x7 + k[3],
         x8 + k[4], x9 + k[5], x10 + k[6], x11 + k[7], x12 + i12, x13 + i13, x14 + i14, x15 + i15)
    for t in range(8):
        out[t] = np.uint64(np.uint32(s[2 * t])) | (np.uint64(np.uint32(s[2 * t + 1])) << np.uint64(32))


@numba.njit(cache=True, nogil=True, parallel=True)
def _words(k: np.ndarray, rows: np.ndarray, stream: int, out: np.ndarray) -> None:
    n, count = out.shape
    for i in numba.prange(n):
        buf = np.empty(8, dtype=np.uint64)
        row = rows[i]
        for c in range((count + 7) // 8):
            _block(k, c, stream << 16, row & _LOW, row >> _HIGH, buf)
            for t in range(min(8, count - 8 * c)):
                out[i, 8 * c + t] = buf[t]


@numba.njit(cache=True, nogil=True)
def _soft_exp(x: float) -> float:
    k = math.floor(x * _LN2_INV + 0.5)
    return math.ldexp(_exp_reduced(x, k), int(k))


@numba.njit(cache=True, nogil=True)
def _soft_log(x: float) -> float:
    m, e = math.frexp(x)
    if m < _SQRT_HALF:
        m, e = m + m, e - 1
    return _log_reduced(m, float(e))


@numba.njit(cache=True, nogil=True)
def _uniform(w: np.uint64) -> float:
    return float(w >> np.uint64(11)) * _TWO_M53


@numba.njit(cache=True, nogil=True)
def _resolve(
    k: np.ndarray, stream: int, row: int, position: int, w: np.uint64, zw: np.ndarray, zk: np.ndarray,
    zf: np.ndarray, r: float, inv_r: float, extra: np.ndarray,
) -> float:
    """The normal of a word that missed its layer's core (tail, wedge, new attempts), from the extra words
    of (row, position) in the reference's order (``_chacha20._resolve``)."""
    used = 8
    block = -1
    while True:
        layer = np.int64(w & np.uint64(255))
        bits = w >> np.uint64(11)
        x = float(bits) * zw[layer]
        negative = (w >> np.uint64(8)) & np.uint64(1)
        if bits < zk[layer]:
            return -x if negative else x
        if layer == 0:
            while True:
                if used == 8:
                    block += 1
                    _block(k, position, (stream << 16) + 1 + block, row & _LOW, row >> _HIGH, extra)
                    used = 0
                u1 = _uniform(extra[used])
                used += 1
                if used == 8:
                    block += 1
                    _block(k, position, (stream << 16) + 1 + block, row & _LOW, row >> _HIGH, extra)
                    used = 0
                u2 = _uniform(extra[used])
                used += 1
                a = -_soft_log(1.0 - u1) * inv_r
                b = -_soft_log(1.0 - u2)
                if b + b > a * a:
                    return -(r + a) if negative else r + a
        if used == 8:
            block += 1
            _block(k, position, (stream << 16) + 1 + block, row & _LOW, row >> _HIGH, extra)
            used = 0
        y = zf[layer] + _uniform(extra[used]) * (zf[layer + 1] - zf[layer])
        used += 1
        if y < _soft_exp(-0.5 * x * x):
            return -x if negative else x
        if used == 8:
            block += 1
            _block(k, position, (stream << 16) + 1 + block, row & _LOW, row >> _HIGH, extra)
            used = 0
        w = extra[used]
        used += 1


@numba.njit(cache=True, nogil=True, parallel=True)
def _normals(
    k: np.ndarray, rows: np.ndarray, stream: int, zw: np.ndarray, zk: np.ndarray, zf: np.ndarray, r: float,
    inv_r: float, out: np.ndarray,
) -> None:
    n, count = out.shape
    for i in numba.prange(n):
        buf = np.empty(8, dtype=np.uint64)
        extra = np.empty(8, dtype=np.uint64)
        row = rows[i]
        for c in range((count + 7) // 8):
            _block(k, c, stream << 16, row & _LOW, row >> _HIGH, buf)
            for t in range(min(8, count - 8 * c)):
                w = buf[t]
                layer = w & np.uint64(255)
                bits = w >> np.uint64(11)
                if bits < zk[layer]:
                    x = float(bits) * zw[layer]
                    out[i, 8 * c + t] = -x if (w >> np.uint64(8)) & np.uint64(1) else x
                else:
                    out[i, 8 * c + t] = _resolve(k, stream, row, 8 * c + t, w, zw, zk, zf, r, inv_r, extra)


def words(key: bytes, rows: np.ndarray | list[int], count: int, *, stream: int = 0) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_words`, compiled."""
    rows = ref._check(rows, count, stream)
    out = np.empty((rows.shape[0], count), dtype=np.uint64)
    _words(ref.key_words(key), rows, stream, out)
    return out


def uniforms(key: bytes, rows: np.ndarray | list[int], count: int, *, stream: int = 0) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_uniforms`, compiled (the word → double map is one exact step)."""
    return ref.word_uniforms(words(key, rows, count, stream=stream))


def normals(key: bytes, rows: np.ndarray | list[int], count: int, *, stream: int = 0) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_normals`, compiled: the same bits."""
    rows = ref._check(rows, count, stream)
    out = np.empty((rows.shape[0], count))
    z = ref.ZIGGURAT
    _normals(ref.key_words(key), rows, stream, z.w, z.k, z.f, z.r, z.inv_r, out)
    return out
