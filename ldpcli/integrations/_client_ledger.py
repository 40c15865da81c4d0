"""The server's ledger of what each federated client has released, across rounds.

Each entry is one round's privatized update of one client (its id, the round, the mechanism and its exact ε).
A client's total is the basic composition of its entries (Dwork & Roth 2014, Thm 3.16: pure ε-LDP releases
with fresh randomness add up, adaptively: :func:`ldpcli.accounting.compose` of its
:class:`~ldpcli.accounting.LocalRelease`\\ s); :meth:`ClientLedger.allows` says whether one more release of ε
keeps it within ``max_budget``. The ledger is the server's bookkeeping of the reports it received: it charges a
report when it arrives (the client has spent its ε then, whether the update is used or not), and the place
to refuse is before asking (a strategy leaves the client out of the round).

With a ``path`` the ledger is a JSON file, read when the ledger is opened and rewritten whole after each
change through a temporary file and a rename (:func:`ldpcli.io._atomic.atomic_write_text`), so a crash leaves
the previous state or the new one, never half of one.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldpcli.accounting import LocalRelease, compose

#: The layout of the JSON file (its ``"version"``).
CLIENT_LEDGER_VERSION = 1


@dataclass(frozen=True)
class ClientRelease:
    """One privatized report of one client: ``client`` (its id as a string), ``round``, ``mechanism``, ``epsilon``."""

    client: str
    round: int
    mechanism: str
    epsilon: float

    def to_dict(self) -> dict[str, Any]:
        """The entry as the JSON file holds it."""
        return {"client": self.client, "round": self.round, "mechanism": self.mechanism, "epsilon": self.epsilon}


class ClientLedger:
    """Per-client basic composition of privatized reports, with an optional cap and JSON file.

    Parameters
    ----------
    max_budget : float or None
        The most ε a client may spend in total (None: no cap, totals kept only).
    path : path or None
        The JSON file to read (if it exists) and keep up to date.
    """

    def __init__(self, max_budget: float | None = None, path: str | os.PathLike[str] | None = None) -> None:
        if max_budget is not None and not (isinstance(max_budget, (int, float)) and max_budget > 0
                                           and math.isfinite(max_budget)):
            raise ValueError(f"max_budget must be a positive finite ε or None, got {max_budget!r}")
        self.max_budget = None if max_budget is None else float(max_budget)
        self.path = None if path is None else Path(path)
        self.entries: list[ClientRelease] = []
        self.refusals: list[dict[str, Any]] = []
        if self.path is not None and self.path.exists():
            self.entries, self.refusals = _read(self.path)

    def spent(self, client: object) -> float:
        """The total ε of ``client``'s reports by basic composition (0.0 for a client with none)."""
        mine = [LocalRelease(entry.epsilon) for entry in self.entries if entry.client == str(client)]
        if not mine:
            return 0.0
        basic = compose(mine).basic
        assert basic is not None
        return basic.epsilon

    def totals(self) -> dict[str, float]:
        """Each client's total ε, by client id."""
        return {client: self.spent(client) for client in dict.fromkeys(entry.client for entry in self.entries)}

    def allows(self, client: object, epsilon: float) -> bool:
        """Whether one more report of ``epsilon`` keeps ``client`` within ``max_budget`` (always, without a cap)."""
        return self.max_budget is None or self.spent(client) + epsilon <= self.max_budget * (1.0 + 1e-12)

    def record(self, client: object, server_round: int, mechanism: str, epsilon: float) -> ClientRelease:
        """Charge ``client`` one report of ``epsilon`` in ``server_round``; the file (if any) is rewritten."""
        if not (isinstance(epsilon, (int, float)) and epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"client {client}: a report's epsilon must be a positive finite number, got {epsilon!r}")
        entry = ClientRelease(str(client), int(server_round), str(mechanism), float(epsilon))
        self.entries.append(entry)
        self.save()
        return entry

    def refuse(self, client: object, server_round: int, reason: str) -> None:
        """Note that ``client`` was refused in ``server_round`` and why; the file (if any) is rewritten."""
        self.refusals.append({"client": str(client), "round": int(server_round), "reason": reason})
        self.save()

    def to_dict(self) -> dict[str, Any]:
        """The ledger as its JSON file holds it: the cap, each entry, each client's total and the refusals."""
        return {"version": CLIENT_LEDGER_VERSION, "max_budget": self.max_budget,
                "composition": "basic (Dwork & Roth 2014, Thm 3.16) per client",
                "entries": [entry.to_dict() for entry in self.entries], "totals": self.totals(),
                "refusals": self.refusals}

    def save(self) -> None:
        """Rewrite the JSON file (nothing without a path)."""
        if self.path is not None:
            from ldpcli.io._atomic import atomic_write_text

            atomic_write_text(self.path, json.dumps(self.to_dict(), indent=2) + "\n", overwrite=True)


def _read(path: Path) -> tuple[list[ClientRelease], list[dict[str, Any]]]:
    """The entries and refusals of a ledger file; ValueError naming the file and what is wrong."""
    from ldpcli.io._jsonfile import read_json

    try:
        data = read_json(path)
        if data.get("version") != CLIENT_LEDGER_VERSION:
            raise ValueError(f"version {data.get('version')!r} is not {CLIENT_LEDGER_VERSION}")
        entries = [ClientRelease(str(e["client"]), int(e["round"]), str(e["mechanism"]), float(e["epsilon"]))
                   for e in data["entries"]]
        return entries, [dict(r) for r in data.get("refusals", [])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a client ledger ({exc}); move it away or give another path") from None
