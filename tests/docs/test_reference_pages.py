"""The site's generated reference pages are current and complete, and the site reaches every page (issue 38).

- The pages ``tools/reference.py`` writes (the CLI reference from the Typer app, one API page per curated namespace,
  the sidecar's JSON Schema) are checked in; the first test fails when one differs from what the script writes now,
  as sqlite-utils' ``cog --check`` does. The fix is one command: ``python tools/reference.py``.
- Every command, subcommand, argument and option of ``ldp`` is in the CLI reference, in its command's section.
- Every public name of every curated namespace (its ``__all__``) is in its API page, and has a docstring.
- ``mkdocs.yml``'s nav lists every page of ``docs/``, and the home page links every guide, reference and explanation.
- ``mkdocs build --strict`` succeeds (slow; where the docs extra is installed: CI builds the site in .ci/run too).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import tool

ROOT = Path(__file__).resolve().parents[2]


def reference() -> ModuleType:
    """tools/reference.py."""
    return tool("reference")


@cache
def generated() -> dict[str, str]:
    return reference().pages()


@pytest.mark.slow  # 2-3 s alone on the loaded 2-core machine (it renders every page); the completeness tests below
# catch a new option or public name missing from the pages in the fast subset
def test_the_generated_pages_are_current() -> None:
    stale = [page for page, text in generated().items()
             if not (ROOT / page).is_file() or (ROOT / page).read_text(encoding="utf-8") != text]
    assert not stale, f"stale generated pages {stale}: run `python tools/reference.py` and commit them"


def _sections(text: str) -> dict[str, str]:
    """The CLI reference by command: ``ldp NAME`` (its heading) → its section's text."""
    parts = re.split(r"^#{2,3} `(ldp[\w -]*)`$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _commands() -> list[tuple[str, Any]]:
    from ldpcli.cli.app import COMMANDS, load_command

    found: list[tuple[str, Any]] = []
    for name in COMMANDS:
        command = load_command(name)
        found.append((f"ldp {name}", command))
        found += [(f"ldp {name} {sub}", subcommand) for sub, subcommand in getattr(command, "commands", {}).items()]
    return found


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    import click

    sections = _sections((ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8"))
    missing: list[str] = []
    counted = 0
    for path, command in _commands():
        if path not in sections:
            missing.append(f"the section of `{path}`")
            continue
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            if param.param_type_name == "option":
                names = [*param.opts, *param.secondary_opts]
            else:  # an argument: by the metavar its --help shows (INPUTS..., PATHS...)
                names = [param.get_help_record(click.Context(command))[0].split()[0]]
            for name in names:
                counted += 1
                if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", sections[path]):
                    missing.append(f"{path} {name}")
    assert counted > 200  # every command's options were seen (the lazy commands loaded)
    assert not missing, f"not in docs/reference/cli.md: {missing}: run `python tools/reference.py`"


def _curated_namespaces() -> list[str]:
    """Every subpackage of ldpcli that is a curated namespace (its ``__init__`` has an ``__all__``), and ldpcli."""
    found = ["ldpcli"]
    for init in sorted((ROOT / "ldpcli").glob("*/__init__.py")):
        if re.search(r"^(?:__getattr__, __dir__, )?__all__\b", init.read_text(encoding="utf-8"), flags=re.M):
            found.append(f"ldpcli.{init.parent.name}")
    return found


def test_every_curated_namespace_has_an_api_page() -> None:
    listed = [module for module, _ in reference().NAMESPACES]
    assert sorted(listed) == sorted(_curated_namespaces())


@pytest.mark.parametrize("module", _curated_namespaces())
def test_every_public_name_is_in_the_api_reference_with_a_docstring(module: str) -> None:
    page = (ROOT / reference().api_page_path(module)).read_text(encoding="utf-8")
    namespace = importlib.import_module(module)
    names = [name for name in namespace.__all__ if name != "__version__"]
    computed = reference().computed_names(module)
    absent = [name for name in names if f"::: {module}.{name}\n" not in page
              and not (name in computed and f"## `{name}`\n" in page)]
    assert not absent, f"{module}: public names missing from its API page: {absent}: run `python tools/reference.py`"
    undocumented = [name for name in names if (inspect.isclass(value := getattr(namespace, name))
                                               or inspect.isroutine(value)) and not inspect.getdoc(value)]
    assert not undocumented, f"{module}: public names without a docstring: {undocumented}"


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:\n"):]
    return re.findall(r"^\s+- (?:[^:\n]+: )?([\w./-]+\.md)$", nav, flags=re.M)


def test_the_nav_lists_every_page_of_docs() -> None:
    pages = sorted(path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md"))
    nav = _nav_pages()
    assert len(nav) == len(set(nav)) and sorted(nav) == pages


def test_the_home_page_links_every_section_in_one_click() -> None:
    """The home links every page of the nav but the API namespaces' own pages (one click on from the API index)."""
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)", home))
    wanted = {page for page in _nav_pages() if page != "index.md" and not page.startswith("reference/api/ldpcli")}
    assert wanted - linked == set()


def test_the_readme_links_resolve() -> None:
    """Every relative link of the README names a file of the repository (the site's pages it points into)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((?!https?://)([^)#\s]+)(?:#[\w-]+)?\)", readme)
    assert len(links) > 20 and [link for link in links if not (ROOT / link).exists()] == []


@pytest.mark.slow
def test_the_site_builds_with_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    pytest.importorskip("material")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "api" / "ldpcli.mechanisms.html").is_file()
