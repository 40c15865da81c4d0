"""The counter-based ChaCha20 stream's entry points: compiled by numba when it is chosen, else the numpy reference.

:mod:`ldpcli.math._chacha20` specifies the stream and computes it with numpy;
:mod:`ldpcli.math._chacha20_numba` computes the same bits compiled (imported only when numba is the kernel that
:func:`ldpcli.math._kernels.kernel_name` chooses). Callers draw through here, so either path gives one answer.
"""

from __future__ import annotations

import numpy as np

from ldpcli.math import _chacha20
from ldpcli.math._kernels import kernel_name


def normals(key: bytes, rows: np.ndarray | list[int], count: int, *, stream: int = 0) -> np.ndarray:
    """:func:`ldpcli.math._chacha20.stream_normals` by the kernel :func:`ldpcli.math._kernels.kernel_name` chooses (numba or this reference)."""
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
