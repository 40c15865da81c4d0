"""Issue 13: no run that exits 0 with a wrong or unsafe release, and the CLI a privacy engineer expects.

Each test names the item of the issue it covers; each failed on the code before the change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ldp, unit_rows, write_list

from ldpcli.errors import DataError
from ldpcli.mechanisms._privunit import PrivUnit2
from ldpcli.planning._compare import compare_mechanisms, recommendation
from ldpcli.release._safety import (
    EPSILON_MAX,
    EPSILON_MIN,
    NEAR_EXACT_RELATIVE_RMS,
    check_clipping,
    clip_warning,
    relative_rms,
)


def privatized(tmp_path: Path, n: int = 400, d: int = 8, scale: float = 1.0, *extra: str) -> Path:
    """A seeded privatized Parquet file of n rows of norm ``scale`` (L = 1 unless ``extra`` says)."""
    src = tmp_path / "rows.parquet"
    write_list(src, unit_rows(n, d, seed=3) * scale, ids=True)
    res = ldp("privatize", src, "--eps", "4", "--seed", "7", "--keep", "id", *extra)
    assert res.exit_code == 0, res.stderr
    return tmp_path / "rows.privatized.parquet"


# --- item 2: clipping is said loudly and can fail a pipeline -------------------------------------------


def gradients(tmp_path: Path) -> Path:
    """Rows of norm 10–100, as gradients are, with a column of ids."""
    rng = np.random.default_rng(0)
    rows = unit_rows(500, 16, seed=1) * rng.uniform(10, 100, size=(500, 1))
    src = tmp_path / "grads.parquet"
    write_list(src, rows, ids=True)
    return src


def test_clipping_most_rows_is_a_warning_that_quiet_does_not_hide(tmp_path: Path) -> None:
    src = gradients(tmp_path)
    res = ldp("privatize", src, "--eps", "4", "--keep", "id", "-q", "--fail-on-clip", "1")  # accepted: a warning
    assert res.exit_code == 0
    assert "ldp: warning: 500 of 500 rows were outside" in res.stderr and "(100.0% of the rows)" in res.stderr
    assert "of the clipped rows" in res.stderr
    sidecar = (tmp_path / "grads.privatized.parquet.ldp.json").read_text()
    assert "500 of 500" not in sidecar and "clipped" not in sidecar  # a statistic of the raw data


def test_the_clipping_messages_say_1_of_1_row_and_2_of_2_rows() -> None:
    """The count of rows takes its noun's number and the verb agrees with the clipped count: never "1 of 1 rows"."""
    mech = PrivUnit2.calibrate(8, 4.0)
    one, two, half = clip_warning(1, 1, mech), clip_warning(2, 2, mech), clip_warning(1, 2, mech)
    assert one is not None and two is not None and half is not None
    assert one[0].startswith("1 of 1 row was outside the l2-ball of radius L = 1 and was moved onto it (100.0% of")
    assert two[0].startswith("2 of 2 rows were outside the l2-ball of radius L = 1 and were moved onto it (100.0% of")
    assert half[0].startswith("1 of 2 rows was outside the l2-ball of radius L = 1 and was moved onto it (50.0% of")
    with pytest.raises(DataError) as refused_one:
        check_clipping(1, 1, 0.5, "one.csv", mech)
    assert str(refused_one.value).startswith("one.csv: 1 of 1 row (100.0%) was outside the l2-ball of radius L = 1 ")
    with pytest.raises(DataError) as refused_two:
        check_clipping(2, 2, 0.5, "two.csv", mech)
    assert str(refused_two.value).startswith("two.csv: 2 of 2 rows (100.0%) were outside the l2-ball of radius L = 1 ")


def test_clipping_a_few_rows_is_a_note(tmp_path: Path) -> None:
    rows = unit_rows(1000, 8, seed=2)  # at d = 4, ε = 4 rules out no guess of a direction to cosine 0.9: a warning
    rows[:5] *= 3.0
    src = tmp_path / "few.parquet"
    write_list(src, rows)
    res = ldp("privatize", src, "--eps", "4")
    assert res.exit_code == 0
    assert "ldp: note: 5 of 1000 rows were outside" in res.stderr and "(0.5% of the rows)" in res.stderr
    assert "ldp: warning" not in res.stderr
    # A second ledger: in the first one this input was just released, which warns even with -q.
    assert ldp("privatize", src, "--eps", "4", "-q", "--overwrite", "--ledger", tmp_path / "other.json").stderr == ""


@pytest.mark.parametrize("fraction, fails", [("0", True), ("0.5", True), ("1", False)])
def test_fail_on_clip_refuses_and_writes_nothing(tmp_path: Path, fraction: str, fails: bool) -> None:
    src = gradients(tmp_path)
    res = ldp("privatize", src, "--eps", "4", "--fail-on-clip", fraction)
    out = tmp_path / "grads.privatized.parquet"
    if fails:
        assert res.exit_code == 1
        assert "more than --fail-on-clip" in res.stderr and "nothing was written" in res.stderr
        assert res.stderr.count("\n") == 1
        assert not out.exists() and not Path(str(out) + ".ldp.json").exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["grads.parquet"]
    else:
        assert res.exit_code == 0 and out.exists()


@pytest.mark.parametrize("fraction", ["-0.1", "1.5", "nan"])
def test_fail_on_clip_must_be_a_fraction(tmp_path: Path, fraction: str) -> None:
    res = ldp("privatize", gradients(tmp_path), "--eps", "4", "--fail-on-clip", fraction)
    assert res.exit_code == 2 and "--fail-on-clip must be a fraction" in res.stderr


def test_help_says_the_estimate_is_of_the_clipped_rows() -> None:
    shown = ldp("privatize", "--help", terminal_width=200).stdout
    assert "clipped" in shown and "--fail-on-clip" in shown


# --- item 6: ε outside the supported range; near-exact releases ----------------------------------------


@pytest.mark.parametrize("eps", ["1e6", "20000", "0.001"])
def test_epsilon_outside_the_range_is_refused_without_force(tmp_path: Path, eps: str) -> None:
    src = tmp_path / "rows.parquet"
    write_list(src, unit_rows(50, 4))
    res = ldp("privatize", src, "--eps", eps)
    assert res.exit_code == 2
    assert "supported range [0.01, 10000]" in res.stderr and "--force" in res.stderr
    assert not (tmp_path / "rows.privatized.parquet").exists()
    forced = ldp("privatize", src, "--eps", eps, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert "ldp: warning:" in forced.stderr and "supported range" in forced.stderr
    sidecar = json.loads((tmp_path / "rows.privatized.parquet.ldp.json").read_text())
    assert any("supported range" in text for text in sidecar["release"]["warnings"])


def test_the_range_is_the_documented_one() -> None:
    assert (EPSILON_MIN, EPSILON_MAX) == (0.01, 1e4)


def test_near_exact_release_is_a_warning_computed_from_the_error(tmp_path: Path) -> None:
    src = tmp_path / "rows.parquet"
    write_list(src, unit_rows(50, 3))
    res = ldp("privatize", src, "--eps", "1000")
    assert res.exit_code == 0
    assert "essentially publishes the data" in res.stderr
    assert "essentially publishes" not in ldp("privatize", src, "--eps", "4", "--overwrite").stderr
    # The threshold is the mechanism's own RMS error, not a fixed ε: at d = 3 it is crossed near ε = 12.
    from ldpcli.mechanisms import PrivUnit2

    assert relative_rms(PrivUnit2.calibrate(3, 11.0)) > NEAR_EXACT_RELATIVE_RMS
    assert relative_rms(PrivUnit2.calibrate(3, 13.0)) < NEAR_EXACT_RELATIVE_RMS
    assert relative_rms(PrivUnit2.calibrate(10_000, 13.0)) > NEAR_EXACT_RELATIVE_RMS
    assert "essentially" in ldp("params", "--d", "3", "--eps", "100", "-m", "privunit2").stderr


def test_params_warns_outside_the_range_but_answers() -> None:
    res = ldp("params", "--d", "384", "--eps", "0.001", "-m", "privunit2", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["d"] == 384
    assert "ldp: warning:" in res.stderr and "supported range" in res.stderr


# --- item 7: baselines ------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism, extra, words", [
    ("gaussian", ["--delta", "1e-6"], "(ε, δ)-DP with δ = 1e-06"),
    ("laplace", [], "Mironov"),
])
def test_baselines_warn_and_are_marked(tmp_path: Path, mechanism: str, extra: list[str], words: str) -> None:
    src = tmp_path / "rows.parquet"
    write_list(src, unit_rows(50, 4))
    res = ldp("privatize", src, "--eps", "4", "-m", mechanism, *extra, "-q")
    assert res.exit_code == 0
    assert "ldp: warning:" in res.stderr and "not for release" in res.stderr and words in res.stderr
    sidecar = json.loads((tmp_path / "rows.privatized.parquet.ldp.json").read_text())
    assert sidecar["mechanism"]["baseline"] is True
    assert any(words in text for text in sidecar["release"]["warnings"])


# --- item 5: kept columns are released unprivatized, and said so -----------------------------------------


def test_kept_columns_are_listed_on_stderr_and_in_the_sidecar(tmp_path: Path) -> None:
    out = privatized(tmp_path)
    sidecar = json.loads(Path(str(out) + ".ldp.json").read_text())
    assert sidecar["release"]["unprivatized_columns"] == ["id"]
    res = ldp("privatize", tmp_path / "rows.parquet", "--eps", "4", "--keep", "id", "-q", "--overwrite")
    assert "ldp: warning: released unprivatized (--keep): 'id'" in res.stderr


def test_free_text_keep_columns_need_keep_unsafe(tmp_path: Path) -> None:
    rows = unit_rows(20, 4)
    table = pa.table({
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rows.ravel()), 4),
        "email": [f"user{i}@example.org" for i in range(20)],
    })
    src = tmp_path / "people.parquet"
    pq.write_table(table, src)
    res = ldp("privatize", src, "--eps", "4", "--keep", "email")
    assert res.exit_code == 2 and "--keep-unsafe" in res.stderr
    assert "user0@example.org" not in res.stderr
    assert not (tmp_path / "people.privatized.parquet").exists()
    unsafe = ldp("privatize", src, "--eps", "4", "--keep", "email", "--keep-unsafe")
    assert unsafe.exit_code == 0 and "released unprivatized" in unsafe.stderr


# --- item 8: one style, one line ------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["params", "privatize", "estimate-mean", "audit"])
def test_help_shows_no_python_types(command: str) -> None:
    shown = ldp(command, "--help", terminal_width=200).stdout
    assert "<bool>" not in shown and "<list[" not in shown and "{" + "INPUT}" not in shown
    assert re.search(r"--json\s+<", shown) is None


def test_top_level_help_offers_completion() -> None:
    shown = ldp("--help", terminal_width=200).stdout
    assert "--install-completion" in shown and "<bool>" not in shown


@pytest.mark.parametrize("args, words", [
    (["privatize"], "Missing argument 'INPUTS...'"),
    (["params", "--d", "x", "--eps", "1"], "'--d'"),
    (["params", "--d", "3"], "Missing option '--eps'"),
    (["estimate-mean", "a.parquet", "--confidance", "0.9"], "No such option"),
    (["estimat-mean"], "No such command"),
])
def test_usage_errors_are_one_line_and_exit_2(args: list[str], words: str) -> None:
    res = ldp(*args)
    assert res.exit_code == 2
    assert res.stderr.startswith("ldp: error: ") and words in res.stderr
    assert res.stderr.count("\n") == 1 and "╭" not in res.stderr
    assert res.stdout == ""


def test_epsilon_is_an_alias_of_eps() -> None:
    a = ldp("params", "--d", "50", "--epsilon", "2", "-m", "privunit2", "--json")
    b = ldp("params", "--d", "50", "--eps", "2", "-m", "privunit2", "--json")
    assert a.exit_code == 0 and a.stdout == b.stdout


def test_privatize_json_is_a_summary_object(tmp_path: Path) -> None:
    src = tmp_path / "rows.parquet"
    write_list(src, unit_rows(30, 5), ids=True)
    res = ldp("privatize", src, "--eps", "2", "--keep", "id", "--json", "--seed", "1")
    assert res.exit_code == 0
    summary = json.loads(res.stdout)
    assert summary["n"] == 30 and summary["d"] == 5 and summary["mechanism"]["spec"]["name"] == "privunit2"
    assert summary["output"].endswith("rows.privatized.parquet") and summary["sidecar"].endswith(".ldp.json")
    assert summary["unprivatized_columns"] == ["id"] and summary["reproducible"] is True
    assert summary["dtype"] == "float64"


def test_estimate_mean_quiet_prints_only_the_result(tmp_path: Path) -> None:
    out = privatized(tmp_path)
    res = ldp("estimate-mean", out, "-q", "--json")
    assert res.exit_code == 0 and res.stderr == ""
    assert json.loads(res.stdout)["n"] == 400
    saved = ldp("estimate-mean", out, "-q", "-o", tmp_path / "mean.json")
    assert saved.exit_code == 0 and saved.stdout == "" and saved.stderr == ""
    assert json.loads((tmp_path / "mean.json").read_text())["n"] == 400
    table = ldp("estimate-mean", out, "-q", "--no-verify")
    assert table.stderr == "" and "UNVERIFIED" in table.stdout


# --- item 10: the estimate explains itself -----------------------------------------------------------------


def test_estimate_mean_table_reads_the_error_against_the_size(tmp_path: Path) -> None:
    out = privatized(tmp_path, 2000, 4)
    res = ldp("estimate-mean", out, terminal_width=200)
    assert res.exit_code == 0
    assert "norm bound L" in res.stdout and "‖mean‖" in res.stdout
    reading = next(line for line in res.stdout.splitlines() if line.startswith("Reading:"))
    assert re.search(r"RMS ℓ2 error [0-9.e-]+ \(guaranteed\) on a mean of norm [0-9.e-]+", reading)
    estimate = json.loads(ldp("estimate-mean", out, "--json").stdout)
    assert estimate["norm_bound"] == 1.0
    assert estimate["mean_norm"] == pytest.approx(float(np.linalg.norm(estimate["mean"])))


# --- item 11: the recommendation comes from the errors -----------------------------------------------------


def test_recommendation_is_computed_for_gradients_with_a_large_bound() -> None:
    rows = compare_mechanisms(500, 4.0, norm_bound=100.0)
    line = recommendation(rows)
    assert "magnitudes matter" not in line
    errors = {row["mechanism"]: row["expected_error_max"] for row in rows if "expected_error_max" in row}
    separated = errors["separated"] / errors["privunit2"]
    assert separated > 2  # the advice "separated for gradients" loses by this factor here, and says so
    assert f"separated {separated:.4g}×" in line
    shown = ldp("params", "--d", "500", "--eps", "4", "-L", "100", terminal_width=300).stdout
    assert f"separated {separated:.4g}×" in shown


# --- item 9: invalid rows, CSV types; item 13: output dtype, through the command line ----------------


def test_skip_invalid_leaves_out_bad_rows_and_names_them(tmp_path: Path) -> None:
    src = tmp_path / "rows.csv"
    src.write_text("id,a,b\n1,0.6,0.8\n2,nan,0.1\n3,,0.2\n4,0.0,1.0\n")
    plain = ldp("privatize", src, "--eps", "2", "--columns", "a,b", "--keep", "id")
    assert plain.exit_code == 1 and "(counting from 1)" in plain.stderr
    res = ldp("privatize", src, "--eps", "2", "--columns", "a,b", "--keep", "id", "--skip-invalid", "-q",
              "-o", tmp_path / "out.parquet")
    assert res.exit_code == 0, res.stderr
    assert "left out 2 invalid rows (rows 2, 3, counting from 1)" in res.stderr
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.column("id").to_pylist() == [1, 4]  # an integer id from CSV stays an integer
    assert pa.types.is_integer(table.schema.field("id").type)
    sidecar = (tmp_path / "out.parquet.ldp.json").read_text()
    assert json.loads(sidecar)["data"]["n"] == 2 and "invalid" not in sidecar


def test_dtype_option_and_its_default(tmp_path: Path) -> None:
    rows = unit_rows(300, 16).astype(np.float32)
    src = tmp_path / "emb.parquet"
    pq.write_table(pa.table({"emb": pa.FixedSizeListArray.from_arrays(pa.array(rows.ravel()), 16)}), src)
    assert ldp("privatize", src, "--eps", "4", "-q").exit_code == 0
    default = pq.read_schema(tmp_path / "emb.privatized.parquet").field("emb").type
    assert default.value_type == pa.float32()
    res = ldp("privatize", src, "--eps", "4", "-q", "--dtype", "float64", "-o", tmp_path / "wide.parquet")
    assert res.exit_code == 0
    assert pq.read_schema(tmp_path / "wide.parquet").field("emb").type.value_type == pa.float64()
    assert json.loads((tmp_path / "wide.parquet.ldp.json").read_text())["data"]["dtype"] == "float64"
    bad = ldp("privatize", src, "--eps", "4", "--dtype", "float16", "-o", tmp_path / "bad.parquet")
    assert bad.exit_code == 2 and "--dtype must be float32 or float64" in bad.stderr


def test_digits_csv_is_refused_with_the_command_that_fixes_it(tmp_path: Path) -> None:
    import shutil

    src = tmp_path / "digits_unit.csv"
    shutil.copy(Path(__file__).parents[2] / "examples" / "digits_unit.csv", src)
    res = ldp("privatize", src, "--eps", "4")
    assert res.exit_code == 2 and "--keep id,label" in res.stderr
    fixed = ldp("privatize", src, "--eps", "4", "--keep", "id,label", "-q")
    assert fixed.exit_code == 0
    sidecar = json.loads((tmp_path / "digits_unit.privatized.csv.ldp.json").read_text())
    assert sidecar["data"]["d"] == 64
    assert "outside" not in fixed.stderr  # unit rows: nothing clipped once id and label are out
    by_range = ldp("privatize", src, "--eps", "4", "--columns", "p00:p63", "-q", "--overwrite")
    assert by_range.exit_code == 0


def test_messages_are_printed_verbatim_not_as_emoji_codes() -> None:
    """rich turned ':b:' in the grid syntax 'A:B:K' into an emoji; messages are text, not markup."""
    res = ldp("sweep", "--eps", "a:b", "--d", "3", "--n", "10")
    assert res.exit_code == 2 and "A:B:K" in res.stderr
