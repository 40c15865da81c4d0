"""Numbers and install lines the README states, checked against the registry and pyproject.toml.

- The gaussian-sign bullet (docs/how-to/queries.md, the README's until the site) states its worst-case error as a
  multiple of privunit2's, per d and ε
  (issue 26 item 18: it said "1.0–1.17× at ε ≤ 1", which holds only for large d; the ratio is π/2
  at d = 1 and 1.40 at d = 2). Every "X at d = N" and "X–Y at d = N" it gives is recomputed from
  the mechanisms' ``expected_error_max`` and must round to what is printed.
- The optional extras (issue 26 item 13): from a clone, an extra is installed as
  ``pip install -e '.[dask]'``; ``'ldp[dask]'`` names the package, which a clone's directory is not.
  Every extra the README names must exist in pyproject.toml, and each must be given in the clone form.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib

from ldpcli.mechanisms import MechanismSpec

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The page that holds the gaussian-sign bullet (the README's "Projection and query release" until the site).
QUERIES = (ROOT / "docs" / "how-to" / "queries.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

#: The ε of each part of the gaussian-sign bullet: the part's first words, and the ε it ranges over.
SEGMENTS = (("For ε from 0.1 to 1", (0.1, 0.5, 1.0)), ("At ε = 4", (4.0,)), ("at ε = 16", (16.0,)))
D_STATED = (1, 2, 3, 10, 100, 1000)
STATED = re.compile(r"(\d+\.\d+)(?:–(\d+\.\d+))? at\s+d = (\d+)")


def worst_case_ratio(d: int, epsilon: float) -> float:
    """gaussian-sign's worst-case E‖Z − x‖² over the unit ball divided by privunit2's, at (d, ε)."""
    sign = MechanismSpec("gaussian-sign", epsilon, None, 1.0, {}).calibrate(d)
    reference = MechanismSpec("privunit2", epsilon, None, 1.0, {}).calibrate(d)
    return sign.expected_error_max / reference.expected_error_max


def gaussian_sign_bullet() -> str:
    start = QUERIES.index("- **`gaussian-sign`**")
    return " ".join(QUERIES[start:QUERIES.index("\n- **", start + 1)].split())


def printed_claims() -> list[tuple[tuple[float, ...], int, str, str | None]]:
    """(the ε of its part, d, the lower or only value, the upper value or None) for each number stated."""
    text = gaussian_sign_bullet()
    starts = [text.find(first) for first, _ in SEGMENTS] + [text.find("Against the hemisphere")]
    claims = []
    for (_, epsilons), begin, end in zip(SEGMENTS, starts, starts[1:]):
        if begin < 0 or end < begin:
            continue  # a part the bullet does not have: the test of the d it covers fails
        for low, high, d in STATED.findall(text[begin:end]):
            claims.append((epsilons, int(d), low, high or None))
    return claims


def rounds_to(value: float, printed: str) -> bool:
    """Whether ``value`` is ``printed`` to the digits it shows (half a unit of its last digit)."""
    decimals = len(printed.split(".")[1])
    return abs(value - float(printed)) <= 0.5 * 10.0**-decimals + 1e-12


def test_the_page_states_the_ratio_for_every_d_at_small_epsilon() -> None:
    stated = {d for epsilons, d, _, _ in printed_claims() if epsilons == SEGMENTS[0][1]}
    assert stated == set(D_STATED)


@pytest.mark.parametrize("claim", printed_claims(), ids=lambda claim: f"eps{claim[0][-1]:g}-d{claim[1]}")
def test_gaussian_sign_ratio_matches_the_registry(claim: tuple[tuple[float, ...], int, str, str | None]) -> None:
    epsilons, d, low, high = claim
    ratios = [worst_case_ratio(d, epsilon) for epsilon in epsilons]
    assert rounds_to(min(ratios), low), (d, epsilons, ratios)
    assert rounds_to(max(ratios), high or low), (d, epsilons, ratios)


def test_the_ratio_is_pi_over_2_at_d_1_whatever_epsilon() -> None:
    """The bullet's "(π/2, at every ε)" at d = 1: one coordinate, where both mechanisms are sign flips."""
    assert all(worst_case_ratio(1, epsilon) == pytest.approx(1.5707963267948966, rel=1e-9)
               for epsilon in (0.1, 1.0, 4.0, 16.0))


SITE = {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8") for path in (ROOT / "docs").rglob("*.md")}


@pytest.mark.parametrize("doc", ["README.md", *sorted(SITE)])
def test_every_extra_the_readme_names_exists_and_has_its_clone_form(doc: str) -> None:
    """The README and every page of the site: each extra named exists, and the README gives its clone form."""
    text = README if doc == "README.md" else SITE[doc]
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    name = PYPROJECT["project"]["name"]
    named = re.findall(r"pip install (?:-e )?'([^'\[]+)\[([^\]]+)\]'", text)
    assert named or doc != "README.md", "the README names no extra"
    for package, listed in named:
        assert package in (".", name), f"pip install '{package}[{listed}]': neither the clone (.) nor {name!r}"
        assert set(listed.split(",")) <= extras, f"unknown extra in [{listed}]; pyproject.toml has {sorted(extras)}"
    for extra in {extra for _, listed in named for extra in listed.split(",")}:
        assert f"pip install -e '.[{extra}]'" in README, f"the extra {extra!r} is not given in its clone form"


def test_the_readme_lists_every_extra_in_its_table() -> None:
    """The README's install table has one row per extra of pyproject.toml (but dev, the test extra plus one)."""
    rows = set(re.findall(r"^\| `(\w+)` \|", README, re.M))
    assert set(PYPROJECT["project"]["optional-dependencies"]) - {"dev"} <= rows
