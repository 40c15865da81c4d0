"""Private learning: Bhowmick et al. 2018 Figure 3 and softmax regression on the bundled digits.

Figure 3's setting (Sec. 5.1): logistic regression, X uniform on the sphere S^{d−1}, θ* uniform on
τ·S^{d−1}, Y = ±1 with P(Y = 1 | x) = 1/(1 + e^{−⟨θ*, x⟩}); d = 500, N = 10^5, τ = 4. One pass of
private SGD (batch 1, η_k = √(ε/d)·k^{−0.51}, averaged iterate, gradients clipped to L = 1, which
they never exceed since ‖x‖ = 1) for each ε and mechanism; non-private SGD on the same pass with
the same steps; the maximum-likelihood estimate. Reported: ‖θ̄ − θ*‖₂, mean ± standard deviation
over ``--reps`` data sets (``--only timing`` measures the time per 10^5 steps against the same
loop without privatizing). ``separated`` is run with
Fig. 3's direction/magnitude split (ε₂ = ε/8 for the magnitude, ``--eps-split 0.875``) and the
optimal cap for the direction (the paper splits the direction's 7ε/8 as 13ε/16 for γ and ε/16
for p; that split is not offered).

Digits (``examples/digits_unit.parquet``, 1797 rows, 64 features on the unit sphere, 10 classes):
``ldp train --loss softmax -L 2`` (‖∇‖ ≤ √2·‖(x, 1)‖ = 2) through the file path, 30% holdout
fixed by the seed, accuracy over ``--reps`` seeds for each ε and number of epochs, with the
non-private SGD of the same pass and the empirical minimiser.

    python benchmarks/train.py                    # both, 5 repetitions
    python benchmarks/train.py --only fig3 --reps 3 --eps 50,500,5000
    python benchmarks/train.py --figure fig3.png  # with matplotlib installed
    python benchmarks/train.py --only timing      # seconds per 10^5 steps at d = 500, vs the non-private loop
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ldpcli.learn.losses import make_loss
from ldpcli.learn.sgd import EuclideanIterate, StepRule, default_step_rule, empirical_minimizer, sgd_pass
from ldpcli.mechanisms import MechanismSpec

FIG3_MECHANISMS = {"privunit2": {}, "separated": {"eps_split": 0.875}, "duchi-l2": {}}


def logistic_data(n: int, d: int, tau: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fig. 3's law: (X uniform on the sphere, Y = ±1 logistic in ⟨θ*, x⟩), θ* uniform on τ·S^{d−1}."""
    theta = rng.standard_normal(d)
    theta *= tau / np.linalg.norm(theta)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    p = 1.0 / (1.0 + np.exp(-X @ theta))
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    return X, y, theta


def fig3_rep(rep: int, n: int, d: int, tau: float, eps_grid: list[float]) -> dict[str, object]:
    """One data set: every (mechanism, ε) run, the non-private twins and the MLE."""
    rng = np.random.default_rng(1000 + rep)
    X, y, theta_star = logistic_data(n, d, tau, rng)
    loss = make_loss("logistic", d, 2)
    mle = empirical_minimizer(loss, X, y, "l2", 1e6)
    out: dict[str, object] = {"mle": float(np.linalg.norm(mle.theta - theta_star))}
    for eps in eps_grid:
        for name, options in FIG3_MECHANISMS.items():
            mech = MechanismSpec(name, eps, None, 1.0, options).calibrate(d)
            rule = default_step_rule("l2", mech, 10.0, eps)
            private, twin = EuclideanIterate(d, 10.0), EuclideanIterate(d, 10.0)
            sgd_pass(loss, mech, private, twin if name == "privunit2" else None, X, y, 1, rule, rng)
            out[f"{name}@{eps:g}"] = float(np.linalg.norm(private.average - theta_star))
            if name == "privunit2":
                out[f"sgd@{eps:g}"] = float(np.linalg.norm(twin.average - theta_star))
    return out


def fig3(reps: int, n: int, d: int, tau: float, eps_grid: list[float], workers: int, figure: str | None) -> None:
    with ProcessPoolExecutor(max_workers=workers) as pool:
        runs = list(pool.map(fig3_rep, range(reps), [n] * reps, [d] * reps, [tau] * reps, [eps_grid] * reps))
    print(f"\nFigure 3 (Bhowmick et al. 2018): logistic regression, d = {d}, N = {n}, τ = {tau:g}, {reps} data sets; "
          f"‖θ̄ − θ*‖₂ mean ± sd (θ = 0 has error {tau:g})")
    names = [*FIG3_MECHANISMS, "sgd"]
    print("| ε | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    curves: dict[str, list[float]] = {name: [] for name in names}
    for eps in eps_grid:
        cells = []
        for name in names:
            values = np.array([run[f"{name}@{eps:g}"] for run in runs])
            curves[name].append(float(values.mean()))
            cells.append(f"{values.mean():.3f} ± {values.std(ddof=1) if reps > 1 else 0.0:.3f}")
        print(f"| {eps:g} | " + " | ".join(cells) + " |")
    mle = np.array([run["mle"] for run in runs])
    print(f"MLE: {mle.mean():.3f} ± {mle.std(ddof=1) if reps > 1 else 0.0:.3f}  (the `sgd` column: non-private SGD "
          "with the privunit2 run's steps, on the same pass)")
    if figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for name in names:
            ax.plot(eps_grid, curves[name], marker="o", label=name if name != "sgd" else "non-private SGD")
        ax.axhline(float(mle.mean()), color="k", linestyle=":", label="MLE")
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
    dimension = d

    class _Exact:  # the identity "mechanism": what the loop costs without privatizing
        norm_bound, d = 1.0, dimension

        def project(self, g: np.ndarray) -> tuple[np.ndarray, int]:
            return g, 0

        def privatize(self, g: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return g

    rows = {}
    for name in ["none", *FIG3_MECHANISMS, "duchi-linf"]:
        mech = _Exact() if name == "none" else MechanismSpec(name, eps, None, 1.0, FIG3_MECHANISMS.get(name, {})).calibrate(d)
        it = EuclideanIterate(d, 10.0)
        started = time.perf_counter()
        sgd_pass(loss, mech, it, None, X, y, batch, StepRule(0.1, 0.51), np.random.default_rng(1))  # type: ignore[arg-type]
        rows[name] = (time.perf_counter() - started) * 1e5 / n * batch
    print(f"\nTime per 10^5 steps (batch {batch}), d = {d}, ε = {eps:g}, one process, {n} steps each:")
    for name, seconds in rows.items():
        label = "non-private loop (same code, identity mechanism)" if name == "none" else name
        print(f"  {label}: {seconds:.2f} s  ({seconds / rows['none']:.2f}× the non-private loop)")


def digits(reps: int, eps_grid: list[float], epochs_grid: list[int]) -> None:
    from ldpcli.learn.train import TrainingOptions, train
    from ldpcli.release.options import ReleaseOptions

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
    parser.add_argument("--only", choices=("fig3", "digits", "timing"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=500)
    parser.add_argument("--tau", type=float, default=4.0)
    parser.add_argument("--eps", default="10,50,100,500,1000,5000", help="Figure 3's ε grid")
    parser.add_argument("--digits-eps", default="1,10,100,1000,10000")
    parser.add_argument("--epochs", default="1,10", help="the digits' epochs grid")
    parser.add_argument("--workers", type=int, default=2, help="processes for Figure 3's repetitions")
    parser.add_argument("--figure", help="save Figure 3's curves here (needs matplotlib)")
    args = parser.parse_args()
    if args.only in (None, "fig3"):
        fig3(args.reps, args.n, args.d, args.tau, [float(e) for e in args.eps.split(",")], args.workers, args.figure)
    if args.only in (None, "timing"):
        timing(args.n, args.d, 100.0, 1)
        timing(args.n, args.d, 100.0, 32)
    if args.only in (None, "digits"):
        digits(args.reps, [float(e) for e in args.digits_eps.split(",")], [int(e) for e in args.epochs.split(",")])


if __name__ == "__main__":
    main()
