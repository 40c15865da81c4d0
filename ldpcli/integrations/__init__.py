"""Federated learning: model updates privatized as the frameworks hold them, and the server's bookkeeping.

``privatize_update(update, mechanism="privunit2", epsilon=…, norm_bound=…, rng=None)``
    A model update (a list or dict of numpy arrays, a PyTorch ``state_dict`` or list of tensors on their
    device, a JAX pytree) flattened into one vector, clipped in ℓ2 to the public bound L, privatized by a
    registered mechanism and put back in the same structure, shapes, dtypes and device; returns
    ``(privatized, UpdateRecord)``.
``aggregate_updates(updates, weights=None, mechanism=…, epsilon=…, norm_bound=…)``
    The unbiased weighted mean of privatized updates, in their structure, with per-coordinate and ℓ2
    error bars (an :class:`AggregateUpdate`).
``ClientLedger(max_budget=None, path=None)``
    Each client's spent ε across rounds (basic composition), with a cap and a JSON file.

The Flower client mod and strategy wrapper are in ``ldpcli.integrations.flower`` (the optional extra
``flwr``), which imports Flower when one of its names is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.integrations._client_ledger import CLIENT_LEDGER_VERSION as CLIENT_LEDGER_VERSION
    from ldpcli.integrations._client_ledger import ClientLedger as ClientLedger
    from ldpcli.integrations._client_ledger import ClientRelease as ClientRelease
    from ldpcli.integrations._model_update import AggregateUpdate as AggregateUpdate
    from ldpcli.integrations._model_update import UpdateRecord as UpdateRecord
    from ldpcli.integrations._model_update import aggregate_updates as aggregate_updates
    from ldpcli.integrations._model_update import privatize_update as privatize_update

__getattr__, __dir__, __all__ = attach(__name__, __file__)
