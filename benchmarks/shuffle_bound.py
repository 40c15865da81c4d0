"""The shuffle bound's cost against one ungrouped evaluation of δ(ε), and the README's table of central ε.

Baseline, in the same process and alternating with the measured runs: one evaluation of the reduction's
δ(ε) (Feldman, McMillan & Talwar 2021, Thm 3.2) at one ε, with every c of the window evaluated on its
own (no grouping into intervals): what each step of a binary search costs without the grouping of
ldpcli.math._shuffling. Measured: the whole ``shuffle_bound`` (both binary searches, about 40 steps on
at most 1026 values of c). The ratio says how many ungrouped evaluations the whole bound costs.

    python benchmarks/shuffle_bound.py                           # n = 10⁵, 10⁷, 10⁹ at ε0 = 1, 4
    python benchmarks/shuffle_bound.py --n 100000 --repeat 3
    python benchmarks/shuffle_bound.py --table                   # the README's table (markdown)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from ldpcli.math._shuffling import Grid, closed_form_epsilon, delta_upper, grid_of, shuffle_bound

TABLE_N = (10**3, 10**4, 10**5, 10**6)
TABLE_DELTA = (1e-6, 1e-9)
TABLE_EPSILON0 = (0.5, 1.0, 2.0, 4.0, 8.0)


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def ungrouped_grid(epsilon0: float, n: int, delta: float) -> Grid:
    """The window of ``grid_of`` with every c its own interval (the tails stay whole)."""
    return grid_of(epsilon0, n, delta, max_intervals=n)


def table(deltas: tuple[float, ...]) -> None:
    """Markdown: N, δ, ε0 → central ε (upper, lower, closed form); δ ≥ 1/N is refused by ldp, so skipped."""
    print("| N | δ | ε0 | central ε upper | central ε lower | closed form (Thm 3.1) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in TABLE_N:
        for delta in deltas:
            for epsilon0 in TABLE_EPSILON0:
                if delta >= 1 / n:
                    print(f"| {n:.0e} | {delta:.0e} | {epsilon0:g} | — | — | — (δ ≥ 1/N: refused) |")
                    continue
                bound = shuffle_bound(epsilon0, n, delta)
                closed = closed_form_epsilon(epsilon0, n, delta)
                print(f"| {n:.0e} | {delta:.0e} | {epsilon0:g} | {bound.epsilon_upper:.6g} | "
                      f"{bound.epsilon_lower:.6g} | {'—' if closed is None else f'{closed:.6g}'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, action="append", help="number of reports, repeatable (default 1e5, 1e7, 1e9)")
    parser.add_argument("--eps0", type=float, action="append", help="local ε0, repeatable (default 1 and 4)")
    parser.add_argument("--delta", type=float, default=None, help="central δ (default 1/n²)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--table", action="store_true", help="print the README's table and stop")
    args = parser.parse_args()
    if args.table:
        table(TABLE_DELTA)
        return
    print(f"{'n':>12} {'ε0':>5} {'window c':>9} {'baseline s':>11} {'bound s':>9} {'ratio':>7}  central ε")
    for n in args.n or [10**5, 10**7, 10**9]:
        for epsilon0 in args.eps0 or [1.0, 4.0]:
            delta = args.delta if args.delta is not None else 1 / n**2
            full = ungrouped_grid(epsilon0, n, delta)
            bound = shuffle_bound(epsilon0, n, delta)  # warms scipy up before the timings
            base, measured = [], []
            for _ in range(args.repeat):
                base.append(timed(lambda: delta_upper(bound.epsilon_upper, epsilon0, full)))  # noqa: B023
                measured.append(timed(lambda: shuffle_bound(epsilon0, n, delta)))  # noqa: B023
            b, m = statistics.median(base), statistics.median(measured)
            print(f"{n:>12.0e} {epsilon0:>5g} {int(np.sum(full.right - full.left + 1 == 1)):>9} {b:>11.4f} {m:>9.4f} "
                  f"{m / b:>7.2f}  [{bound.epsilon_lower:.6g}, {bound.epsilon_upper:.6g}]")


if __name__ == "__main__":
    main()
