"""docs/architecture.md's module map names every module of the package, and nothing that is gone."""

from __future__ import annotations

import importlib
import re
import warnings
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


#: A dotted name of the house in a code span (``release._file.write_file_release``, ``io._read.VectorReader``),
#: without a call's arguments.
_DOTTED = re.compile(r"`((?:math|io|mechanisms|accounting|estimators|release|analysis|planning|learn|risk|audit|cli)"
                     r"(?:\.\w+)+)(?:\([^`]*\))?`")


def _resolves(dotted: str) -> bool:
    """Whether ``ldpcli.<dotted>`` is a module, or a name inside one, at its home (an old path's forwarding
    warns, which the test turns into an error: not at home)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module("ldpcli." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        except DeprecationWarning:  # an old module path of ldp 0.1, forwarded by _compat
            return False
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_dotted_name_on_the_page_exists() -> None:
    """The paths of one row and one ε name real functions in their real modules: a rename fails here. (The
    module map's rows, whose text also names sidecar fields such as ``release.shuffled``, are the test above's.)"""
    text = "\n".join(line for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
                     if not line.startswith("|"))
    names = sorted(set(_DOTTED.findall(text)))
    assert len(names) > 40
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # an old module path forwards with a warning: not here
        missing = [name for name in names if not _resolves(name)]
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"
