"""docs/mechanisms.md lists every optional capability of a mechanism in its one table (issue 37 item 5)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Protocol

from ldpcli.mechanisms import _base, _hooks, _rendering

DOC = Path(__file__).resolve().parents[2] / "docs" / "mechanisms.md"


def _capabilities() -> set[str]:
    """Every protocol a mechanism may satisfy: the hooks, the spec's hooks and the secure rendering's."""
    found = set()
    for module in (_hooks, _base, _rendering):
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__ and Protocol in value.__mro__[1:]:
                found.add(name)
    return found


def test_every_capability_is_a_row_of_the_table() -> None:
    rows = {line.split("|")[1].strip() for line in DOC.read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and not line.startswith("|---")}
    capabilities = _capabilities()
    assert len(capabilities) >= 14
    assert not capabilities - rows, f"docs/mechanisms.md lacks {sorted(capabilities - rows)}"


def test_the_validation_plumbing_is_private() -> None:
    """What a mechanism must say: the checks ``calibrate`` runs are not part of the interface."""
    public = {name for name in vars(_base.Mechanism) if not name.startswith("_")}
    assert not {name for name in public if name.startswith("check")}, public
    assert "clip" not in public
