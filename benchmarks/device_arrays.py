"""Time ``ldpcli.privatize`` on an array where it lives against the device's own normals, side by side.

Floor: the n·d standard normals of the same shape and dtype, drawn on the array's device by the
generator the device path uses (``ldpcli.math._devices.device_normals``: torch.randn, cupy's or
jax's normals). PrivUnit2 needs at least those (one Gaussian per coordinate for the direction
orthogonal to u). Also timed: the host's share, the per-row draws alone (the rounding's uniforms, the
cap events and cosines: ``cap_cosines``), which the device path makes with numpy and sends over,
and the numpy path on a host copy of the same rows. The timed runs of the sides alternate, after
one untimed round, so drift in the machine's speed hits all of them (``run.side_by_side``).

    python benchmarks/device_arrays.py --library torch --shape 2000000x500    # on a GPU: n·d = 10⁹
    python benchmarks/device_arrays.py --library strict --shape 20000x500 --repeat 3   # CPU stand-in

``--library strict`` is array-api-strict on the CPU (numpy underneath, normals from numpy on the
host): it shows that the path runs and what it costs over numpy, not a device's speed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import side_by_side  # noqa: E402

import ldpcli  # noqa: E402
from ldpcli.math._devices import device_namespace, device_normals, device_of  # noqa: E402
from ldpcli.mechanisms import get_mechanism  # noqa: E402


def device_rows(library: str, n: int, d: int, dtype: str) -> Any:
    """n unit rows of dimension d as ``dtype`` on the library's default device (a GPU where it has one)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d)).astype(dtype)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    if library == "torch":
        import torch

        return torch.asarray(x, device="cuda" if torch.cuda.is_available() else "cpu")
    if library == "cupy":
        import cupy

        return cupy.asarray(x)
    if library == "jax":
        import jax.numpy as jnp

        return jnp.asarray(x)
    import array_api_strict

    return array_api_strict.asarray(x)


def synchronise(z: Any) -> None:
    """Wait for the device's queued work on ``z`` (GPU libraries return before their kernels finish)."""
    module = type(z).__module__.split(".")[0]
    if module == "torch":
        import torch

        if z.is_cuda:
            torch.cuda.synchronize(z.device)
    elif module == "cupy":
        import cupy

        cupy.cuda.get_current_stream().synchronize()
    elif hasattr(z, "block_until_ready"):
        z.block_until_ready()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--library", choices=["torch", "cupy", "jax", "strict"], default="torch")
    parser.add_argument("--shape", action="append", help="NxD, repeatable (default 2000000x500)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--mechanism", default="privunit2")
    parser.add_argument("--eps", type=float, default=8.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-numpy", action="store_true", help="skip the numpy path on a host copy (large n·d)")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.lower().split("x")) for s in (args.shape or ["2000000x500"])]
    print(f"{args.library}, {args.dtype}, {args.mechanism} at ε = {args.eps:g}; medians of {args.repeat}")
    print(f"{'n×d':>14} {'normals s':>10} {'privatize s':>12} {'ratio':>6} {'host draws s':>13} {'share':>6} "
          f"{'numpy path s':>13} {'values/s':>10}")
    for n, d in shapes:
        x = device_rows(args.library, n, d, args.dtype)
        xp = device_namespace(x)
        mech = get_mechanism(args.mechanism).calibrate(d, args.eps)
        normals = device_normals(xp, device_of(x), x.dtype, np.random.SeedSequence(1))
        host = np.random.default_rng(2)

        def floor() -> None:
            synchronise(normals((n, d)))

        def privatize() -> None:
            z, _ = ldpcli.privatize(x, epsilon=args.eps, mechanism=args.mechanism, rng=3)
            synchronise(z)

        def host_draws() -> None:
            host.random(n)
            mech.cap_cosines(n, host)  # type: ignore[attr-defined]

        fns: dict[str, Callable[[], object]] = {"floor": floor, "privatize": privatize, "host": host_draws}
        if not args.no_numpy:
            rows = np.asarray(x.cpu() if hasattr(x, "cpu") else x)
            fns["numpy"] = lambda: ldpcli.privatize(rows, epsilon=args.eps, mechanism=args.mechanism, rng=3)
        t = side_by_side(fns, args.repeat)
        numpy_text = f"{t['numpy']:>13.3f}" if "numpy" in t else f"{'—':>13}"
        print(f"{n:>8}×{d:<5} {t['floor']:>10.3f} {t['privatize']:>12.3f} {t['privatize'] / t['floor']:>6.2f} "
              f"{t['host']:>13.3f} {t['host'] / t['privatize']:>6.1%} {numpy_text} {n * d / t['privatize']:>10.3g}")


if __name__ == "__main__":
    main()
