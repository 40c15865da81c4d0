"""docs/errata.md stays consistent with the code, the tests and the README that cite it.

(a) every erratum number cited in ldpcli/, tests/ or README.md has a section in docs/errata.md;
(b) the sections are numbered 1..K, once each, each with its ``erratum-N`` anchor just before it;
(c) every test that the file names as failing on a printed form (``tests/….py::test_…``) exists.

Standard library and pytest only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ERRATA = ROOT / "docs" / "errata.md"
THIS_FILE = Path(__file__).resolve()

#: The forms in which code, tests and the README cite an erratum; each captures the number N.
#: Written with escapes so that this file does not cite anything itself.
CITATION_PATTERNS = [
    re.compile(r"\bERRATA\s+(\d+)(?:\.\d+)?\b", re.IGNORECASE),  # ERRATA N, ERRATA N.M
    re.compile(r"errata\.md\s*§\s*(\d+)", re.IGNORECASE),  # docs/errata.md §N
    re.compile(r"errata\.md#erratum-(\d+)", re.IGNORECASE),  # a link to the anchor
    re.compile(r"\berratum\s+(\d+)\b", re.IGNORECASE),  # erratum N
]
#: The unnumbered section cited as ERRATA "Numerics".
NUMERICS_CITATION = re.compile(r"(?:ERRATA|docs/errata\.md)\s+\"Numerics\"", re.IGNORECASE)

HEADING = re.compile(r"^## (\d+)\. (\S.*)$")
ANY_NUMBERED_HEADING = re.compile(r"^##\s*(\d+)\b")
ANCHOR = re.compile(r'^<a id="erratum-(\d+)"></a>$')
TEST_REFERENCE = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def errata_text() -> str:
    assert ERRATA.is_file(), f"{ERRATA.relative_to(ROOT)} is missing"
    return ERRATA.read_text(encoding="utf-8")


def cited_sources() -> list[Path]:
    """The files whose citations must resolve: ldpcli/ and tests/ (Python), README.md and the site's pages."""
    files = sorted((ROOT / "ldpcli").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
    files = [f for f in files if f.resolve() != THIS_FILE]
    readme = ROOT / "README.md"
    if readme.is_file():
        files.append(readme)
    # The site's pages that were README sections until the site (docs/errata.md itself is the target).
    files += sorted((ROOT / "docs").glob("*/**/*.md"))
    return files


def citations() -> dict[int, list[str]]:
    """Erratum number -> the places ("path:line") that cite it."""
    found: dict[int, list[str]] = {}
    for path in cited_sources():
        text = path.read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), start=1):
            for pattern in CITATION_PATTERNS:
                for match in pattern.finditer(line):
                    found.setdefault(int(match.group(1)), []).append(f"{path.relative_to(ROOT)}:{lineno}")
    return found


def sections(text: str) -> list[tuple[int, int]]:
    """(erratum number, line index) of every ``## N. title`` heading, in order."""
    return [(int(m.group(1)), i) for i, line in enumerate(text.splitlines()) if (m := HEADING.match(line))]


def section_bodies(text: str) -> dict[int, str]:
    """Erratum number -> its text, from its heading to the next level-2 heading."""
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
    bodies: dict[int, str] = {}
    for number, start in sections(text):
        end = next((h for h in heads if h > start), len(lines))
        bodies[number] = "\n".join(lines[start:end])
    return bodies


# --- (a) every citation resolves --------------------------------------------------------------------


def test_citations_are_found_at_all() -> None:
    """Guard against a scan that silently matches nothing (a broken pattern or moved sources)."""
    cited = citations()
    assert cited, "no erratum citation found in ldpcli/, tests/ or README.md"
    assert 1 in cited and 11 in cited  # cited in the PrivUnit2 and Duchi ℓ2 code and the README


def test_every_cited_erratum_has_a_section() -> None:
    documented = {number for number, _ in sections(errata_text())}
    missing = {n: where for n, where in citations().items() if n not in documented}
    assert not missing, "cited but not in docs/errata.md: " + "; ".join(
        f"§{n} at {', '.join(where[:3])}" for n, where in sorted(missing.items())
    )


def test_numerics_citation_has_its_section() -> None:
    cited = any(NUMERICS_CITATION.search(p.read_text(encoding="utf-8", errors="replace")) for p in cited_sources())
    if not cited:
        pytest.skip('nothing cites ERRATA "Numerics"')
    text = errata_text()
    assert '<a id="numerics"></a>' in text
    assert re.search(r"^## Numerics\b", text, re.MULTILINE)


# --- (b) numbering and anchors ------------------------------------------------------------------------


def test_sections_are_numbered_one_to_k_without_gaps_or_duplicates() -> None:
    text = errata_text()
    numbers = [number for number, _ in sections(text)]
    assert numbers, "docs/errata.md has no '## N. title' section"
    assert numbers == list(range(1, len(numbers) + 1)), f"sections must be 1..K in order, got {numbers}"
    # A level-2 heading that starts with a number but is not exactly '## N. title' would escape the
    # check above.
    loose = [line for line in text.splitlines() if ANY_NUMBERED_HEADING.match(line) and not HEADING.match(line)]
    assert not loose, f"malformed numbered headings: {loose}"


def test_every_section_has_its_anchor_just_before_the_heading() -> None:
    text = errata_text()
    lines = text.splitlines()
    anchors = [int(m.group(1)) for line in lines if (m := ANCHOR.match(line.strip()))]
    numbers = [number for number, _ in sections(text)]
    assert sorted(anchors) == numbers, f"anchors {sorted(anchors)} do not match sections {numbers}"
    for number, index in sections(text):
        previous = next((lines[i].strip() for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        assert previous == f'<a id="erratum-{number}"></a>', f"§{number}: the line before its heading is {previous!r}"


def test_every_section_names_a_test_or_says_it_is_not_implemented() -> None:
    for number, body in section_bodies(errata_text()).items():
        assert TEST_REFERENCE.search(body) or "not implemented yet" in body.lower(), (
            f"§{number} names no test (tests/…::test_…) and does not say 'not implemented yet'"
        )


# --- (c) the named tests exist ----------------------------------------------------------------------


def defined_functions(path: Path) -> set[str]:
    """Names of every function defined in a Python file (module level, nested or in classes)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_named_tests_exist() -> None:
    references = sorted(set(TEST_REFERENCE.findall(errata_text())))
    assert references, "docs/errata.md names no test"
    cache: dict[str, set[str]] = {}
    missing = []
    for file, name in references:
        path = ROOT / file
        if not path.is_file():
            missing.append(f"{file}::{name} (no such file)")
            continue
        if file not in cache:
            cache[file] = defined_functions(path)
        if name not in cache[file]:
            missing.append(f"{file}::{name}")
    assert not missing, "docs/errata.md names tests that do not exist: " + ", ".join(missing)
