"""A generator on the counter-based ChaCha20 stream: the draws a mechanism makes, as numpy's ``Generator`` names them.

:mod:`ldpcli.math._chacha20` specifies the stream: every 64-bit word is addressed by (key, stream, row key,
position), so its value does not depend on how many words are computed at once, in which order or on how
many threads. :class:`CounterGenerator` turns that address space into the sequential draws a mechanism's
``privatize`` makes (``random``, ``standard_normal``, ``integers``, ...), so every mechanism runs on it
unchanged, with the numpy reference or the compiled stream computing the bits (:func:`words`, :func:`normals`:
numba's kernel, :mod:`ldpcli.math._chacha20_numba`, when :func:`ldpcli.math._kernels.kernel_name` chooses it, else
the reference; the same bits either way).

**The layout of one generator's draws.** A generator is keyed once (a release keys one per key block of
rows, :mod:`ldpcli.release._randomness`) and keeps two cursors, both starting at 0: one over the words of
stream :data:`WORDS` (uniforms, integers and exponentials: one word a value) and one over the normals of
stream :data:`NORMALS` (the ziggurat: one word a value, plus the extra words of its rare rejections). Flat
position p of a stream is position p mod :data:`ROW_POSITIONS` of row key p div :data:`ROW_POSITIONS`; a
call drawing m values reads the next m positions of its stream. So the values depend on how many of each
kind were drawn before, not on how the draws were split into calls: m normals in one call or in chunks
are the same m normals. Whichever path computes them gives the same bits: the numpy reference and the
numba kernel agree exactly (``tests/math/test_chacha20.py``).
Every word read is a distinct block position of one PRF, so the draws are independent uniform bits for a key
the adversary does not know.

**The laws** (exact on the 53-bit grid of numpy's ``Generator.random``):

- ``random``: (w >> 11)·2⁻⁵³, uniform on the 2⁵³ multiples of 2⁻⁵³ in [0, 1);
- ``standard_normal``: the Marsaglia–Tsang ziggurat of :mod:`ldpcli.math._chacha20`;
- ``integers`` on [low, high): w mod k for k = high − low, redrawn (from the next words of the cursor) when w is at or above
  the largest multiple of k below 2⁶⁴, so every value has probability exactly 1/k;
- ``standard_exponential``: −log(1 − u), with the basic-operation log of :func:`ldpcli.math._chacha20.soft_log`
  (the same bits on every path); ``laplace``: ±scale times an exponential, the sign from a fair integer;
- ``uniform`` and ``normal``: the affine images of ``random`` and ``standard_normal``;
- ``permutation``: the order that sorts n i.i.d. 128-bit keys (two words a position, ties by position), within
  n²/2¹²⁹ of the uniform law on the n! orders in total variation (the probability of a tie bounds the distance).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np

from ldpcli.math import _chacha20
from ldpcli.math._kernels import kernel_name

#: Positions read per row key: small enough that a call wastes little of its last row key, large enough
#: (128 ChaCha blocks) that the compiled stream's per-row work dominates its per-row overhead.
ROW_POSITIONS = 1024
#: The stream of uniform words (``random``, ``integers``, ``standard_exponential``).
WORDS = 0
#: The stream of normals (``standard_normal``).
NORMALS = 1

Size = int | Sequence[int] | None


def normals(key: _chacha20.Keys, rows: np.ndarray | list[int], count: int, *, stream: int = 0) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_normals` by the kernel :func:`ldpcli.math._kernels.kernel_name` chooses
    (the compiled :mod:`ldpcli.math._chacha20_numba`, imported only then, or the numpy reference); ``key`` one key,
    or one per row (an (n, 8) uint32 array of key words)."""
    if kernel_name() == "numba":
        from ldpcli.math import _chacha20_numba

        return _chacha20_numba.normals(key, rows, count, stream=stream)
    return _chacha20.stream_normals(key, rows, count, stream=stream)


def words(key: bytes, rows: np.ndarray | list[int], count: int, *, stream: int = 0) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_words` by the kernel :func:`ldpcli.math._kernels.kernel_name` chooses."""
    if kernel_name() == "numba":
        from ldpcli.math import _chacha20_numba

        return _chacha20_numba.words(key, rows, count, stream=stream)
    return _chacha20.stream_words(key, rows, count, stream=stream)


def uniforms(key: bytes, rows: np.ndarray | list[int], count: int, *, stream: int = 0) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_uniforms`: the exact word → double map of :func:`words` (one step, so
    the same on both paths)."""
    return _chacha20.word_uniforms(words(key, rows, count, stream=stream))


def _shape(size: Size) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


class CounterGenerator:
    """The draws of ``numpy.random.Generator`` that ldp's mechanisms make, from one key of the ChaCha20 stream.

    ``key``: 32 bytes (:func:`ldpcli.math._chacha20.secure_key`, from the OS or derived for a seeded run).
    The draws are those of the module docstring; a draw with ``size=None`` returns a Python float or int.
    Not thread-safe (one generator per key block, as the release uses them).
    """

    def __init__(self, key: bytes) -> None:
        if len(key) != _chacha20.KEY_BYTES:
            raise ValueError(f"a ChaCha20 key is {_chacha20.KEY_BYTES} bytes, got {len(key)}")
        self._key = bytes(key)
        self._next = {WORDS: 0, NORMALS: 0}
        #: Per stream, the row key a call ended inside and a copy of its values: the next call starts there.
        self._partial: dict[int, tuple[int, np.ndarray]] = {}

    def __repr__(self) -> str:
        return f"CounterGenerator(ChaCha20, next words {self._next[WORDS]}, next normals {self._next[NORMALS]})"

    def _take(self, stream: int, count: int) -> np.ndarray:
        """The next ``count`` values of ``stream`` (uint64 words or normals): flat positions
        [c, c + count) of its cursor c, position p being position p mod 1024 of row key p div 1024.

        A call that ends inside a row key keeps a copy of that row's values, so a following call that fits
        in the rest of the row (many small draws) copies them instead of computing the row again: the same
        values, as a row's values depend on its key alone."""
        start = self._next[stream]
        self._next[stream] = start + count
        if count == 0:
            return np.empty(0, dtype=np.uint64 if stream == WORDS else np.float64)
        first, last = start // ROW_POSITIONS, (start + count - 1) // ROW_POSITIONS
        offset = start - first * ROW_POSITIONS
        cached = self._partial.pop(stream, None)
        if cached is not None and cached[0] == first == last:
            values = cached[1]
        else:
            rows = np.arange(first, last + 1, dtype=np.uint64)
            draw = words if stream == WORDS else normals
            values = draw(self._key, rows, ROW_POSITIONS, stream=stream).reshape(-1)
        end = offset + count
        if end % ROW_POSITIONS:  # the call ends inside row key ``last``: the next one starts there
            self._partial[stream] = (last, values if values.size == ROW_POSITIONS else values[-ROW_POSITIONS:].copy())
        return values[offset:end].copy() if values.size == ROW_POSITIONS else values[offset:end]

    def _words(self, count: int) -> np.ndarray:
        """``count`` fresh uniform 64-bit words (stream :data:`WORDS`)."""
        return self._take(WORDS, count)

    def random_raw(self, size: int) -> np.ndarray:
        """``size`` uniform 64-bit words (uint64), as a bit generator's ``random_raw``: the stream's words themselves."""
        return self._words(int(size))

    def _doubles(self, size: Size, out: np.ndarray | None, draw: str) -> tuple[np.ndarray, tuple[int, ...]]:
        shape = _shape(size) if out is None else out.shape
        if out is not None and (size is not None and _shape(size) != out.shape):
            raise ValueError(f"size {size} does not match out's shape {out.shape}")
        count = int(np.prod(shape, dtype=np.int64))
        if draw == "normal":
            values = self._take(NORMALS, count)
        else:
            values = _chacha20.word_uniforms(self._words(count))
        return values, shape

    @staticmethod
    def _deliver(values: np.ndarray, shape: tuple[int, ...], out: np.ndarray | None) -> np.ndarray | float:
        if out is not None:
            out[...] = values.reshape(shape)
            return out
        if shape == ():
            return float(values[0])
        return values.reshape(shape)

    @staticmethod
    def _check_dtype(dtype: object) -> None:
        if np.dtype(dtype) != np.float64:  # type: ignore[call-overload]
            raise TypeError(f"the ChaCha20 stream draws float64, got dtype {dtype}")

    @overload
    def random(self, size: None = None, dtype: object = ..., out: None = None) -> float: ...
    @overload
    def random(self, size: Size = None, dtype: object = ..., out: np.ndarray | None = None) -> np.ndarray: ...

    def random(self, size: Size = None, dtype: object = np.float64, out: np.ndarray | None = None) -> np.ndarray | float:
        """Uniform doubles on the 2⁵³ multiples of 2⁻⁵³ in [0, 1), as ``Generator.random``."""
        self._check_dtype(dtype)
        values, shape = self._doubles(size, out, "uniform")
        return self._deliver(values, shape, out)

    @overload
    def standard_normal(self, size: None = None, dtype: object = ..., out: None = None) -> float: ...
    @overload
    def standard_normal(self, size: Size = None, dtype: object = ..., out: np.ndarray | None = None) -> np.ndarray: ...

    def standard_normal(
        self, size: Size = None, dtype: object = np.float64, out: np.ndarray | None = None,
    ) -> np.ndarray | float:
        """Standard normals by the ziggurat of :mod:`ldpcli.math._chacha20`, as ``Generator.standard_normal``."""
        self._check_dtype(dtype)
        values, shape = self._doubles(size, out, "normal")
        return self._deliver(values, shape, out)

    def standard_exponential(self, size: Size = None) -> np.ndarray | float:
        """−log(1 − u) for u from :meth:`random` (1 − u in (0, 1], exact), the log of basic operations."""
        values, shape = self._doubles(size, None, "uniform")
        return self._deliver(-_chacha20.soft_log(1.0 - values) if values.size else values, shape, None)

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size: Size = None) -> np.ndarray | float:
        """loc ± scale·E, E exponential and the sign a fair coin: the Laplace law of location loc and scale ``scale``."""
        shape = _shape(size)
        magnitude = np.asarray(self.standard_exponential(shape))
        sign = np.asarray(self.integers(0, 2, size=shape)) * 2 - 1
        values = loc + scale * (sign * magnitude)
        return float(values) if shape == () else values

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Size = None) -> np.ndarray | float:
        """low + (high − low)·u, u from :meth:`random`."""
        values = low + (high - low) * np.asarray(self.random(_shape(size)))
        return float(values) if size is None else values

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Size = None) -> np.ndarray | float:
        """loc + scale·z, z from :meth:`standard_normal`."""
        values = loc + scale * np.asarray(self.standard_normal(_shape(size)))
        return float(values) if size is None else values

    def integers(
        self, low: int, high: int | None = None, size: Size = None, dtype: object = np.int64, endpoint: bool = False,
    ) -> np.ndarray | int:
        """Integers uniform on [low, high) (``endpoint``: [low, high]), exactly: w mod k, redrawn above the
        largest multiple of k = high − low below 2⁶⁴ (probability < k/2⁶⁴ a draw)."""
        if high is None:
            low, high = 0, low
        low, high = int(low), int(high) + (1 if endpoint else 0)
        span = high - low
        if not 0 < span <= 1 << 64:
            raise ValueError(f"integers needs 0 < high - low <= 2**64, got low={low}, high={high}")
        out_type = np.dtype(dtype)  # type: ignore[call-overload]
        info = np.iinfo(out_type)
        if low < info.min or high - 1 > info.max:
            raise ValueError(f"[{low}, {high}) does not fit {out_type}")
        shape = _shape(size)
        count = int(np.prod(shape, dtype=np.int64))
        words = self._words(count)
        limit = (1 << 64) - (1 << 64) % span
        if limit < 1 << 64:
            bad = np.flatnonzero(words >= np.uint64(limit))
            while bad.size:
                words[bad] = self._words(int(bad.size))
                bad = bad[words[bad] >= np.uint64(limit)]
        offsets = words if span == 1 << 64 else words % np.uint64(span)
        if low >= 0:
            values = (offsets + np.uint64(low)).astype(out_type)
        else:
            values = (offsets.astype(np.int64) + low).astype(out_type)
        return int(values[0]) if shape == () else values.reshape(shape)

    def permutation(self, x: int | np.ndarray) -> np.ndarray:
        """A uniformly random order of range(x) for an integer x, or a copy of the array x with its first axis in
        such an order, as ``Generator.permutation``: the order sorts 2·n fresh words read as n 128-bit keys (high
        word first; ties by position, probability below n²/2¹²⁹), so its law is within n²/2¹²⁹ of the uniform one."""
        items = None if np.ndim(x) == 0 else np.asarray(x)
        n = int(x) if items is None else len(items)
        if n < 0:
            raise ValueError(f"permutation needs a count >= 0, got {n}")
        keys = self._words(2 * n).reshape(n, 2)
        order = np.lexsort((keys[:, 1], keys[:, 0]))
        return order if items is None else items[order]
