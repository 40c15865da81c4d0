"""``ldp privatize --copies 2`` then ``ldp regress`` end to end (Aliakbarpour et al. 2024, Alg. 3), seeded."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from helpers import ldp

from ldpcli.analysis._regress import regress
from ldpcli.errors import UsageError
from ldpcli.estimators._regression import ball_least_squares, least_squares_objective
from ldpcli.mechanisms import MechanismSpec
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions


@pytest.fixture()
def regression_csv(tmp_path):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    n = 20000
    z = rng.uniform(-1, 1, (n, 3))
    label = np.clip(z @ np.array([0.5, -0.3, 0.2]) + 0.1 * rng.normal(size=n), -1, 1)
    path = tmp_path / "reg.csv"
    pd.DataFrame({"a": z[:, 0], "b": z[:, 1], "c": z[:, 2], "y": label}).to_csv(path, index=False)
    return path, z, label


@pytest.mark.parametrize("mechanism, options, bound", [
    ("privunit2", {}, 2.0), ("bcdp", {"q": 0.1, "feature_eps": "a=4"}, 1.0),
])
def test_regress_a_release_of_two_copies(tmp_path, regression_csv, mechanism, options, bound) -> None:  # type: ignore[no-untyped-def]
    path, z, label = regression_csv
    out = tmp_path / "reg.priv.parquet"
    result = write_file_release(path, out, mechanism=MechanismSpec(mechanism, 16.0, norm_bound=bound, options=options), options=ReleaseOptions(columns=Columns(columns=["a:y"]), copies=2, seed=4))
    assert result.layout.copies == 2 and result.layout.columns[4:] == ("a_copy2", "b_copy2", "c_copy2", "y_copy2")
    fitted = regress(out, label="y")
    assert fitted.features == ("a", "b", "c") and fitted.label == "y"
    best = ball_least_squares(z, label, math.sqrt(3))
    excess = least_squares_objective(z, label, fitted.fit.theta) - least_squares_objective(z, label, best)
    assert 0 <= excess < 0.05, (fitted.fit.theta, best)
    assert math.isclose(fitted.epsilon_total, 2 * result.mechanism.epsilon_exact, rel_tol=1e-12)
    side = json.loads(result.sidecar.read_text())
    assert side["release"]["copies"] == 2 and side["data"]["layout"]["copies"] == 2
    assert math.isclose(side["release"]["epsilon_total"], fitted.epsilon_total, rel_tol=1e-12)
    if mechanism == "bcdp":
        assert side["features"]["split"] == 2
        assert all(g["bcdp_level"] <= g["delta"] * (1 + 1e-12) for g in side["features"]["groups"])
    shown = ldp("estimate-mean", out, "--json")  # the mean of the copies
    assert shown.exit_code == 0 and json.loads(shown.stdout)["copies"] == 2


def test_regress_refuses_one_copy_and_a_bad_label(tmp_path, regression_csv) -> None:  # type: ignore[no-untyped-def]
    path, _, _ = regression_csv
    out = tmp_path / "one.parquet"
    write_file_release(path, out, epsilon=4.0, norm_bound=2.0, options=ReleaseOptions(columns=Columns(columns=["a:y"]), seed=1))
    with pytest.raises(UsageError, match="with copies 2"):
        regress(out, label="y")
    two = tmp_path / "two.parquet"
    write_file_release(path, two, epsilon=4.0, norm_bound=2.0, options=ReleaseOptions(columns=Columns(columns=["a:y"]), seed=1, copies=2))
    with pytest.raises(UsageError, match="label 'nope' is not one of"):
        regress(two, label="nope")
    result = ldp("regress", two, "--label", "nope")
    assert result.exit_code != 0 and "--label" in result.stderr
    ok = ldp("regress", two, "--label", "-1", "--json", "-o", tmp_path / "coef.csv")
    assert ok.exit_code == 0, ok.stderr
    assert pd.read_csv(tmp_path / "coef.csv")["feature"].tolist() == ["a", "b", "c"]


def test_feature_names_that_match_no_column_and_clipped_levels(tmp_path, regression_csv) -> None:  # type: ignore[no-untyped-def]
    path, _, _ = regression_csv
    bad = ldp("privatize", path, "--columns", "a:y", "-m", "bcdp", "--q", "0.1", "--eps", "2",
              "--feature-eps", "nope=0.5", "-o", tmp_path / "x.parquet")
    assert bad.exit_code == 2 and "nope" in bad.stderr and not (tmp_path / "x.parquet").exists()
    q_bad = ldp("privatize", path, "--columns", "a:y", "-m", "bcdp", "--q", "1.5", "--eps", "2",
                "-o", tmp_path / "x.parquet")
    assert q_bad.exit_code == 2 and "--q" in q_bad.stderr
    ok = ldp("privatize", path, "--columns", "a:y", "-m", "bcdp", "--q", "0.1", "--eps", "2",
             "--feature-eps", "a=5,b=0.5", "-o", tmp_path / "x.parquet", "--seed", "1")
    assert ok.exit_code == 0, ok.stderr
    assert "clipped" in ok.stderr
