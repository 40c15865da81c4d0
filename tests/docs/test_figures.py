"""The release-path figure (docs/figures/release-path.svg) is what tools/release_path.py draws now, and names
only functions that exist where it says: renaming a step fails here until the figure is redrawn."""

from __future__ import annotations

import importlib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import tool

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_figure_is_current() -> None:
    drawing = tool("release_path")
    assert drawing.FIGURE.read_text(encoding="utf-8") == drawing.svg(), \
        "docs/figures/release-path.svg is stale: run `python tools/release_path.py` and commit it"
    assert ET.fromstring(drawing.svg()).tag == "{http://www.w3.org/2000/svg}svg"


@pytest.mark.parametrize("module, name", tool("release_path").named_functions())
def test_every_step_the_figure_names_exists(module: str, name: str) -> None:
    found: object = importlib.import_module(f"ldpcli.{module}")
    for part in name.split("."):
        assert hasattr(found, part), f"the release-path figure names {module}.{name}, which does not exist"
        found = getattr(found, part)
    assert callable(found)


@pytest.mark.parametrize("page", ["architecture.md", "commit-protocol.md"])
def test_the_pages_show_the_figure(page: str) -> None:
    assert "](figures/release-path.svg)" in (ROOT / "docs" / page).read_text(encoding="utf-8")
