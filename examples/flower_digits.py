"""Federated training on the digits under local DP, through Flower's own simulation engine: Flower's
``LocalDpMod`` against ldp's ``LdpMod``, same clients, rounds, model, initial parameters and seed.

    python examples/flower_digits.py --eps 1 2 4 8 --rounds 10 --clients 100 --out /tmp/flower_digits

The model is a multinomial logistic regression, 64 pixels (scaled to [0, 1]) → 10 classes: W (64×10) and b (10),
d = 650 parameters, starting at zero. ``examples/digits.parquet`` (1797 rows) is split once, 80/20 with seed 0; the
1437 training rows are dealt IID over ``--clients`` clients, all of whom take part in every round. A client runs
``LOCAL_STEPS`` full-batch gradient steps of the cross-entropy at rate ``LEARNING_RATE`` from the global
parameters and replies its new parameters: deterministic given (client, global parameters), so the server can
replay it exactly.

Arms, all in one ``run_simulation`` (one Ray start; one numba compile per actor), each a strategy run of its own
from the same zero parameters, the arm named in the train config and a client mod dispatching on it:

- ``none``: no mod, plain FedAvg (the non-private reference);
- ``localdp``: Flower's ``LocalDpMod(clipping_norm=L, sensitivity=2L, epsilon=ε, delta=1e-5)``, plain FedAvg. It
  clips the *update* (new − old) to L in ℓ2 and adds Gaussian noise of σ = 2L √(2 ln(1.25/δ)) / ε to the
  parameters old + clipped update, which is the same as noising the update; sensitivity 2L is the ℓ2
  sensitivity of a clipped update (two clients' updates can be 2L apart). It reads and writes the FitIns/FitRes
  layout (``fitins.parameters``, ``fitres.parameters``), so a thin adapter renames the records around it (the
  arrays pass as they are);
- ``ldp``: ldp's ``LdpMod(epsilon=ε, norm_bound=L)`` (PrivUnit2, pure ε), ``LdpStrategy(FedAvg())``.

Both private arms send old + a privatized update and FedAvg averages them weighted by the public ``num-examples``,
so both aggregates are unbiased for the weighted mean clipped update. Per round, for every arm: the test
accuracy of the new global model, and ‖aggregate update − true mean‖², where the aggregate update is the new
global minus the old and the true mean is the weighted mean of the clipped updates of the same clients from the
same old global, computed outside Flower by replaying the clients' training in the server process (no raw update
ever travels through the private path). The reference arm is not clipped, so its error is clipping's bias
alone. L = ``NORM_BOUND`` is a public constant, near a typical update's norm
at the start (not computed from the data at run time).

Writes ``flower_digits.json`` (one row per arm, ε and round) and ``flower_digits.png`` under ``--out`` and
prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

#: Public choices of the run (none is fitted to the data at run time).
NORM_BOUND = 1.0
DELTA = 1e-5
LOCAL_STEPS = 5
LEARNING_RATE = 0.5
SEED = 0
FEATURES, CLASSES = 64, 10


def load_digits(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train x, train y, test x, test y): pixels / 16, an 80/20 split with seed ``SEED``."""
    table = pq.read_table(path, columns=["label", "pixels"])
    x = np.asarray(table.column("pixels").to_pylist(), dtype=np.float64) / 16.0
    y = np.asarray(table.column("label").to_pylist(), dtype=np.int64)
    order = np.random.default_rng(SEED).permutation(len(y))
    cut = int(0.8 * len(y))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def partition(n_rows: int, clients: int, pid: int) -> np.ndarray:
    """Row indices of client ``pid``: the training rows dealt IID (a seeded shuffle, then round robin)."""
    order = np.random.default_rng(SEED + 1).permutation(n_rows)
    return order[pid::clients]


def local_train(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``LOCAL_STEPS`` full-batch gradient steps of the mean cross-entropy of softmax(x W + b)."""
    w, b = w.astype(np.float64), b.astype(np.float64)
    onehot = np.eye(CLASSES)[y]
    for _ in range(LOCAL_STEPS):
        logits = x @ w + b
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot) / len(y)
        w = w - LEARNING_RATE * (x.T @ g)
        b = b - LEARNING_RATE * g.sum(axis=0)
    return w.astype(np.float32), b.astype(np.float32)


def accuracy(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(x @ w + b, axis=1) == y))


def true_mean_update(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray, clients: int) -> np.ndarray:
    """The num-examples-weighted mean of the clients' updates clipped to L in ℓ2, from (w, b): the replay."""
    total, weight = np.zeros(FEATURES * CLASSES + CLASSES), 0
    for pid in range(clients):
        rows = partition(len(y), clients, pid)
        nw, nb = local_train(w, b, x[rows], y[rows])
        u = np.concatenate([(nw.astype(np.float64) - w).ravel(), nb.astype(np.float64) - b])
        u *= min(1.0, NORM_BOUND / max(float(np.linalg.norm(u)), 1e-300))
        total += len(rows) * u
        weight += len(rows)
    return total / weight


def build_apps(data_path: Path, eps: list[float], rounds: int, clients: int, rows: list[dict[str, Any]]) -> Any:
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.client.mod import LocalDpMod
    from flwr.clientapp import ClientApp
    from flwr.common import parameters_to_ndarrays
    from flwr.compat.common import recorddict_compat as compat
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg

    from ldpcli.integrations.flower import LdpMod, LdpStrategy

    mods: dict[str, Any] = {}

    def legacy(local_dp: Any) -> Any:
        """``LocalDpMod`` reads the FitIns/FitRes layout (``fitins.parameters``, ``fitres.parameters``): the
        Message API's records renamed into it around the mod and back, the arrays untouched; the mod itself clips
        and noises."""
        def mod(msg: Message, ctxt: Context, call_next: Any) -> Message:
            keys = list(msg.content["arrays"].keys())
            incoming = Message(metadata=msg.metadata, content=RecordDict({
                "fitins.parameters": ArrayRecord({str(i): msg.content["arrays"][k] for i, k in enumerate(keys)}),
                "fitins.config": ConfigRecord({})}))

            def app(legacy_msg: Message, context: Context) -> Message:
                reply = call_next(msg, context)
                if reply.has_error():
                    return reply
                content = RecordDict({
                    "fitres.parameters": ArrayRecord({str(i): reply.content["arrays"][k] for i, k in enumerate(keys)}),
                    "fitres.metrics": ConfigRecord({}),
                    "fitres.num_examples": MetricRecord({"num_examples": reply.content["metrics"]["num-examples"]}),
                    "fitres.status": ConfigRecord({"code": 0, "message": "Success"})})
                return Message(content, reply_to=legacy_msg)

            out = local_dp(incoming, ctxt, app)
            if out.has_error():
                return out
            fitres = compat.recorddict_to_fitres(out.content, keep_input=True)
            sent = parameters_to_ndarrays(fitres.parameters)
            dtypes = [msg.content["arrays"][k].numpy().dtype for k in keys]
            return Message(RecordDict({
                "arrays": ArrayRecord({k: Array(a.astype(t)) for k, a, t in zip(keys, sent, dtypes)}),
                "metrics": MetricRecord({"num-examples": fitres.num_examples})}), reply_to=msg)
        return mod

    def dispatch(msg: Message, ctxt: Context, call_next: Any) -> Message:
        """The mod of the arm named in the train config (built once per client process)."""
        arm = str(msg.content["config"]["arm"]) if "config" in msg.content else "none"
        if arm == "none":
            return call_next(msg, ctxt)
        if arm not in mods:
            kind, epsilon = arm.split(":")
            mods[arm] = (legacy(LocalDpMod(clipping_norm=NORM_BOUND, sensitivity=2 * NORM_BOUND,
                                           epsilon=float(epsilon), delta=DELTA)) if kind == "localdp"
                         else LdpMod(epsilon=float(epsilon), norm_bound=NORM_BOUND, rng=SEED))
        return mods[arm](msg, ctxt, call_next)

    client = ClientApp(mods=[dispatch])
    train_x, train_y, test_x, test_y = load_digits(data_path)

    @client.train()
    def train(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        rows_of = partition(len(train_y), int(context.node_config["num-partitions"]), pid)
        arrays = msg.content["arrays"]
        w, b = local_train(arrays["w"].numpy(), arrays["b"].numpy(), train_x[rows_of], train_y[rows_of])
        content = RecordDict({"arrays": ArrayRecord({"w": Array(w), "b": Array(b)}),
                              "metrics": MetricRecord({"num-examples": len(rows_of)})})
        return Message(content, reply_to=msg)

    def evaluator(kind: str, epsilon: float) -> Any:
        """The server-side evaluation of an arm: a row per round (accuracy; error against the replayed mean)."""
        previous: list[np.ndarray] = []
        started = time.perf_counter()

        def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
            w, b = arrays["w"].numpy().astype(np.float64), arrays["b"].numpy().astype(np.float64)
            if server_round > 0:
                pw, pb = previous
                aggregate = np.concatenate([(w - pw).ravel(), b - pb])
                truth = true_mean_update(pw, pb, train_x, train_y, clients)
                rows.append({"arm": kind, "epsilon": epsilon, "round": server_round,
                             "accuracy": accuracy(w, b, test_x, test_y),
                             "mse": float(np.sum((aggregate - truth) ** 2)),
                             "true_norm": float(np.linalg.norm(truth)),
                             "seconds": time.perf_counter() - started})
            previous[:] = [w, b]
            return MetricRecord({"accuracy": accuracy(w, b, test_x, test_y)})
        return evaluate

    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        arms = [("none", 0.0)] + [(kind, e) for e in eps for kind in ("localdp", "ldp")]
        for kind, epsilon in arms:
            fedavg = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=clients,
                            min_available_nodes=clients)
            strategy = LdpStrategy(fedavg, epsilon=epsilon, norm_bound=NORM_BOUND) if kind == "ldp" else fedavg
            initial = ArrayRecord({"w": Array(np.zeros((FEATURES, CLASSES), np.float32)),
                                   "b": Array(np.zeros(CLASSES, np.float32))})
            arm = "none" if kind == "none" else f"{kind}:{epsilon:g}"
            strategy.start(grid=grid, initial_arrays=initial, num_rounds=rounds,
                           train_config=ConfigRecord({"arm": arm}), evaluate_fn=evaluator(kind, epsilon))

    return server, client


def table(rows: list[dict[str, Any]], eps: list[float], rounds: int) -> str:
    """Round × ε: accuracy and MSE of LocalDpMod and of ldp, the non-private accuracy beside."""
    get = {(r["arm"], r["epsilon"], r["round"]): r for r in rows}
    head = "| round | no DP acc | " + " | ".join(
        f"ε={e:g} acc LocalDpMod | ε={e:g} acc ldp | ε={e:g} MSE LocalDpMod | ε={e:g} MSE ldp" for e in eps) + " |"
    lines = [head, "|" + "---|" * (2 + 4 * len(eps))]
    for t in range(1, rounds + 1):
        cells = [str(t), f"{get[('none', 0.0, t)]['accuracy']:.3f}"]
        for e in eps:
            a, b = get[("localdp", e, t)], get[("ldp", e, t)]
            cells += [f"{a['accuracy']:.3f}", f"{b['accuracy']:.3f}", f"{a['mse']:.3g}", f"{b['mse']:.3g}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], eps: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    ref = [r for r in rows if r["arm"] == "none"]
    left.plot([r["round"] for r in ref], [r["accuracy"] for r in ref], "k-", label="no DP")
    for color, e in zip(colors, eps):
        for kind, style in (("localdp", "--"), ("ldp", "-")):
            mine = [r for r in rows if r["arm"] == kind and r["epsilon"] == e]
            name = "LocalDpMod" if kind == "localdp" else "ldp LdpMod"
            left.plot([r["round"] for r in mine], [r["accuracy"] for r in mine], style, color=color,
                      label=f"{name}, ε={e:g}")
            right.plot([r["round"] for r in mine], [r["mse"] for r in mine], style, color=color,
                       label=f"{name}, ε={e:g}")
    left.set(xlabel="round", ylabel="test accuracy", title="global model")
    right.set(xlabel="round", ylabel="‖aggregate − true mean update‖²", yscale="log", title="aggregate error")
    fig.legend(*left.get_legend_handles_labels(), loc="lower center", ncol=5, fontsize=8)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0, 4.0, 8.0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parent / "digits.parquet")
    args = parser.parse_args()
    from flwr.simulation import run_simulation

    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    server, client = build_apps(args.data, args.eps, args.rounds, args.clients, rows)
    started = time.perf_counter()
    run_simulation(server_app=server, client_app=client, num_supernodes=args.clients,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}})
    seconds = time.perf_counter() - started
    expected = args.rounds * (1 + 2 * len(args.eps))
    if len(rows) != expected or not all(math.isfinite(r["mse"]) for r in rows):
        raise SystemExit(f"{args.out}: the simulation gave {len(rows)} of {expected} round rows; see Flower's log")
    setup = {"clients": args.clients, "rounds": args.rounds, "eps": args.eps, "norm_bound": NORM_BOUND,
             "delta": DELTA, "local_steps": LOCAL_STEPS, "learning_rate": LEARNING_RATE, "d": FEATURES * CLASSES
             + CLASSES, "seed": SEED, "seconds": seconds}
    (args.out / "flower_digits.json").write_text(json.dumps({"setup": setup, "rows": rows}, indent=1),
                                                 encoding="utf-8")
    plot(rows, args.eps, args.out / "flower_digits.png")
    print(table(rows, args.eps, args.rounds))
    print(f"\n{args.clients} clients, {args.rounds} rounds, d = 650, L = {NORM_BOUND:g}, δ = {DELTA:g}; "
          f"{seconds:.0f} s in run_simulation")


if __name__ == "__main__":
    main()
