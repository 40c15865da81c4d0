"""Counts in words: ``ldpcli.errors.counted`` gives "1 row", "2 rows", "1 entry", "3 entries", and no message
of the package writes a count known at run time beside a "noun(s)"."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import ldpcli
from ldpcli.errors import counted
from ldpcli.estimators._regression import RegressionMoments
from ldpcli.io._feature_eps import parse_feature_levels
from ldpcli.math._lawtests import deterministic

#: A count formatted beside a noun with "(s)", either way round: "{n} time(s)", "reservation(s) {ids}".
_HEDGED = re.compile(r"\}\s*[A-Za-z ]*\(s\)|[A-Za-z]\(s\)\s*\{")


@pytest.mark.parametrize(("n", "noun", "plural", "expected"), [
    (0, "row", None, "0 rows"), (1, "row", None, "1 row"), (2, "row", None, "2 rows"),
    (1, "entry", "entries", "1 entry"), (3, "entry", "entries", "3 entries"),
    (1, "copy", "copies", "1 copy"), (2, "row hash", "row hashes", "2 row hashes"),
])
def test_a_count_takes_the_number_of_its_noun(n: int, noun: str, plural: str | None, expected: str) -> None:
    assert counted(n, noun, plural) == expected


def test_no_message_hedges_a_count_with_s_in_brackets() -> None:
    package = Path(ldpcli.__file__).parent
    found = [f"{path.relative_to(package)}:{number}: {line.strip()}"
             for path in sorted(package.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if _HEDGED.search(line)]
    assert found == []


def test_counts_of_one_in_messages_of_every_layer_take_the_singular() -> None:
    """A few of the counts that earlier read "1 of 1 rows", "1 entries", "1 features" (math, mechanisms,
    estimators)."""
    assert deterministic("Z on the grid", 1, 1, "off the grid").note == "1 of 1 row off the grid"
    assert deterministic("Z on the grid", 0, 1, "off the grid").note == "all 1 row"
    with pytest.raises(ValueError, match=r"^names has 1 entry for d = 2 coordinates$"):
        parse_feature_levels("a=0.5", d=2, epsilon=1.0, names=["a"])
    one, two = RegressionMoments(), RegressionMoments()
    one.add_pair(np.ones((2, 2)), np.ones((2, 2)))
    two.add_pair(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"^cannot merge moments of p = 1 feature into p = 2$"):
        two.merge(one)
