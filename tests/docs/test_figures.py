"""The release-path figure (docs/figures/release-path.svg) is what tools/release_path.py draws now, and names
only functions that exist where it says: renaming a step fails here until the figure is redrawn."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def _tool() -> ModuleType:
    """tools/release_path.py, imported from its path (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("ldp_tools_release_path", ROOT / "tools" / "release_path.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_figure_is_current() -> None:
    tool = _tool()
    assert tool.FIGURE.read_text(encoding="utf-8") == tool.svg(), \
        "docs/figures/release-path.svg is stale: run `python tools/release_path.py` and commit it"
    assert ET.fromstring(tool.svg()).tag == "{http://www.w3.org/2000/svg}svg"


@pytest.mark.parametrize("module, name", _tool().named_functions())
def test_every_step_the_figure_names_exists(module: str, name: str) -> None:
    found: object = importlib.import_module(f"ldpcli.{module}")
    for part in name.split("."):
        assert hasattr(found, part), f"the release-path figure names {module}.{name}, which does not exist"
        found = getattr(found, part)
    assert callable(found)


@pytest.mark.parametrize("page", ["architecture.md", "commit-protocol.md"])
def test_the_pages_show_the_figure(page: str) -> None:
    assert "](figures/release-path.svg)" in (ROOT / "docs" / page).read_text(encoding="utf-8")
