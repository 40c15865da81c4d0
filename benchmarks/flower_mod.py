"""ldp's Flower client mod against Flower's own ``LocalDpMod`` (issue 41's targets), both called as a ClientApp calls
a mod, on the same messages, in one process on one thread.

- ``overhead``: the seconds of one train reply of ``--params`` float32 parameters (10⁶ by default) through
  ``LdpMod(privunit2, ε, L)`` — with its default generator (ldp's ChaCha20 stream) and with a seed (numpy's
  PCG64) — and through ``LocalDpMod(clipping_norm=L, sensitivity=2L, ε, δ)``; the median of ``--repeats`` calls
  after one untimed call each (compiling ldp's kernels is not counted), and the ratio.
- ``mse``: ``--clients`` updates of d = ``--d`` values (random directions, norms uniform in [0.5L, 1.5L], so some
  are clipped), each client's reply through either mod, the replies' plain mean against the mean of the clipped
  updates: ‖mean − truth‖² averaged over ``--trials``, beside each mechanism's expected value (PrivUnit2's
  ``expected_error_max / n``, at most; the Gaussian's d σ² / n with σ = 2L √(2 ln(1.25/δ)) / ε).

    python benchmarks/flower_mod.py                      # both, ε = 4, L = 1, δ = 1e−5
    python benchmarks/flower_mod.py --only mse --d 10000 --clients 40 --trials 5
    python benchmarks/flower_mod.py --sweep --clients 40 --trials 2   # ε ∈ {1,2,4,8} × d ∈ {10³,10⁴,10⁵}

Nothing here is a test: tests never assert wall-clock times.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402


def _legacy_message(old: list[np.ndarray], node: int) -> Any:
    """A train message in the layout ``LocalDpMod`` reads (``fitins.parameters``), as the ClientApp receives it."""
    from flwr.app import DEFAULT_TTL, Array, ArrayRecord, ConfigRecord, Message, MessageType, Metadata, RecordDict

    content = RecordDict({"fitins.parameters": ArrayRecord({str(i): Array(a) for i, a in enumerate(old)}),
                          "fitins.config": ConfigRecord({})})
    metadata = Metadata(run_id=1, message_id=f"m{node}", src_node_id=1, dst_node_id=node, reply_to_message_id="",
                        group_id="1", created_at=time.time(), ttl=DEFAULT_TTL, message_type=MessageType.TRAIN)
    return Message(metadata=metadata, content=content)


def _legacy_app(new: list[np.ndarray]) -> Callable[[Any, Any], Any]:
    """A ClientApp's train function replying ``new`` in the legacy layout (``fitres.*``)."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

    def train(msg: Any, ctxt: Any) -> Any:
        content = RecordDict({"fitres.parameters": ArrayRecord({str(i): Array(a) for i, a in enumerate(new)}),
                              "fitres.metrics": ConfigRecord({}), "fitres.num_examples": MetricRecord({"num_examples": 1}),
                              "fitres.status": ConfigRecord({"code": 0, "message": "Success"})})
        return Message(content, reply_to=msg)
    return train


def _sent(reply: Any) -> np.ndarray:
    if reply.has_error():
        raise RuntimeError(reply.error.reason)
    record = reply.content["fitres.parameters"]
    return np.concatenate([record[key].numpy().astype(np.float64).reshape(-1) for key in record])


def _mods(epsilon: float, bound: float, delta: float) -> dict[str, Any]:
    from flwr.client.mod import LocalDpMod

    from ldpcli.integrations.flower import LdpMod

    return {"LdpMod (ChaCha20)": LdpMod(epsilon=epsilon, norm_bound=bound),
            "LdpMod (seeded PCG64)": LdpMod(epsilon=epsilon, norm_bound=bound, rng=1),
            "LocalDpMod": LocalDpMod(clipping_norm=bound, sensitivity=2 * bound, epsilon=epsilon, delta=delta)}


def overhead(params: int, repeats: int, epsilon: float, bound: float, delta: float) -> None:
    import logging

    from flwr.app import Context, RecordDict

    logging.getLogger("flwr").setLevel(logging.WARNING)
    rng = np.random.default_rng(0)
    shapes = [(params // 2,), (params - params // 2,)]
    old = [rng.normal(0, 0.1, s).astype(np.float32) for s in shapes]
    new = [(a + rng.normal(0, 1e-3, a.shape)).astype(np.float32) for a in old]
    ctxt = Context(run_id=1, node_id=7, node_config={}, state=RecordDict(), run_config={})
    app = _legacy_app(new)
    times: dict[str, float] = {}
    for name, mod in _mods(epsilon, bound, delta).items():
        _sent(mod(_legacy_message(old, 7), ctxt, app))  # untimed: compiling, first allocations
        seconds = []
        for _ in range(repeats):
            message = _legacy_message(old, 7)
            start = time.perf_counter()
            _sent(mod(message, ctxt, app))
            seconds.append(time.perf_counter() - start)
        times[name] = statistics.median(seconds)
    print(f"overhead: one train reply of {params} float32 parameters, one thread, median of {repeats}")
    for name, value in times.items():
        print(f"  {name:24s} {value:8.3f} s   {value / times['LocalDpMod']:5.2f}× LocalDpMod")


def _errors(d: int, clients: int, trials: int, epsilon: float, bound: float,
            delta: float) -> tuple[dict[str, float], dict[str, float]]:
    """(measured, expected) ‖mean − true mean‖² of ``LdpMod`` (ChaCha20) and ``LocalDpMod``, mean over trials."""
    import logging

    from flwr.app import Context, RecordDict

    from ldpcli.mechanisms import MechanismSpec

    logging.getLogger("flwr").setLevel(logging.WARNING)
    ctxt = Context(run_id=1, node_id=7, node_config={}, state=RecordDict(), run_config={})
    mods = _mods(epsilon, bound, delta)
    del mods["LdpMod (seeded PCG64)"]
    errors: dict[str, list[float]] = {name: [] for name in mods}
    rng = np.random.default_rng(41)
    for _ in range(trials):
        directions = rng.normal(size=(clients, d))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        updates = (directions * rng.uniform(0.5 * bound, 1.5 * bound, (clients, 1))).astype(np.float32)
        clipped = updates.astype(np.float64)
        clipped *= np.minimum(1.0, bound / np.linalg.norm(clipped, axis=1, keepdims=True))
        truth = clipped.mean(axis=0)
        old = [np.zeros(d, np.float32)]
        for name, mod in mods.items():
            sent = [_sent(mod(_legacy_message(old, 100 + i), ctxt, _legacy_app([updates[i]]))) for i in range(clients)]
            errors[name].append(float(np.sum((np.mean(sent, axis=0) - truth) ** 2)))
    mech = MechanismSpec("privunit2", epsilon, None, bound).validated().calibrate(d)
    sigma = 2 * bound * math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    expected = {"LdpMod (ChaCha20)": mech.expected_error_max / clients, "LocalDpMod": d * sigma**2 / clients}
    return {name: statistics.fmean(values) for name, values in errors.items()}, expected


def mse(d: int, clients: int, trials: int, epsilon: float, bound: float, delta: float) -> None:
    measured, expected = _errors(d, clients, trials, epsilon, bound, delta)
    print(f"mse: ‖mean − true mean‖², d = {d}, {clients} clients, ε = {epsilon:g}, L = {bound:g}, "
          f"LocalDpMod at δ = {delta:g} with sensitivity 2L; mean over {trials} trials")
    for name, value in measured.items():
        print(f"  {name:24s} {value:12.2f}   (expected {expected[name]:12.2f})")
    print(f"  LocalDpMod / LdpMod: {measured['LocalDpMod'] / measured['LdpMod (ChaCha20)']:.1f}×")


def sweep(clients: int, trials: int, bound: float, delta: float) -> None:
    """The issue's target grid: ε ∈ {1, 2, 4, 8} × d ∈ {10³, 10⁴, 10⁵}, a markdown table with the ratio (at
    d = 10⁵ half the clients and one trial, to keep it within minutes on a small machine)."""
    print(f"| d | ε | clients × trials | LdpMod MSE | LocalDpMod MSE | ratio | expected ratio |  (L = {bound:g}, "
          f"δ = {delta:g})")
    print("|---|---|---|---|---|---|---|")
    for d in (10**3, 10**4, 10**5):
        n, t = (clients, trials) if d < 10**5 else (max(2, clients // 2), 1)
        for epsilon in (1.0, 2.0, 4.0, 8.0):
            measured, expected = _errors(d, n, t, epsilon, bound, delta)
            ldp, local = measured["LdpMod (ChaCha20)"], measured["LocalDpMod"]
            print(f"| {d} | {epsilon:g} | {n} × {t} | {ldp:.4g} | {local:.4g} | {local / ldp:.1f}× | "
                  f"{expected['LocalDpMod'] / expected['LdpMod (ChaCha20)']:.1f}× |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("overhead", "mse"))
    parser.add_argument("--sweep", action="store_true", help="the MSE grid over ε and d (instead of the rest)")
    parser.add_argument("--params", type=int, default=10**6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--d", type=int, default=10**4)
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--eps", type=float, default=4.0)
    parser.add_argument("--bound", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    args = parser.parse_args()
    if args.sweep:
        sweep(args.clients, args.trials, args.bound, args.delta)
        return
    if args.only in (None, "overhead"):
        overhead(args.params, args.repeats, args.eps, args.bound, args.delta)
    if args.only in (None, "mse"):
        mse(args.d, args.clients, args.trials, args.eps, args.bound, args.delta)


if __name__ == "__main__":
    main()
