"""Formulas in docstrings are typeset on the API pages (pymdownx.arithmatex, generic, with MathJax in the
browser; the build fetches nothing), and each is intact: ``$`` paired, and no escape eaten by a docstring
that is not raw (``"\\frac"`` is a form feed and ``rac``, ``"\\binom"`` a backspace and ``inom``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
#: what a docstring that is not raw makes of \a \b \f \r \t \v: the start of \alpha, \binom, \frac, \theta, …
_EATEN = re.compile(r"[\a\b\f\v\r\t]")


def _docstrings_with_math() -> list[tuple[str, str]]:
    found = []
    for path in sorted((ROOT / "ldpcli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False) or ""
                if "$" in re.sub(r"``[^`]*``", "", doc):
                    found.append((f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}", doc))
    return found


def test_the_site_typesets_formulas_without_fetching_at_build_time() -> None:
    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("", lambda loader, suffix, node: None)  # mkdocs' !!python/name tags
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    extensions = {next(iter(e)) if isinstance(e, dict) else e: (e[next(iter(e))] if isinstance(e, dict) else {})
                  for e in config["markdown_extensions"]}
    assert extensions["pymdownx.arithmatex"] == {"generic": True}
    assert "javascripts/mathjax.js" in config["extra_javascript"]
    assert (ROOT / "docs" / "javascripts" / "mathjax.js").is_file()


def test_every_formula_in_a_docstring_is_intact() -> None:
    found = _docstrings_with_math()
    assert len(found) >= 4  # the composition theorems (accounting._theorems) at least
    broken = [place for place, doc in found
              if re.sub(r"``[^`]*``", "", doc).count("$") % 2 or _EATEN.search(doc)]
    assert not broken, f"formulas broken (unpaired $, or a docstring with LaTeX that is not r\"\"\"…): {broken}"
