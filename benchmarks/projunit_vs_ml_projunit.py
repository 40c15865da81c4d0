"""ldp's projunit against apple/ml-projunit's own ProjUnit and FastProjUnit on the same inputs: bias and error.

    git clone https://github.com/apple/ml-projunit /tmp/ml-projunit     # its code, imported as it is
    python benchmarks/projunit_vs_ml_projunit.py --clone /tmp/ml-projunit
    python benchmarks/projunit_vs_ml_projunit.py --clone /tmp/ml-projunit --rows 20000 --d 64 --k 8 --eps 4

Each side privatizes --rows copies of each of three unit inputs of dimension --d (a vertex e₁, the all-ones
direction 1/√d and a random direction, seeded), projected to --k dimensions at ε = --eps: ml-projunit's
``ProjUnit`` and ``FastProjUnit`` (``PrivUnitAlgs.py``, with their own PrivUnitG parameters, one Python call per
row as its experiments make them, its global generators seeded), and ldp's projunit with ``--projection haar``
and ``srht`` (base privunitg, the whole batch at once). For each, over the rows Z of one input x (‖x‖ = 1):

- **bias along x**: ⟨mean(Z), x⟩ − 1, with its standard error from the rows (an unbiased mechanism is within a
  few standard errors of 0);
- **‖mean(Z) − x‖**: beside the noise floor √(mean‖Z − x‖²/n) that an unbiased mechanism's mean stays near;
- **per-row ‖Z − x‖²**: the mean over the rows, beside ldp's exact error (haar) or stated bound (srht).

ml-projunit's ε = −1 (its "no privacy" switch: no noise, the projection alone) isolates the projection: its
Rᵀ·(Rx/‖Rx‖) has mean E[RᵀRx/‖Rx‖], which is not x, because its R is the QR of uniform [0, 1) entries (not a
Haar subspace) and its decoder leaves out the 1/E‖Rx‖ that the normalisation calls for. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import table  # noqa: E402

from ldpcli.mechanisms import MechanismSpec  # noqa: E402


def inputs(d: int, seed: int) -> dict[str, np.ndarray]:
    """The three unit inputs: a vertex, the all-ones direction and a random direction."""
    vertex = np.zeros(d)
    vertex[0] = 1.0
    direction = np.random.default_rng(seed).standard_normal(d)
    return {"vertex e1": vertex, "all-ones": np.full(d, 1.0 / math.sqrt(d)), "random": direction /
            np.linalg.norm(direction)}


def ml_projunit(clone: Path) -> Any:
    """ml-projunit's ``PrivUnitAlgs`` module, imported from its clone (its SQKR imports matplotlib: Agg)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.path.insert(0, str(clone))
    try:
        return importlib.import_module("PrivUnitAlgs")
    except ImportError as exc:
        raise SystemExit(f"cannot import ml-projunit from {clone} ({exc}): clone it with "
                         "`git clone https://github.com/apple/ml-projunit` and pass --clone; its code needs numpy, "
                         "scipy and matplotlib") from exc


def summary(z: np.ndarray, x: np.ndarray, exact: float | None) -> list[str]:
    """The row of one (side, input): bias along x ± se, ‖mean − x‖ and its noise floor, per-row error."""
    n = z.shape[0]
    along = z @ x
    errors = np.sum((z - x) ** 2, axis=1)
    deviation = float(np.linalg.norm(z.mean(axis=0) - x))
    floor = math.sqrt(float(errors.mean()) / n)
    bias = float(along.mean()) - 1.0
    se = float(along.std(ddof=1)) / math.sqrt(n)
    return [f"{bias:+.4f} ± {se:.4f}", f"{bias / se:+.1f}" if se > 0 else "exact", f"{deviation:.4f}",
            f"{floor:.4f}", f"{errors.mean():.4g}", "—" if exact is None else f"{exact:.4g}"]


def their_rows(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, rows: int) -> np.ndarray:
    return np.stack([np.asarray(fn(x), dtype=np.float64) for _ in range(rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clone", type=Path, default=Path(os.environ.get("ML_PROJUNIT", "/tmp/ml-projunit")))
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--eps", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    theirs = ml_projunit(args.clone)
    np.random.seed(args.seed)  # ml-projunit draws from numpy's and Python's global generators
    random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    mechanisms = {projection: MechanismSpec("projunit", args.eps, None, 1.0, {"k": args.k, "projection": projection})
                  .calibrate(args.d) for projection in ("haar", "srht")}
    sides: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "ml-projunit ProjUnit, ε = −1 (no noise)": lambda x: their_rows(
            lambda v: theirs.ProjUnit(v, -1, args.k), x, args.rows),
        "ml-projunit ProjUnit": lambda x: their_rows(lambda v: theirs.ProjUnit(v, args.eps, args.k), x, args.rows),
        "ml-projunit FastProjUnit": lambda x: their_rows(
            lambda v: theirs.FastProjUnit(v, args.eps, args.k), x, args.rows),
        "ldp projunit haar": lambda x: mechanisms["haar"].privatize(np.tile(x, (args.rows, 1)), rng),
        "ldp projunit srht": lambda x: mechanisms["srht"].privatize(np.tile(x, (args.rows, 1)), rng),
    }
    exact = {"ldp projunit haar": mechanisms["haar"].expected_error,
             "ldp projunit srht": mechanisms["srht"].expected_error}
    out, seconds = [], {}
    for side, privatize in sides.items():
        start = time.perf_counter()
        for name, x in inputs(args.d, args.seed + 1).items():
            out.append([side, name, *summary(privatize(x), x, exact.get(side))])
        seconds[side] = time.perf_counter() - start
    print(f"d = {args.d}, k = {args.k}, ε = {args.eps:g}, {args.rows} rows per input, {os.cpu_count()} cores; "
          f"ml-projunit from {args.clone}")
    table(["mechanism", "input", "bias along x ± se", "bias / se", "‖mean − x‖", "noise floor",
           "per-row ‖Z − x‖²", "ldp exact (haar) / bound (srht)"], out)
    print("seconds (3 inputs): " + ", ".join(f"{side} {value:.2f}" for side, value in seconds.items()))
    # ldp's Haar W has orthonormal rows (α = E‖Wx‖ ≈ √(k/d)); ml-projunit scales its R by √(d/k), as the SRHT is
    scaled = {"haar": float(mechanisms["haar"].alpha) * math.sqrt(args.d / args.k),
              "srht": float(mechanisms["srht"].alpha)}
    print(f"E‖Wx‖ for a unit x, W scaled by √(d/k): {scaled['haar']:.5f} (Haar), {scaled['srht']:.5f} (SRHT); a "
          f"decoder that leaves out its inverse (ml-projunit's) is biased along x by {scaled['haar'] - 1:+.4f} "
          f"(Haar), {scaled['srht'] - 1:+.4f} (SRHT), on top of what a projection that is not Haar adds")


if __name__ == "__main__":
    main()
