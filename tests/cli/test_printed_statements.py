"""Issue 26 items 6 and 11, and two of item 13: every statement the commands print is true.

- estimate-mean's reading: how much noise inflates ‖mean‖ (E‖mean‖² = ‖μ‖² + tr Cov/n), the relative
  error against the norm with the noise removed, and clipping said as a condition (the sidecar holds no
  count); its progress bar knows n;
- ``-q`` silences the summary of ``privatize … -o -``; ``ldp plot --x d`` refuses a table with one d;
  privunit2's line stays visible where privunitg's covers it; ``queries release`` names the bound it
  prints; help texts (bcdp's options, ``risk --calibration``, INPUTS..., the formats read) and counts
  ("1 invalid row") say what they mean; bcdp's missing-q error speaks Python to Python callers.

The command's own output is checked in a real subprocess (the console script), wide enough that rich
does not wrap a table cell. The Monte Carlo test is seeded, its tolerance a Bonferroni z times the
standard error of the mean over its repetitions.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import bonferroni_z, ldp, ldp_process, unit_rows, write_list

import ldpcli
from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.cli.commands import estimate_mean as estimate_mean_cmd
from ldpcli.errors import DataError, counted
from ldpcli.estimators._mean import MeanEstimate, MeanEstimator
from ldpcli.io._formats import file_suffixes
from ldpcli.mechanisms import MechanismSpec
from ldpcli.planning._plot import plot_sweep, select_rows
from ldpcli.planning._sweep import save_sweep, sweep


def run(*args: Any, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """``ldp ARGS…`` as a user runs it: the console script in a subprocess, 400 columns wide."""
    return ldp_process(*args, env={"COLUMNS": "400"}, input=stdin, text=False, timeout=None)


def text(stream: bytes) -> str:
    return stream.decode()


# --- item 6: estimate-mean's reading line -------------------------------------------------------------


@pytest.fixture(scope="module")
def small_mean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 rows inside the unit ball (none is clipped) with a mean of norm 0.25, privatized at ε = 4."""
    folder = tmp_path_factory.mktemp("small-mean")
    rows = 0.6 * unit_rows(400, 16, seed=3)
    rows[:, 0] += 0.25
    assert np.linalg.norm(rows, axis=1).max() < 1.0
    raw = write_list(folder / "raw.parquet", rows)
    out = folder / "raw.privatized.parquet"
    res = ldp("privatize", raw, "-o", out, "--eps", 4, "--seed", 5, "-q", "--ledger", folder / "ledger.json")
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.slow
def test_the_reading_quantifies_the_inflation_and_reads_the_error_against_the_debiased_norm(small_mean: Path) -> None:
    res = run("estimate-mean", small_mean, "--json")
    assert res.returncode == 0, text(res.stderr)
    info = json.loads(res.stdout)
    se = np.array(info["std_error"])
    noise = float(np.sum(se**2))
    debiased = math.sqrt(max(0.0, info["mean_norm"] ** 2 - noise))
    assert info["noise_sq"] == pytest.approx(noise) and info["debiased_norm"] == pytest.approx(debiased)
    inflation = info["mean_norm"] / debiased - 1.0
    assert inflation > 0.10  # noise makes ‖mean‖ more than 10% too large: not "slightly"
    assert debiased > info["rms_error"]

    human = run("estimate-mean", small_mean)
    shown = text(human.stdout)
    assert human.returncode == 0, text(human.stderr)
    assert "slightly" not in shown and "rows were clipped to it" not in shown  # none was: it is not said as a fact
    assert "any row outside the ℓ2 ball of radius L = 1 was moved onto it before privatizing" in shown
    assert "the sidecar records no count" in shown
    assert f"so ‖mean‖ is {inflation:.1%} above this" in shown
    within = f"within about {info['rms_error'] / debiased:.0%} of the mean's norm"
    assert within in shown and f"{info['rms_error'] / info['mean_norm']:.0%}" not in within


def _estimate(mean: list[float], std_error: list[float] | None, rms: float) -> MeanEstimate:
    d = len(mean)
    return MeanEstimate(
        mean=np.array(mean), n=1 if std_error is None else 100, d=d, expected_error=rms**2,
        std_error=None if std_error is None else np.array(std_error), confidence=0.95, lower=None, upper=None,
        mechanism="privunit2", epsilon=1.0, norm_bound=1.0,
    )


def test_the_reading_says_when_a_relative_error_means_nothing() -> None:
    reading = estimate_mean_cmd._reading
    within_noise = _estimate([0.1, 0.0], [0.1, 0.1], rms=0.05)  # ‖mean‖² = 0.01 < Σ se² = 0.02
    assert within_noise.debiased_norm == 0.0
    assert "noise alone accounts for ‖mean‖" in reading(within_noise) and "%" not in reading(within_noise)
    dominated = _estimate([0.3, 0.0], [0.1, 0.1], rms=0.5)  # debiased 0.265 < RMS 0.5
    assert "the error is as large as the mean itself" in reading(dominated)
    one_row = _estimate([0.3, 0.0], None, rms=0.1)
    assert one_row.debiased_norm is None and "with one row the noise cannot be told from the mean" in reading(one_row)
    fine = _estimate([0.3, 0.4], [0.03, 0.04], rms=0.05)  # debiased √(0.25 − 0.0025)
    assert f"within about {0.05 / math.sqrt(0.2475):.0%}" in reading(fine)


def test_the_debiased_squared_norm_is_unbiased_and_the_raw_one_is_not() -> None:
    """E‖Z̄‖² = ‖μ‖² + tr Cov/n, and ‖Z̄‖² − Σ std_error² removes the second term on average."""
    mech = MechanismSpec("privunit2", 4.0, None, 1.0, {}).calibrate(8)
    rng = np.random.default_rng(26)
    mu = np.zeros(8)
    mu[0] = 0.1
    reps, n, sigma = 400, 100, 0.3
    debiased, raw = [], []
    for _ in range(reps):
        estimator = MeanEstimator(8)
        estimator.add(mu + sigma * rng.standard_normal((n, 8)), None)
        est = estimator.finalize(mech, n)
        assert est.noise_sq is not None
        raw.append(est.mean_norm**2)
        debiased.append(est.mean_norm**2 - est.noise_sq)
    z = bonferroni_z(1e-6, 2)
    target = float(mu @ mu)
    assert abs(np.mean(debiased) - target) <= z * np.std(debiased, ddof=1) / math.sqrt(reps)
    inflation = 8 * sigma**2 / n  # tr Cov / n
    assert abs(np.mean(raw) - target - inflation) <= z * np.std(raw, ddof=1) / math.sqrt(reps)
    assert np.mean(raw) - target > z * np.std(raw, ddof=1) / math.sqrt(reps)  # the raw norm is inflated


# --- item 13: estimate-mean's progress bar knows n ----------------------------------------------------


def test_the_progress_bar_is_given_the_rows_to_read(small_mean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    totals: list[int | None] = []
    assert estimate_file_mean(small_mean, on_start=totals.append).n == 400 and totals == [400]

    class Recorded:
        def __init__(self, label: str, quiet: bool) -> None:
            pass

        def __enter__(self) -> tuple[Any, Any]:
            return totals.append, lambda rows: None

        def __exit__(self, *exc: object) -> None:
            return None

    totals.clear()
    monkeypatch.setattr(estimate_mean_cmd, "progress", Recorded)
    assert ldp("estimate-mean", small_mean, "--json").exit_code == 0
    assert ldp("estimate-mean", small_mean, "--json", "--no-verify").exit_code == 0
    assert totals == [400, None]  # unverified files may have been filtered: no total then


# --- item 11: -q in pipe mode, plot along a single d, the bound row, help texts, counts ---------------


@pytest.mark.slow
def test_quiet_silences_the_summary_when_the_rows_go_to_stdout(tmp_path: Path) -> None:
    csv = b"a,b\n0.1,0.2\n0.3,0.1\n0.0,0.5\n"
    loud = run("privatize", "-", "-o", "-", "--sidecar", tmp_path / "loud.ldp.json", "--eps", 1, "--columns", "a,b",
               stdin=csv)
    assert loud.returncode == 0 and "ldp: wrote 3 rows (d = 2) to stdout" in text(loud.stderr)
    quiet = run("privatize", "-", "-o", "-", "--sidecar", tmp_path / "quiet.ldp.json", "--eps", 1, "--columns", "a,b",
                "-q", "--ledger", tmp_path / "other-ledger.json", stdin=csv)
    assert quiet.returncode == 0 and len(quiet.stdout.splitlines()) == 4  # the header and the 3 rows
    assert text(quiet.stderr) == ""
    seeded = run("privatize", "-", "-o", "-", "--sidecar", tmp_path / "seeded.ldp.json", "--eps", 1, "--columns",
                 "a,b", "-q", "--seed", 1, "--ledger", tmp_path / "third-ledger.json", stdin=csv)
    assert "warning: seeded run" in text(seeded.stderr)  # what the user must see still shows


@pytest.mark.slow
def test_plot_along_d_refuses_a_table_with_one_d(tmp_path: Path) -> None:
    table = tmp_path / "one-d.json"
    save_sweep(sweep(16, "1,4,16", 1000, mechanisms=["privunit2", "duchi-l2"]), table)
    figure = tmp_path / "d.png"
    res = run("plot", table, "--x", "d", "-o", figure)
    assert res.returncode == 2 and not figure.exists()
    assert "--x d: the rows to draw have a single d = 16" in text(res.stderr)
    assert run("plot", table, "--x", "d", "--terminal").returncode == 2
    assert run("plot", table, "--x", "eps", "-o", figure).returncode == 0


def test_a_line_under_another_stays_visible(tmp_path: Path) -> None:
    """privunit2 and privunitg with the same predictions: each line keeps pixels of its own colour."""
    from matplotlib.colors import to_rgb

    rows = sweep(16, "0.5:16:5", 1000, mechanisms=["privunit2", "privunitg"])
    by_eps = {row["epsilon"]: row["expected_error_mean"] for row in rows if row["mechanism"] == "privunit2"}
    same = [dict(row, expected_error_mean=by_eps[row["epsilon"]]) for row in rows]
    figure = plot_sweep(select_rows(same))
    (ax,) = figure.axes
    lines = {line.get_gid(): line for line in ax.get_lines()}
    under, over = lines["predicted-privunit2"], lines["predicted-privunitg"]
    assert list(under.get_ydata()) == list(over.get_ydata())
    assert under.get_marker() not in ("None", "", None) and under.get_marker() != over.get_marker()
    assert under.get_markerfacecolor() == over.get_markerfacecolor() == "none"  # hollow: the one below shows through
    figure.canvas.draw()
    image = np.asarray(figure.canvas.buffer_rgba())[..., :3].astype(int)
    box = ax.get_window_extent()
    height = image.shape[0]
    plot = image[int(height - box.y1) + 1:int(height - box.y0) - 1, int(box.x0) + 1:int(box.x1) - 1]

    def pixels(line: Any) -> int:
        rgb = np.round(np.array(to_rgb(line.get_color())) * 255)
        return int(np.sum(np.all(np.abs(plot - rgb) <= 12, axis=-1)))

    assert under.get_linewidth() > over.get_linewidth()  # the line below is wider: a band around the other
    assert pixels(under) >= 100 and pixels(over) >= 100


@pytest.fixture()
def central(tmp_path: Path) -> tuple[Path, Path]:
    """The 2-way marginals of 4 bits over 16 items, and 2000 people."""
    from ldpcli.estimators._queries import marginal_workload

    w = marginal_workload(4)
    workload = tmp_path / "workload.csv"
    frame = pd.DataFrame(w.values, columns=list(w.names))
    frame.insert(0, "item", np.arange(16))
    frame.to_csv(workload, index=False)
    items = np.random.default_rng(2).integers(0, 16, 2000)
    data = tmp_path / "people.csv"
    data.write_text("person,item\n" + "\n".join(f"{p},{i}" for p, i in enumerate(items)) + "\n")
    return workload, data


@pytest.mark.slow
@pytest.mark.parametrize(("rho", "by"), [(0.5, "noise"), (1e-5, "width")])
def test_the_bound_row_names_the_bound_it_prints(tmp_path: Path, central: tuple[Path, Path], rho: float,
                                                 by: str) -> None:
    workload, data = central
    args = ("queries", "release", data, "--workload", workload, "--key", "item", "--rho", rho, "--seed", 1)
    res = run(*args, "-o", tmp_path / "a.json", "--json")
    assert res.returncode == 0, text(res.stderr)
    bounds = json.loads(res.stdout)["bounds"]
    assert bounds["projected_by"] == by
    assert bounds["projected"] == pytest.approx(min(bounds["noisy"], bounds["projected_form"]))
    human = run(*args, "-o", tmp_path / "b.json")
    (row,) = [line for line in text(human.stdout).splitlines() if "RMS error per query (bound)" in line]
    if by == "noise":
        assert f"{bounds['projected_rms_per_query']:.6g}" == f"{bounds['noisy_rms_per_query']:.6g}"
        assert "√(σ²): the projection never moves the answers further from the truth" in row
        assert f"Lemma 5.3's √(σ·g(K)/m) = {bounds['projected_form_rms_per_query']:.6g} is larger here" in row
    else:
        assert "√(σ·g(K)/m), g bounded by R√(2 log N) (Lemma 5.3): below √(σ²)" in row


@pytest.mark.slow
def test_help_texts_say_each_thing_once_and_completely() -> None:
    shown = text(run("privatize", "--help").stdout)
    assert "bcdp: bcdp" not in shown and "bcdp with" not in shown
    assert "Usage: ldp privatize [OPTIONS] INPUTS..." in shown
    for suffix in file_suffixes():  # every format the registry reads, compressed ones too
        assert suffix in shown, suffix
    encode = text(run("queries", "encode", "--help").stdout)
    assert ".arrows" in encode and ".npy" in encode  # it writes any format the registry has
    assert ".parquet or .csv" not in text(run("sweep", "--help").stdout)
    risk = text(run("risk", "--help").stdout)
    assert "--calibration" in risk and "With --mechanism: how its parameters are chosen" in risk
    root = text(run("--help").stdout)
    assert "Parquet or CSV file" not in root and "ldp privatize --help lists the formats read" in root


@pytest.mark.slow
def test_counts_take_the_number_of_their_noun(tmp_path: Path) -> None:
    assert (counted(1, "row"), counted(0, "row"), counted(2, "query", "queries")) == ("1 row", "0 rows", "2 queries")
    src = tmp_path / "two.csv"
    src.write_text("a,b\n0.1,0.2\n0.3,\n")
    res = run("privatize", src, "--eps", 1, "--columns", "a,b", "--skip-invalid")
    assert res.returncode == 0, text(res.stderr)
    assert "left out 1 invalid row (row 2, counting from 1)" in text(res.stderr)
    assert "(1 row, d = 2," in text(res.stdout)
    both = tmp_path / "both.csv"
    both.write_text("a,b\n0.1,0.2\n0.3,0.1\n")
    assert run("privatize", both, "--eps", 1, "--columns", "a,b", "-q").returncode == 0
    privatized = tmp_path / "both.privatized.csv"
    privatized.write_text("\n".join(privatized.read_text().splitlines()[:2]) + "\n")  # one row of the two left
    with pytest.raises(DataError, match=r"has 1 row but its sidecar .* says n = 2"):
        estimate_file_mean(privatized)
    sweep_table = tmp_path / "one.csv"
    res = run("sweep", "--d", 4, "--eps", 1, "--n", 10, "-m", "privunit2", "-o", sweep_table)
    assert res.returncode == 0 and f"wrote {sweep_table} (1 row)" in text(res.stdout)


def test_bcdp_asks_for_q_in_the_callers_words() -> None:
    with pytest.raises(ValueError) as caught:  # the array API raises the library's errors as ValueError
        ldpcli.privatize(np.zeros((3, 4)), eps=1.0, mechanism="bcdp")
    message = str(caught.value)
    assert "e.g. q=0.1: how much the features may depend" in message and "bcdp: bcdp" not in message
    res = run("params", "-m", "bcdp", "--d", 4, "--eps", 1)
    assert res.returncode == 2 and "e.g. --q=0.1: how much" in text(res.stderr)
