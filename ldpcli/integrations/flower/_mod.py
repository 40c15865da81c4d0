"""The Flower client mod: every train reply's update privatized by ldp, or the reply refused.

:class:`LdpMod` is used as Flower's own ``LocalDpMod`` is (``ClientApp(mods=[...])``) and follows the same
convention: the update is the change u = new − old of the parameters (old: those of the incoming train
message), and the reply carries old + Z, Z the privatized update (:func:`ldpcli.integrations.privatize_update`:
clipped in ℓ2 to L, then one release of the mechanism), so that a strategy averaging the replies' parameters
(FedAvg) averages old + Z and, E[Z] being the clipped update, is unbiased for old plus the mean clipped update.

It fails closed: whatever would let the client's parameters out unprivatized is answered with an error reply
(``ErrorCode.MOD_FAILED_PRECONDITION``), never the app's reply: a train message or reply without exactly one
``ArrayRecord``; a reply whose arrays differ from the incoming ones (keys, order, shapes or dtypes); a value
that is NaN or infinite; an integer array; a list or bytes in a reply's metric or config record (what a
secure-aggregation mod placed *inside* this one writes, or an app smuggling arrays); an ``ArrayRecord`` in the
reply to any other message (evaluate, query). Nothing is derived from the data: ε, L and the mechanism fix
the noise (no sensitivity knob), and nothing of the clipping goes into the reply or the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from ldpcli.integrations._model_update import checked_spec, privatize_update

try:
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, MessageType, MetricRecord
    from flwr.common.constant import ErrorCode
except ImportError:  # pragma: no cover - exercised by the missing-extra test in a subprocess
    from ldpcli.errors import install_hint

    raise ImportError(f"ldpcli.integrations.flower needs Flower: {install_hint('flwr')}") from None

#: The metric a privatized reply carries: the exact ε of its one release (a float, so strategies may average it).
EPSILON_METRIC = "ldp-epsilon"
#: The config record a privatized reply carries: ``mechanism`` (its name), ``epsilon`` (exact) and ``norm-bound``.
LDP_RECORD = "ldp"

#: Where the layout of Flower's FitRes (``flwr.compat``, read by ``LocalDpMod`` and the older strategies) keeps a
#: reply's metrics.
LEGACY_METRICS = "fitres.metrics"

_LOG = logging.getLogger("ldpcli.integrations.flower")


class RefusedReply(Exception):
    """A reply the mod will not send (the reason, in one line): turned into an error reply."""


class LdpMod:
    """A Flower client mod that privatizes each train reply's model update under ε-LDP (module docstring).

    Parameters
    ----------
    mechanism : str
        A registered vector mechanism (PrivUnit2 by default: the optimal one for ℓ2-bounded vectors).
    epsilon : float
        The ε of each round's release; a client's rounds compose (the server's :class:`LdpStrategy` keeps
        the ledger).
    norm_bound : float
        The public ℓ2 bound L on the update (the change of the parameters in one round).
    rng : int or None
        None (the default): ldp's ChaCha20 stream keyed from the OS, fresh per reply; an int seed only
        for simulations (each reply then draws from ``numpy.random.default_rng([seed, round, node])``, the
        round from the train config's ``server-round``; a seeded reply without a round is refused).
    **options
        The mechanism's own options.

    With a secure-aggregation mod, list that mod first (``mods=[secaggplus_mod, LdpMod(...)]``): it then
    masks the privatized parameters. Listed after this mod, its replies carry lists in config records and
    are refused. Every parameter of the model must be floating point (leave integer buffers out of it).
    """

    def __init__(self, mechanism: str = "privunit2", *, epsilon: float, norm_bound: float, rng: int | None = None,
                 **options: Any) -> None:
        checked_spec(mechanism, epsilon, norm_bound, options)  # now, not at the first round
        if rng is not None and (isinstance(rng, bool) or not isinstance(rng, int) or rng < 0):
            raise TypeError(f"rng must be None or a non-negative int seed (simulations only), got {rng!r}")
        self.mechanism, self.epsilon, self.norm_bound = mechanism, float(epsilon), float(norm_bound)
        self.rng, self.options = rng, dict(options)

    def __call__(self, msg: Message, ctxt: Context, call_next: Callable[[Message, Context], Message]) -> Message:
        """Privatize the reply to a train message; refuse a reply that would let raw parameters out."""
        if msg.metadata.message_type != MessageType.TRAIN:
            out = call_next(msg, ctxt)
            if not out.has_error() and len(out.content.array_records):
                return _refused(msg, f"the reply to a {msg.metadata.message_type} message carries an ArrayRecord: "
                                     "only train replies may carry parameters, and they are privatized")
            return out
        try:
            name, old = _only_array_record(msg.content, "the train message")
            old_arrays = {key: array.numpy() for key, array in old.items()}
        except RefusedReply as exc:
            return _refused(msg, str(exc))
        out = call_next(msg, ctxt)
        if out.has_error():
            return out
        try:
            return self._privatized(msg, out, old_arrays)
        except (RefusedReply, ValueError, TypeError) as exc:
            return _refused(msg, str(exc))

    def _privatized(self, msg: Message, out: Message, old: dict[str, np.ndarray]) -> Message:
        """``out`` with its parameters replaced by old + privatized (new − old), and ε in its metrics."""
        content = out.content
        name, new = _only_array_record(content, "the train reply")
        _check_same_arrays(old, new)
        _check_scalar_records(content)
        new_arrays = {key: array.numpy() for key, array in new.items()}
        for key, array in new_arrays.items():
            if not np.issubdtype(array.dtype, np.floating):
                raise RefusedReply(f"the reply's array {key!r} has dtype {array.dtype}: every parameter must be "
                                   "floating point; leave integer buffers out of the model's arrays")
        update = {key: new_arrays[key].astype(np.float64) - old[key].astype(np.float64) for key in old}
        noise, record = privatize_update(update, mechanism=self.mechanism, epsilon=self.epsilon,
                                         norm_bound=self.norm_bound, rng=self._generator(msg), **self.options)
        sent = ArrayRecord({key: Array((old[key].astype(np.float64) + noise[key]).astype(old[key].dtype))
                            for key in old})
        content[name] = sent
        if LEGACY_METRICS in content.config_records:  # the layout of FitRes (its metrics are a ConfigRecord)
            content.config_records[LEGACY_METRICS][EPSILON_METRIC] = record.epsilon
        else:
            target = next(iter(content.metric_records), "metrics")
            if target not in content.metric_records:
                content[target] = MetricRecord()
            content.metric_records[target][EPSILON_METRIC] = record.epsilon
        content[LDP_RECORD] = ConfigRecord({"mechanism": record.mechanism.name, "epsilon": record.epsilon,
                                            "norm-bound": float(record.mechanism.norm_bound)})
        return out

    def _generator(self, msg: Message) -> np.random.Generator | None:
        """None (ldp's OS-keyed ChaCha20 stream), or for a seeded simulation one stream per (round, node): the
        round from the train config's ``server-round`` (what Flower's strategies send), else from the message's
        ``group_id`` (the legacy workflows' round); a seeded reply that names neither is refused, since it would
        draw the same stream in every round."""
        if self.rng is None:
            return None
        config = msg.content.config_records.get("config")
        server_round = None if config is None else config.get("server-round")
        if isinstance(server_round, bool) or not isinstance(server_round, int):
            group = str(msg.metadata.group_id)
            if not group.isdigit():
                raise RefusedReply("a seeded LdpMod needs the round (the train config's 'server-round' or the "
                                   "message's group_id) so that no two rounds share a stream; none was sent")
            server_round = int(group)
        return np.random.default_rng([self.rng, server_round, int(msg.metadata.dst_node_id)])


def _only_array_record(content: Any, what: str) -> tuple[str, ArrayRecord]:
    """The name and record of the one ArrayRecord of ``content``; RefusedReply for none or several."""
    records = content.array_records
    if len(records) != 1:
        raise RefusedReply(f"{what} carries {len(records)} ArrayRecords, not one: the mod privatizes exactly one "
                           "set of parameters (put the model's arrays in one ArrayRecord)")
    name = next(iter(records))
    return name, records[name]


def _check_same_arrays(old: dict[str, np.ndarray], new: ArrayRecord) -> None:
    """RefusedReply unless ``new`` has the incoming arrays' keys, order, shapes and dtypes."""
    if list(new.keys()) != list(old):
        missing, extra = sorted(set(old) - set(new.keys())), sorted(set(new.keys()) - set(old))
        raise RefusedReply(f"the reply's arrays are not the incoming ones (missing {missing[:3]}, new {extra[:3]}, "
                           "or another order): reply with the same model's parameters")
    for key, array in new.items():
        shape, dtype = tuple(array.shape), str(array.dtype)
        if shape != tuple(old[key].shape) or dtype != str(old[key].dtype):
            raise RefusedReply(f"the reply's array {key!r} is {dtype}{list(shape)} but came as "
                               f"{old[key].dtype}{list(old[key].shape)}: reply with the same model's parameters")


def _check_scalar_records(content: Any) -> None:
    """RefusedReply for a list or bytes in a metric or config record: what could carry arrays past the mod."""
    for kind, records in (("metric", content.metric_records), ("config", content.config_records)):
        for name, record in records.items():
            for key, value in record.items():
                if isinstance(value, (list, bytes)):
                    raise RefusedReply(f"the reply's {kind} record {name!r} holds a {type(value).__name__} at {key!r}: "
                                       "a privatized reply carries scalars only (a secure-aggregation mod goes "
                                       "before this mod in mods=[...])")


def _refused(msg: Message, reason: str) -> Message:
    """The error reply that stands for a refused one (the app's reply is dropped), logged."""
    _LOG.warning("LdpMod refused a reply: %s", reason)
    return Message(Error(code=ErrorCode.MOD_FAILED_PRECONDITION, reason=f"LdpMod: {reason}"), reply_to=msg)
