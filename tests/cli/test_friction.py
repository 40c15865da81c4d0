"""Issue 26 item 13: friction removed from ``privatize``, ``params`` and every table.

(a) a release that would clip more than half its rows is refused unless the caller accepts it, and
nothing is written nor recorded; (b) the input's columns that are neither vectors nor kept are named;
(c) privatizing an ldp release warns that it is one; (d) ``params`` without ``-m`` uses ``--n``;
(e) a switch of mechanism is advised only for a material gain (5%); (f) tables keep numbers and
paths whole in a pipe of 80 columns. Each test failed on the code before the change.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ldp, ldp_process, unit_rows, write_list

import ldpcli
from ldpcli.cli.render import fmt
from ldpcli.errors import DataError
from ldpcli.planning._compare import MATERIAL_GAIN, compare_mechanisms, recommendation
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions
from ldpcli.release._safety import CLIP_REFUSE_FRACTION


def run_ldp(*args: object, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """``ldp ARGS…`` in its own process, its output piped (so not a terminal), the ledger the test's own."""
    return ldp_process(*args, env=None if columns is None else {"COLUMNS": str(columns)}, module=True)


def half_outside(path: Path, n: int, outside: int) -> Path:
    """``n`` rows of d = 4, the first ``outside`` of norm 2 (outside L = 1), the others of norm 1."""
    rows = unit_rows(n, 4, seed=3)
    rows[:outside] *= 2.0
    return write_list(path, rows)


# --- (a) refused past half the rows, unless accepted ----------------------------------------------


@pytest.mark.slow
def test_the_default_refuses_a_release_that_clips_most_rows_and_leaves_nothing(tmp_path: Path) -> None:
    src = half_outside(tmp_path / "grads.parquet", 40, 40)
    out = tmp_path / "grads.privatized.parquet"
    refused = run_ldp("privatize", src, "--eps", "4")
    assert refused.returncode == 1
    message = refused.stderr
    assert "40 of 40 rows (100.0%) were outside the l2-ball of radius L = 1" in message
    assert "more than --fail-on-clip 0.5 (the default) allows" in message and "nothing was written" in message
    assert "set --fail-on-clip to 1 to release the clipped rows anyway" in message and "--norm-bound" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grads.parquet"]  # no output, sidecar or temporary
    assert json.loads(run_ldp("budget", "--json").stdout)["inputs"] == []  # and nothing in the ledger
    accepted = run_ldp("privatize", src, "--eps", "4", "--fail-on-clip", "1")
    assert accepted.returncode == 0 and out.is_file() and "40 of 40 rows were outside" in accepted.stderr
    assert len(json.loads(run_ldp("budget", "--json").stdout)["inputs"]) == 1


def test_half_the_rows_is_the_documented_default_and_the_limit_is_more_than_half(tmp_path: Path) -> None:
    assert ReleaseOptions().fail_on_clip == CLIP_REFUSE_FRACTION == 0.5
    half = half_outside(tmp_path / "half.parquet", 40, 20)
    assert write_file_release(half, epsilon=4.0, options=ReleaseOptions(seed=0)).n_clipped == 20  # 50%: written
    more = half_outside(tmp_path / "more.parquet", 40, 21)
    with pytest.raises(DataError, match=r"21 of 40 rows \(52.5%\) were outside .* fail_on_clip 0.5 \(the default\)"):
        write_file_release(more, epsilon=4.0, options=ReleaseOptions(seed=0))
    assert not (tmp_path / "more.privatized.parquet").exists()
    assert write_file_release(more, epsilon=4.0, options=ReleaseOptions(seed=0, fail_on_clip=1.0)).n_clipped == 21


def test_the_array_api_has_the_same_default() -> None:
    outside = unit_rows(20, 3) * 2
    with pytest.raises(ValueError, match="20 of 20 rows .* set fail_on_clip to 1 to release the clipped rows anyway"):
        ldpcli.privatize(outside, eps=1.0, rng=0)
    with pytest.warns(ldpcli.LdpWarning, match="20 of 20 rows were outside"):
        _, release = ldpcli.privatize(outside, eps=1.0, rng=0, fail_on_clip=1.0)
    assert release.n_clipped == 20


# --- (b) the columns left out are named -----------------------------------------------------------


def table_with_extras(path: Path, extra: int) -> Path:
    """A Parquet file: an id, four coordinates f0..f3, then ``extra`` other columns x00, x01, …"""
    rows = unit_rows(30, 4, seed=5)
    columns = {"id": np.arange(30), **{f"f{j}": rows[:, j] for j in range(4)},
               **{f"x{k:02d}": np.full(30, float(k)) for k in range(extra)}}
    pq.write_table(pa.table(columns), path)
    return path


def test_columns_neither_selected_nor_kept_are_named_on_stderr_and_in_the_json(tmp_path: Path) -> None:
    src = table_with_extras(tmp_path / "t.parquet", 2)
    res = ldp("privatize", src, "--eps", "4", "--columns", "f0:f3", "--keep", "id", "--json")
    assert res.exit_code == 0
    assert "left out 2 columns of the input, neither vectors nor kept (--keep): 'x00', 'x01'" in res.stderr
    assert json.loads(res.stdout)["dropped_columns"] == ["x00", "x01"]
    quiet = ldp("privatize", src, "--eps", "4", "--columns", "f0:f3", "--keep", "id,x00,x01", "--overwrite")
    assert "left out" not in quiet.stderr  # every column is used: nothing to say


def test_a_long_list_of_left_out_columns_is_shortened_but_counted(tmp_path: Path) -> None:
    src = table_with_extras(tmp_path / "wide.parquet", 12)
    res = ldp("privatize", src, "--eps", "4", "--columns", "f0:f3", "--json", "-o", tmp_path / "out.parquet")
    assert "left out 13 columns" in res.stderr and "'id', 'x00'" in res.stderr and "'x06' and 5 more" in res.stderr
    assert "'x07'" not in res.stderr
    assert json.loads(res.stdout)["dropped_columns"] == ["id", *[f"x{k:02d}" for k in range(12)]]


def test_a_dataset_names_the_left_out_columns_too(tmp_path: Path) -> None:
    src = table_with_extras(tmp_path / "t.parquet", 1)
    result = write_dataset_release(src, tmp_path / "ds", engine=None, mechanism="privunit2", epsilon=4.0,
                               options=ReleaseOptions(columns=Columns(columns=["f0", "f1", "f2", "f3"])))
    assert result.summary()["dropped_columns"] == ["id", "x00"]


# --- (c) an input that is already a release -------------------------------------------------------


def test_privatizing_a_release_again_warns_what_it_means(tmp_path: Path) -> None:
    src = write_list(tmp_path / "rows.parquet", unit_rows(50, 4, seed=2))
    first = tmp_path / "rows.privatized.parquet"
    assert ldp("privatize", src, "--eps", "4", "-q").exit_code == 0
    raw = ldp("privatize", src, "--eps", "2", "-o", tmp_path / "raw_again.parquet")
    assert "already privatized" not in raw.stderr  # the raw file: an ordinary second release
    again = ldp("privatize", first, "--eps", "4", "-L", "1000", "-o", tmp_path / "twice.parquet")
    assert again.exit_code == 0
    warning = again.stderr
    assert f"{first} is already privatized (privunit2 at ε = 4; its sidecar {first.name}.ldp.json" in warning
    assert "spends no more privacy of the raw rows" in warning and "privatize the raw file" in warning
    # at the default L the released rows (norm scale·L) are all clipped: the refusal says why
    refused = ldp("privatize", first, "--eps", "4", "-o", tmp_path / "thrice.parquet")
    assert refused.exit_code == 1 and "nothing was written" in refused.stderr
    assert f"{first} is already privatized" in refused.stderr


# --- (d) params without -m uses --n ---------------------------------------------------------------


def test_the_comparison_table_shows_the_error_of_the_mean_at_n() -> None:
    shown = ldp("params", "--d", "100", "--eps", "8", "--n", "1000").stdout
    assert "error of mean" in shown and "(n = 1000)" in shown  # the header, wrapped at 80 columns
    for row in compare_mechanisms(100, 8.0):
        assert fmt(row["expected_error_max"] / 1000) in shown, row["mechanism"]
    best = compare_mechanisms(100, 8.0)[0]
    assert f"RMS ℓ2 error of at most {fmt(float(np.sqrt(best['expected_error_max'] / 1000)))}" in shown
    assert "error of mean" not in ldp("params", "--d", "100", "--eps", "8").stdout


# --- (e) a switch only for a material gain --------------------------------------------------------


def test_no_switch_is_advised_for_a_difference_below_five_percent() -> None:
    assert MATERIAL_GAIN == 0.05
    close = recommendation(compare_mechanisms(64, 1.0))  # privunit-inf: 0.9996× privunit2 on the box
    assert "use it" not in close and "instead" not in close
    assert "they are equivalent here (the better has less than 5% less error): either will do" in close
    assert "Equivalent to it here (privunit2 has less than 5% less error): privunitg 1.009×" in close
    assert "use it (16% less error)" in recommendation(compare_mechanisms(2, 2.0))  # 0.842×
    assert "use privunit2 with `norm_bound` L√d instead (22% less error)" in recommendation(compare_mechanisms(2, 0.5))


# --- (f) tables keep numbers and paths whole ------------------------------------------------------


def test_a_piped_table_of_80_columns_cuts_no_name_and_no_number() -> None:
    res = run_ldp("params", "--d", "10", "--eps", "1", "--n", "100000", columns=80)
    assert res.returncode == 0 and "…" not in res.stdout
    assert "Duchi–Jordan–Wainwright" in res.stdout
    for row in compare_mechanisms(10, 1.0):
        assert f" {row['mechanism']} " in res.stdout
        assert f" {fmt(row['expected_error_max'] / 100000)} " in res.stdout  # on one line, whole


@pytest.mark.slow
def test_a_narrow_terminal_still_shows_every_path_whole(tmp_path: Path) -> None:
    folder = tmp_path / "a_directory_with_a_rather_long_name" / "and_another_level_below_it"
    folder.mkdir(parents=True)
    src = write_list(folder / "rows_with_a_long_file_name.parquet", unit_rows(20, 3))
    assert run_ldp("privatize", src, "--eps", "1", "-q").returncode == 0
    shown = run_ldp("budget", columns=80).stdout
    assert str(src.resolve()) in shown and str(folder.resolve() / "rows_with_a_long_file_name.privatized.parquet") in shown
    assert "…" not in shown
