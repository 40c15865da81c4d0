"""docs/architecture.md's module map names every module of the package, and nothing that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> set[str]:
    """Every module of ldpcli as the map names it (``math._sphere``; ``__init__`` for the package's own)."""
    names = set()
    for path in (ROOT / "ldpcli").rglob("*.py"):
        parts = path.relative_to(ROOT / "ldpcli").with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            continue  # a layer's __init__ is its docstring: the map's bold row
        names.add(".".join(parts))
    return names


def test_the_module_map_names_every_module() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    named: set[str] = set()
    for row in rows:
        first = row.split("|")[1]
        named.update(re.findall(r"`([\w.]+)`", first))
        if "cli.commands.*" in first:  # the commands are listed in the row's text
            named.update(f"cli.commands.{name}" for name in re.findall(r"`(\w+)`", row.split("|")[2]))
    modules = _modules()
    assert not modules - named, f"modules missing from docs/architecture.md: {sorted(modules - named)}"
    assert not named - modules, f"docs/architecture.md names modules that do not exist: {sorted(named - modules)}"
