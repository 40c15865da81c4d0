"""The secure rendering's cost (``--secure``, docs/floating-point.md): speed and error, as ratios to the
plain rendering of the same mechanism, in one run.

Each row times ``privatize`` of an n × d batch with the plain mechanism and with its secure rendering
(``ldpcli.mechanisms._rendering.secured``), the two alternating (``run.side_by_side``), and prints the
time ratio beside the rendering's grid, its δ and its error ratio (worst-case E‖Z − x‖², secure over
plain). The plain side runs with the kernel ``LDP_KERNEL`` selects (numba when installed).

    python benchmarks/secure_rendering.py                       # n·d = 10⁶ at d ∈ {16, 1000}
    python benchmarks/secure_rendering.py --values 100000 --repeat 1
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import side_by_side  # noqa: E402

from ldpcli.mechanisms import get_mechanism  # noqa: E402
from ldpcli.mechanisms._rendering import secured  # noqa: E402

MECHANISMS = ("privunit2", "duchi-l2", "privunitg", "separated", "gaussian-sign", "privunit-inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=10**6, help="n·d per batch (default 10⁶)")
    parser.add_argument("--dims", default="16,1000", help="comma-separated d (default 16,1000)")
    parser.add_argument("--eps", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'mechanism':>13} {'n×d':>12} {'plain s':>8} {'secure s':>9} {'time ratio':>10} {'grid g':>8} "
          f"{'δ':>8} {'error ratio':>12}")
    for d in (int(v) for v in args.dims.split(",")):
        n = max(1, args.values // d)
        x = np.random.default_rng(0).standard_normal((n, d))
        x /= 1.25 * np.linalg.norm(x, axis=1, keepdims=True)
        for name in MECHANISMS:
            plain = get_mechanism(name).calibrate(d, args.eps)
            secure = secured(plain)
            times = side_by_side({
                "plain": lambda: plain.privatize(x, np.random.default_rng(1)),
                "secure": lambda: secure.privatize(x, np.random.default_rng(1)),
            }, args.repeat)
            r = secure.rendering
            grid = r.kind if r.grid is None else f"2^{int(math.log2(r.grid))}"
            print(f"{name:>13} {n:>6}×{d:<5} {times['plain']:>8.3f} {times['secure']:>9.3f} "
                  f"{times['secure'] / times['plain']:>10.2f} {grid:>8} {r.delta:>8.1e} {r.error_ratio:>12.9f}")


if __name__ == "__main__":
    main()
