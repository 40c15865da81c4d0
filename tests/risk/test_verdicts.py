"""The reconstruction verdicts match the probability (issue 26 item 3).

A bound of 0.3755 is a 38% chance of reconstruction, not protection: each bound reads "protected"
only at most the threshold (``risk_threshold``, default 10⁻³), "at risk" above it and "no guarantee"
where it reaches 1, in ``ldp risk``, ``ldp params`` (table and comparison line), every sidecar's
reconstruction section and ``ldp risk --model zipf``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import ldp, unit_rows, write_list

from ldpcli.cli import render
from ldpcli.errors import UsageError
from ldpcli.mechanisms import MechanismSpec, RiskEpsilon
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions, RiskSection
from ldpcli.release._sidecar import sidecar_path, sidecar_schema
from ldpcli.risk import _diffuse as df
from ldpcli.risk._section import reconstruction, reconstruction_for
from ldpcli.risk._sparse import sparse_risk


@pytest.fixture(autouse=True)
def wide_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables as wide as their cells, so that a verdict is one string in the output."""
    monkeypatch.setattr(render.out, "width", 400)


#: `ldp risk --eps 3 --k 4 --a 0.9`: e³·P(⟨Y, v0⟩ ≥ 0.9) on S³ = 0.3755, the issue's example.
ISSUE_BOUND = math.exp(3.0) * math.exp(df.log_uniform_cap(0.9, 4))


def test_the_issue_example_is_at_risk_not_protected() -> None:
    assert ISSUE_BOUND == pytest.approx(0.3755, abs=5e-5)
    res = ldp("risk", "--eps", "3", "--k", "4", "--a", "0.9")
    assert res.exit_code == 0, res.stderr
    assert "at risk (0.3755 > 0.001)" in res.stdout and "protected (" not in res.stdout
    for words in ("'protected' where the bound is at most 0.001", "'at risk' where it is larger but below 1",
                  "'no guarantee' where it reaches 1"):
        assert words in res.stdout, words
    info = json.loads(ldp("risk", "--eps", "3", "--k", "4", "--a", "0.9", "--json").stdout)
    (bound,) = info["levels"][0]["bounds"]
    assert info["threshold"] == df.DEFAULT_THRESHOLD == 1e-3
    assert bound["guarantee"] is True and bound["verdict"] == "at risk"
    assert bound["probability_bound"] == pytest.approx(ISSUE_BOUND, rel=1e-12)


def test_the_threshold_is_the_users() -> None:
    res = ldp("risk", "--eps", "3", "--k", "4", "--a", "0.9", "--risk-threshold", "0.5", "--json")
    assert json.loads(res.stdout)["levels"][0]["bounds"][0]["verdict"] == "protected"
    table = ldp("risk", "--eps", "3", "--k", "4", "--a", "0.9", "--risk-threshold", "0.5").stdout
    assert "protected (≤ 0.5)" in table and "at most 0.5 (--risk-threshold)" in table
    for bad in ("0", "1", "2", "-0.1"):
        refused = ldp("risk", "--eps", "3", "--k", "4", "--risk-threshold", bad)
        assert refused.exit_code == 2 and "--risk-threshold must be a probability in (0, 1)" in refused.stderr


@pytest.mark.parametrize("log_bound, verdict", [
    (math.log(1e-3), "protected"),  # at the threshold: protected
    (math.log(1e-3) + 1e-12, "at risk"),
    (-1e-12, "at risk"),
    (0.0, "no guarantee"),  # the bound reaches 1
    (5.0, "no guarantee"),
    (-math.inf, "protected"),  # a = 1: probability 0
])
def test_the_three_verdicts_and_their_edges(log_bound: float, verdict: str) -> None:
    assert df.verdict(log_bound, 1e-3) == verdict


def test_every_bound_of_a_section_has_its_verdict_at_the_sections_threshold() -> None:
    level = RiskEpsilon("release", 8.0, "any 8-LDP release, any prior", True)
    for threshold in (1e-6, 1e-3, 0.3):
        section = reconstruction_for([level], k=10, a=[0.1, 0.5, 0.9, 1.0], threshold=threshold)
        assert section["threshold"] == threshold
        for bound in section["levels"][0]["bounds"]:
            exact = -math.inf if bound["log_exact"] is None else bound["log_exact"]
            expected = ("no guarantee" if exact >= 0 else "protected" if exact <= math.log(threshold) else "at risk")
            assert bound["verdict"] == expected and bound["guarantee"] is (exact < 0)
    words = {b["verdict"] for b in reconstruction_for([level], k=10, a=[0.1, 0.5, 0.9, 1.0])["levels"][0]["bounds"]}
    assert words == {"no guarantee", "at risk", "protected"}


def test_a_threshold_outside_0_1_is_refused_by_its_name() -> None:
    level = RiskEpsilon("release", 2.0, "any", True)
    with pytest.raises(UsageError, match="^threshold must be a probability in"):
        reconstruction_for([level], k=4, threshold=1.0)
    mech = MechanismSpec("privunit2", 2.0, None, 1.0, {}).calibrate(8)
    with pytest.raises(UsageError, match="^risk_threshold must be a probability in"):
        reconstruction(mech, threshold=0.0)


def test_params_table_and_comparison_line_say_the_verdict() -> None:
    res = ldp("params", "--d", "10", "--eps", "4", "-m", "privunit2")
    assert res.exit_code == 0, res.stderr
    assert "at risk (" in res.stdout and "no guarantee (bound ≥ 1)" in res.stdout
    assert "'at risk' where it is larger but below 1" in res.stdout
    info = json.loads(ldp("params", "--d", "10", "--eps", "4", "-m", "privunit2", "--json",
                          "--risk-threshold", "0.01").stdout)
    assert info["reconstruction"]["threshold"] == 0.01
    assert {b["verdict"] for b in info["reconstruction"]["levels"][0]["bounds"]} <= {"protected", "at risk",
                                                                                     "no guarantee"}
    line = ldp("params", "--d", "64", "--eps", "4").stdout
    assert "a = 0.3: 0.4145 (at risk)" in line and "a = 0.9: 10^-22.2 (protected)" in line
    assert "a = 0.1: 1 (no guarantee)" in line


def test_the_sidecar_records_the_threshold_and_each_verdict(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    src = write_list(tmp_path / "rows.parquet", unit_rows(50, 4))
    write_file_release(src, tmp_path / "a.parquet", epsilon=3.0, options=ReleaseOptions(seed=1, risk=RiskSection(a=[0.9])))
    content = json.loads(sidecar_path(tmp_path / "a.parquet").read_text())
    jsonschema.validate(content, sidecar_schema())
    section = content["reconstruction"]
    assert section["threshold"] == 1e-3 and section["levels"][0]["bounds"][0]["verdict"] == "at risk"
    res = ldp("privatize", src, "-o", tmp_path / "b.parquet", "--eps", "3", "--risk-a", "0.9", "--risk-threshold", "0.5")
    assert res.exit_code == 0, res.stderr
    section = json.loads(sidecar_path(tmp_path / "b.parquet").read_text())["reconstruction"]
    assert section["threshold"] == 0.5 and section["levels"][0]["bounds"][0]["verdict"] == "protected"
    refused = ldp("privatize", src, "-o", tmp_path / "c.parquet", "--eps", "3", "--risk-threshold", "1.5")
    assert refused.exit_code == 2 and "--risk-threshold must be a probability" in refused.stderr


def test_sparse_data_gets_a_verdict_too() -> None:
    risk = sparse_risk(2.0, m=5, d=1000, precision=0.5, recall=0.5)
    assert risk.to_dict()["verdict"] == "no guarantee" and risk.to_dict()["threshold"] == 1e-3
    res = ldp("risk", "--model", "zipf", "--eps", "2", "--m", "5", "--d", "1000", "--precision", "0.5",
              "--recall", "0.5")
    assert res.exit_code == 0, res.stderr
    assert "Verdict: no guarantee (the tighter bound after the release is 1)" in res.stdout
