"""Issue 13 item 12: the Python API for arrays and tables (``ldpcli.privatize``, ``ldpcli.estimate_mean``).

Same mechanisms and safety checks as the CLI, errors that speak Python (keyword names, not flags).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from helpers import bonferroni_z, unit_rows

import ldpcli
from ldpcli.mechanisms import PrivUnit2


def test_array_round_trip_is_unbiased_with_the_reported_error() -> None:
    n, d, eps = 20_000, 16, 2.0
    x = unit_rows(n, d, seed=5) * 0.5 + 0.5 * unit_rows(1, d, seed=6)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    z, release = ldpcli.privatize(x, eps=eps, rng=11)
    assert z.shape == (n, d) and z.dtype == np.float64
    mech = PrivUnit2.calibrate(d, eps)
    assert release.mechanism == mech and release.n == n and release.reproducible is True
    # Each output row has norm 1/m exactly, so each coordinate's variance is at most 1/m²: a
    # Bonferroni z-test over the d coordinates at family level 1e-6 cannot flake.
    est = ldpcli.estimate_mean(z, release)
    z_crit = bonferroni_z(1e-6, d)
    assert np.all(np.abs(est.mean - x.mean(axis=0)) <= z_crit * math.sqrt(mech.scale**2 / n))
    assert est.expected_error == pytest.approx(mech.expected_error_max / n)
    assert est.norm_bound == 1.0


def test_same_seed_same_output_and_os_entropy_otherwise() -> None:
    x = unit_rows(50, 5)
    a, _ = ldpcli.privatize(x, eps=1.0, rng=3)
    b, _ = ldpcli.privatize(x, eps=1.0, rng=3)
    c, release = ldpcli.privatize(x, eps=1.0)
    assert np.array_equal(a, b) and not np.array_equal(a, c) and release.reproducible is False
    _, mine = ldpcli.privatize(x, eps=1.0, rng=np.random.default_rng(0))
    assert mine.reproducible is None  # the caller's generator: reproducible if the caller can re-create it


def test_float32_rows_give_float32_output_on_the_sphere() -> None:
    x = unit_rows(200, 32).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float32 unit rows are on the sphere: nothing clipped, no warning
        z, release = ldpcli.privatize(x, eps=4.0, rng=1)
    assert z.dtype == np.float32 and release.dtype == "float32" and release.n_clipped == 0
    z64, _ = ldpcli.privatize(x, eps=4.0, rng=1, dtype="float64")
    assert z64.dtype == np.float64 and np.array_equal(z64.astype(np.float32), z)


@pytest.mark.parametrize("kwargs, words", [
    ({"eps": -1.0}, "eps: epsilon must be a finite number > 0"),
    ({"eps": 1e6}, "pass force=True"),
    ({"eps": 1.0, "norm_bound": 0.0}, "norm_bound: norm bound must be"),
    ({"eps": 1.0, "mechanism": "gaussian"}, "needs delta"),
    ({"eps": 1.0, "mechanism": "nope"}, "unknown mechanism 'nope'"),
    ({"eps": 1.0, "fail_on_clip": 2.0}, "fail_on_clip must be a fraction"),
    ({"eps": 1.0, "dtype": "float16"}, "dtype must be"),
])
def test_errors_speak_python(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError) as raised:
        ldpcli.privatize(unit_rows(10, 3), **kwargs)  # type: ignore[arg-type]
    assert words in str(raised.value)
    assert "--" not in str(raised.value)


@pytest.mark.parametrize("x, error, words", [
    (np.ones(5), ValueError, "must be 2-D"),
    (np.ones((0, 3)), ValueError, "no rows"),
    (np.array([[1.0, np.nan]]), ValueError, "x[0, 1] is nan"),
    (np.array([["a", "b"]]), TypeError, "real numbers"),
    (np.ones((2, 2), dtype=complex), TypeError, "real numbers"),
])
def test_bad_arrays_are_named(x: np.ndarray, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        ldpcli.privatize(x, eps=1.0)


def test_force_and_warnings_are_python_warnings() -> None:
    x = unit_rows(20, 3) * 40  # every row outside L = 1
    with pytest.warns(ldpcli.LdpWarning) as caught:
        _, release = ldpcli.privatize(x, eps=1e5, force=True, mechanism="laplace", fail_on_clip=1.0)
    texts = [str(w.message) for w in caught]
    assert any("supported range" in t for t in texts) and any("baseline" in t for t in texts)
    assert any("20 of 20 rows were outside" in t for t in texts)
    assert release.n_clipped == 20
    assert "n_clipped" not in json.dumps(release.to_dict())  # a statistic of the raw data


def test_fail_on_clip_raises() -> None:
    with pytest.raises(ValueError, match="more than fail_on_clip 0"):
        ldpcli.privatize(unit_rows(20, 3) * 2, eps=1.0, fail_on_clip=0.0)


def test_arrow_table_keeps_the_kept_columns_and_refuses_ids() -> None:
    rows = unit_rows(30, 4)
    table = pa.table({"user_id": np.arange(30), "f0": rows[:, 0], "f1": rows[:, 1], "f2": rows[:, 2], "f3": rows[:, 3]})
    with pytest.raises(ValueError, match="user_id"):
        ldpcli.privatize(table, eps=2.0)
    with pytest.warns(ldpcli.LdpWarning, match="released unprivatized"):
        out, release = ldpcli.privatize(table, eps=2.0, keep=["user_id"], rng=1)
    assert isinstance(out, pa.Table) and out.column_names == ["f0", "f1", "f2", "f3", "user_id"]
    assert out.column("user_id").to_pylist() == list(range(30))
    assert release.columns == ("f0", "f1", "f2", "f3") and release.keep == ("user_id",)
    est = ldpcli.estimate_mean(out, release)
    assert est.n == 30 and est.d == 4


def test_pandas_frame_with_a_list_column() -> None:
    rows = unit_rows(25, 6)
    frame = pd.DataFrame({"emb": list(rows), "label": np.arange(25) % 2})
    out, release = ldpcli.privatize(frame, eps=3.0, column="emb", rng=2)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["emb"]
    assert np.stack(out["emb"].to_numpy()).shape == (25, 6)
    assert ldpcli.estimate_mean(out, release).d == 6


def test_release_round_trips_and_a_sidecar_path_works(tmp_path: Path) -> None:
    x = unit_rows(100, 8)
    z, release = ldpcli.privatize(x, eps=2.0, rng=4)
    again = ldpcli.Release.from_dict(json.loads(json.dumps(release.to_dict())))
    assert again == release
    assert ldpcli.estimate_mean(z, again.to_dict()).expected_error == ldpcli.estimate_mean(z, release).expected_error
    from helpers import write_list

    from ldpcli.release._file import write_file_release
    from ldpcli.release._options import ReleaseOptions

    src = tmp_path / "x.parquet"
    write_list(src, x)
    result = write_file_release(src, epsilon=2.0, options=ReleaseOptions(seed=1))
    est = ldpcli.estimate_mean(z, result.sidecar)
    assert est.expected_error == pytest.approx(release.expected_error_mean)
    with pytest.raises(ValueError, match="d = 3 coordinates but the release has d = 8"):
        ldpcli.estimate_mean(z[:, :3], release)


# --- issue 26 item 12: a type problem is a TypeError, the seed goes to rng, warnings speak Python ------------------


@pytest.mark.parametrize("kwargs, words", [
    ({"eps": "4"}, "eps must be a real number (the privacy level ε, e.g. eps=2.0), got str '4'"),
    ({"epsilon": "4"}, "epsilon must be a real number (the privacy level ε, e.g. epsilon=2.0), got str '4'"),
    ({"eps": [4.0]}, "got list [4.0]"),
    ({"eps": True}, "got bool True"),
])
def test_a_privacy_level_of_the_wrong_type_is_a_type_error(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(TypeError) as raised:
        ldpcli.privatize(unit_rows(10, 3), **kwargs)  # type: ignore[arg-type]
    assert words in str(raised.value)
    # numpy scalars are real numbers: accepted as they were
    _, release = ldpcli.privatize(unit_rows(10, 3), eps=np.float32(2.0), rng=1)
    assert release.mechanism.epsilon == 2.0


def test_a_seed_keyword_points_to_rng_instead_of_reading_as_a_mechanism_option() -> None:
    with pytest.raises(TypeError) as raised:
        ldpcli.privatize(unit_rows(10, 3), eps=4.0, seed=1)
    assert str(raised.value) == ("seed is not an option of privunit2; for a reproducible run pass rng=1 "
                                 "(an int seed or a numpy Generator)")
    with pytest.raises(TypeError, match="random_state is not an option of separated; for a reproducible run pass "
                                        "it as rng="):
        ldpcli.privatize(unit_rows(10, 3), eps=4.0, mechanism="separated", random_state=np.random.default_rng(1))
    same = [ldpcli.privatize(unit_rows(10, 3), eps=4.0, rng=1)[0] for _ in range(2)]
    np.testing.assert_array_equal(*same)


def test_no_warning_of_the_array_api_names_a_flag() -> None:
    """Every LdpWarning path of ldpcli.privatize: ε forced out of range, a baseline (pure and (ε, δ)), a
    near-exact release, many clipped rows, kept columns, a bcdp level clipped to ε. Each speaks Python
    (no "--flag") and is attributed to the caller's line."""
    outside = unit_rows(20, 3) * 40
    table = pa.table({"label": np.arange(20), "f0": outside[:, 0], "f1": outside[:, 1]})
    box = np.random.default_rng(0).uniform(-1, 1, size=(50, 3))
    calls = [
        lambda: ldpcli.privatize(outside, eps=1e5, force=True, mechanism="laplace", rng=1, fail_on_clip=1.0),
        lambda: ldpcli.privatize(outside, eps=1e-3, force=True, rng=1, fail_on_clip=1.0),
        lambda: ldpcli.privatize(outside, eps=1.0, mechanism="gaussian", delta=1e-6, rng=1, fail_on_clip=1.0),
        lambda: ldpcli.privatize(outside, eps=5000.0, rng=1, fail_on_clip=1.0),
        lambda: ldpcli.privatize(table, eps=1.0, keep=["label"], rng=1, fail_on_clip=1.0),
        lambda: ldpcli.privatize(box, eps=1.0, mechanism="bcdp", feature_eps="0=0.2,1=5", q=0.1, rng=1),
    ]
    texts: list[str] = []
    for call in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, release = call()
        assert caught and all(w.category is ldpcli.LdpWarning for w in caught)
        assert {w.filename for w in caught} == {__file__}
        texts += [str(w.message) for w in caught] + list(release.warnings)
    for words in ("supported range", "baseline", "(ε, δ)-DP", "essentially publishes", "rows were outside",
                  "released unprivatized (keep)", "feature_eps: the level of 1 is above ε = 1 and was clipped"):
        assert any(words in text for text in texts), words
    assert not [text for text in texts if "--" in text]
