"""The Flower integration (issue 41 item 2) with the real ``flwr`` package: ``LdpMod`` called as a ClientApp calls
a mod, on Flower's Message/RecordDict/ArrayRecord objects; every way raw parameters could leave is refused; ε in
the reply's metrics; ``LdpStrategy``'s per-client ledger against a hand count over rounds, and its budget."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

from flwr.app import (  # noqa: E402
    DEFAULT_TTL,
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    Metadata,
    MetricRecord,
    RecordDict,
)
from flwr.common.constant import ErrorCode  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from ldpcli.integrations.flower import EPSILON_METRIC, LDP_RECORD, LdpMod, LdpStrategy  # noqa: E402
from ldpcli.mechanisms import MechanismSpec  # noqa: E402

OLD = {"conv.weight": np.full((2, 3), 100.0, np.float32), "conv.bias": np.zeros(3, np.float32),
       "fc.weight": np.full((4,), -5.0, np.float64)}
CONTEXT = Context(run_id=1, node_id=7, node_config={}, state=RecordDict(), run_config={})


def _incoming(arrays: dict[str, np.ndarray] | None = None, node: int = 7, server_round: int | None = 1,
              message_type: str = MessageType.TRAIN, group: str | None = None) -> Message:
    """A message as the ClientApp receives it from the server (metadata set by the SuperLink); ``group``: its
    group_id when not the round (Flower's own strategies send ""); ``server_round`` None: no config record."""
    content = RecordDict({} if server_round is None else {"config": ConfigRecord({"server-round": server_round})})
    if arrays is not None:
        content["arrays"] = ArrayRecord({k: Array(v) for k, v in arrays.items()})
    metadata = Metadata(run_id=1, message_id=f"m{node}-{server_round}", src_node_id=1, dst_node_id=node,
                        reply_to_message_id="", group_id=str(server_round) if group is None else group, created_at=time.time(), ttl=DEFAULT_TTL,
                        message_type=message_type)
    return Message(metadata=metadata, content=content)


def _app(change: Callable[[dict[str, np.ndarray]], dict[str, Any]] | None = None,
         **records: Any) -> Callable[[Message, Context], Message]:
    """A ClientApp's train function: the parameters moved by 0.01 (or ``change``), num-examples 10."""
    def train(msg: Message, ctxt: Context) -> Message:
        arrays = {k: a.numpy() for k, a in msg.content["arrays"].items()}
        new = change(arrays) if change else {k: (a + 0.01).astype(a.dtype) for k, a in arrays.items()}
        content = RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in new.items()}),
                              "metrics": MetricRecord({"num-examples": 10}), **records})
        return Message(content, reply_to=msg)
    return train


def _arrays(msg: Message) -> dict[str, np.ndarray]:
    return {k: a.numpy() for k, a in msg.content["arrays"].items()}


def test_the_mod_sends_old_plus_the_privatized_change_with_epsilon_in_the_metrics() -> None:
    mod = LdpMod(epsilon=4.0, norm_bound=1.0, rng=11)
    out = mod(_incoming(OLD), CONTEXT, _app())
    assert not out.has_error()
    sent = _arrays(out)
    assert list(sent) == list(OLD)
    for key, old in OLD.items():
        assert sent[key].shape == old.shape and sent[key].dtype == old.dtype
    mech = MechanismSpec("privunit2", 4.0, None, 1.0).validated().calibrate(13)
    change = np.concatenate([(sent[k].astype(np.float64) - OLD[k]).reshape(-1) for k in OLD])
    assert mech.scale is not None
    # the report is old + Z, ‖Z‖ = L·scale: the change (13 × 0.01) was privatized, not the parameters (‖·‖ ≈ 245)
    assert np.linalg.norm(change) == pytest.approx(mech.scale, rel=1e-4)
    assert out.content["metrics"][EPSILON_METRIC] == mech.epsilon_exact
    assert out.content["metrics"]["num-examples"] == 10
    assert dict(out.content[LDP_RECORD]) == {"mechanism": "privunit2", "epsilon": mech.epsilon_exact,
                                             "norm-bound": 1.0}


def test_a_seeded_mod_repeats_and_the_default_one_does_not() -> None:
    first = _arrays(LdpMod(epsilon=2.0, norm_bound=1.0, rng=5)(_incoming(OLD), CONTEXT, _app()))
    again = _arrays(LdpMod(epsilon=2.0, norm_bound=1.0, rng=5)(_incoming(OLD), CONTEXT, _app()))
    other_round = _arrays(LdpMod(epsilon=2.0, norm_bound=1.0, rng=5)(_incoming(OLD, server_round=2), CONTEXT, _app()))
    assert all(np.array_equal(first[k], again[k]) for k in OLD)
    assert not np.array_equal(first["fc.weight"], other_round["fc.weight"])


def test_a_seeded_mod_draws_a_fresh_stream_each_round_as_flowers_strategies_send_them() -> None:
    """Flower's strategies (FedAvg.configure_train) leave group_id empty and put the round in the config's
    server-round: each round is its own stream (the seeded digits run once drew round 1's in every round); a
    seeded reply that names no round at all is refused rather than drawn from a shared stream."""
    mod = LdpMod(epsilon=2.0, norm_bound=1.0, rng=5)
    rounds = [_arrays(mod(_incoming(OLD, server_round=r, group=""), CONTEXT, _app())) for r in (1, 2, 1)]
    assert not np.array_equal(rounds[0]["fc.weight"], rounds[1]["fc.weight"])
    assert all(np.array_equal(rounds[0][k], rounds[2][k]) for k in OLD)
    _refused(mod(_incoming(OLD, server_round=None, group=""), CONTEXT, _app()), "needs the round")
    unseeded = LdpMod(epsilon=2.0, norm_bound=1.0)(_incoming(OLD, server_round=None, group=""), CONTEXT, _app())
    assert not unseeded.has_error()


def _refused(out: Message, words: str) -> None:
    assert out.has_error(), "a reply that could carry raw parameters was sent"
    assert out.error.code == ErrorCode.MOD_FAILED_PRECONDITION and words in out.error.reason


@pytest.mark.parametrize(("app", "words"), [
    (_app(lambda a: {**a, "conv.bias": np.zeros(4, np.float32)}), "'conv.bias' is float32[4] but came as float32[3]"),
    (_app(lambda a: {**a, "fc.weight": a["fc.weight"].astype(np.float32)}), "'fc.weight' is float32[4]"),
    (_app(lambda a: {k: v for k, v in a.items() if k != "conv.bias"}), "missing ['conv.bias']"),
    (_app(lambda a: {**a, "extra": np.zeros(2)}), "new ['extra']"),
    (_app(lambda a: dict(reversed(list(a.items())))), "another order"),
    (_app(lambda a: {**a, "conv.bias": np.array([0.0, np.nan, 0.0], np.float32)}), "holds nan"),
    (_app(lambda a: {**a, "conv.bias": np.array([1, 2, 3], np.int32)}), "int32"),
    (_app(secret=ArrayRecord({"w": Array(np.zeros(2))})), "carries 2 ArrayRecords"),
    (_app(masked=ConfigRecord({"vector": [1, 2, 3]})), "config record 'masked' holds a list"),
    (_app(blob=ConfigRecord({"state": b"raw parameters"})), "holds a bytes"),
])
def test_a_reply_that_could_let_raw_parameters_out_is_refused(app: Callable[[Message, Context], Message],
                                                              words: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ldpcli.integrations.flower"):
        out = LdpMod(epsilon=1.0, norm_bound=1.0, rng=0)(_incoming(OLD), CONTEXT, app)
    _refused(out, words)
    assert "LdpMod refused a reply" in caplog.text


def test_a_list_metric_and_a_reply_without_parameters_are_refused() -> None:
    mod = LdpMod(epsilon=1.0, norm_bound=1.0, rng=0)

    def listed(msg: Message, ctxt: Context) -> Message:
        reply = _app()(msg, ctxt)
        reply.content["metrics"]["weights"] = [0.1, 0.2]
        return reply

    _refused(mod(_incoming(OLD), CONTEXT, listed), "metric record 'metrics' holds a list")
    bare = lambda msg, ctxt: Message(RecordDict({"metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)  # noqa: E731
    _refused(mod(_incoming(OLD), CONTEXT, bare), "the train reply carries 0 ArrayRecords")


def test_a_train_message_without_parameters_is_refused_before_the_app_runs() -> None:
    ran = []

    def app(msg: Message, ctxt: Context) -> Message:
        ran.append(msg)
        return _app()(msg, ctxt)

    _refused(LdpMod(epsilon=1.0, norm_bound=1.0)(_incoming(None), CONTEXT, app), "the train message carries 0")
    assert not ran


def test_other_messages_pass_unless_their_reply_carries_arrays() -> None:
    mod = LdpMod(epsilon=1.0, norm_bound=1.0)
    evaluate = _incoming(OLD, message_type=MessageType.EVALUATE)
    metrics_only = mod(evaluate, CONTEXT, lambda msg, ctxt: Message(
        RecordDict({"metrics": MetricRecord({"accuracy": 0.5, "num-examples": 3})}), reply_to=msg))
    assert not metrics_only.has_error() and metrics_only.content["metrics"]["accuracy"] == 0.5
    _refused(mod(evaluate, CONTEXT, _app()), "the reply to a evaluate message carries an ArrayRecord")


def test_an_error_reply_of_the_app_passes_as_it_is() -> None:
    from flwr.app import Error

    def failing(msg: Message, ctxt: Context) -> Message:
        return Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason="boom"), reply_to=msg)

    out = LdpMod(epsilon=1.0, norm_bound=1.0)(_incoming(OLD), CONTEXT, failing)
    assert out.has_error() and out.error.reason == "boom"


def test_the_mod_has_no_sensitivity_knob_and_checks_its_spec_at_once() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        LdpMod(epsilon=0.0, norm_bound=1.0)
    with pytest.raises(ValueError):
        LdpMod(epsilon=1.0, norm_bound=1.0, sensitivity=2.0)
    with pytest.raises(TypeError, match="rng must be None or a non-negative int seed"):
        LdpMod(epsilon=1.0, norm_bound=1.0, rng=np.random.default_rng(0))  # type: ignore[arg-type]


# --- the server ---------------------------------------------------------------------------------------------------


class _Grid:
    """The part of Flower's Grid a strategy's configure_train reads: the connected nodes."""

    def __init__(self, nodes: list[int]) -> None:
        self.nodes = nodes

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)


@pytest.fixture
def server_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a ServerApp process has set before its strategy builds messages."""
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)


def _round(strategy: LdpStrategy, server_round: int, nodes: list[int], mod: LdpMod,
           replying: set[int] | None = None) -> tuple[list[int], Any]:
    """One round: the strategy's train messages delivered to the nodes (those in ``replying``), each answered
    through the mod, and aggregated. (The asked nodes, the aggregate.)"""
    arrays = ArrayRecord({k: Array(v) for k, v in OLD.items()})
    messages = list(strategy.configure_train(server_round, arrays, ConfigRecord(), _Grid(nodes)))
    asked = [m.metadata.dst_node_id for m in messages]
    replies = []
    for node in asked:
        if replying is None or node in replying:
            incoming = _incoming(OLD, node=node, server_round=server_round)
            replies.append(mod(incoming, CONTEXT, _app()))
    return asked, strategy.aggregate_train(server_round, replies)


def test_the_ledger_matches_a_hand_count_and_refuses_past_max_budget(
        server_identity: None, tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "clients.json"
    strategy = LdpStrategy(FedAvg(min_available_nodes=1, min_train_nodes=1), epsilon=1.0, norm_bound=1.0,
                           max_budget=2.5, ledger_path=path)
    mod = LdpMod(epsilon=1.0, norm_bound=1.0, rng=3)
    eps = MechanismSpec("privunit2", 1.0, None, 1.0).validated().calibrate(13).epsilon_exact
    asked1, _ = _round(strategy, 1, [11, 12, 13], mod)
    asked2, _ = _round(strategy, 2, [11, 12, 13], mod, replying={11, 12})  # 13 does not answer round 2
    assert sorted(asked1) == sorted(asked2) == [11, 12, 13]
    assert strategy.ledger.totals() == {"11": 2 * eps, "12": 2 * eps, "13": eps}
    with caplog.at_level(logging.WARNING, logger="ldpcli.integrations.flower"):
        asked3, (aggregate, _) = _round(strategy, 3, [11, 12, 13], mod)
    assert asked3 == [13]  # 11 and 12 have spent 2ε: a third round would pass 2.5
    assert strategy.ledger.totals() == {"11": 2 * eps, "12": 2 * eps, "13": 2 * eps}
    assert "node 11 left out of round 3" in caplog.text and "passes max_budget = 2.5" in caplog.text
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["totals"] == {"11": 2 * eps, "12": 2 * eps, "13": 2 * eps}
    assert sorted((r["client"], r["round"]) for r in saved["refusals"]) == [("11", 3), ("12", 3)]  # FedAvg shuffles
    assert aggregate is not None and set(aggregate.keys()) == set(OLD)
    asked4, _ = _round(strategy, 4, [11, 12, 13], mod)
    assert asked4 == []
    reopened = LdpStrategy(FedAvg(), epsilon=1.0, norm_bound=1.0, max_budget=2.5, ledger_path=path)
    assert reopened.ledger.totals() == strategy.ledger.totals()


def test_the_strategy_aggregates_privatized_replies_and_excludes_the_others(server_identity: None) -> None:
    strategy = LdpStrategy(FedAvg(min_available_nodes=1, min_train_nodes=1), epsilon=1.0, norm_bound=1.0)
    mod = LdpMod(epsilon=1.0, norm_bound=1.0, rng=9)
    private = [mod(_incoming(OLD, node=n), CONTEXT, _app()) for n in (21, 22)]
    raw = _app()(_incoming(OLD, node=23), CONTEXT)  # a client without the mod
    other = LdpMod(epsilon=3.0, norm_bound=1.0, rng=9)(_incoming(OLD, node=24), CONTEXT, _app())
    arrays, metrics = strategy.aggregate_train(1, [*private, raw, other])
    assert arrays is not None and metrics is not None
    expected = {k: (_arrays(private[0])[k].astype(np.float64) + _arrays(private[1])[k]) / 2 for k in OLD}
    for key in OLD:
        np.testing.assert_allclose(arrays[key].numpy(), expected[key], rtol=1e-6)
    assert [r["client"] for r in strategy.ledger.refusals] == ["23", "24"]
    assert "not privatized by LdpMod" in strategy.ledger.refusals[0]["reason"]
    assert set(strategy.ledger.totals()) == {"21", "22", "24"}  # 24 spent its ε, though it is not used


def test_the_docs_page_runs(server_identity: None) -> None:
    """docs/federated-flower.md's python blocks, in order in one namespace; then its ClientApp's train function
    answered through its mod, as Flower would call them."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "federated-flower.md").read_text(encoding="utf-8")
    blocks = [block.split("\n", 1)[1] for block in text.split("```")[1::2] if block.startswith("python\n")]
    assert len(blocks) == 3
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, "docs/federated-flower.md", "exec"), namespace)  # noqa: S102
    mod = namespace["app"]._mods[0]
    out = mod(_incoming({"w": np.zeros((16, 16), np.float32)}), CONTEXT, namespace["train"])
    assert not out.has_error() and out.content["metrics"][EPSILON_METRIC] > 0


#: A Flower app run by Flower's own simulation engine (its Ray backend), in a process of its own.
SIMULATION = '"""A Flower simulation: 3 clients, 2 rounds, LdpMod on each, LdpStrategy(FedAvg) with a ledger file."""\nimport json, sys\nimport numpy as np\nfrom flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict\nfrom flwr.clientapp import ClientApp\nfrom flwr.serverapp import Grid, ServerApp\nfrom flwr.serverapp.strategy import FedAvg\nfrom flwr.simulation import run_simulation\n\nfrom ldpcli.integrations.flower import LdpMod, LdpStrategy\n\nout_dir = sys.argv[1]\nclient = ClientApp(mods=[LdpMod(epsilon=2.0, norm_bound=1.0)])\n\n\n@client.train()\ndef train(msg: Message, context: Context) -> Message:\n    arrays = {k: a.numpy() for k, a in msg.content["arrays"].items()}\n    step = 0.01 * (1 + context.node_config.get("partition-id", 0))\n    new = {k: Array((a + np.float32(step)).astype(a.dtype)) for k, a in arrays.items()}\n    content = RecordDict({"arrays": ArrayRecord(new), "metrics": MetricRecord({"num-examples": 10})})\n    return Message(content, reply_to=msg)\n\n\nserver = ServerApp()\n\n\n@server.main()\ndef main(grid: Grid, context: Context) -> None:\n    strategy = LdpStrategy(FedAvg(fraction_evaluate=0.0, min_available_nodes=3, min_train_nodes=3),\n                           epsilon=2.0, norm_bound=1.0, max_budget=10.0, ledger_path=f"{out_dir}/ledger.json")\n    initial = ArrayRecord({"w": Array(np.zeros((8, 8), np.float32)), "b": Array(np.zeros(8, np.float32))})\n    result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=2)\n    final = {k: a.numpy().tolist() for k, a in result.arrays.items()}\n    with open(f"{out_dir}/result.json", "w") as f:\n        json.dump({"arrays": final}, f)\n\n\nif __name__ == "__main__":\n    run_simulation(server_app=server, client_app=client, num_supernodes=3,\n                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}})\n'


@pytest.mark.slow  # Ray's start and one numba compile per client actor: about a minute on 2 cores
def test_a_flower_simulation_end_to_end(tmp_path: Any) -> None:
    """3 clients, 2 rounds of ``flwr.simulation.run_simulation``: every reply privatized by LdpMod and charged by
    LdpStrategy's ledger file (2 rounds × ε per node), the final model of the right shapes and finite."""
    import subprocess
    import sys

    script = tmp_path / "app.py"
    script.write_text(SIMULATION, encoding="utf-8")
    result = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    ledger = json.loads((tmp_path / "ledger.json").read_text(encoding="utf-8"))
    assert len(ledger["totals"]) == 3 and set(ledger["totals"].values()) == {4.0} and not ledger["refusals"]
    assert sorted(entry["round"] for entry in ledger["entries"]) == [1, 1, 1, 2, 2, 2]
    final = json.loads((tmp_path / "result.json").read_text(encoding="utf-8"))["arrays"]
    assert np.asarray(final["w"]).shape == (8, 8) and np.all(np.isfinite(final["w"])) and len(final["b"]) == 8


def test_the_fitres_layout_of_local_dp_mod_is_privatized_too() -> None:
    """The layout of Flower's FitIns/FitRes (what LocalDpMod reads, and the apps written before the Message API):
    the parameters privatized, ε in the FitRes metrics, the reply still a FitRes to Flower's own converter."""
    from flwr.compat.common import recorddict_compat as compat

    def train(msg: Message, ctxt: Context) -> Message:
        arrays = {k: Array(a.numpy() + np.float32(0.01)) for k, a in msg.content["fitins.parameters"].items()}
        content = RecordDict({"fitres.parameters": ArrayRecord(arrays), "fitres.metrics": ConfigRecord({"loss": 0.5}),
                              "fitres.num_examples": MetricRecord({"num_examples": 4}),
                              "fitres.status": ConfigRecord({"code": 0, "message": "Success"})})
        return Message(content, reply_to=msg)

    incoming = _incoming(None)
    incoming.content["fitins.parameters"] = ArrayRecord({"0": Array(np.zeros(64, np.float32))})
    out = LdpMod(epsilon=2.0, norm_bound=1.0, rng=1)(incoming, CONTEXT, train)
    assert not out.has_error()
    fitres = compat.recorddict_to_fitres(out.content, keep_input=True)
    assert fitres.num_examples == 4 and fitres.metrics["loss"] == 0.5 and fitres.metrics[EPSILON_METRIC] > 0
    values = out.content["fitres.parameters"]["0"].numpy()
    assert not np.allclose(values, 0.01) and values.dtype == np.float32
