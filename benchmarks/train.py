"""Private learning: Bhowmick et al. 2018 Figure 3 and softmax regression on the bundled digits.

Figure 3's setting (Sec. 5.1): logistic regression, X uniform on the sphere S^{d−1}, θ* uniform on
τ·S^{d−1}, Y = ±1 with P(Y = 1 | x) = 1/(1 + e^{−⟨θ*, x⟩}); d = 500, N = 10^5, τ = 4. One pass of
private SGD (batch 1, β = 0.51, averaged iterate, gradients clipped to L = 1, which they never
exceed since ‖x‖ = 1, ball radius R = 10) for each ε. Reported: ‖θ̄ − θ*‖₂, mean ± standard
deviation over ``--reps`` data sets, for

- ``default``: what ``ldp train`` does by default (:data:`ldpcli.learn._sgd.DEFAULT_MECHANISM`,
  ``separated`` with its error-minimising split, and :func:`ldpcli.learn._sgd.default_step_rule`,
  η₀ = 1/(G·M));
- ``paper``: the paper's choices, ``separated`` with ε₂ = ε/8 for the magnitude
  (``eps_split`` 0.875; the direction's 7ε/8 with the optimal cap, since the paper's 13ε/16 and
  ε/16 split of γ and p is not offered) and η₀ = √(ε/d);
- ``privunit2``: the default before issue 26, privunit2 with η₀ = √(ε/d);
- ``θ = 0`` (error τ), non-private SGD on the same data with the default rule's noiseless step
  η₀ = 1/L² (the ε → ∞ limit of ``default``), and the maximum-likelihood estimate.

``--small`` keeps the problem's difficulty at about 1/100 of the work: d = 100 and N = 4000 keep
d²/N (the asymptotic error² of averaged SGD is ∝ d²·E‖Z‖²/N) and λ_min·Σ_k η_k (how far the
iterates travel, ∝ N^{0.49}/d); ε scales with d (the grid is ε/d = 0.02 … 10 either way).
``--only timing`` measures the time per 10^5 steps against the same loop without privatizing.
``--only central`` measures the central layer (Bhowmick et al. eq. (13): Poisson samples and
Gaussian noise from ChaCha20, projection onto the ρ-ball) against the local loop with the same
expected rows per step and the same steps, the two alternating in one process; and the accounting's
one-off time (PLD and RDP).

Digits (``examples/digits_unit.parquet``, 1797 rows, 64 features on the unit sphere, 10 classes):
``ldp train --loss softmax -L 2`` (‖∇‖ ≤ √2·‖(x, 1)‖ = 2) through the file path, 30% holdout
fixed by the seed, accuracy over ``--reps`` seeds for each ε and number of epochs, with the
non-private SGD of the same pass and the empirical minimiser.

    python benchmarks/train.py                    # all three, 5 repetitions
    python benchmarks/train.py --only fig3 --small --reps 5 --workers 2   # about a minute on 2 cores
    python benchmarks/train.py --only fig3 --reps 3                       # the paper's size
    python benchmarks/train.py --only fig3 --reps 1 --columns default --eps 50,250,1000,5000
    python benchmarks/train.py --figure fig3.png  # with matplotlib installed
    python benchmarks/train.py --only timing      # seconds per 10^5 steps at d = 500, vs the non-private loop
    python benchmarks/train.py --only central --n 20000 --d 100 --reps 3   # the central layer vs the local loop
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ldpcli.learn._losses import make_loss
from ldpcli.learn._reference import empirical_minimizer
from ldpcli.learn._sgd import (
    DEFAULT_MECHANISM,
    EuclideanIterate,
    StepRule,
    default_step_rule,
    sgd_pass,
)
from ldpcli.math._domains import L2_BALL
from ldpcli.mechanisms import MechanismSpec

#: Figure 3's ε grid as multiples of d (ε = 10 … 5000 at d = 500).
FIG3_RATIOS = (0.02, 0.1, 0.2, 0.5, 1.0, 2.0, 10.0)
#: The private columns: (mechanism, options, step rule) with "default" the library's rule and
#: "paper" η₀ = √(ε/d).
FIG3_RUNS = {
    "default": (DEFAULT_MECHANISM, {}, "default"),
    "paper": ("separated", {"eps_split": 0.875}, "paper"),
    "privunit2": ("privunit2", {}, "paper"),
}
RADIUS = 10.0


def logistic_data(n: int, d: int, tau: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fig. 3's law: (X uniform on the sphere, Y = ±1 logistic in ⟨θ*, x⟩), θ* uniform on τ·S^{d−1}."""
    theta = rng.standard_normal(d)
    theta *= tau / np.linalg.norm(theta)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    p = 1.0 / (1.0 + np.exp(-X @ theta))
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    return X, y, theta


class Exact:
    """The identity "mechanism" on the unit ball: the non-private loop, same code."""

    norm_bound = 1.0
    domain = L2_BALL
    scale = 1.0

    def __init__(self, d: int) -> None:
        self.d = d

    def project(self, g: np.ndarray) -> tuple[np.ndarray, int]:
        return g, 0

    def privatize(self, g: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return g


def fig3_rep(rep: int, n: int, d: int, tau: float, eps_grid: list[float], columns: list[str]) -> dict[str, float]:
    """One data set: every (column, ε) run, non-private SGD and the MLE."""
    rng = np.random.default_rng(1000 + rep)
    X, y, theta_star = logistic_data(n, d, tau, rng)
    loss = make_loss("logistic", d, 2)
    out = {"mle": float(np.linalg.norm(empirical_minimizer(loss, X, y, "l2", 1e6).theta - theta_star))}

    def error(mech: object, rule: StepRule) -> float:
        private = EuclideanIterate(d, RADIUS)
        sgd_pass(loss, mech, private, None, X, y, 1, rule, rng)  # type: ignore[arg-type]
        return float(np.linalg.norm(private.average - theta_star))

    out["sgd"] = error(Exact(d), default_step_rule("l2", Exact(d), RADIUS))  # type: ignore[arg-type]
    for eps in eps_grid:
        for column in columns:
            name, options, rule = FIG3_RUNS[column]
            mech = MechanismSpec(name, eps, None, 1.0, options).calibrate(d)
            steps = default_step_rule("l2", mech, RADIUS) if rule == "default" else StepRule(math.sqrt(eps / d), 0.51)
            out[f"{column}@{eps:g}"] = error(mech, steps)
    return out


def fig3(reps: int, n: int, d: int, tau: float, eps_grid: list[float], columns: list[str], workers: int,
         figure: str | None) -> None:
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        runs = list(pool.map(fig3_rep, range(reps), [n] * reps, [d] * reps, [tau] * reps, [eps_grid] * reps,
                             [columns] * reps))
    seconds = time.perf_counter() - started

    def cell(key: str) -> tuple[float, str]:
        values = np.array([run[key] for run in runs])
        return float(values.mean()), f"{values.mean():.3f} ± {values.std(ddof=1) if reps > 1 else 0.0:.3f}"

    print(f"\nFigure 3 (Bhowmick et al. 2018): logistic regression, d = {d}, N = {n}, τ = {tau:g}, {reps} data sets, "
          f"one pass, batch 1; ‖θ̄ − θ*‖₂ mean ± sd over the data sets ({seconds:.0f} s, {workers} processes)")
    names = list(columns)
    print("| ε | ε/d | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    curves: dict[str, list[float]] = {name: [] for name in names}
    for eps in eps_grid:
        cells = []
        for name in names:
            mean, text = cell(f"{name}@{eps:g}")
            curves[name].append(mean)
            cells.append(text)
        print(f"| {eps:g} | {eps / d:g} | " + " | ".join(cells) + " |")
    sgd, mle = cell("sgd"), cell("mle")
    print(f"θ = 0: {tau:.3f}; non-private SGD (η₀ = 1, the default rule's noiseless step): {sgd[1]}; MLE: {mle[1]}")
    if figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for name in names:
            ax.plot(eps_grid, curves[name], marker="o", label=name)
        ax.axhline(tau, color="grey", linestyle="--", label="θ = 0")
        ax.axhline(sgd[0], color="k", linestyle="-.", label="non-private SGD")
        ax.axhline(mle[0], color="k", linestyle=":", label="MLE")
        ax.set_xscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel("‖θ̄ − θ*‖₂")
        ax.set_title(f"Private logistic regression, d = {d}, N = {n}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(figure)
        print(f"wrote {figure}")


def timing(n: int, d: int, eps: float, batch: int) -> None:
    """Seconds per 10^5 steps of one private pass at d, one process, against the non-private pass of
    the same loop (gradients, steps, averaging; no clipping or privatizing) measured in the same run."""
    rng = np.random.default_rng(0)
    X, y, _ = logistic_data(n, d, 4.0, rng)
    loss = make_loss("logistic", d, 2)
    rows = {}
    for name in ["none", "privunit2", "separated", "duchi-l2", "duchi-linf"]:
        mech = Exact(d) if name == "none" else MechanismSpec(name, eps, None, 1.0, {}).calibrate(d)
        it = EuclideanIterate(d, RADIUS)
        started = time.perf_counter()
        sgd_pass(loss, mech, it, None, X, y, batch, StepRule(0.1, 0.51), np.random.default_rng(1))  # type: ignore[arg-type]
        rows[name] = (time.perf_counter() - started) * 1e5 / n * batch
    print(f"\nTime per 10^5 steps (batch {batch}), d = {d}, ε = {eps:g}, one process, {n} steps each:")
    for name, seconds in rows.items():
        label = "non-private loop (same code, identity mechanism)" if name == "none" else name
        print(f"  {label}: {seconds:.2f} s  ({seconds / rows['none']:.2f}× the non-private loop)")


def central_timing(n: int, d: int, eps: float, rate: float, reps: int) -> None:
    """The central layer's steps (:func:`ldpcli.learn._central.central_steps` over a Poisson schedule from
    ChaCha20) against :func:`sgd_pass` with batch qN (the same expected rows per step, the same ⌈1/q⌉
    steps), alternating ``reps`` times in this process; and the one-off accounting (PLD and RDP)."""
    from ldpcli.learn._central import CentralOptions, central_steps, poisson_schedule
    from ldpcli.release._randomness import keyed_generator, root_seed

    X, y, _ = logistic_data(n, d, 4.0, np.random.default_rng(0))
    loss = make_loss("logistic", d, 2)
    mech = MechanismSpec(DEFAULT_MECHANISM, eps, None, 1.0, {}).calibrate(d)
    steps, batch = math.ceil(1 / rate), max(1, round(rate * n))
    started = time.perf_counter()
    layer = CentralOptions(1.0, rate, noise_multiplier=1.0).layer(steps)
    accounting = time.perf_counter() - started
    local: list[float] = []
    central: list[float] = []
    for rep in range(reps + 1):  # run 0 warms up (numba's compilation, ChaCha's first keys) and is not kept
        it = EuclideanIterate(d, RADIUS)
        started = time.perf_counter()
        sgd_pass(loss, mech, it, None, X, y, batch, StepRule(0.1, 0.51), np.random.default_rng(rep))
        local.append(time.perf_counter() - started)
        it = EuclideanIterate(d, RADIUS)
        root = root_seed(rep)
        started = time.perf_counter()
        schedule = poisson_schedule(n, rate, steps, keyed_generator(root, 2, rng="secure"))
        central_steps(loss, mech, layer, it, None, X, y, schedule, StepRule(0.1, 0.51), np.random.default_rng(rep),
                      keyed_generator(root, 3, rng="secure"))
        central.append(time.perf_counter() - started)
    local, central = local[1:], central[1:]
    ratios = sorted(c / b for c, b in zip(central, local))
    print(f"\nCentral layer, N = {n}, d = {d}, ε = {eps:g} ({mech.name}), q = {rate:g}: {steps} steps of ~{batch} rows, "
          f"{reps} alternating runs")
    print(f"  local loop (batch {batch}): median {sorted(local)[reps // 2]:.3f} s; central layer: median "
          f"{sorted(central)[reps // 2]:.3f} s; central/local per run: {', '.join(f'{r:.2f}' for r in ratios)} "
          f"(median {ratios[reps // 2]:.2f}×)")
    print(f"  accounting (PLD + RDP, once per run): {accounting:.2f} s; ε_PLD = {layer.account.epsilon_pld:.4g}, "
          f"ε_RDP = {layer.account.epsilon_rdp:.4g} at δ = {layer.account.delta:g}")


def digits(reps: int, eps_grid: list[float], epochs_grid: list[int]) -> None:
    from ldpcli.learn._train import TrainingOptions, train
    from ldpcli.release._options import ReleaseOptions

    data = Path(__file__).resolve().parent.parent / "examples" / "digits_unit.parquet"
    classes = [str(c) for c in range(10)]
    print(f"\nDigits: softmax regression (p = 650), 30% holdout, L = 2, {reps} seeds; holdout accuracy mean ± sd")
    print("| ε per use | epochs | ε per row | private | non-private SGD (same pass) | empirical minimiser |")
    print("|---|---|---|---|---|---|")
    for epochs in epochs_grid:
        for eps in eps_grid:
            acc: dict[str, list[float]] = {"private": [], "baseline": [], "minimizer": []}
            for seed in range(reps):
                result = train(data, label="label", epsilon=eps, norm_bound=2.0,
                               training=TrainingOptions(loss="softmax", holdout=0.3, baseline=True, epochs=epochs,
                                                        classes=classes),
                               options=ReleaseOptions(seed=seed))
                for key in acc:
                    accuracy = result.metrics[key].accuracy
                    assert accuracy is not None
                    acc[key].append(accuracy)
            cells = [f"{np.mean(v):.1%} ± {np.std(v, ddof=1) if reps > 1 else 0.0:.1%}" for v in acc.values()]
            print(f"| {eps:g} | {epochs} | {eps * epochs:g} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("fig3", "digits", "timing", "central"))
    parser.add_argument("--rate", type=float, default=0.01, help="the central layer's sampling rate q")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--n", type=int, help="rows N (default 100000; 4000 with --small)")
    parser.add_argument("--d", type=int, help="dimension d (default 500; 100 with --small)")
    parser.add_argument("--small", action="store_true", help="Figure 3 at d = 100, N = 4000: the same d²/N")
    parser.add_argument("--columns", default=",".join(FIG3_RUNS), help="Figure 3's private columns, of: "
                        + ", ".join(FIG3_RUNS))
    parser.add_argument("--tau", type=float, default=4.0)
    parser.add_argument("--eps", help="Figure 3's ε grid (default: ε/d = " + ", ".join(f"{r:g}" for r in FIG3_RATIOS)
                        + ")")
    parser.add_argument("--digits-eps", default="1,10,100,1000,10000")
    parser.add_argument("--epochs", default="1,10", help="the digits' epochs grid")
    parser.add_argument("--workers", type=int, default=2, help="processes for Figure 3's repetitions")
    parser.add_argument("--figure", help="save Figure 3's curves here (needs matplotlib)")
    args = parser.parse_args()
    n = args.n or (4000 if args.small else 100_000)
    d = args.d or (100 if args.small else 500)
    if args.only in (None, "fig3"):
        grid = [float(e) for e in args.eps.split(",")] if args.eps else [r * d for r in FIG3_RATIOS]
        columns = args.columns.split(",")
        unknown = sorted(set(columns) - set(FIG3_RUNS))
        if unknown:
            parser.error(f"--columns: unknown {', '.join(unknown)}; choose from {', '.join(FIG3_RUNS)}")
        fig3(args.reps, n, d, args.tau, grid, columns, args.workers, args.figure)
    if args.only in (None, "timing"):
        timing(n, d, 100.0, 1)
        timing(n, d, 100.0, 32)
    if args.only in (None, "central"):
        central_timing(n, d, 100.0, args.rate, args.reps)
    if args.only in (None, "digits"):
        digits(args.reps, [float(e) for e in args.digits_eps.split(",")], [int(e) for e in args.epochs.split(",")])


if __name__ == "__main__":
    main()
