"""The Python API how-to (docs/how-to/python-api.md, the README's "Python API" section until the site) and the
README's Python example run, and they use only names of the public API (``ldpcli.X``).

Their ```` ```python ```` blocks (the README's, then the page's "Python API" section) are read when the tests are
collected, run in document order in one
temporary directory holding a copy of ``examples/`` (one process, so a block may use what an earlier
one made), three times over, leaving nothing there nor in the repository; and parsed: they may import
``ldpcli`` itself and nothing below it, and every ``ldpcli.X`` they use must be one of ``ldpcli.__all__``.
"""

from __future__ import annotations

import ast
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import files_under

import ldpcli

ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/how-to/python-api.md"
SECTION = "# Python API"
FENCE = re.compile(r"^```(\w*)\s*$")


def python_blocks(text: str, section: str | None = SECTION) -> list[tuple[int, str]]:
    """The (first line number, code) of each python block in the section titled ``section`` (up to the next
    ``## `` heading; the whole text when ``section`` is None)."""
    lines = text.splitlines()
    start = lines.index(section) if section is not None else -1
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    if section is None:
        end = len(lines)
    blocks: list[tuple[int, str]] = []
    lang: str | None = None  # inside a fence: its language
    body: list[str] = []
    first = 0
    for number in range(start + 1, end):
        if lang is None:
            match = FENCE.match(lines[number])
            if match is not None:
                lang, first, body = match[1], number + 2, []
        elif lines[number].startswith("```"):
            if lang == "python":
                blocks.append((first, "\n".join(body)))
            lang = None
        else:
            body.append(lines[number])
    return blocks


#: (file, first line, code) of each block: the README's example, then the page's section.
BLOCKS = [("README.md", line, code) for line, code in python_blocks((ROOT / "README.md").read_text(encoding="utf-8"),
                                                                    None)]
BLOCKS += [(PAGE, line, code) for line, code in python_blocks((ROOT / PAGE).read_text(encoding="utf-8"))]


def ldpcli_names(code: str) -> Iterator[str]:
    """Every ``ldpcli.X`` the code uses, and ``import ldpcli.X`` / ``from ldpcli… import`` as their module path."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ldpcli":
            yield node.attr
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("ldpcli."))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ldpcli":
            yield f"from {node.module} import"


def test_the_section_has_its_examples() -> None:
    code = "\n".join(block for doc, _, block in BLOCKS if doc == PAGE)
    for call in ("ldpcli.privatize(", "ldpcli.privatize_file(", "ldpcli.open_release(", ".mean(", ".group_means(",
                 ".regress(", ".answer(", ".attack(", "ldpcli.Ledger", "ldpcli.MechanismSpec"):
        assert call in code, call


@pytest.mark.parametrize("doc, line, code", BLOCKS, ids=[f"{doc}:{line}" for doc, line, _ in BLOCKS])
def test_blocks_use_only_the_public_api(doc: str, line: int, code: str) -> None:
    outside = sorted(set(ldpcli_names(code)) - set(ldpcli.__all__))
    assert outside == [], f"{doc}:{line} uses names outside ldpcli.__all__: {outside}"


def test_the_readme_has_a_python_example() -> None:
    assert any(doc == "README.md" and "ldpcli.privatize(" in code for doc, _, code in BLOCKS)


RUNS = 3  # an owner's ledger kept between runs refused the third (2 + 2 + 2 > 5): each run must start afresh


@pytest.mark.slow
def test_blocks_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocks, as a reader runs them again and again from a clone: every run succeeds, and none leaves a
    file in the directory it runs in (a copy of examples/ here; the repository root for a reader) nor in
    the repository: they write into the scratch folders they make (``tempfile.mkdtemp()``, under tmp_path
    here)."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    repository, here = files_under(ROOT, depth=2), files_under(work, depth=3)
    monkeypatch.chdir(work)
    for run in range(RUNS):
        namespace: dict[str, object] = {"__name__": "__readme__"}
        for doc, line, code in BLOCKS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ldpcli.LdpWarning)
                exec(compile(code, f"{doc}:{line}", "exec"), namespace)  # noqa: S102
        shown = capsys.readouterr().out
        assert "reconstructed to cosine" in shown and "would exceed" in shown, run  # the attack ran; the cap refused
        assert files_under(work, depth=3) == here, f"run {run + 1} left files where it ran"
    assert files_under(ROOT, depth=2) == repository
