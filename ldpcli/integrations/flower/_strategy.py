"""The server's side of :class:`~ldpcli.integrations.flower.LdpMod`: a strategy wrapper with a per-client ledger.

:class:`LdpStrategy` wraps any Flower strategy (``flwr.serverapp.strategy.FedAvg`` and the others of the
Message API). Each reply of an :class:`LdpMod` client carries old + Z (Z the privatized update) and its public
weight (``num-examples``, which the client reports unprivatized: a public weight); the wrapped strategy's
weighted mean of the replies' parameters is then old + Σ wᵢZᵢ / Σ wᵢ, unbiased for old plus the weighted mean
of the clipped updates (:func:`ldpcli.integrations.aggregate_updates` gives its error bars for updates held
apart).

The wrapper keeps a :class:`~ldpcli.integrations.ClientLedger` (basic composition per node id, optionally a
JSON file): before a round it leaves out every node whose total plus the round's ε would pass ``max_budget``;
after it, it charges each reply its reported exact ε and excludes from the aggregate any reply without ldp's
record (not privatized by the mod), with another mechanism, ε or bound than configured, or past the budget.
Each exclusion is logged and noted in the ledger.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable
from typing import Any

from ldpcli.integrations._client_ledger import ClientLedger
from ldpcli.integrations._model_update import checked_spec
from ldpcli.integrations.flower._mod import LDP_RECORD

try:
    from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
    from flwr.serverapp import Grid
    from flwr.serverapp.strategy import Strategy
except ImportError:  # pragma: no cover - the _mod import above has raised already
    from ldpcli.errors import install_hint

    raise ImportError(f"ldpcli.integrations.flower needs Flower: {install_hint('flwr')}") from None

_LOG = logging.getLogger("ldpcli.integrations.flower")


class LdpStrategy(Strategy):
    """A Flower strategy that aggregates :class:`~ldpcli.integrations.flower.LdpMod` replies and keeps the ledger.

    Parameters
    ----------
    strategy : flwr.serverapp.strategy.Strategy
        The strategy that samples clients and averages their replies (FedAvg: the unbiased weighted mean).
    mechanism, epsilon, norm_bound, **options
        The public spec the clients' mods use; a reply claiming another one is excluded.
    max_budget : float or None
        The most ε a client may spend over all rounds (basic composition); None: no cap.
    ledger_path : path or None
        The JSON file of the ledger (read if it exists, rewritten after each change).
    """

    def __init__(self, strategy: Strategy, *, mechanism: str = "privunit2", epsilon: float, norm_bound: float,
                 max_budget: float | None = None, ledger_path: str | os.PathLike[str] | None = None,
                 **options: Any) -> None:
        spec = checked_spec(mechanism, epsilon, norm_bound, options)
        self.strategy = strategy
        self.mechanism, self.epsilon, self.norm_bound = spec.name, float(spec.epsilon), float(spec.norm_bound)
        self.ledger = ClientLedger(max_budget, ledger_path)

    def summary(self) -> None:
        """The wrapped strategy's summary, and the ledger's cap."""
        self.strategy.summary()
        _LOG.info("LdpStrategy: %s at ε = %g, L = %g per round; max_budget %s per client", self.mechanism,
                  self.epsilon, self.norm_bound, self.ledger.max_budget)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """The wrapped strategy's train messages, less those to nodes one more round would take past the budget."""
        kept = []
        for message in self.strategy.configure_train(server_round, arrays, config, grid):
            node = message.metadata.dst_node_id
            if self.ledger.allows(node, self.epsilon):
                kept.append(message)
            else:
                self._refuse(node, server_round, f"spent ε = {self.ledger.spent(node):g}: one more round of "
                                                 f"ε = {self.epsilon:g} passes max_budget = {self.ledger.max_budget:g}")
        return kept

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Charge each privatized reply to its node, and aggregate those within the spec and the budget."""
        accepted = []
        for reply in replies:
            if reply.has_error():
                accepted.append(reply)  # the wrapped strategy logs and skips it
                continue
            node = reply.metadata.src_node_id
            claim = reply.content.config_records.get(LDP_RECORD)
            if claim is None:
                self._refuse(node, server_round, "the reply carries no ldp record: it was not privatized by LdpMod")
                continue
            mechanism, epsilon, bound = claim.get("mechanism"), claim.get("epsilon"), claim.get("norm-bound")
            if not isinstance(epsilon, float) or not math.isfinite(epsilon) or epsilon <= 0:
                self._refuse(node, server_round, f"the reply's ldp record has no valid epsilon ({epsilon!r})")
                continue
            allowed = self.ledger.allows(node, epsilon)
            self.ledger.record(node, server_round, str(mechanism), epsilon)  # the client has spent it
            if mechanism != self.mechanism or bound != self.norm_bound or epsilon > self.epsilon * (1 + 1e-9):
                self._refuse(node, server_round, f"the reply was privatized as {mechanism} at ε = {epsilon:g}, "
                                                 f"L = {bound}; this server aggregates {self.mechanism} at "
                                                 f"ε ≤ {self.epsilon:g}, L = {self.norm_bound:g}")
            elif not allowed:
                self._refuse(node, server_round, f"its total ε = {self.ledger.spent(node):g} passes max_budget = "
                                                 f"{self.ledger.max_budget:g}")
            else:
                accepted.append(reply)
        return self.strategy.aggregate_train(server_round, accepted)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        """The wrapped strategy's evaluate messages (an evaluation releases no update)."""
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """The wrapped strategy's evaluation metrics."""
        return self.strategy.aggregate_evaluate(server_round, replies)

    def _refuse(self, node: int, server_round: int, reason: str) -> None:
        _LOG.warning("LdpStrategy: node %s left out of round %d: %s", node, server_round, reason)
        self.ledger.refuse(node, server_round, reason)
