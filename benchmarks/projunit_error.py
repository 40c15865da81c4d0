"""projunit's exact error against privunitg's and privunit2's at full d: the choice of k, and the table against k.

Every number is the exact boundary error E‖x̂ − x‖² at ‖x‖ = L (ldpcli.mechanisms._projunit: E_k/α² + L²(1/α² − 1),
E_k the base's error at dimension k and α = E‖Wu‖), divided by privunitg's exact boundary error at full d
(the issue's target: within 5 % at k = 1000, d = 2¹⁵ and 2¹⁸, ε ∈ {1, 4, 8}). Nothing is sampled: these are
the formulas the tests check by Monte Carlo at small d; ``--monte-carlo`` adds a seeded Monte Carlo
column at a d where sampling the Haar transform is cheap (n rows of one boundary input, mean ± standard error).

    python benchmarks/projunit_error.py                     # the target table and the table against k
    python benchmarks/projunit_error.py --d 32768 --eps 4   # one (d, ε)
    python benchmarks/projunit_error.py --monte-carlo       # and the measured error beside the exact one
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from ldpcli.mechanisms import PrivUnit2, PrivUnitG
from ldpcli.mechanisms._projunit import ProjUnit

TARGET_D = (2**15, 2**18)
TARGET_EPS = (1.0, 4.0, 8.0)
TABLE_K = tuple(2**j for j in range(4, 13))  # 16 … 4096


def ratios(d: int, eps: float, k: int | None) -> dict[str, float]:
    """k, α and the boundary error of projunit (both bases) over privunitg's and privunit2's at full d."""
    full_g = PrivUnitG.calibrate(d, eps).expected_error
    full_2 = PrivUnit2.calibrate(d, eps).expected_error
    g = ProjUnit.calibrate(d, eps, k=k)
    two = ProjUnit.calibrate(d, eps, k=g.k, base="privunit2")
    return {"k": g.k, "alpha": g.alpha, "g_vs_g": g.expected_error / full_g, "g_vs_2": g.expected_error / full_2,
            "2_vs_g": two.expected_error / full_g, "2_vs_2": two.expected_error / full_2}


def target_table(ds: tuple[int, ...], epss: tuple[float, ...]) -> None:
    """Markdown: at k = 1000 and at the default k (the smallest within 5 % of the base at full d)."""
    print("| d | ε | k | α | projunit(privunitg) / privunitg | projunit(privunitg) / privunit2 | "
          "projunit(privunit2) / privunitg | projunit(privunit2) / privunit2 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d in ds:
        for eps in epss:
            for k in (1000, None):
                r = ratios(d, eps, k)
                label = f"{r['k']:.0f}" + (" (default)" if k is None else "")
                print(f"| 2^{d.bit_length() - 1} | {eps:g} | {label} | {r['alpha']:.5f} | {r['g_vs_g']:.4f} | "
                      f"{r['g_vs_2']:.4f} | {r['2_vs_g']:.4f} | {r['2_vs_2']:.4f} |")


def k_table(ds: tuple[int, ...], epss: tuple[float, ...]) -> None:
    """Markdown: projunit (privunitg base) over privunitg at full d, against k."""
    print("| d | ε | " + " | ".join(f"k = {k}" for k in TABLE_K) + " |")
    print("|---:|---:|" + "---:|" * len(TABLE_K))
    for d in ds:
        for eps in epss:
            cells = [f"{ratios(d, eps, k)['g_vs_g']:.4f}" if k < d else "—" for k in TABLE_K]
            print(f"| 2^{d.bit_length() - 1} | {eps:g} | " + " | ".join(cells) + " |")


def monte_carlo_table(d: int, eps: float, n: int) -> None:
    """Markdown: the measured E‖x̂ − x‖² (n rows of one boundary input, seeded) beside the exact one, against k."""
    x = np.linspace(1.0, 2.0, d)
    x /= np.linalg.norm(x)
    print(f"| d | ε | k | measured E‖x̂ − x‖² (n = {n}) | exact | (measured − exact)/se |")
    print("|---:|---:|---:|---:|---:|---:|")
    for k in (k for k in TABLE_K if k < d):
        mech = ProjUnit.calibrate(d, eps, k=k)
        errors = np.sum((mech.privatize(np.tile(x, (n, 1)), np.random.default_rng(k)) - x) ** 2, axis=1)
        se = errors.std(ddof=1) / math.sqrt(n)
        print(f"| {d} | {eps:g} | {k} | {errors.mean():.2f} ± {se:.2f} | {mech.expected_error:.2f} | "
              f"{(errors.mean() - mech.expected_error) / se:+.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, action="append", help="dimension, repeatable (default 2^15 and 2^18)")
    parser.add_argument("--eps", type=float, action="append", help="ε, repeatable (default 1, 4, 8)")
    parser.add_argument("--monte-carlo", action="store_true", help="also the measured error at --mc-d (sampled)")
    parser.add_argument("--mc-d", type=int, default=1024, help="dimension of the Monte Carlo table (default 1024)")
    parser.add_argument("--mc-rows", type=int, default=2000, help="rows of the Monte Carlo table (default 2000)")
    args = parser.parse_args()
    ds = tuple(args.d) if args.d else TARGET_D
    epss = tuple(args.eps) if args.eps else TARGET_EPS
    target_table(ds, epss)
    print()
    k_table(ds, epss)
    if args.monte_carlo:
        print()
        monte_carlo_table(args.mc_d, epss[len(epss) // 2], args.mc_rows)


if __name__ == "__main__":
    main()
