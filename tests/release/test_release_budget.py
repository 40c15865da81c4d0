"""Issue 9 through the CLI: the budget ledger and input tags of `ldp privatize`, `ldp budget`,
`estimate-mean` refusing two releases of one input, and the reconstruction section of sidecars and
`ldp params`.

Every test has its own ledger (tests/conftest.py sets LDP_LEDGER), so nothing here touches the
home directory.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from helpers import ldp, unit_rows, write_list

from ldpcli.errors import UsageError
from ldpcli.mechanisms import MechanismSpec
from ldpcli.release._file import write_file_release
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, ReleaseOptions
from ldpcli.release._sidecar import load_sidecar, sidecar_path, sidecar_schema
from ldpcli.risk._diffuse import log_uniform_cap
from ldpcli.risk._section import reconstruction


def rows_file(tmp_path: Path, name: str = "rows.parquet", n: int = 300, d: int = 6, seed: int = 1) -> Path:
    path = tmp_path / name
    write_list(path, unit_rows(n, d, seed=seed))
    return path


def release(src: Path, out: Path, *extra: object, eps: float = 2.0) -> None:
    res = ldp("privatize", src, "-o", out, "--eps", eps, "-q", *extra)
    assert res.exit_code == 0, res.stderr


def sidecar_of(path: Path) -> dict:
    return json.loads(sidecar_path(path).read_text())


# --- the ledger and the input tag -----------------------------------------------------------------------


def test_a_second_release_of_one_input_warns_and_carries_the_same_tag(tmp_path: Path) -> None:
    src = rows_file(tmp_path)
    release(src, tmp_path / "a.parquet")
    res = ldp("privatize", src, "-o", tmp_path / "b.parquet", "--eps", "3")
    assert res.exit_code == 0, res.stderr
    assert "already released 1 time" in res.stderr
    tag_a = sidecar_of(tmp_path / "a.parquet")["release"]["input_tag"]
    tag_b = sidecar_of(tmp_path / "b.parquet")["release"]["input_tag"]
    assert tag_a == tag_b and tag_a.startswith("ldptag1-")
    # The notice is for the operator, not for whoever receives the file.
    assert not any("already released" in w for w in sidecar_of(tmp_path / "b.parquet")["release"]["warnings"])
    spent = Ledger.open().summary()
    assert len(spent) == 1 and spent[0].releases == 2
    assert spent[0].epsilon == pytest.approx(5.0, rel=1e-12)


def test_estimate_mean_refuses_two_releases_of_one_input_as_shards(tmp_path: Path) -> None:
    src = rows_file(tmp_path)
    release(src, tmp_path / "a.parquet")
    release(src, tmp_path / "b.parquet")
    res = ldp("estimate-mean", tmp_path / "a.parquet", tmp_path / "b.parquet")
    assert res.exit_code == 1
    assert "two releases of the same input" in res.stderr and "ε = 4" in res.stderr
    # Shards of two different inputs are fine, and each file alone is fine.
    other = rows_file(tmp_path, "other.parquet", seed=2)
    release(other, tmp_path / "c.parquet")
    assert ldp("estimate-mean", tmp_path / "a.parquet", tmp_path / "c.parquet", "-q").exit_code == 0
    assert ldp("estimate-mean", tmp_path / "b.parquet", "-q").exit_code == 0


def test_the_fingerprint_is_of_the_values_not_the_file(tmp_path: Path) -> None:
    """The same rows as CSV and as Parquet are the same people: one tag, one budget."""
    rows = unit_rows(50, 3, seed=4)
    parquet = tmp_path / "rows.parquet"
    write_list(parquet, rows)
    csv = tmp_path / "rows.csv"
    pacsv.write_csv(pa.table({f"x{j}": rows[:, j] for j in range(3)}), csv)
    release(parquet, tmp_path / "a.parquet")
    res = ldp("privatize", csv, "-o", tmp_path / "b.parquet", "--eps", "2")
    assert res.exit_code == 0, res.stderr
    assert "already released" in res.stderr
    assert sidecar_of(tmp_path / "a.parquet")["release"]["input_tag"] == sidecar_of(tmp_path / "b.parquet")["release"]["input_tag"]


def test_max_budget_refuses_before_anything_is_written(tmp_path: Path) -> None:
    src = rows_file(tmp_path)
    release(src, tmp_path / "a.parquet", eps=2.0)
    res = ldp("privatize", src, "-o", tmp_path / "b.parquet", "--eps", "2", "--max-budget", "3")
    assert res.exit_code == 1
    assert "--max-budget" in res.stderr or "budget" in res.stderr
    assert not (tmp_path / "b.parquet").exists() and not sidecar_path(tmp_path / "b.parquet").exists()
    assert len(Ledger.open().entries) == 1
    # Within the cap it goes through.
    release(src, tmp_path / "c.parquet", "--max-budget", "4", eps=2.0)
    assert len(Ledger.open().entries) == 2


def test_an_unreadable_ledger_stops_the_release_and_is_left_as_it_was(tmp_path: Path) -> None:
    ledger = Path(os.environ["LDP_LEDGER"])
    ledger.write_bytes(b"{not json")
    res = ldp("privatize", rows_file(tmp_path), "-o", tmp_path / "a.parquet", "--eps", "2")
    assert res.exit_code == 1
    assert str(ledger) in res.stderr and "never resets" in res.stderr
    assert ledger.read_bytes() == b"{not json"
    assert not (tmp_path / "a.parquet").exists()


def test_ledger_option_and_budget_command(tmp_path: Path) -> None:
    book = tmp_path / "owner" / "ledger.json"
    src = rows_file(tmp_path)
    release(src, tmp_path / "a.parquet", "--ledger", book, eps=1.0)
    release(src, tmp_path / "b.parquet", "--ledger", book, "-m", "separated", eps=8.0)
    res = ldp("budget", "--ledger", book, "--json")
    assert res.exit_code == 0, res.stderr
    info = json.loads(res.stdout)
    (line,) = info["inputs"]
    assert line["releases"] == 2
    expected = 1.0 + MechanismSpec("separated", 8.0, None, 1.0, {}).calibrate(6).epsilon_exact
    assert line["epsilon"] == pytest.approx(expected, rel=1e-12)
    assert "fingerprint" not in json.dumps(info)  # the unkeyed hash of the raw values stays in the ledger
    human = ldp("budget", "--ledger", book)
    assert human.exit_code == 0 and "releases" in human.stdout
    # The default ledger (LDP_LEDGER) saw nothing.
    assert ldp("budget").stdout.startswith("No release recorded")


def test_library_call_without_a_ledger_records_nothing_and_max_budget_needs_one(tmp_path: Path) -> None:
    src = rows_file(tmp_path)
    result = write_file_release(src, tmp_path / "a.parquet", epsilon=2.0, options=ReleaseOptions(seed=1))
    assert result.input_tag is None and "input_tag" not in sidecar_of(tmp_path / "a.parquet")["release"]
    assert not Path(os.environ["LDP_LEDGER"]).exists()
    with pytest.raises(UsageError, match="max_budget"):
        write_file_release(src, tmp_path / "b.parquet", epsilon=2.0, options=ReleaseOptions(budget=Budget(max_budget=5.0)))


# --- the reconstruction section ------------------------------------------------------------------------


def test_sidecar_carries_the_reconstruction_section_and_matches_the_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    src = rows_file(tmp_path, d=6)
    release(src, tmp_path / "a.parquet", eps=4.0)
    content = sidecar_of(tmp_path / "a.parquet")
    jsonschema.validate(content, sidecar_schema())
    section = content["reconstruction"]
    assert section["k"] == 6 and section["rho0"] == 0 and section["a"] == [0.1, 0.3, 0.5, 0.9]
    (level,) = section["levels"]
    eps_exact = content["mechanism"]["epsilon_exact"]
    assert level["epsilon"] == eps_exact and level["conservative"]
    for bound in level["bounds"]:
        assert bound["log_exact"] == pytest.approx(eps_exact + log_uniform_cap(bound["a"], 6), rel=1e-12)
    load_sidecar(sidecar_path(tmp_path / "a.parquet"))  # still loads


def test_risk_options_of_privatize_change_the_section(tmp_path: Path) -> None:
    src = rows_file(tmp_path, d=6)
    release(src, tmp_path / "a.parquet", "--risk-k", "3", "--risk-rho0", "0.5", "--risk-a", "0.2,0.7")
    section = sidecar_of(tmp_path / "a.parquet")["reconstruction"]
    assert (section["k"], section["rho0"], section["a"]) == (3, 0.5, [0.2, 0.7])
    res = ldp("privatize", src, "-o", tmp_path / "b.parquet", "--eps", "2", "--risk-k", "7")
    assert res.exit_code == 2 and "--risk-k must be an integer >= 2 and <= d = 6, got 7" in res.stderr
    assert not (tmp_path / "b.parquet").exists()


def test_separated_reports_the_direction_level_beside_the_conservative_one() -> None:
    mech = MechanismSpec("separated", 20.0, None, 1.0, {}).calibrate(50)
    section = reconstruction(mech)
    assert section is not None
    release_level, direction = section["levels"]
    assert release_level["conservative"] and not direction["conservative"]
    assert release_level["epsilon"] == mech.epsilon_exact
    assert direction["epsilon"] == mech.direction.epsilon_exact < mech.epsilon_exact
    assert "independent" in direction["applies"]


def test_gaussian_has_no_per_output_guarantee_and_scalar_no_section() -> None:
    gauss = MechanismSpec("gaussian", 2.0, None, 1.0, {"delta": 1e-6}).calibrate(10)
    section = reconstruction(gauss)
    assert section is not None and section["levels"][0]["epsilon"] is None and section["levels"][0]["bounds"] == []
    assert reconstruction(MechanismSpec("scalar", 2.0, None, 1.0, {}).calibrate(1)) is None


def test_params_json_has_the_section_and_the_comparison_too() -> None:
    res = ldp("params", "--d", "100", "--eps", "8", "-m", "privunit2", "--json")
    assert res.exit_code == 0, res.stderr
    section = json.loads(res.stdout)["reconstruction"]
    bound = {b["a"]: b for b in section["levels"][0]["bounds"]}
    assert bound[0.5]["log_exact"] == pytest.approx(8.0 + log_uniform_cap(0.5, 100), rel=1e-9)
    assert ldp("params", "--d", "100", "--eps", "8", "--risk-k", "1").exit_code == 2
    rows = json.loads(ldp("params", "--d", "100", "--eps", "8", "--json").stdout)
    assert all("reconstruction" in row for row in rows if "expected_error_max" in row)
    human = ldp("params", "--d", "100", "--eps", "8")
    assert "Reconstruction (k = 100" in human.stdout


# --- choosing ε from an error target -------------------------------------------------------------------


def test_params_target_rmse_gives_the_smallest_epsilon_that_meets_it() -> None:
    res = ldp("params", "--d", "100", "--n", "10000", "--target-rmse", "0.1", "-m", "privunit2", "--json")
    assert res.exit_code == 0, res.stderr
    info = json.loads(res.stdout)
    mech = MechanismSpec("privunit2", info["epsilon"], None, 1.0, {}).calibrate(100)
    assert mech.expected_error_mean(10_000) <= 0.01
    below = MechanismSpec("privunit2", info["epsilon"] * (1 - 1e-8), None, 1.0, {}).calibrate(100)
    assert below.expected_error_mean(10_000) > 0.01
    table = ldp("params", "--d", "100", "--n", "10000", "--target-rmse", "0.1")
    assert table.exit_code == 0 and "privunit2" in table.stdout
    assert ldp("params", "--d", "100", "--target-rmse", "0.1").exit_code == 2  # needs --n
    assert ldp("params", "--d", "100", "--n", "10", "--target-rmse", "0.1", "--eps", "2").exit_code == 2
    assert ldp("params", "--d", "100").exit_code == 2  # neither --eps nor a target


def test_risk_json_gives_the_exact_and_prop1_bounds() -> None:
    """Numbers the note quotes: `ldp risk --eps 8 --k 100 --a 0.5` (log p exact vs Prop. 1)."""
    res = ldp("risk", "--eps", "8", "--k", "100", "--a", "0.5", "--json")
    assert res.exit_code == 0, res.stderr
    (bound,) = json.loads(res.stdout)["levels"][0]["bounds"]
    assert bound["log_exact"] == pytest.approx(8 + log_uniform_cap(0.5, 100), rel=1e-12)
    assert bound["log_prop1_small"] == pytest.approx(8 + 50 * math.log(0.75), rel=1e-12)
    assert bound["log_exact"] < bound["log_prop1_small"]
    assert np.isfinite(bound["log_exact"])


# --- `ldp risk` modes through the CLI -------------------------------------------------------------------


def test_risk_from_a_sidecar_and_from_a_mechanism_say_which_epsilon_counts(tmp_path: Path) -> None:
    src = rows_file(tmp_path, d=6)
    release(src, tmp_path / "s.parquet", "-m", "separated", eps=8.0)
    res = ldp("risk", "--sidecar", sidecar_path(tmp_path / "s.parquet"), "--json")
    assert res.exit_code == 0, res.stderr
    names = [level["name"] for level in json.loads(res.stdout)["levels"]]
    assert names == ["release", "direction"]
    human = ldp("risk", "-m", "separated", "--d", "50", "--eps", "20", "--k", "10")
    assert human.exit_code == 0 and "direction" in human.stdout and "independent" in human.stdout
    gauss = ldp("risk", "-m", "gaussian", "--d", "50", "--eps", "2", "--json")
    assert gauss.exit_code == 0 and json.loads(gauss.stdout)["levels"][0]["bounds"] == []
    assert ldp("risk", "-m", "privunit2", "--eps", "2").exit_code == 2  # needs --d
    assert ldp("risk", "--eps", "2").exit_code == 2  # needs --k or --d
    assert ldp("risk", "--eps", "2", "--k", "10", "--a", "1.5").exit_code == 2
    assert ldp("risk", "--eps", "2", "--k", "10", "--rho0", "-1").exit_code == 2
    assert ldp("risk", "--eps", "2", "--d", "5", "--k", "6").exit_code == 2


def test_risk_max_risk_and_zipf_through_the_cli() -> None:
    res = ldp("risk", "--max-risk", "1e-6", "--k", "100", "--a", "0.1,0.5", "--json")
    assert res.exit_code == 0, res.stderr
    low, mid = json.loads(res.stdout)
    assert low["epsilon_max"] is None and "even at ε = 0" in low["reason"]
    assert mid["epsilon_max"] == pytest.approx(math.log(1e-6) - log_uniform_cap(0.5, 100), rel=1e-12)
    assert ldp("risk", "--max-risk", "1e-6", "--eps", "2", "--k", "10").exit_code == 2
    zipf = ldp("risk", "--model", "zipf", "--m", "20", "--d", "200", "--precision", "0.9", "--recall", "0.9",
               "--eps", "4", "--json")
    assert zipf.exit_code == 0, zipf.stderr
    info = json.loads(zipf.stdout)
    assert info["log_bound_exact"] == pytest.approx(min(0.0, 4.0 + info["log_prior_exact"]))
    assert ldp("risk", "--model", "zipf", "--m", "20", "--eps", "4").exit_code == 2  # --d, --precision, --recall


def test_risk_attack_through_the_cli(tmp_path: Path) -> None:
    src = rows_file(tmp_path, n=400, d=8)
    release(src, tmp_path / "a.parquet", "--seed", "3", eps=50.0)
    res = ldp("risk", "--attack", tmp_path / "a.parquet", "--raw", src, "--k", "4", "--json")
    assert res.exit_code == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["k"] == 4 and info["n"] == 400 and "never be published" in info["notice"]
    human = ldp("risk", "--attack", tmp_path / "a.parquet", "--raw", src, "-q")
    assert human.exit_code == 0 and "prior only" in human.stdout and "never be published" in human.stderr
    assert ldp("risk", "--attack", tmp_path / "a.parquet").exit_code == 2  # needs --raw
    other = rows_file(tmp_path, "other.parquet", n=300, d=8)
    assert ldp("risk", "--attack", tmp_path / "a.parquet", "--raw", other).exit_code == 1  # row counts differ


def test_attack_on_a_gaussian_release_claims_no_bound(tmp_path: Path) -> None:
    """An (ε, δ) release has no per-output guarantee: the attack's bound column is 1, not e^ε·P_cap."""
    src = rows_file(tmp_path, n=200, d=8)
    release(src, tmp_path / "g.parquet", "-m", "gaussian", "--delta", "1e-6", eps=2.0)
    info = json.loads(ldp("risk", "--attack", tmp_path / "g.parquet", "--raw", src, "--json").stdout)
    assert [row["uniform_bound"] for row in info["success"]] == [1.0] * 4


# --- issue 26 item 16: what the ledger records for copies, and what it composes -----------------------------------


def budget_line(book: Path) -> dict:
    res = ldp("budget", "--ledger", book, "--json")
    assert res.exit_code == 0, res.stderr
    (line,) = json.loads(res.stdout)["inputs"]
    return line


def test_copies_of_the_gaussian_baseline_spend_k_delta_in_the_ledger(tmp_path: Path) -> None:
    book = tmp_path / "ledger.json"
    release(rows_file(tmp_path), tmp_path / "g.parquet", "--ledger", book, "-m", "gaussian", "--delta", "1e-6",
            "--copies", "3", eps=1.0)
    copy = MechanismSpec("gaussian", 1.0, None, 1.0, {"delta": 1e-6}).for_copies(3).calibrate(6)
    line = budget_line(book)
    assert line["delta"] == pytest.approx(3 * copy.delta_exact, rel=1e-12) and line["delta"] > 2e-6
    assert line["epsilon_asked"] == pytest.approx(1.0) and line["epsilon"] == pytest.approx(3 * copy.epsilon_exact)


def test_bcdp_copies_record_the_epsilon_asked_not_copies_times_it(tmp_path: Path) -> None:
    book = tmp_path / "ledger.json"
    bcdp = ("-m", "bcdp", "--q", "0.1", "--feature-eps", "0=0.2")
    release(rows_file(tmp_path), tmp_path / "b.parquet", "--ledger", book, *bcdp, "--copies", "2", eps=2.0)
    copy = MechanismSpec("bcdp", 2.0, None, 1.0, {"q": 0.1, "feature_eps": "0=0.2"}).for_copies(2).calibrate(6)
    line = budget_line(book)
    assert line["epsilon_asked"] == pytest.approx(2.0)  # was 4.0: each bcdp copy keeps ε, and split divides it
    assert line["epsilon"] == pytest.approx(2 * copy.epsilon_exact, rel=1e-12)
    assert line["epsilon"] == pytest.approx(sidecar_of(tmp_path / "b.parquet")["release"]["epsilon_total"], rel=1e-12)


def test_budget_says_it_composes_only_the_overall_epsilon_of_bcdp_releases(tmp_path: Path) -> None:
    from ldpcli.mechanisms._feature_levels import bcdp_levels

    book = tmp_path / "ledger.json"
    src = rows_file(tmp_path)
    bcdp = ("-m", "bcdp", "--q", "0.1", "--feature-eps", "0=0.2")
    release(src, tmp_path / "b1.parquet", "--ledger", book, *bcdp)
    assert "feature_levels" not in budget_line(book)  # one release: its sidecar's levels are the whole story
    release(src, tmp_path / "b2.parquet", "--ledger", book, *bcdp)
    line = budget_line(book)
    assert "composes the overall ε only" in line["feature_levels"] and "ε spent" in line["feature_levels"]
    human = ldp("budget", "--ledger", book)
    assert human.exit_code == 0 and "per-feature levels (bcdp) hold for each release alone" in " ".join(
        human.stdout.split())
    # Why the levels are not added up: Prop. 4 for the two releases together bounds feature 0 by more than twice
    # what each release grants it, and the overall ε spent bounds it.
    features = sidecar_of(tmp_path / "b1.parquet")["features"]
    one = min(group["bcdp_level"] for group in features["groups"])
    mech = MechanismSpec("bcdp", 2.0, None, 1.0, {"q": 0.1, "feature_eps": "0=0.2"}).calibrate(6)
    together = bcdp_levels(2 * mech.budget, 0.1)[0]
    assert together > 2 * one and together <= line["epsilon"] * (1 + 1e-12)
    # Releases without per-feature levels get no such sentence.
    other = tmp_path / "other.json"
    release(src, tmp_path / "p1.parquet", "--ledger", other)
    release(src, tmp_path / "p2.parquet", "--ledger", other)
    assert "feature_levels" not in budget_line(other)
