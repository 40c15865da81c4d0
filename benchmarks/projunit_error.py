"""projunit's exact error against privunitg's and privunit2's at full d: the choice of k, and the table against k.

Every number is the exact boundary error E‖x̂ − x‖² at ‖x‖ = L (ldpcli.mechanisms._projunit: E_k/α² + L²(1/α² − 1),
E_k the base's error at dimension k and α = E‖Wu‖), divided by privunitg's exact boundary error at full d
(the issue's target: within 5 % at k = 1000, d = 2¹⁵ and 2¹⁸, ε ∈ {1, 4, 8}). Nothing is sampled: these are
the formulas the tests check by Monte Carlo at small d; ``--monte-carlo`` adds a seeded Monte Carlo
column at a d where sampling the Haar transform is cheap (n rows of one boundary input, mean ± standard error).

    python benchmarks/projunit_error.py                     # the target table and the table against k
    python benchmarks/projunit_error.py --d 32768 --eps 4   # one (d, ε)
    python benchmarks/projunit_error.py --monte-carlo       # and the measured error beside the exact one
    python benchmarks/projunit_error.py --srht              # FastProjUnit: its bound and its measured error, k = 1000
    python benchmarks/projunit_error.py --timing            # time per row: srht, haar and privunitg at full d

FastProjUnit (``--projection srht``) has no exact error: ``--srht`` prints its stated upper bound and a seeded Monte
Carlo of ``--srht-rows`` rows of one random boundary input, each over privunitg's exact error at full d, and the
measured relative bias along x. ``--timing`` privatizes a few rows of each at one d (haar's O(dk) a row: one row)
in one run, on the kernels ``LDP_KERNEL`` chooses.
"""

from __future__ import annotations

import argparse
import math
import time

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


def boundary_input(d: int) -> np.ndarray:
    """One seeded random unit vector of R^d."""
    g = np.random.default_rng([17, d]).standard_normal(d)
    return g / np.linalg.norm(g)


def srht_table(ds: tuple[int, ...], epss: tuple[float, ...], n: int) -> None:
    """Markdown: FastProjUnit at k = 1000, its stated bound and its measured error over privunitg's at full d."""
    print(f"| d | ε | k | srht bound / privunitg | srht measured / privunitg (n = {n}, ± se) | "
          "relative bias along x (± se) | stated bias bound along x |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for d in ds:
        x = boundary_input(d)
        for eps in epss:
            full = PrivUnitG.calibrate(d, eps).expected_error
            mech = ProjUnit.calibrate(d, eps, k=1000, projection="srht")
            rng = np.random.default_rng([d, int(eps)])
            errors, along = np.empty(n), np.empty(n)
            for start in range(0, n, 50):  # 50 rows at a time: memory stays flat at d = 2^18
                rows = slice(start, min(n, start + 50))
                z = mech.privatize(np.tile(x, (rows.stop - rows.start, 1)), rng)
                errors[rows], along[rows] = np.sum((z - x) ** 2, axis=1), z @ x
            print(f"| 2^{d.bit_length() - 1} | {eps:g} | 1000 | {mech.expected_error / full:.4f} | "
                  f"{errors.mean() / full:.4f} ± {errors.std(ddof=1) / math.sqrt(n) / full:.4f} | "
                  f"{along.mean() - 1:+.4f} ± {along.std(ddof=1) / math.sqrt(n):.4f} | "
                  f"{mech.srht_bias['relative_bias_along_max']:.2g} |")


def timing_table(d: int, eps: float, rows: int) -> None:
    """Markdown: seconds per row of privatize for srht and haar (k = 1000) and privunitg at full d, in one run."""
    x = np.tile(boundary_input(d), (rows, 1))
    mechs = {"projunit srht": (ProjUnit.calibrate(d, eps, k=1000, projection="srht"), rows),
             "privunitg": (PrivUnitG.calibrate(d, eps), rows),
             "projunit haar": (ProjUnit.calibrate(d, eps, k=1000), 1)}
    times = {}
    for name, (mech, m) in mechs.items():
        mech.privatize(x[:1], np.random.default_rng(0))  # compile and warm
        start = time.perf_counter()
        mech.privatize(x[:m], np.random.default_rng(1))
        times[name] = (time.perf_counter() - start) / m
    print(f"| d = 2^{d.bit_length() - 1}, ε = {eps:g} | ms per row | privunitg's time / this |")
    print("|---|---:|---:|")
    for name, seconds in times.items():
        print(f"| {name} | {seconds * 1e3:.2f} | {times['privunitg'] / seconds:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, action="append", help="dimension, repeatable (default 2^15 and 2^18)")
    parser.add_argument("--eps", type=float, action="append", help="ε, repeatable (default 1, 4, 8)")
    parser.add_argument("--monte-carlo", action="store_true", help="also the measured error at --mc-d (sampled)")
    parser.add_argument("--mc-d", type=int, default=1024, help="dimension of the Monte Carlo table (default 1024)")
    parser.add_argument("--mc-rows", type=int, default=2000, help="rows of the Monte Carlo table (default 2000)")
    parser.add_argument("--srht", action="store_true", help="also FastProjUnit's bound and measured error, k = 1000")
    parser.add_argument("--srht-rows", type=int, default=100, help="rows of each FastProjUnit cell (default 100)")
    parser.add_argument("--timing", action="store_true", help="also the time per row at the largest --d")
    parser.add_argument("--timing-rows", type=int, default=32, help="rows timed for srht and privunitg (default 32)")
    args = parser.parse_args()
    ds = tuple(args.d) if args.d else TARGET_D
    epss = tuple(args.eps) if args.eps else TARGET_EPS
    target_table(ds, epss)
    print()
    k_table(ds, epss)
    if args.monte_carlo:
        print()
        monte_carlo_table(args.mc_d, epss[len(epss) // 2], args.mc_rows)
    if args.srht:
        print()
        srht_table(ds, epss, args.srht_rows)
    if args.timing:
        print()
        timing_table(max(ds), epss[len(epss) // 2], args.timing_rows)


if __name__ == "__main__":
    main()
