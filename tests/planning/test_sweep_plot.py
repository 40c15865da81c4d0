"""`ldp sweep` and `ldp plot` (issue 15): the sweep table, its grids, its simulation, its files, and the
figures and text charts drawn from it.

The simulated errors are seeded, so every run draws the same numbers; the tolerances are still derived from
the sampling error (a Bonferroni z over the points of a test at family level 1e-6), so a change of seed or of
the order of the draws cannot turn a correct simulation into a failure.
"""

from __future__ import annotations

import json
import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from helpers import bonferroni_z, ldp, unit_rows, write_list

from ldpcli.errors import DataError, UsageError
from ldpcli.mechanisms import MechanismSpec, get_mechanism
from ldpcli.planning._plot import plot_sweep, text_chart
from ldpcli.planning._sweep import (
    COLUMN_NAMES,
    DEFAULT_DELTA,
    parse_grid,
    read_sweep,
    save_sweep,
    simulate_boundary,
    sweep,
    vector_mechanisms,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
Z95 = 1.959963984540054


def predicted(name: str, d: int, eps: float, norm_bound: float = 1.0):
    options = {"delta": DEFAULT_DELTA} if "delta" in get_mechanism(name).options else {}
    return MechanismSpec(name, eps, None, norm_bound, options).calibrate(d)


@pytest.fixture(scope="module")
def small_sweep() -> list[dict]:
    """Every vector mechanism at d = 16, n = 200 over 5 values of ε, with 40 simulated trials each."""
    return sweep(16, "0.5:16:5", 200, empirical=40, seed=11)


# --- grids -------------------------------------------------------------------------------------------


def test_a_range_is_log_spaced_with_its_ends_exact() -> None:
    grid = parse_grid("0.5:16", "--eps")
    assert len(grid) == 12 and grid[0] == 0.5 and grid[-1] == 16.0
    ratios = np.diff(np.log(grid))
    assert np.allclose(ratios, math.log(32) / 11)
    assert parse_grid("0.5:16", "--eps", points=6) == parse_grid("0.5:16:6", "--eps")
    assert len(parse_grid("1:100:3", "--eps")) == 3 and parse_grid("1:100:3", "--eps")[1] == pytest.approx(10.0)


def test_lists_and_single_values() -> None:
    assert parse_grid("4,1,2,2", "--eps") == (1.0, 2.0, 4.0)
    assert parse_grid(" 8 ", "--eps") == (8.0,)
    assert parse_grid(3, "--eps") == (3.0,)
    assert parse_grid([2, 1], "--d", integer=True) == (1, 2)
    assert parse_grid("1e4", "--n", integer=True) == (10_000,)


def test_integer_ranges_are_rounded_and_distinct() -> None:
    grid = parse_grid("1:1000", "--d", integer=True)
    assert grid[0] == 1 and grid[-1] == 1000 and all(isinstance(v, int) for v in grid)
    assert list(grid) == sorted(set(grid))
    assert parse_grid("1:3:12", "--d", integer=True) == (1, 2, 3)  # rounding merges values


@pytest.mark.parametrize("text, integer, words", [
    ("0:4", False, "0 < A < B"),
    ("4:1", False, "0 < A < B"),
    ("1:2:1", False, "between 2 and"),
    ("1:2:2.5", False, "must be an integer"),
    ("a,b", False, "cannot read 'a'"),
    ("1,-2", False, "> 0"),
    ("1:2:3:4", False, "cannot read"),
    ("1.5", True, "integer >= 1"),
    ("nan", False, "finite"),
])
def test_bad_grids_are_usage_errors(text: str, integer: bool, words: str) -> None:
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        parse_grid(text, "--eps", integer=integer)


# --- the table ---------------------------------------------------------------------------------------


def test_one_row_per_mechanism_d_eps_n_with_the_mechanisms_predictions() -> None:
    rows = sweep("8,64", "1,4", "100,1000")
    names = vector_mechanisms()
    assert len(rows) == len(names) * 2 * 2 * 2
    keys = [(row["mechanism"], row["d"], row["epsilon"], row["n"]) for row in rows]
    assert keys == [(m, d, e, n) for m in names for d in (8, 64) for e in (1.0, 4.0) for n in (100, 1000)]
    for row in rows:
        assert tuple(row) == COLUMN_NAMES
        mech = predicted(row["mechanism"], row["d"], row["epsilon"])
        reference = predicted("privunit2", row["d"], row["epsilon"])
        assert row["error"] is None
        assert row["expected_error_mean"] == mech.expected_error_max / row["n"]
        assert row["expected_error_mean_boundary"] == mech.expected_error / row["n"]
        assert row["ratio_to_privunit2"] == pytest.approx(mech.expected_error_max / reference.expected_error_max,
                                                          rel=1e-15)
        assert row["epsilon_exact"] == mech.epsilon_exact and row["calibration"] == mech.calibration
        assert row["domain"] == str(mech.domain) and row["norm_bound"] == 1.0
        assert row["baseline"] is type(mech).baseline
        if row["mechanism"] == "gaussian":
            assert row["guarantee"] == "(ε,δ)-DP" and row["delta"] == DEFAULT_DELTA
        else:
            assert row["guarantee"] == "ε-LDP" and row["delta"] is None
        assert all(row[key] is None for key in ("inputs", "trials", "empirical_error", "empirical_lower"))
    assert {row["ratio_to_privunit2"] for row in rows if row["mechanism"] == "privunit2"} == {1.0}


def test_mechanisms_norm_bound_and_delta_are_passed_on() -> None:
    rows = sweep(32, 2, 50, mechanisms=["gaussian", "privunit2"], norm_bound=3.0, delta=1e-9)
    assert [row["mechanism"] for row in rows] == ["gaussian", "privunit2"]
    gaussian = MechanismSpec("gaussian", 2.0, None, 3.0, {"delta": 1e-9}).calibrate(32)
    assert rows[0]["delta"] == 1e-9 and rows[0]["expected_error_mean"] == gaussian.expected_error_max / 50
    assert rows[1]["expected_error_mean"] == predicted("privunit2", 32, 2.0, 3.0).expected_error_max / 50


def test_a_point_that_cannot_be_calibrated_is_a_row_with_an_error() -> None:
    rows = sweep(20_000_000, 2, 10, mechanisms=["privunit-inf", "privunit2"])
    failed, fine = rows
    assert failed["mechanism"] == "privunit-inf" and "above the 1e+07" in failed["error"]
    assert failed["expected_error_mean"] is None and failed["d"] == 20_000_000 and failed["n"] == 10
    assert fine["error"] is None and fine["expected_error_mean"] > 0
    res = ldp("sweep", "--d", 20_000_000, "--eps", 2, "--n", 10, "-m", "privunit-inf", "-m", "privunit2", "--json")
    assert res.exit_code == 0, res.output
    assert [row["error"] is None for row in json.loads(res.stdout)] == [False, True]


def test_bad_choices_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="scalar column"):
        sweep(8, 1, 10, mechanisms=["scalar"])
    with pytest.raises(UsageError, match="unknown mechanism"):
        sweep(8, 1, 10, mechanisms=["nope"])
    with pytest.raises(UsageError, match="^delta applies to gaussian"):
        sweep(8, 1, 10, mechanisms=["privunit2"], delta=1e-6)
    with pytest.raises(UsageError, match="^give n "):
        sweep(8, 1)
    with pytest.raises(UsageError, match="^empirical must be >= 2"):
        sweep(8, 1, 10, empirical=1)
    res = ldp("sweep", "--d", 8, "--eps", "1:x", "--n", 10)
    assert res.exit_code == 2 and res.stderr.startswith("ldp: error: --eps: cannot read 'x'")


def test_eps_outside_the_supported_range_is_a_warning_as_in_params() -> None:
    res = ldp("sweep", "--d", 4, "--eps", "0.001,1", "--n", 10, "-m", "privunit2", "--json")
    assert res.exit_code == 0, res.output
    assert "ldp: warning: --eps = 0.001 is below the supported range" in res.stderr
    assert len(json.loads(res.stdout)) == 2
    with pytest.warns(UserWarning, match="above the supported range"):
        sweep(4, 20_000, 10, mechanisms=["privunit2"])


def test_the_human_table_names_every_mechanism() -> None:
    res = ldp("sweep", "--d", 16, "--eps", "1,4", "--n", 100, terminal_width=200)
    assert res.exit_code == 0, res.output
    for name in vector_mechanisms():
        assert name in res.stdout
    assert "gaussian (ε,δ)" in res.stdout and "δ = 1e-06" in res.stdout


# --- the simulation ----------------------------------------------------------------------------------


def test_the_simulated_error_covers_the_boundary_prediction() -> None:
    # Not at small d and large ε together: there the hypercube mechanisms' error comes from an output that is
    # wrong with probability ~1e-6 (privunit-inf at d = 3, ε = 16), which 20 000 simulated rows never draw.
    rows = sweep("3,40", "0.5,2,6", 50, empirical=400, seed=7)
    z = bonferroni_z(1e-6, len(rows))
    for row in rows:
        assert row["inputs"] == "boundary" and row["trials"] == 400
        mean, se = row["empirical_error"], row["empirical_se"]
        assert se > 0
        assert abs(mean - row["expected_error_mean_boundary"]) <= z * se, row
        assert row["empirical_lower"] == pytest.approx(max(0.0, mean - Z95 * se), rel=1e-12)
        assert row["empirical_upper"] == pytest.approx(mean + Z95 * se, rel=1e-12)


def test_simulate_boundary_chunks_many_small_trials_and_one_large_one() -> None:
    """The two paths of the chunking (several trials per call; one trial in several calls) measure the
    same quantity: ‖mean − true mean‖² of n rows, whose expectation is expected_error / n."""
    from ldpcli.planning import _sweep as module

    mech = predicted("privunit2", 5, 2.0)
    rng = np.random.default_rng(1)
    many = simulate_boundary(mech, 7, 3000, rng)
    z = bonferroni_z(1e-6, 2)
    assert many.shape == (3000,)
    assert abs(many.mean() - mech.expected_error / 7) <= z * many.std(ddof=1) / math.sqrt(3000)
    old = module.CHUNK_VALUES
    module.CHUNK_VALUES = 5 * 64  # 64 rows per call: n = 1000 rows take 16 calls per trial
    try:
        one = simulate_boundary(mech, 1000, 300, rng)
    finally:
        module.CHUNK_VALUES = old
    assert abs(one.mean() - mech.expected_error / 1000) <= z * one.std(ddof=1) / math.sqrt(300)


def test_a_point_draws_the_same_numbers_whatever_else_is_swept() -> None:
    both = sweep(8, "1,4", 30, mechanisms=["privunit2", "laplace"], empirical=10, seed=5, threads=2)
    alone = sweep(8, 4, 30, mechanisms=["laplace"], empirical=10, seed=5, threads=1)
    assert alone[0] == both[-1]
    again = sweep(8, "1,4", 30, mechanisms=["privunit2", "laplace"], empirical=10, seed=5, threads=1)
    assert again == both
    other = sweep(8, 4, 30, mechanisms=["laplace"], empirical=10, seed=6)
    assert other[0]["empirical_error"] != alone[0]["empirical_error"]


def test_progress_counts_every_privatized_row() -> None:
    seen: list[int] = []
    total: list[int | None] = []
    sweep(6, "1,2", "10,25", mechanisms=["privunit2"], empirical=3, seed=1, on_start=total.append, on_rows=seen.append)
    assert total == [2 * 3 * (10 + 25)] and sum(seen) == total[0]


def test_data_rows_are_simulated_with_their_clipped_mean(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    x = unit_rows(300, 5, seed=3) * rng.uniform(0.2, 1.0, (300, 1))
    x[:30] = 2.0 * unit_rows(30, 5, seed=4)  # 10% of the rows outside L = 1: clipped onto the sphere
    src = write_list(tmp_path / "rows.parquet", x)
    warned: list[str] = []
    rows = sweep(epsilon="2,8", data=src, mechanisms=["privunit2", "laplace"], empirical=300, seed=1,
                 on_warning=warned.append)
    assert [(row["d"], row["n"], row["inputs"]) for row in rows] == [(5, 300, "data")] * 4
    clipped = x.copy()
    clipped[:30] /= np.linalg.norm(clipped[:30], axis=1, keepdims=True)
    norms2 = np.einsum("ij,ij->i", clipped, clipped)
    z = bonferroni_z(1e-6, len(rows))
    for row in rows:
        mech = predicted(row["mechanism"], 5, row["epsilon"])
        if row["mechanism"] == "privunit2":  # outputs of constant norm: E‖Z − x‖² = (scale·L)² − ‖x‖²
            exact = float(np.mean(mech.expected_error_max - norms2)) / 300
        else:  # laplace: the same error everywhere
            exact = mech.expected_error_max / 300
        assert abs(row["empirical_error"] - exact) <= z * row["empirical_se"], row
        assert row["empirical_error"] <= row["expected_error_mean"] + z * row["empirical_se"]
    assert len(warned) == 1 and "30 of 300 rows were outside" in warned[0] and "clipped rows" in warned[0]


def test_data_from_the_command_line(tmp_path: Path) -> None:
    x = unit_rows(120, 4, seed=2) * 0.5
    src = tmp_path / "rows.csv"
    pacsv.write_csv(pa.table({f"f{j}": x[:, j] for j in range(4)}), src)
    res = ldp("sweep", "--data", src, "--eps", 4, "--empirical", 50, "--seed", 1, "-m", "privunit2", "--json")
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert (row["d"], row["n"], row["inputs"], row["trials"]) == (4, 120, "data", 50)
    assert ldp("sweep", "--data", src, "--eps", 4, "--d", 4, "--empirical", 5).exit_code == 2
    res = ldp("sweep", "--data", src, "--eps", 4)
    assert res.exit_code == 2 and "--empirical" in res.stderr


# --- files -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".json"])
def test_each_format_round_trips(suffix: str, tmp_path: Path, small_sweep: list[dict]) -> None:
    rows = small_sweep + sweep(20_000_000, 2, 10, mechanisms=["privunit-inf", "gaussian"])  # error rows, nulls
    path = tmp_path / f"sweep{suffix}"
    save_sweep(rows, path)
    assert read_sweep(path) == rows
    with pytest.raises(UsageError, match="exists"):
        save_sweep(rows, path)
    save_sweep(rows[:3], path, overwrite=True)
    assert read_sweep(path) == rows[:3]


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".json"])
def test_the_command_writes_the_table_it_prints(suffix: str, tmp_path: Path) -> None:
    args = ["sweep", "--d", 6, "--eps", "1,8", "--n", 30, "--empirical", 20, "--seed", 1, "-m", "privunit2",
            "-m", "gaussian"]
    printed = ldp(*args, "--json")
    assert printed.exit_code == 0, printed.output
    out = tmp_path / f"t{suffix}"
    res = ldp(*args, "-o", out)
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == f"wrote {out} (4 rows)"
    assert read_sweep(out) == json.loads(printed.stdout)
    again = ldp(*args, "-o", out)
    assert again.exit_code == 2 and "--overwrite" in again.stderr


def test_unknown_table_suffix_is_refused(tmp_path: Path) -> None:
    res = ldp("sweep", "--d", 6, "--eps", 1, "--n", 30, "-o", tmp_path / "t.xlsx")
    assert res.exit_code == 2 and "use .csv, .parquet or .json" in res.stderr
    assert not (tmp_path / "t.xlsx").exists()


def test_a_table_without_the_sweep_columns_is_bad_data(tmp_path: Path) -> None:
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"mechanism": ["privunit2"], "epsilon": [1.0]}), path)
    with pytest.raises(DataError, match="not a sweep table: no column d, n, expected_error_mean"):
        read_sweep(path)
    res = ldp("plot", path, "--terminal")
    assert res.exit_code == 1 and "no column" in res.stderr
    res = ldp("plot", tmp_path / "missing.csv", "--terminal")
    assert res.exit_code == 2 and "no such file" in res.stderr


# --- figures -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_png_renders(tmp_path: Path, small_sweep: list[dict]) -> None:
    table = tmp_path / "sweep.parquet"
    save_sweep(small_sweep, table)
    figure = tmp_path / "error-vs-eps.png"
    res = ldp("plot", table, "-o", figure)
    assert res.exit_code == 0, res.output
    assert figure.read_bytes()[:8] == PNG_SIGNATURE
    assert res.stdout.startswith(f"wrote {figure} ({len(vector_mechanisms())} mechanisms;")
    assert ldp("plot", table, "-o", figure).exit_code == 2  # exists
    assert ldp("plot", table, "-o", figure, "--overwrite").exit_code == 0


@pytest.mark.slow
def test_one_line_per_mechanism_in_the_figure_and_the_svg(tmp_path: Path, small_sweep: list[dict]) -> None:
    names = vector_mechanisms()
    predicted_only = [dict(row, inputs=None, trials=None, empirical_error=None, empirical_se=None,
                           empirical_lower=None, empirical_upper=None) for row in small_sweep]
    fig = plot_sweep(predicted_only)
    (ax,) = fig.axes
    assert len(ax.get_lines()) == len(names)
    assert [line.get_gid() for line in ax.get_lines()] == [f"predicted-{name}" for name in names]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "ε (privacy level)" and ax.get_ylabel() == "E‖mean − true mean‖² (units of L²)"
    assert ax.get_title() == "Error of the mean vs ε at d = 16, n = 200"
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert all(any(label.startswith(name) for label in legend) for name in names)
    line = next(line for line in ax.get_lines() if line.get_gid() == "predicted-privunit2")
    expected = [row["expected_error_mean"] for row in small_sweep if row["mechanism"] == "privunit2"]
    assert list(line.get_ydata()) == expected

    svg = tmp_path / "error-vs-eps.svg"
    fig = plot_sweep(small_sweep, svg)
    (ax,) = fig.axes
    assert sum(1 for line in ax.get_lines() if (line.get_gid() or "").startswith("predicted-")) == len(names)
    assert sorted(line.get_gid() for line in ax.get_lines() if line.get_gid() in
                  {f"empirical-{name}" for name in names}) == sorted(f"empirical-{name}" for name in names)
    root = ET.parse(svg).getroot()
    ids = [element.get("id", "") for element in root.iter()]
    assert sorted(i for i in ids if i.startswith("predicted-")) == sorted(f"predicted-{name}" for name in names)
    assert sorted(i for i in ids if i in {f"empirical-{name}" for name in names}) == sorted(
        f"empirical-{name}" for name in names)
    assert len([i for i in ids if i]) == len({i for i in ids if i})  # ids are unique
    groups = [element for element in root.iter() if element.get("id", "").startswith("predicted-")]
    # one drawn line each (its markers' shape is a path of the group's <defs>, with an id)
    assert all(len([path for path in group.findall(".//{http://www.w3.org/2000/svg}path") if path.get("id") is None])
               == 1 for group in groups)


@pytest.mark.slow
def test_a_pdf_renders(tmp_path: Path, small_sweep: list[dict]) -> None:
    pdf = tmp_path / "f.pdf"
    plot_sweep(small_sweep, pdf)
    assert pdf.read_bytes()[:5] == b"%PDF-"
    with pytest.raises(UsageError, match="use .png, .svg or .pdf"):
        plot_sweep(small_sweep, tmp_path / "f.jpg")


def test_error_against_d_and_n_fixes_the_other_variables(tmp_path: Path) -> None:
    rows = sweep("8:512:4", "1,4,16", "100,10000", mechanisms=["privunit2", "duchi-l2"])
    table = tmp_path / "grid.json"
    save_sweep(rows, table)
    fig = plot_sweep(rows, x="d", at={"epsilon": 4, "n": 10_000})
    (ax,) = fig.axes
    assert ax.get_title() == "Error of the mean vs d at ε = 4, n = 10,000"
    assert ax.get_xlabel() == "d (dimension)" and len(ax.get_lines()) == 2
    assert list(ax.get_lines()[0].get_xdata()) == [8, 32, 128, 512]
    fig = plot_sweep(rows, x="n")  # defaults: the middle of each other variable
    assert fig.axes[0].get_title() == "Error of the mean vs n at d = 32, ε = 4"
    res = ldp("plot", table, "--x", "n", "--d", 512, "--eps", 16, "-o", tmp_path / "n.png")
    assert res.exit_code == 0, res.output
    assert "vs n at d = 512, ε = 16" in res.stdout
    res = ldp("plot", table, "--x", "eps", "-o", tmp_path / "e.png")
    assert res.exit_code == 0 and "drawing d = 32 (choose with --d)" in res.stderr
    res = ldp("plot", table, "--x", "d", "--eps", 3, "--terminal")
    assert res.exit_code == 2 and "the table has ε = 1, 4, 16" in res.stderr
    assert ldp("plot", table, "--x", "k", "--terminal").exit_code == 2
    assert ldp("plot", table, "--x", "d", "--d", 8, "--terminal").exit_code == 2


def test_the_terminal_chart_names_each_mechanism(tmp_path: Path, small_sweep: list[dict]) -> None:
    table = tmp_path / "sweep.csv"
    save_sweep(small_sweep, table)
    res = ldp("plot", table, "--terminal")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    for name in vector_mechanisms():
        (line,) = [line for line in lines if line.startswith(name + " ")]
        assert "simulated ÷ boundary prediction" in line
    assert "d = 16, n = 200" in lines[0]
    assert text_chart(small_sweep, mechanisms=["separated"]).count("\n") == 2
    res = ldp("plot", table)
    assert res.exit_code == 2 and "--terminal" in res.stderr


def test_without_matplotlib_plot_says_how_to_install_it(tmp_path: Path, small_sweep: list[dict],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "sweep.json"
    save_sweep(small_sweep, table)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    res = ldp("plot", table, "-o", tmp_path / "f.png")
    assert res.exit_code == 1
    assert res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1
    assert "matplotlib" in res.stderr and "pip install 'ldp[plot]'" in res.stderr
    assert not (tmp_path / "f.png").exists()
    res = ldp("sweep", "--d", 8, "--eps", "1,2", "--n", 10, "-o", tmp_path / "s.csv")
    assert res.exit_code == 0, res.output
    res = ldp("plot", tmp_path / "s.csv", "--terminal")
    assert res.exit_code == 0 and "privunit2" in res.stdout


@pytest.mark.parametrize("command", ["sweep", "plot"])
def test_help_shows_no_python_types(command: str) -> None:
    shown = ldp(command, "--help", terminal_width=200).stdout
    assert "<bool>" not in shown and "<list[" not in shown and "🅱" not in shown
