"""Query release on the 2-way marginals of 8 binary attributes (m = 112 queries over 256 items), one run.

Local: n people, each privatizes the centred answer vector of their record (privunit2 and
gaussian-sign, ε = 1 and 4); the server averages, adds the centroid back and projects onto the
hull of the universe (Błasiok et al. 2019, Lemma 5.3 / Thm 5.1). Central: the projection mechanism
at ρ (noise calibrated to the diameter) and its coarse variant. Reported: the mean squared ℓ2 error
of the raw and the projected answers over ``--reps`` repetitions (± its standard error), the RMS
error per query, and the guarantees. Then the hull solver's time on random universes, as a multiple of
one pass over the universe (the floor of any exact method) measured in the same run.

    python benchmarks/queries.py                       # n = 10^4, 20 repetitions
    python benchmarks/queries.py --reps 5 --no-hull-timing
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from ldpcli.estimators._projection import Hull
from ldpcli.estimators._queries import (
    central_sigma,
    diameter,
    greedy_cover,
    marginal_workload,
    mean_width,
    nearest_rows,
)
from ldpcli.mechanisms import get_mechanism


def data_items(n: int, attributes: int, rng: np.random.Generator) -> np.ndarray:
    """n records from a correlated law: a latent coin shifts every attribute's probability."""
    latent = rng.random(n) < 0.4
    p = np.where(latent[:, None], np.linspace(0.6, 0.9, attributes), np.linspace(0.1, 0.4, attributes))
    records = (rng.random((n, attributes)) < p).astype(np.int64)
    return records @ (1 << np.arange(attributes - 1, -1, -1))


def summary(values: list[float]) -> str:
    a = np.asarray(values)
    return f"{a.mean():.4g} ± {a.std(ddof=1) / math.sqrt(a.size):.2g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--no-hull-timing", action="store_true")
    args = parser.parse_args()
    w = marginal_workload(8)
    rng = np.random.default_rng(2026)
    items = data_items(args.n, 8, rng)
    truth = w.values[items].mean(axis=0)
    encoded = w.values[items] - w.center
    print(f"workload: 2-way marginals of 8 bits, m = {w.m}, {w.items} items; radius about the centroid "
          f"{w.radius:.4g} (uncentred {math.sqrt(28):.4g}); diameter {w.diameter:.4g}; n = {args.n}")
    print("\nlocal (E‖·‖² of the answer vector, mean ± s.e. over repetitions; RMS per query = √(E‖·‖²/m))")
    print(f"{'mechanism':14} {'ε':>4} {'raw':>18} {'projected':>18} {'gain':>7} {'guarantee':>10} {'RMS raw':>8} "
          f"{'RMS proj':>8}")
    for eps in (1.0, 4.0):
        for name in ("privunit2", "gaussian-sign"):
            mech = get_mechanism(name).calibrate(w.m, eps, norm_bound=w.radius * (1 + 1e-12))
            raw_err, proj_err = [], []
            for _ in range(args.reps):
                raw = mech.privatize(encoded, rng).mean(axis=0) + w.center
                raw_err.append(float(np.sum((raw - truth) ** 2)))
                proj_err.append(float(np.sum((w.hull.project(raw) - truth) ** 2)))
            gain = np.mean(raw_err) / np.mean(proj_err)
            print(f"{name:14} {eps:>4g} {summary(raw_err):>18} {summary(proj_err):>18} {gain:>6.1f}× "
                  f"{mech.expected_error_max / args.n:>10.4g} {math.sqrt(np.mean(raw_err) / w.m):>8.4f} "
                  f"{math.sqrt(np.mean(proj_err) / w.m):>8.4f}")
    print(f"\ncentral at ρ = {args.rho} (σ = diam/(n√(2ρ)))")
    for alpha in (None, 0.1, 0.2):
        if alpha is None:
            support, hull, label = w.distinct, w.hull, "projection"
            counts = np.bincount(w.item_rows[items], minlength=w.distinct.shape[0]).astype(float)
        else:
            cover = greedy_cover(w.distinct, alpha)
            support = w.distinct[cover]
            hull, label = Hull(support), f"coarse α={alpha:g} ({support.shape[0]} items)"
            owner = nearest_rows(w.distinct, support)
            counts = np.bincount(owner[w.item_rows[items]], minlength=support.shape[0]).astype(float)
        sigma = central_sigma(diameter(support), args.n, args.rho)
        mean = counts @ support / args.n
        noisy_err, proj_err = [], []
        for _ in range(args.reps):
            noisy = mean + sigma * rng.standard_normal(w.m)
            noisy_err.append(float(np.sum((noisy - truth) ** 2)))
            proj_err.append(float(np.sum((hull.project(noisy) - truth) ** 2)))
        width = mean_width(support)
        bound = (math.sqrt(min(w.m * sigma**2, sigma * width.upper_bound))
                 + (0.0 if alpha is None else 0.5 * alpha * math.sqrt(w.m))) ** 2
        print(f"{label:28} σ = {sigma:.3g}: noisy {summary(noisy_err)}, projected {summary(proj_err)} "
              f"(bound {bound:.3g}); RMS per query {math.sqrt(np.mean(proj_err) / w.m):.3g}")
    if args.no_hull_timing:
        return
    print("\nhull projection time (random 0/1 universes, y = a mean + Gaussian noise of norm ~√m), against the floor of"
          " one pass over the universe (V @ y, the work of one major cycle), in the same run")
    for items_, m in ((256, 112), (1000, 100), (2000, 500), (10_000, 1000)):
        points = (rng.random((items_, m)) < 0.3).astype(float)
        hull = Hull(points)
        y = points[: items_ // 2].mean(axis=0) + rng.standard_normal(m)
        start = time.perf_counter()
        solution = hull.solve(y)
        elapsed = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(20):
            hull.points @ y
        one_pass = (time.perf_counter() - start) / 20
        print(f"  {items_:>6} items × {m:>5} queries: {elapsed:7.3f} s = {elapsed / one_pass:6.0f} passes, "
              f"{solution.iterations} iterations, {solution.indices.size} active points, gap {solution.gap:.2g}")

if __name__ == "__main__":
    main()
