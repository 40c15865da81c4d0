"""Row utilities of the samplers: norms without overflow, rows rounded to unit length, and the
chunked loop (with numpy's buffer one row long) that the fused samplers run over n × d arrays.

Nothing here knows a cap or a mechanism: :mod:`ldpcli.math._sphere` draws the cap directions, and
each mechanism's sampler walks its rows with :func:`row_chunks` / :func:`rounded_chunks`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np


def row_norms(x: np.ndarray) -> np.ndarray:
    """‖x_i‖₂ of every row, without overflow (‖x‖ ≳ 1.3e154) or underflow (‖x‖ ≲ 1e−154) in the squares.

    Rows whose plain √Σx² is not finite or is tiny are recomputed after dividing by their largest
    |x_j|, so a row of 1e308s keeps its direction instead of becoming a zero row. A norm beyond
    float64's largest value (e.g. four coordinates of 1e308) is inf, its correct rounding, without a
    warning; :func:`unit_scaled` gives such rows a finite form with the same direction.
    """
    with np.errstate(over="ignore"):
        norms = np.sqrt(np.vecdot(x, x))
    redo = ~np.isfinite(norms) | (norms < 1e-150)
    if redo.any():
        scaled, biggest = unit_scaled(x[redo])
        with np.errstate(over="ignore"):  # ‖x‖ > 1.8e308: inf
            norms[redo] = biggest * np.sqrt(np.vecdot(scaled, scaled))
    return norms


def unit_scaled(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x_i/max_j |x_ij|, max_j |x_ij|) for every row (a zero row is kept, with factor 0): rows of the
    same directions whose largest |value| is 1, so their squares neither overflow nor underflow."""
    biggest = np.max(np.abs(x), axis=1)
    return x / np.where(biggest > 0.0, biggest, 1.0)[:, None], biggest


def rounded_units_into(x: np.ndarray, flips: np.ndarray, radius: float, u: np.ndarray) -> np.ndarray:
    """The rounding of :func:`~ldpcli.math._sphere.round_to_sphere` with its uniforms given: u = +x/‖x‖ where
    flips < (1 + ‖x‖/radius)/2, −x/‖x‖ elsewhere, written into ``u``; zero rows are left 0 and
    their mask is returned (the fused samplers give them their own law).

    A division, not the faster multiplication by 1/‖x‖: that overflows for tiny rows and is one
    rounding more, so x/‖x‖ = ±1 exactly at d = 1 (the finite rendering's public values,
    ``ldpcli.mechanisms._rendering``) and for a row along an axis would become 1 − 2⁻⁵³.
    """
    norms = row_norms(x)
    zero = norms == 0.0
    sign = np.where(flips < (1.0 + norms / radius) / 2.0, 1.0, -1.0)
    np.divide(x, np.where(zero, 1.0, norms * sign)[:, None], out=u)
    return zero


#: Values of one chunk of the fused numpy samplers (:func:`rounded_chunks`): 512 KiB of normals and
#: as much of u, so a chunk stays in a core's L2 cache from the draw of its normals to its last scaling.
FUSED_CHUNK_VALUES = 2**16


def row_chunks(n: int, d: int, values: int | None = None) -> Iterator[slice]:
    """Consecutive slices of the n rows of an n × d array, each about ``values`` values
    (default :data:`FUSED_CHUNK_VALUES`, read when called) and at least one row."""
    step = max(1, (FUSED_CHUNK_VALUES if values is None else values) // d)
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


#: Rows shorter than this keep numpy's default buffer in :func:`row_buffers`: one pass per row costs
#: more than the buffer's copy when a row has only a few values (measured: 4.2 against 1.4 ns per
#: value at d = 3, 0.75 against 0.82 at d = 64).
_ROW_BUFFER_MIN_D = 64


@contextlib.contextmanager
def row_buffers(d: int) -> Iterator[None]:
    """numpy's ufunc buffer at most one row of d values long while a fused loop runs (it is reset after).

    An operation between a chunk of rows and one value per row (``g *= a[:, None]``) runs through
    numpy's buffered iteration, which walks across rows in blocks of its buffer (8192 values) and so
    copies the per-row values into a buffer first; with the buffer no longer than a row, each row
    is one pass with its scalar: measured 0.6–0.9 against 0.25–0.4 ns per value for d from 200 to
    4000 (2 cores, numpy 2.4). Rows shorter than :data:`_ROW_BUFFER_MIN_D` keep the default. Only the
    iteration changes, not a single result. numpy keeps the setting per thread (a context variable),
    so worker threads do not see each other's.
    """
    old = np.getbufsize()
    if d >= _ROW_BUFFER_MIN_D:
        np.setbufsize(min(old, d - d % 16))  # numpy wants a multiple of 16
    try:
        yield
    finally:
        np.setbufsize(old)


def rounded_chunks(x: np.ndarray, flips: np.ndarray, radius: float) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """The fused samplers' loop: for each chunk of rows (:func:`row_chunks`), (rows, u, zero) with u
    the rounding of ``x[rows]`` by ``flips[rows]`` (:func:`rounded_units_into`) and ``zero`` its zero rows.

    u lives in one scratch array that every chunk reuses (the caller may overwrite it); run the loop
    inside :func:`row_buffers`.
    """
    n, d = x.shape
    scratch = np.empty((min(n, max(1, FUSED_CHUNK_VALUES // d)), d))
    for rows in row_chunks(n, d):
        u = scratch[: rows.stop - rows.start]
        yield rows, u, rounded_units_into(x[rows], flips[rows], radius, u)
