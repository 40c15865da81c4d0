"""Arrays where they live: the Array API namespace of a PyTorch, CuPy or JAX array, normals drawn on
its device by its own library, and the n·d part of the rounded-cap sampler run there.

The Array API standard (``array-api-compat`` gives every library's namespace ``xp``) has no
random module, so :func:`device_normals` is a small adapter per library, seeded from a host
``numpy.random.SeedSequence``:

- PyTorch: a ``torch.Generator`` on the array's device (``manual_seed`` of 64 bits of the seed);
- CuPy: ``cupy.random.default_rng`` (a ``cupy.random.Generator`` over XORWOW) on the array's GPU;
- JAX: ``jax.random`` keys (the configured implementation, threefry2x32 by default), one split per draw;
- any other library (``array-api-strict`` in the tests): numpy's PCG64 on the host, then
  ``xp.asarray`` onto the device.

None of them is a cryptographic generator, and the bit-for-bit reproducibility of a numpy seed does
not carry over to them: a seeded run repeats only on the same device and library version.

:func:`device_rounded_cap_directions` is :func:`ldpcli.math._sphere.rounded_cap_directions` on the device:
the per-row scalar draws (the rounding's uniforms, the cap events and cosines, exact in log space
with numpy/scipy) are made on the host and passed in; the n·d normals and the reductions (norms,
projections, rescaling) run on the device through ``xp``. ``array-api-compat`` is imported only
here, and only for an array that is not numpy's, so numpy users need neither package.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpcli.errors import install_hint

#: Libraries whose arrays take the device path (the first part of their type's module); without
#: array-api-compat installed they are refused with the extra to install, not silently copied.
DEVICE_LIBRARIES = ("torch", "cupy", "jax", "jaxlib", "array_api_strict")


def device_namespace(x: Any) -> Any | None:
    """The Array API namespace of ``x`` when ``x`` is an array of another library than numpy, else None.

    None for numpy arrays, dask arrays (computed into host memory, as before) and everything that is
    not an array of the standard (lists, tables). ImportError, naming the extra to install, for an
    array of :data:`DEVICE_LIBRARIES` when ``array-api-compat`` is missing.
    """
    if isinstance(x, (np.ndarray, np.generic)):
        return None
    library = type(x).__module__.split(".")[0]
    try:
        import array_api_compat as compat
    except ImportError:
        if library in DEVICE_LIBRARIES:
            raise ImportError(f"x is a {library} array: privatizing it on its device needs array-api-compat: "
                              f"{install_hint('arrays')}; or pass a numpy array") from None
        return None
    if not compat.is_array_api_obj(x) or compat.is_numpy_array(x) or compat.is_dask_array(x):
        return None
    return compat.array_namespace(x)


def device_of(x: Any) -> Any:
    """The device ``x`` lives on (``array_api_compat.device``: also for libraries without ``.device``)."""
    import array_api_compat as compat

    return compat.device(x)


def without_autograd(xp: Any) -> AbstractContextManager[Any]:
    """``torch.no_grad()`` for PyTorch, so that rows that require gradients (a model's embeddings)
    keep no graph of their privatization (a release is not differentiated); nothing for the others."""
    import array_api_compat as compat

    if compat.is_torch_namespace(xp):
        import torch

        return torch.no_grad()
    return nullcontext()


def host_copy(x: Any) -> np.ndarray:
    """The values of an array of another library as a numpy array in host memory: PyTorch's
    ``.cpu()``, CuPy's ``.get()``, and ``numpy.asarray`` for the others (JAX copies from its device)."""
    import array_api_compat as compat

    if compat.is_torch_array(x):
        return x.detach().cpu().numpy()
    if compat.is_cupy_array(x):
        return x.get()
    return np.asarray(x)


class RowStack:
    """The rows of a batched device run in order, in one array allocated up front: each batch is
    copied into its slice as it is finished, so the device holds the output once (concatenating the
    batches would hold it twice and copy it again). JAX arrays cannot be assigned to: there the
    batches are kept and concatenated at the end."""

    def __init__(self, xp: Any, shape: tuple[int, int], dtype: Any, device: Any) -> None:
        import array_api_compat as compat

        self._xp = xp
        self._parts: list[Any] | None = [] if compat.is_jax_namespace(xp) else None
        self._rows: Any = None if self._parts is not None else xp.empty(shape, dtype=dtype, device=device)
        self._filled = 0

    def append(self, batch: Any) -> None:
        """The next batch of rows."""
        if self._parts is not None:
            self._parts.append(batch)
        else:
            self._rows[self._filled:self._filled + batch.shape[0], ...] = batch
        self._filled += batch.shape[0]

    def rows(self) -> Any:
        """All the rows appended, in order."""
        if self._parts is None:
            return self._rows
        return self._parts[0] if len(self._parts) == 1 else self._xp.concat(self._parts)


@dataclass(frozen=True)
class DeviceNormals:
    """Standard normals of one dtype on one device, from one seeded generator; ``name`` says which."""

    name: str
    draw: Callable[[tuple[int, int]], Any]

    def __call__(self, shape: tuple[int, int]) -> Any:
        """The next ``shape`` standard normals of the stream."""
        return self.draw(shape)


def device_normals(xp: Any, device: Any, dtype: Any, seed: np.random.SeedSequence) -> DeviceNormals:
    """The normal-draw adapter of ``xp``'s library on ``device`` (module docstring), seeded by ``seed``."""
    import array_api_compat as compat

    if compat.is_torch_namespace(xp):
        import torch

        torch_generator = torch.Generator(device=device)
        torch_generator.manual_seed(int(seed.generate_state(1, np.uint64)[0]))
        return DeviceNormals(f"torch.Generator on {device}",
                             lambda shape: torch.randn(shape, generator=torch_generator, dtype=dtype, device=device))
    if compat.is_cupy_namespace(xp):
        import cupy

        with device:
            cupy_generator = cupy.random.default_rng(seed)

        def cupy_draw(shape: tuple[int, int]) -> Any:
            with device:
                return cupy_generator.standard_normal(shape, dtype=dtype)

        return DeviceNormals(f"cupy.random.Generator (XORWOW) on {device}", cupy_draw)
    if compat.is_jax_namespace(xp):
        import jax

        keys = [jax.random.key(int(seed.generate_state(1, np.uint32)[0]))]

        def jax_draw(shape: tuple[int, int]) -> Any:
            keys[0], key = jax.random.split(keys[0])
            return jax.device_put(jax.random.normal(key, shape, dtype=dtype), device)

        return DeviceNormals(f"jax.random ({jax.random.key_impl(keys[0])}) on {device}", jax_draw)
    host = np.random.Generator(np.random.PCG64(seed))
    host_dtype = np.float32 if dtype == xp.float32 else np.float64
    return DeviceNormals(f"numpy PCG64 on the host, copied to {device}",
                         lambda shape: xp.asarray(host.standard_normal(shape, dtype=host_dtype), device=device))


def scaled_rows(xp: Any, x: Any) -> tuple[Any, Any, Any]:
    """(rows, their norms, factors) with ‖x_i‖ = factor_i·norm_i, the rows' directions unchanged.

    :func:`ldpcli.math._sphere.row_norms` on the device: a row whose sum of squares overflows, or
    is so small that it loses bits to subnormals (‖x‖ below √(smallest normal/ε) of the dtype), is
    divided by its largest |x_j| first, so that its norm and its products with the normals keep full
    precision; the other rows are returned as they are (factor 1).
    """
    norms = xp.sqrt(xp.vecdot(x, x))
    info = xp.finfo(x.dtype)
    redo = ~xp.isfinite(norms) | (norms < math.sqrt(info.smallest_normal / info.eps))
    if not bool(xp.any(redo)):
        return x, norms, xp.ones_like(norms)
    biggest = xp.max(xp.abs(x), axis=1)
    factors = xp.where(redo & (biggest > 0), biggest, xp.ones_like(biggest))
    rows = x / factors[:, None]
    return rows, xp.sqrt(xp.vecdot(rows, rows)), factors


def device_rounded_cap_directions(
    xp: Any, x: Any, norms: Any, rho: Any, below: Any, t: Any, r: Any, scale: float,
    normals: Callable[[tuple[int, int]], Any],
) -> Any:
    """scale·(t·u + r·w) for u the unbiased rounding of each row of x to the sphere, w uniform ⊥ u.

    The sampler of PrivUnit2 (Bhowmick et al. 2018, Alg. 1) and of the hemisphere mechanism, as
    :func:`ldpcli.math._sphere.rounded_cap_directions` computes it, with the per-row draws given:

    - ``rho`` = ‖x‖/L and ``below`` = 2U − 1 for U uniform on [0, 1) (kept below 1 in the dtype):
      u = +x/‖x‖ when ``below`` < ρ, probability (1 + ρ)/2, else −x/‖x‖; a row with ρ ≥ 1 keeps +;
    - ``t``, ``r`` = √(1 − t²): the cosine ⟨V, u⟩ of each row (the mechanism's cap law);
    - ``norms``: the norms of the rows ``x`` as passed (:func:`scaled_rows`: they may be rescaled).

    With g the device's normals, w = (g − ⟨g, u⟩u)/‖·‖, and Z = a·g + b·x with ‖w‖² = ‖g‖² − ⟨g, u⟩²,
    a = scale·r/‖w‖ and b = (scale·t − a⟨g, u⟩)/(±‖x‖): two reductions and two in-place passes over g
    (the normals, ours to overwrite), u never stored.
    Rows where most of g lies along u (‖w‖² < ‖g‖²/4, common only for small d) are projected
    explicitly, twice ("twice is enough", Giraud et al. 2005), and drawn again if g ∥ u. A zero row
    is released as scale·g/‖g‖ (uniform: V | u is symmetric about a uniform u). d = 1: Z = scale·t·u,
    a zero row's u being the sign of ``below`` (±1 with probability 1/2).
    """
    n, d = x.shape
    zero = norms == 0
    sign = 2 * xp.astype(below < rho, x.dtype) - 1
    signed = norms * sign + xp.astype(zero, x.dtype)  # ±‖x‖, and 1 for a zero row (x/signed stays 0)
    if d == 1:
        return scale * t[:, None] * (x / signed[:, None] + xp.astype(zero, x.dtype)[:, None] * sign[:, None])
    g = normals((n, d))
    gg = xp.vecdot(g, g)
    gu = xp.vecdot(g, x) / signed
    ww = gg - gu * gu
    redo = ww < 0.25 * gg
    if bool(xp.any(redo)):
        g, gu, ww = _reproject(xp, g, x / signed[:, None], redo, gu, ww, normals)
    a = scale * r / xp.sqrt(ww)
    b = (scale * t - a * gu) / signed
    a = xp.where(zero, scale / xp.sqrt(gg), a)
    g *= a[:, None]  # in place where the library allows it (a JAX array is replaced): one n·d temporary, not three
    g += b[:, None] * x
    return g


def _reproject(
    xp: Any, g: Any, u: Any, redo: Any, gu: Any, ww: Any, normals: Callable[[tuple[int, int]], Any]
) -> tuple[Any, Any, Any]:
    """(g, ⟨g, u⟩, ‖w‖²) with the ``redo`` rows of g replaced by their part orthogonal to u, projected
    twice; a row whose part is exactly 0 (g ∥ u: probability 0) gets new normals and is projected again."""
    while True:
        w = g
        for _ in range(2):
            w = w - xp.vecdot(w, u)[:, None] * u
        g = xp.where(redo[:, None], w, g)
        gu = xp.where(redo, xp.zeros_like(gu), gu)
        ww = xp.where(redo, xp.vecdot(w, w), ww)
        redo = redo & (ww == 0)
        if not bool(xp.any(redo)):
            return g, gu, ww
        g = xp.where(redo[:, None], normals(tuple(g.shape)), g)


__all__ = ["DEVICE_LIBRARIES", "DeviceNormals", "RowStack", "device_namespace", "device_normals", "device_of", "host_copy",
           "device_rounded_cap_directions", "scaled_rows", "without_autograd"]
