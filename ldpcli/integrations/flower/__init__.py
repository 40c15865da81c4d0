"""Flower (``flwr``, the optional extra ``flwr``): ldp's mechanisms in a Flower federation.

``LdpMod(mechanism="privunit2", epsilon=…, norm_bound=…)``
    A client mod for ``ClientApp(mods=[...])`` in place of Flower's ``LocalDpMod``: each train reply
    carries old + the privatized update (new − old), ε in its metrics (``EPSILON_METRIC``) and ldp's config
    record (``LDP_RECORD``); a reply that would let parameters out unprivatized is refused.
``LdpStrategy(strategy, mechanism=…, epsilon=…, norm_bound=…, max_budget=None, ledger_path=None)``
    The server's wrapper of a strategy: a per-client ledger across rounds, clients past ``max_budget``
    left out, replies without ldp's record excluded.

Flower is imported when one of these names is first used (an ImportError naming the extra when it is
missing), so ``import ldpcli.integrations.flower`` costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.integrations.flower._mod import EPSILON_METRIC as EPSILON_METRIC
    from ldpcli.integrations.flower._mod import LDP_RECORD as LDP_RECORD
    from ldpcli.integrations.flower._mod import LdpMod as LdpMod
    from ldpcli.integrations.flower._mod import RefusedReply as RefusedReply
    from ldpcli.integrations.flower._strategy import LdpStrategy as LdpStrategy

__getattr__, __dir__, __all__ = attach(__name__, __file__)
