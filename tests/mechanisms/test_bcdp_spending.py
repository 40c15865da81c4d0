"""A bcdp release whose levels bind spends less than the ε asked, and says so everywhere (issue 26 item 5).

With levels 0.5/1 and q = 0.1 at ε = 4 the least-error total budget is c_d = 1: the release is 1-LDP.
The mechanism's note, the array API's LdpWarning, the privatize summary (terminal and --json) and
the ledger state the ε spent, the ε asked and why; the budget charges the ε spent (the exact ε, the
privacy loss the release incurs), and records both.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import ldp, ledger_document

import ldpcli
from ldpcli.mechanisms import BCDP, get_mechanism
from ldpcli.mechanisms._composition import release_cost
from ldpcli.release._ledger import Ledger

LEVELS = "0=0.5,1=1"
SPENT = re.compile(r"bcdp spends ε = 1 of the 4 asked.*levels 0\.5/1 with q = 0\.1 bind.*c_d = 1\b.*"
                   r"error is ([0-9.]+)× that of a 4-LDP release by plain privunit2")


def _rows(n: int = 60, d: int = 4) -> np.ndarray:
    return np.random.default_rng(5).uniform(-1.0, 1.0, (n, d))


def test_the_mechanism_says_what_it_spends_and_why() -> None:
    mech = get_mechanism("bcdp").calibrate(4, 4.0, q=0.1, feature_eps=LEVELS)
    assert isinstance(mech, BCDP)
    cost = release_cost(mech)
    assert cost.epsilon == 4.0 and math.isclose(cost.epsilon_exact, 1.0, rel_tol=1e-9) and cost.spends_less
    note = mech.spending_note()
    assert note is not None
    match = SPENT.search(note)
    assert match, note
    plain = get_mechanism("privunit2").calibrate(4, 4.0, norm_bound=2.0)  # the ball of radius L·√d
    assert float(match[1]) == pytest.approx(mech.expected_error / plain.expected_error, rel=5e-3)
    assert "Thm 2 (16) caps the total budget c_d at 2.01" in note
    # every level at ε, or a release whose levels let it spend ε: nothing to say
    assert get_mechanism("bcdp").calibrate(4, 4.0, q=0.1).spending_note() is None
    # every feature below ε: the highest level caps c_d, whatever q
    low = get_mechanism("bcdp").calibrate(4, 4.0, q=0.5, feature_eps="0:3=0.5").spending_note()
    assert low is not None and "every feature has a level below ε, and c_d cannot exceed the highest, 0.5" in low


def test_copies_report_the_spend_of_all_copies() -> None:
    each = get_mechanism("bcdp").calibrate(4, 4.0, q=0.1, feature_eps=LEVELS, split=2)
    note = each.spending_note()
    assert note is not None and note.startswith("bcdp spends ε = 1 of the 4 asked (its 2 copies together)")


def test_the_array_api_warns_with_the_epsilon_spent() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        release = ldpcli.privatize(_rows(), eps=4.0, mechanism="bcdp", q=0.1, feature_eps=LEVELS, rng=1)
    texts = [str(w.message) for w in caught if issubclass(w.category, ldpcli.LdpWarning)]
    assert any(SPENT.search(text) for text in texts), texts
    assert release is not None


def test_the_summary_and_the_ledger_say_the_epsilon_spent(tmp_path: Path) -> None:
    data = tmp_path / "x.csv"
    rows = _rows()
    data.write_text("a,b,c,e\n" + "\n".join(",".join(f"{v:.6f}" for v in row) for row in rows) + "\n")
    ledger = tmp_path / "ledger.json"
    common = ("-m", "bcdp", "--eps", 4, "--q", 0.1, "--feature-eps", "a=0.5,b=1", "--ledger", ledger)
    res = ldp("privatize", data, "-o", tmp_path / "out.csv", *common)
    assert res.exit_code == 0, res.stderr
    assert "bcdp, ε = 1 spent of the 4 asked)" in res.stdout
    assert SPENT.search(res.stderr), res.stderr
    res = ldp("privatize", data, "-o", tmp_path / "out2.csv", "--json", *common)
    assert res.exit_code == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["epsilon_asked"] == 4.0 and math.isclose(summary["epsilon_spent"], 1.0, rel_tol=1e-9)
    assert any(SPENT.search(text) for text in summary["warnings"])
    # the ledger records both, says why, and charges the ε spent: two releases spent 2, not 8
    stored = ledger_document(ledger)["entries"]
    assert [entry["epsilon"] for entry in stored] == [4.0, 4.0]
    assert all(math.isclose(entry["epsilon_exact"], 1.0, rel_tol=1e-9) for entry in stored)
    assert all(SPENT.search(entry["note"]) for entry in stored)
    spends = Ledger.open(ledger).summary()
    assert len(spends) == 1 and math.isclose(spends[0].epsilon, 2.0, rel_tol=1e-9)


def test_a_release_that_spends_what_it_asks_keeps_its_summary(tmp_path: Path) -> None:
    data = tmp_path / "x.csv"
    data.write_text("a,b\n0.1,0.2\n-0.3,0.4\n")
    res = ldp("privatize", data, "-o", tmp_path / "out.csv", "--eps", 4, "--ledger", tmp_path / "ledger.json")
    assert res.exit_code == 0, res.stderr
    assert "privunit2, ε = 4)" in res.stdout and "spent" not in res.stdout
    entry = ledger_document((tmp_path / "ledger.json"))["entries"][0]
    assert "note" not in entry
