"""The device path of an array release: rows on a PyTorch, CuPy or JAX device privatized where they
live (the Array API, :mod:`ldpcli.math._devices`), for :func:`ldpcli.release._arrays.privatize_rows`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ldpcli.math._domains import FLOAT32_PRECISION
from ldpcli.mechanisms import Mechanism

#: Values of one batch on a device (256 MiB of float32): its rows, normals and output are a few
#: such arrays at once, and each batch's host draws are one array of its rows.
_DEVICE_BATCH_VALUES = 2**26


def _privatize_on_device(
    xp: Any, mech: Mechanism, values: Any, rng: np.random.Generator, precision: float, out_dtype: str
) -> tuple[Any, int, str]:
    """Privatize device rows where they live; (the rows as ``out_dtype`` on their device, how many
    rows were clipped, the name of the generator of the normals).

    In batches of :data:`_DEVICE_BATCH_VALUES` values: the per-row draws of the mechanism (the
    rounding's uniforms, then its cap events and cosines, :class:`~ldpcli.mechanisms._hooks.RoundedCap`)
    come from ``rng`` on the host, in numpy's order, and are sent to the device; the normals come
    from the device's generator (:func:`~ldpcli.math._devices.device_normals`, seeded by 128 bits
    of ``rng``) and the rest runs there (:func:`~ldpcli.math._devices.device_rounded_cap_directions`), in
    the wider of the rows' and the output's dtype. Rows beyond L are counted as the domain's
    projection counts them (:meth:`ldpcli.math._domains.Domain.project`) but not moved: the
    sampler uses only a row's direction and a sign whose probability (1 + ‖x‖/L)/2 saturates at
    ‖x‖ ≥ L, so its output has the law it has for the projected row.
    """
    from ldpcli.math._devices import (
        RowStack,
        device_normals,
        device_of,
        device_rounded_cap_directions,
        scaled_rows,
        without_autograd,
    )
    from ldpcli.mechanisms._hooks import rounded_cap

    try:
        sampler = rounded_cap(mech)
    except NotImplementedError as exc:
        raise TypeError(f"{exc}; for {mech.name}, pass x as a numpy array (torch: x.cpu().numpy(), cupy: "
                        "x.get(), jax: numpy.asarray(x))") from None
    device = device_of(values)
    out = getattr(xp, out_dtype)
    work = xp.result_type(values.dtype, out)
    host = np.float32 if work == xp.float32 else np.float64
    below_one = np.nextafter(host(1.0), host(0.0))  # 2U − 1 rounded to 1 would flip a row with ‖x‖ ≥ L
    normals = device_normals(xp, device, work, np.random.SeedSequence(rng.integers(2**32, size=4).tolist()))
    bound, (n, d) = mech.norm_bound, values.shape
    step = max(1, _DEVICE_BATCH_VALUES // d)
    released, clipped = RowStack(xp, (n, d), out, device), 0
    with without_autograd(xp):
        for start in range(0, n, step):
            rows = xp.astype(values[start:min(n, start + step), :], work, copy=False)
            m = rows.shape[0]
            scaled, norms, factors = scaled_rows(xp, rows)
            rho = norms * factors / bound
            clipped += _device_clipped(xp, mech, rows, rho, precision)
            below = np.minimum(2.0 * rng.random(m) - 1.0, below_one)
            t, r = sampler.cap_cosines(m, rng)
            below, t, r = (xp.asarray(draw.astype(host), device=device) for draw in (below, t, r))
            z = device_rounded_cap_directions(xp, scaled, norms, rho, below, t, r, bound * sampler.scale, normals)
            released.append(xp.astype(z, out, copy=False))
        return released.rows(), clipped, normals.name


def _device_clipped(xp: Any, mech: Mechanism, rows: Any, rho: Any, precision: float) -> int:
    """The rows of a batch beyond the ℓ2 ball by more than its slack at ``precision``, those within
    float32's slack whose values are all exact in float32 excepted (:meth:`~ldpcli.math._domains.Domain.rounded`:
    float32 data held as float64); ``rho`` = ‖x‖/L."""
    d = rows.shape[1]
    slack, wider = mech.domain.slack(precision, d), mech.domain.slack(FLOAT32_PRECISION, d)
    over = rho > 1.0 + slack
    count = int(xp.count_nonzero(over))
    if count and wider > slack:
        exact = xp.all(xp.astype(xp.astype(rows, xp.float32), rows.dtype) == rows, axis=1)
        count -= int(xp.count_nonzero(over & exact & (rho <= 1.0 + wider)))
    return count
