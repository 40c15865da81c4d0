"""Which implementation runs the hot loops: the compiled kernels (numba) or the numpy reference.

``pip install 'ldp[fast]'`` adds numba, the field's standard compiler for numeric Python loops; with
it, the sampler of every vector mechanism that draws n·d numbers (PrivUnit2 and the hemisphere
mechanism's cap sampler, PrivUnitG, gaussian-sign, and the hypercube mechanisms privunit-inf and
duchi-linf) runs as one compiled loop per row (:mod:`ldpcli.math._numba_kernels`) instead of a few
numpy passes per chunk of rows. Without it, the numpy code (:mod:`ldpcli.math._sphere` and each
mechanism's ``privatize``) runs; it is the reference the kernels are tested against.

The kernels draw the same numbers from the same generator in the same order as their reference and
agree to rounding, not bit for bit (their sums run in different orders); the hypercube kernel, from a
numpy Generator, draws each row's agreeing coordinates from fewer numbers than the numpy reference's d
keys a row and agrees in law only (given the reference's uniforms and keys, from any other generator,
it agrees bit for bit). So a seeded output depends on which one ran: the sidecar records it
(``release.randomness.kernel``). ``LDP_KERNEL=numpy`` forces the reference (for example to reproduce
a seeded output made without numba); ``LDP_KERNEL=numba`` makes a missing numba an error instead of
a silent fallback.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np

from ldpcli.errors import MissingDependency, UsageError, install_hint

#: The environment variable that chooses the kernels: ``auto`` (default), ``numba`` or ``numpy``.
KERNEL_ENV = "LDP_KERNEL"
_CHOICES = ("auto", "numba", "numpy")


@functools.cache
def _numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def kernel_name() -> str:
    """``"numba"`` or ``"numpy"``: what the samplers use now (``LDP_KERNEL`` and whether numba is there)."""
    choice = os.environ.get(KERNEL_ENV, "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise UsageError(f"{KERNEL_ENV}={choice!r}: use one of {', '.join(_CHOICES)}")
    if choice == "numba" and not _numba_installed():
        raise MissingDependency(f"{KERNEL_ENV}=numba but numba is not installed: {install_hint('fast')}")
    if choice == "numpy" or not _numba_installed():
        return "numpy"
    return "numba"


def compiled(rng: object, *, given_draws: bool = False) -> ModuleType | None:
    """The compiled kernels' module when :func:`kernel_name` is ``"numba"`` and the kernel can use ``rng``, else None.

    A kernel draws from a ``numpy.random.Generator`` itself (numba compiles its methods). A kernel
    that can read its draws from arrays (``given_draws``: the sphere and Gaussian samplers' normals,
    :func:`normal_chunks`; the hypercube sampler's uniforms and keys) also runs with any other
    generator, such as :class:`ldpcli.math._counter_rng.CounterGenerator` (the ChaCha20 stream),
    which fills the arrays first. Imported on first use: numba's
    import and the first call's compilation (cached on disk afterwards) cost only runs that privatize.
    """
    if kernel_name() != "numba" or not (given_draws or isinstance(rng, np.random.Generator)):
        return None
    from ldpcli.math import _numba_kernels

    return _numba_kernels


#: Normals the stream fills ahead of a compiled sampler at a time (512 KiB): still in cache when the kernel reads them.
GIVEN_CHUNK_VALUES = 2**16


def normal_chunks(rng: Any, out: np.ndarray) -> Iterator[tuple[slice, Any]]:
    """The rows of ``out`` a compiled sampler runs over, each with the source of its normals: ``(rows, source)``.

    For a ``numpy.random.Generator``, all rows at once with ``rng`` itself (the kernel draws them as it
    goes, in row order). For any other generator, chunk by chunk of rows (about :data:`GIVEN_CHUNK_VALUES`
    values), ``out[rows]`` first filled with its normals (``rng.standard_normal(out=...)``) and given as the
    source, which the kernel reads and overwrites: the same normals, in row order, as one fill of ``out``
    would draw, while each chunk is in cache. The caller runs its kernel on each chunk before asking for
    the next (the next chunk's normals are drawn only then).
    """
    n, d = out.shape
    if isinstance(rng, np.random.Generator):
        yield slice(0, n), rng
        return
    step = max(1, GIVEN_CHUNK_VALUES // max(1, d))
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        rng.standard_normal(out=out[rows])
        yield rows, out[rows]
