"""The `ldp` command line end to end: params, privatize, estimate-mean, and every bad input."""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from helpers import bonferroni_z, ldp, read_list, unit_rows, write_list

from ldpcli.mechanisms import PrivUnit2


def write_columns(path: Path, x: np.ndarray) -> None:
    table = pa.table({"id": [f"u{i:04d}" for i in range(len(x))], **{f"x{j}": x[:, j] for j in range(x.shape[1])}})
    if path.suffix == ".csv":
        pacsv.write_csv(table, path)
    else:
        pq.write_table(table, path)


def listing(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


# --- params ---------------------------------------------------------------------------------------


def test_params_json_has_every_documented_field() -> None:
    res = ldp("params", "--d", 500, "--eps", 4, "-m", "privunit2", "--n", 1000, "--json")
    assert res.exit_code == 0, res.stderr
    info = json.loads(res.stdout)
    for key in ("mechanism", "calibration", "d", "epsilon", "gamma", "p", "cap_probability", "scale",
                "expected_error", "expected_error_max", "epsilon_exact", "expected_error_mean"):
        assert key in info
    mech = PrivUnit2.calibrate(500, 4.0)
    assert info["gamma"] == mech.gamma and info["epsilon_exact"] == pytest.approx(4.0)
    assert info["expected_error"] == pytest.approx(1 / math.exp(mech.log_m) ** 2 - 1, rel=1e-12)
    assert info["expected_error_mean"] == pytest.approx(info["expected_error_max"] / 1000, rel=1e-15)


def test_params_norm_bound_scales_errors_by_l_squared() -> None:
    one = json.loads(ldp("params", "--d", 20, "--eps", 2, "-m", "privunit2", "--json").stdout)
    three = json.loads(ldp("params", "--d", 20, "--eps", 2, "-m", "privunit2", "--norm-bound", 3, "--json").stdout)
    assert three["expected_error"] == pytest.approx(9 * one["expected_error"], rel=1e-14)
    assert three["scale"] == one["scale"]


def test_params_table_and_reading() -> None:
    res = ldp("params", "--d", 1068298, "--eps", 100, "--calibration", "bhowmick")  # implies privunit2
    assert res.exit_code == 0
    assert "0.0133065" in res.stdout and "bhowmick" in res.stdout and "Reading:" in res.stdout
    assert res.stderr == ""


def test_params_states_the_default_randomness_and_what_secure_and_pcg64_change() -> None:
    """The default release's generator (ldp's ChaCha20 stream, cryptographic, keyed from the OS) in the JSON and one
    sentence, the bit-level claim only under --secure, the opt-out named; the comparison says it too."""
    plain = json.loads(ldp("params", "--d", 16, "--eps", 2, "-m", "privunit2", "--json").stdout)["randomness"]
    assert plain["bit_generator"] == "ChaCha20" and plain["package"] == "ldp" and plain["rounds"] == 20
    assert plain["cryptographic"] is True and plain["entropy"] == "from the OS" and plain["bit_level"] is False
    secure = json.loads(ldp("params", "--d", 16, "--eps", 2, "-m", "privunit2", "--secure", "--json").stdout)
    assert secure["randomness"]["bit_level"] is True
    for args, words in ((["-m", "privunit2"], "bit-level guarantee only with --secure"),
                        (["-m", "privunit2", "--secure"], "proven post-processing of the exact mechanism"),
                        ([], "bit-level guarantee only with --secure")):
        res = ldp("params", "--d", 16, "--eps", 2, *args, terminal_width=400)
        assert res.exit_code == 0, res.stderr
        line = next(text for text in res.stdout.splitlines() if text.startswith("Randomness:"))
        assert "ChaCha20" in line and words in line and "--rng pcg64 opts out" in line


@pytest.mark.parametrize(
    "args, message",
    [
        (["--d", "3", "--eps", "0"], "epsilon must be a finite number > 0"),
        (["--d", "3", "--eps", "-2"], "epsilon must be a finite number > 0"),
        (["--d", "3", "--eps", "nan"], "epsilon must be a finite number > 0"),
        (["--d", "3", "--eps", "inf"], "epsilon must be a finite number > 0"),
        (["--d", "0", "--eps", "1"], "d must be an integer >= 1"),
        (["--d", "3", "--eps", "1", "--norm-bound", "0"], "norm bound must be a finite number > 0"),
        (["--d", "3", "--eps", "1", "--mechanism", "laplace9"], "unknown mechanism 'laplace9'"),
        (["--d", "3", "--eps", "1", "-m", "privunit2", "--calibration", "fast"], "has no calibration 'fast'"),
        (["--d", "3", "--eps", "1", "--calibration", "fast"], "mechanism 'privunit2' has no calibration 'fast'"),
        (["--d", "3", "--eps", "1", "--k", "3"], "need --mechanism"),
        (["--d", "3", "--eps", "1", "-m", "privunit2", "--k", "3"], "takes no option --k"),
        (["--d", "3", "--eps", "1", "--norm-bound", "2", "--r-max", "3"], "disagree"),
        (["--d", "3", "--eps", "1", "--n", "0"], "--n must be >= 1"),
    ],
)
def test_params_usage_errors(args: list[str], message: str) -> None:
    res = ldp("params", *args)
    assert res.exit_code == 2
    assert res.stdout == ""
    assert res.stderr.startswith("ldp: error: ") and message in res.stderr
    assert res.stderr.count("\n") == 1


# --- privatize and estimate-mean ------------------------------------------------------------------


def test_parquet_list_round_trip_and_sidecar(tmp_path: Path) -> None:
    x = unit_rows(500, 8)
    src = tmp_path / "emb.parquet"
    write_list(src, x, ids=True)
    before = src.read_bytes()
    res = ldp("privatize", src, "--mechanism", "privunit2", "--eps", 3, "--keep", "id")
    assert res.exit_code == 0, res.stderr
    out, side = tmp_path / "emb.privatized.parquet", tmp_path / "emb.privatized.parquet.ldp.json"
    assert listing(tmp_path) == {"emb.parquet", out.name, side.name}
    assert src.read_bytes() == before
    table = pq.read_table(out)
    assert table.column_names == ["id", "vec"]
    assert table.schema.field("vec").type == pa.list_(pa.float64(), 8)
    assert table.column("id").to_pylist() == list(range(500))
    z = read_list(out)
    mech = PrivUnit2.calibrate(8, 3.0)
    assert np.allclose(np.linalg.norm(z, axis=1), mech.scale, rtol=1e-12)
    sc = json.loads(side.read_text())
    for key in ("tool.version", "mechanism.spec.name", "mechanism.spec.calibration", "mechanism.spec.epsilon",
                "mechanism.epsilon_exact", "mechanism.parameters.gamma", "mechanism.parameters.p",
                "mechanism.parameters.cap_probability", "mechanism.scale", "mechanism.expected_error",
                "mechanism.expected_error_max", "release.expected_error_mean", "data.n", "mechanism.d",
                "mechanism.spec.norm_bound", "data.layout", "data.file", "release.created", "release.reproducible"):
        *section, name = key.split(".")
        assert name in functools.reduce(dict.__getitem__, section, sc), key
    assert (sc["data"]["n"] == 500 and sc["mechanism"]["d"] == 8 and sc["release"]["reproducible"] is False
            and sc["data"]["file"] == out.name)
    assert sc["data"]["layout"] == {"kind": "list", "columns": ["vec"], "d": 8, "keep": ["id"]}
    assert sc["release"]["expected_error_mean"] == pytest.approx(mech.expected_error_max / 500)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_per_column_round_trip(tmp_path: Path, suffix: str) -> None:
    x = unit_rows(300, 5, radius=0.5)
    src = tmp_path / f"cols{suffix}"
    write_columns(src, x)
    res = ldp("privatize", src, "--eps", 2, "--columns", "x0,x1,x2,x3,x4", "--keep", "id", "-o", tmp_path / f"o{suffix}")
    assert res.exit_code == 0, res.stderr
    out = tmp_path / f"o{suffix}"
    table = pacsv.read_csv(out) if suffix == ".csv" else pq.read_table(out)
    assert table.column_names == ["id", "x0", "x1", "x2", "x3", "x4"]
    assert table.column("id").to_pylist() == [f"u{i:04d}" for i in range(300)]
    assert all(table.schema.field(f"x{j}").type == pa.float64() for j in range(5))
    est = json.loads(ldp("estimate-mean", out, "--json").stdout)
    assert est["n"] == 300 and est["d"] == 5 and len(est["mean"]) == 5


def test_all_numeric_columns_are_the_default_layout(tmp_path: Path) -> None:
    src = tmp_path / "c.csv"
    pacsv.write_csv(pa.table({"a": [0.1, 0.2], "b": [0.3, -0.1], "tag": ["x", "y"]}), src)
    res = ldp("privatize", src, "--eps", 1, "--keep", "tag")
    assert res.exit_code == 0, res.stderr
    assert json.loads((tmp_path / "c.privatized.csv.ldp.json").read_text())["data"]["layout"]["columns"] == ["a", "b"]


def test_estimate_mean_error_matches_prediction_on_20k_rows(tmp_path: Path) -> None:
    """The reported error bars are right: observed ‖mean − truth‖² against E = (1/m² − 1)/n."""
    n, d, eps = 20_000, 64, 2.0
    x = unit_rows(n, d, seed=3) * 0.5 + 0.5 * unit_rows(1, d, seed=4)  # a common direction plus spread
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    src = tmp_path / "x.parquet"
    write_list(src, x)
    assert ldp("privatize", src, "--eps", eps, "--seed", 17).exit_code == 0
    res = ldp("estimate-mean", tmp_path / "x.privatized.parquet", "--json")
    assert res.exit_code == 0, res.stderr
    est = json.loads(res.stdout)
    mech = PrivUnit2.calibrate(d, eps)
    predicted = mech.expected_error / n  # every row has ‖x‖ = 1
    assert est["expected_error"] == pytest.approx(mech.expected_error_max / n)
    observed = float(np.sum((np.array(est["mean"]) - x.mean(axis=0)) ** 2))
    # ‖error‖² is a sum of d nearly independent squared normals: relative sd ≈ √(2/d)
    assert abs(observed / predicted - 1) < 6 * math.sqrt(2 / d)
    se = np.array(est["std_error"])
    assert float(np.sum(se**2)) == pytest.approx(predicted, rel=6 * math.sqrt(2 / n) + 0.02)
    z = (np.array(est["mean"]) - x.mean(axis=0)) / se
    assert np.all(np.abs(z) < bonferroni_z(1e-6, d))
    lower, upper = np.array(est["lower"]), np.array(est["upper"])
    assert np.all(lower < est["mean"]) and np.all(np.array(est["mean"]) < upper)


@pytest.mark.parametrize("suffix", [".json", ".npy", ".parquet", ".csv"])
def test_estimate_mean_output_files(tmp_path: Path, suffix: str) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(50, 3), ids=True)
    assert ldp("privatize", src, "--eps", 1).exit_code == 0
    target = tmp_path / f"mean{suffix}"
    res = ldp("estimate-mean", tmp_path / "x.privatized.parquet", "-o", target, "--json")
    assert res.exit_code == 0, res.stderr
    mean = np.array(json.loads(res.stdout)["mean"])
    if suffix == ".json":
        saved = np.array(json.loads(target.read_text())["mean"])
    elif suffix == ".npy":
        saved = np.load(target)
    else:
        table = pacsv.read_csv(target) if suffix == ".csv" else pq.read_table(target)
        assert table.column_names == ["coordinate", "mean", "std_error", "lower", "upper"]
        saved = np.array(table.column("mean").to_pylist())
    assert np.array_equal(saved, mean)
    again = ldp("estimate-mean", tmp_path / "x.privatized.parquet", "-o", target)
    assert again.exit_code == 2 and "already exists" in again.stderr


def test_human_estimate_output(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(40, 30), ids=True)
    assert ldp("privatize", src, "--eps", 1).exit_code == 0
    res = ldp("estimate-mean", tmp_path / "x.privatized.parquet")
    assert res.exit_code == 0
    assert "first 10 of 30" in res.stdout and "95% interval" in res.stdout and "RMS" in res.stdout


def test_seed_policy(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(100, 4), ids=True)
    outs = []
    for i, extra in enumerate([["--seed", "123456789"], ["--seed", "123456789"], [], []]):
        out = tmp_path / f"o{i}.parquet"
        res = ldp("privatize", src, "--eps", 2, "-o", out, *extra)
        assert res.exit_code == 0, res.stderr
        outs.append(pq.read_table(out).column("vec").to_pylist())
        sidecar_text = (tmp_path / f"o{i}.parquet.ldp.json").read_text()
        assert "123456789" not in sidecar_text and "123456789" not in res.stdout + res.stderr
        assert json.loads(sidecar_text)["release"]["reproducible"] is bool(extra)
    assert outs[0] == outs[1]
    assert outs[2] != outs[3] and outs[0] != outs[2]


def test_rows_outside_the_ball_are_clipped_and_counted_on_stderr_only(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    x = unit_rows(10, 3)
    x[:4] *= 5.0
    write_list(src, x, ids=True)
    res = ldp("privatize", src, "--eps", 1, "--norm-bound", 2)
    assert res.exit_code == 0
    assert "4 of 10 rows were outside the l2-ball of radius L = 2" in res.stderr
    pairs: list[tuple[str, object]] = []  # every (key, value) of the nested sidecar, at any depth
    json.loads((tmp_path / "x.privatized.parquet.ldp.json").read_text(), object_pairs_hook=lambda p: pairs.extend(p) or dict(p))
    assert not any("clip" in key for key, _ in pairs)
    assert 4 not in [value for _, value in pairs if isinstance(value, int) and not isinstance(value, bool)]


def test_overwrite(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(10, 3), ids=True)
    assert ldp("privatize", src, "--eps", 1).exit_code == 0
    first = (tmp_path / "x.privatized.parquet").read_bytes()
    res = ldp("privatize", src, "--eps", 1)
    assert res.exit_code == 2 and "already exists; pass --overwrite" in res.stderr
    assert (tmp_path / "x.privatized.parquet").read_bytes() == first
    assert ldp("privatize", src, "--eps", 1, "--overwrite").exit_code == 0
    assert (tmp_path / "x.privatized.parquet").read_bytes() != first


# --- bad input: one clear line, the right exit code, nothing left behind --------------------------


def bad_files(tmp_path: Path) -> dict[str, tuple[Path, list[str], int, list[str]]]:
    """name → (input, extra args, exit code, fragments the message must contain)."""
    cases: dict[str, tuple[Path, list[str], int, list[str]]] = {}
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not parquet at all PAR1")
    cases["corrupt"] = (corrupt, [], 1, ["corrupt.parquet", "Parquet"])
    truncated = tmp_path / "truncated.parquet"
    write_list(truncated, unit_rows(100, 4), ids=True)
    truncated.write_bytes(truncated.read_bytes()[:-40])
    cases["truncated"] = (truncated, [], 1, ["truncated.parquet"])
    empty = tmp_path / "empty.csv"
    empty.write_text("a,b\n")
    cases["header only"] = (empty, [], 1, ["empty.csv", "no rows"])
    empty_pq = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"v": pa.array([], pa.list_(pa.float64(), 3))}), empty_pq)
    cases["zero rows"] = (empty_pq, [], 1, ["empty.parquet", "no rows"])
    zero_bytes = tmp_path / "zero.csv"
    zero_bytes.write_text("")
    cases["empty file"] = (zero_bytes, [], 1, ["zero.csv"])
    text = tmp_path / "text.csv"
    text.write_text("name,city\nann,paris\nbob,rome\n")
    cases["no numeric column"] = (text, [], 1, ["text.csv", "numeric"])
    strings = tmp_path / "strings.csv"
    strings.write_text("a,b\n0.1,0.2\n0.3,abc\n")
    cases["string in vector column"] = (strings, ["--columns", "a,b"], 1, ["strings.csv", "'b'"])
    ragged = tmp_path / "ragged.parquet"
    pq.write_table(pa.table({"v": pa.array([[0.1, 0.2], [0.1, 0.2], [0.3]], pa.list_(pa.float64()))}), ragged)
    cases["ragged"] = (ragged, [], 1, ["ragged.parquet", "row 3", "'v'"])
    nan = tmp_path / "nan.csv"
    nan.write_text("a,b\n0.1,0.2\n0.3,0.1\nnan,0.2\n")
    cases["nan"] = (nan, [], 1, ["nan.csv", "row 3", "'a'", "NaN"])
    inf = tmp_path / "inf.parquet"
    write_list(inf, np.array([[0.1, 0.2], [np.inf, 0.0]]), ids=True)
    cases["inf"] = (inf, [], 1, ["inf.parquet", "row 2", "'vec'"])
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"v": pa.array([[0.1, 0.2], None], pa.list_(pa.float64()))}), nulls)
    cases["null"] = (nulls, [], 1, ["nulls.parquet", "row 2"])
    good = tmp_path / "good.parquet"
    write_list(good, unit_rows(5, 3), ids=True)
    cases["missing column"] = (good, ["--column", "emb"], 2, ["'emb'"])
    cases["missing keep"] = (good, ["--keep", "user"], 2, ["'user'"])
    cases["eps 0"] = (good, ["--eps", "0"], 2, ["epsilon"])
    cases["eps inf"] = (good, ["--eps", "inf"], 2, ["epsilon"])
    cases["L 0"] = (good, ["--norm-bound", "0"], 2, ["norm bound"])
    cases["L negative"] = (good, ["--norm-bound", "-1"], 2, ["norm bound"])
    cases["unknown mechanism"] = (good, ["--mechanism", "privunit3"], 2, ["privunit3"])
    cases["unknown calibration"] = (good, ["--calibration", "paper"], 2, ["paper"])
    cases["output is input"] = (good, ["-o", str(good)], 2, ["input"])
    cases["bad output format"] = (good, ["-o", str(tmp_path / "out.xlsx")], 2, ["out.xlsx"])
    cases["list to csv"] = (good, ["-o", str(tmp_path / "out.csv")], 2, ["CSV"])
    cases["missing"] = (tmp_path / "nope.parquet", [], 2, ["nope.parquet", "no such file"])
    return cases


def test_every_bad_input_is_one_clear_line_and_leaves_nothing(tmp_path: Path) -> None:
    for name, (path, extra, code, fragments) in bad_files(tmp_path).items():
        before = listing(tmp_path)
        content = path.read_bytes() if path.exists() else None
        args = ["privatize", path, *extra]
        if "--eps" not in extra:
            args += ["--eps", "1"]
        res = ldp(*args)
        assert res.exit_code == code, (name, res.exit_code, res.stderr, res.exception)
        assert res.stdout == "", name
        assert res.stderr.startswith("ldp: error: ") and res.stderr.count("\n") == 1, (name, res.stderr)
        assert "Traceback" not in res.stderr
        for fragment in fragments:
            assert fragment in res.stderr, (name, fragment, res.stderr)
        assert listing(tmp_path) == before, name  # no output, no sidecar, no temporary file
        if content is not None:
            assert path.read_bytes() == content, name


def privatized(tmp_path: Path, n: int = 20, d: int = 3) -> Path:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(n, d), ids=True)
    assert ldp("privatize", src, "--eps", 1).exit_code == 0
    return tmp_path / "x.privatized.parquet"


def test_estimate_mean_without_sidecar(tmp_path: Path) -> None:
    out = privatized(tmp_path)
    (tmp_path / "x.privatized.parquet.ldp.json").unlink()
    res = ldp("estimate-mean", out)
    assert res.exit_code == 1 and "no such sidecar" in res.stderr and "--sidecar" in res.stderr


def test_estimate_mean_on_a_missing_file_says_no_such_file_as_privatize_does(tmp_path: Path) -> None:
    missing = tmp_path / "missing.parquet"
    privatize = ldp("privatize", missing, "--eps", 1)
    for args in (("estimate-mean", missing), ("estimate-mean", missing, "--sidecar", tmp_path / "s.ldp.json")):
        res = ldp(*args)
        assert res.exit_code == privatize.exit_code == 2, res.stderr
        assert f"{missing}: no such file" in res.stderr and "no such sidecar" not in res.stderr


def test_estimate_mean_on_a_raw_file_says_it_may_not_be_privatized(tmp_path: Path) -> None:
    raw = tmp_path / "raw.parquet"
    write_list(raw, unit_rows(20, 3))
    res = ldp("estimate-mean", raw)
    assert res.exit_code == 1 and res.stderr.count("\n") == 1, res.stderr
    assert f"{raw}: no such sidecar beside it (raw.parquet.ldp.json)" in res.stderr
    assert "may not be a privatized file" in res.stderr and "ldp privatize" in res.stderr and "--sidecar" in res.stderr


def test_risk_given_the_data_file_as_sidecar_names_the_sidecar(tmp_path: Path) -> None:
    out = privatized(tmp_path)
    res = ldp("risk", "--sidecar", out)
    assert res.exit_code == 1 and res.stderr.count("\n") == 1, res.stderr
    assert f"{out}: is a Parquet file, not an ldp sidecar" in res.stderr
    assert f"its sidecar is {out}.ldp.json: pass that as --sidecar" in res.stderr
    assert "utf-8" not in res.stderr and "restore" not in res.stderr


def test_estimate_mean_with_explicit_sidecar(tmp_path: Path) -> None:
    out = privatized(tmp_path)
    moved = tmp_path / "elsewhere.json"
    (tmp_path / "x.privatized.parquet.ldp.json").rename(moved)
    assert ldp("estimate-mean", out, "--sidecar", moved).exit_code == 0


@pytest.mark.parametrize("field, value, fragment", [("data.n", 21, "n = 21"), ("mechanism.d", 4, "d"),
                                                     ("mechanism.parameters.gamma", 0.5, "gamma"),
                                                     ("mechanism.spec.epsilon", 2.0, "epsilon_exact"),
                                                     ("format", "x", "not an ldp sidecar")])
def test_estimate_mean_refuses_a_sidecar_that_does_not_match(tmp_path: Path, field: str, value: object, fragment: str) -> None:
    out = privatized(tmp_path)
    side = tmp_path / "x.privatized.parquet.ldp.json"
    content = json.loads(side.read_text())
    *section, name = field.split(".")
    functools.reduce(dict.__getitem__, section, content)[name] = value
    side.write_text(json.dumps(content))
    res = ldp("estimate-mean", out)
    assert res.exit_code == 1, res.stderr
    assert res.stderr.startswith("ldp: error: ") and fragment in res.stderr and res.stderr.count("\n") == 1


def test_estimate_mean_refuses_data_that_does_not_match_the_layout(tmp_path: Path) -> None:
    out = privatized(tmp_path, d=3)
    write_list(out, unit_rows(20, 4), ids=True)  # same name, other dimension
    res = ldp("estimate-mean", out)
    assert res.exit_code == 1 and res.stderr.startswith("ldp: error: ")


def test_estimate_mean_bad_usage(tmp_path: Path) -> None:
    out = privatized(tmp_path)
    assert ldp("estimate-mean", out, "--confidence", "1.5").exit_code == 2
    assert ldp("estimate-mean", tmp_path / "none.parquet").exit_code in (1, 2)
    res = ldp("estimate-mean", out, "-o", tmp_path / "mean.txt")
    assert res.exit_code == 2 and "mean.txt" in res.stderr


def test_console_script_runs_without_traceback(tmp_path: Path) -> None:
    """The installed entry point, in a real subprocess."""
    exe = Path(sys.executable).with_name("ldp")
    res = subprocess.run([str(exe), "privatize", str(tmp_path / "missing.csv"), "--eps", "1"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 2 and res.stderr.startswith("ldp: error:") and "Traceback" not in res.stderr
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and "privatize" in res.stdout and "estimate-mean" in res.stdout


def test_detected_columns_are_named_on_stderr(tmp_path: Path) -> None:
    """A text column is left out of the automatic layout: the note shows what d is. (A column of
    numbers with one stray text cell is no longer left out but reported: tests/io/test_bad_cells.py.)"""
    src = tmp_path / "c.csv"
    src.write_text("a,b,c\n0.1,0.2,x\n0.3,0.1,y\n")
    res = ldp("privatize", src, "--eps", 1)
    assert res.exit_code == 0
    assert "vectors from 2 numeric columns 'a', 'b' (d = 2)" in res.stderr
    # A second ledger: in the first one this input was just released, which warns even with -q.
    quiet = ldp("privatize", src, "--eps", 1, "--overwrite", "--quiet", "--ledger", tmp_path / "other-ledger.json")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    explicit = ldp("privatize", src, "--eps", 1, "--overwrite", "--columns", "a")
    assert "vectors from" not in explicit.stderr
