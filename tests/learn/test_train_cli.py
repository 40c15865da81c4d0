"""``ldp train`` and :func:`ldpcli.learn._train.train` on files: accounting, outputs, evaluation, bad input.

The optimiser's mathematics is tested in tests/learn/test_learn_math.py; here: epochs × ε in the
result, the sidecar and the ledger, and --max-budget refusing before anything is written; the
model file (.json, .npz) and its sidecar (hash, public fields only); one-pass counting in memory
and through re-read windows; the holdout split; seeded reproducibility; mirror descent; and one
clear error for every bad input the issue lists.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from helpers import ldp, write_list

from ldpcli.errors import DataError, UsageError
from ldpcli.learn._model import MODEL_SIDECAR_FORMAT
from ldpcli.learn._train import TrainingOptions, train
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, Columns, ReleaseOptions, Resources


def _logistic_file(path: Path, n: int = 600, d: int = 4, seed: int = 0, *, labels: tuple = (0, 1)) -> Path:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    theta = np.linspace(1.0, -1.0, d) * 2
    positive = rng.random(n) < 1 / (1 + np.exp(-X @ theta))
    label = np.where(positive, labels[1], labels[0])
    return write_list(path, X, column="x", label=pa.array(label))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return _logistic_file(tmp_path / "train.parquet")


def test_epochs_multiply_eps_in_result_sidecar_and_ledger(data: Path, tmp_path: Path) -> None:
    book = Ledger.open(tmp_path / "ledger.json")
    result = train(data, output=tmp_path / "m.json", label="label", epsilon=2.0, training=TrainingOptions(epochs=3), options=ReleaseOptions(seed=1, budget=Budget(ledger=book)))
    assert result.epsilon_per_row == pytest.approx(3 * result.mechanism.epsilon_exact)
    assert result.steps == 3 * 600  # every row once per epoch, batch 1
    side = json.loads((tmp_path / "m.json.ldp.json").read_text())
    assert side["format"] == MODEL_SIDECAR_FORMAT
    assert side["privacy"]["uses_per_row"] == 3
    assert side["privacy"]["epsilon_per_row"] == pytest.approx(6.0)
    assert "6-LDP" in side["privacy"]["statement"]
    entry = Ledger.open(tmp_path / "ledger.json").entries[-1]
    assert entry.epsilon_exact == pytest.approx(6.0) and entry.rows == 600
    assert side["release"]["input_tag"] == entry.tag
    # a second run is refused past the cap, before anything is written
    with pytest.raises(DataError, match="max_budget"):
        train(data, output=tmp_path / "m2.json", label="label", epsilon=2.0, training=TrainingOptions(epochs=3), options=ReleaseOptions(budget=Budget(ledger=Ledger.open(tmp_path / "ledger.json"), max_budget=10.0)))
    assert not (tmp_path / "m2.json").exists() and not (tmp_path / "m2.json.ldp.json").exists()
    assert len(Ledger.open(tmp_path / "ledger.json").entries) == 1


def test_cli_records_in_the_ledger_and_max_budget_refuses(data: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "book.json"
    first = ldp("train", data, "--label", "label", "--eps", 4, "--epochs", 2, "--ledger", ledger, "-q")
    assert first.exit_code == 0, first.stderr
    refused = ldp("train", data, "--label", "label", "--eps", 4, "--ledger", ledger, "--max-budget", 10,
                  "-o", tmp_path / "m.json")
    assert refused.exit_code == 1
    assert "would exceed --max-budget" in refused.stderr and not (tmp_path / "m.json").exists()
    shown = ldp("budget", "--ledger", ledger, "--json")
    assert shown.exit_code == 0
    assert "8" in shown.stdout


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_model_file_and_sidecar(data: Path, tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"model{suffix}"
    result = train(data, output=target, label="label", epsilon=4.0, training=TrainingOptions(classes=["0", "1"]), options=ReleaseOptions(seed=3))
    payload = target.read_bytes()
    side = json.loads((tmp_path / f"model{suffix}.ldp.json").read_text())
    assert side["model"]["sha256"] == hashlib.sha256(payload).hexdigest()
    assert side["model"]["file"] == target.name
    assert side["training"]["rows"] == 600 and side["training"]["steps"] == 600
    assert side["training"]["classes_from_data"] is False
    assert "not covered" not in side["privacy"]["statement"]
    assert '"seed"' not in json.dumps(side) and set(side["release"]) == {"created", "reproducible", "note", "randomness"}
    assert side["release"]["reproducible"] is True
    weights = result.theta
    if suffix == ".json":
        model = json.loads(payload)
        assert model["classes"] == [0, 1] and model["features"] == [f"x[{j}]" for j in range(4)]
        np.testing.assert_array_equal(model["coefficients"], weights[:4])
        assert model["intercept"] == weights[4]
    else:
        with np.load(target) as arrays:
            np.testing.assert_array_equal(arrays["coefficients"], weights[:4])
            assert float(arrays["intercept"]) == weights[4]
            assert list(arrays["classes"]) == [0, 1]
            assert json.loads(str(arrays["meta"]))["loss"] == "logistic"


def test_seed_reproduces_the_model_and_os_entropy_does_not(data: Path, tmp_path: Path) -> None:
    a = train(data, output=tmp_path / "a.json", label="label", epsilon=4.0, options=ReleaseOptions(seed=5))
    b = train(data, output=tmp_path / "b.json", label="label", epsilon=4.0, options=ReleaseOptions(seed=5))
    c = train(data, label="label", epsilon=4.0, output=tmp_path / "c.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert not np.array_equal(a.theta, c.theta)
    assert c.reproducible is False and b.reproducible is True


def test_the_noise_is_ldps_chacha20_stream_unless_the_run_opts_out(data: Path, tmp_path: Path) -> None:
    """A model's noise, row order and samples come from the run's generator, stated in the sidecar's
    release.randomness: ldp's ChaCha20 stream by default, numpy's PCG64 (not cryptographic) with --rng pcg64; the
    two streams give different models for one seed; a generator that is not one of the three is one line."""
    ledger = tmp_path / "ledger.json"
    for name, rng in (("default", None), ("pcg64", "pcg64")):
        args = () if rng is None else ("--rng", rng)
        res = ldp("train", data, "--label", "label", "--eps", 4, "--seed", 3, "--no-reference", "-o",
                  tmp_path / f"{name}.json", "--ledger", ledger, *args)
        assert res.exit_code == 0, res.stderr
    default = json.loads((tmp_path / "default.json.ldp.json").read_text())["release"]["randomness"]
    opted = json.loads((tmp_path / "pcg64.json.ldp.json").read_text())["release"]["randomness"]
    assert (default["bit_generator"], default["package"], default["cryptographic"]) == ("ChaCha20", "ldp", True)
    assert (opted["bit_generator"], opted["cryptographic"]) == ("PCG64", False)
    assert default["entropy"] == opted["entropy"] == "chosen by the user: not for release"
    models = [json.loads((tmp_path / f"{name}.json").read_text()) for name in ("default", "pcg64")]
    assert models[0]["coefficients"] != models[1]["coefficients"]
    bad = ldp("train", data, "--label", "label", "--eps", 4, "--rng", "mt19937", "--ledger", ledger)
    assert bad.exit_code == 2 and bad.stderr.strip().endswith("got 'mt19937'") and len(bad.stderr.splitlines()) == 1


@pytest.mark.slow
def test_windows_when_the_rows_do_not_fit_use_every_row_once_per_epoch(tmp_path: Path) -> None:
    """A file larger than --memory is re-read each epoch in windows; the step count is exact and the
    holdout split is the same on every pass (evaluation sees exactly the holdout rows)."""
    n, d = 40_000, 8
    data = _logistic_file(tmp_path / "big.parquet", n=n, d=d)
    result = train(data, label="label", epsilon=50.0, training=TrainingOptions(batch=4, epochs=2, holdout=0.25, baseline=True), options=ReleaseOptions(seed=2, resources=Resources(memory=2**20)))
    assert not result.in_memory
    assert result.train_rows + result.holdout_rows == n
    assert result.steps == 2 * -(-result.train_rows // 4) or result.steps >= 2 * result.train_rows // 4
    assert result.evaluation_rows == result.holdout_rows
    assert result.minimizer is None and "do not fit" in (result.minimizer_note or "")
    assert result.metrics["private"].accuracy is not None and result.metrics["private"].accuracy > 0.6
    in_memory = train(data, label="label", epsilon=50.0, training=TrainingOptions(batch=4, epochs=2, holdout=0.25), options=ReleaseOptions(seed=2))
    assert in_memory.in_memory and in_memory.holdout_rows == result.holdout_rows  # the same split


def test_holdout_rows_are_not_trained_on(data: Path) -> None:
    result = train(data, label="label", epsilon=4.0, training=TrainingOptions(holdout=0.3, baseline=True), options=ReleaseOptions(seed=1))
    assert result.train_rows + result.holdout_rows == 600
    assert 120 < result.holdout_rows < 240
    assert result.steps == result.train_rows
    assert result.evaluation_rows == result.holdout_rows
    assert set(result.metrics) == {"private", "baseline", "minimizer"}


@pytest.mark.slow
def test_large_eps_model_classifies_like_the_non_private_one(tmp_path: Path) -> None:
    data = _logistic_file(tmp_path / "t.parquet", n=20_000, d=4, seed=9)
    result = train(data, label="label", mechanism="separated", epsilon=5000.0, norm_bound=1.5, training=TrainingOptions(loss="logistic", holdout=0.2, baseline=True), options=ReleaseOptions(seed=4))
    assert abs(result.metrics["private"].accuracy - result.metrics["minimizer"].accuracy) < 0.02
    assert result.to_dict()["minimizer"]["distance"] < 0.5


def test_softmax_multiclass_and_test_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    centres = np.eye(3, 5) * 3
    labels = rng.integers(0, 3, 900)
    X = centres[labels] + rng.standard_normal((900, 5)) * 0.5
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    names = np.array(["cat", "dog", "eel"])[labels]
    write_list(tmp_path / "tr.parquet", X[:600], column="x", species=pa.array(names[:600]))
    write_list(tmp_path / "te.parquet", X[600:], column="x", species=pa.array(names[600:]))
    result = train(tmp_path / "tr.parquet", output=tmp_path / "m.json", label="species", epsilon=1000.0, norm_bound=2.0, training=TrainingOptions(loss="softmax", test=tmp_path / "te.parquet", epochs=3), options=ReleaseOptions(seed=0))
    assert result.classes == ("cat", "dog", "eel") and result.classes_from_data
    assert result.theta.size == 3 * 6
    assert result.evaluation_rows == 300 and result.metrics["private"].accuracy > 0.8
    model = json.loads((tmp_path / "m.json").read_text())
    assert len(model["coefficients"]) == 3 and len(model["intercept"]) == 3
    side = json.loads((tmp_path / "m.json.ldp.json").read_text())
    assert "not covered" in side["privacy"]["statement"]


def test_categorical_labels(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 3)) / 2
    names = pa.array(np.where(X[:, 0] > 0, "yes", "no")).dictionary_encode()
    data = write_list(tmp_path / "cat.parquet", X, column="x", answer=names)
    result = train(data, label="answer", epsilon=50.0, training=TrainingOptions(holdout=0.2), options=ReleaseOptions(seed=0))
    assert result.classes == ("no", "yes") and result.metrics["private"].accuracy is not None
    given = train(data, label="answer", epsilon=50.0, training=TrainingOptions(classes=["yes", "no"]), options=ReleaseOptions(seed=0))
    assert given.classes == ("yes", "no")


def test_mirror_descent_with_a_box_mechanism(data: Path) -> None:
    result = train(data, label="label", mechanism="duchi-linf", epsilon=8.0, training=TrainingOptions(geometry="l1", radius=1.5, baseline=True, holdout=0.2), options=ReleaseOptions(seed=0))
    assert np.abs(result.theta).sum() <= 1.5 * (1 + 1e-12)
    assert np.abs(result.baseline).sum() <= 1.5 * (1 + 1e-12)
    assert result.rule.beta == 0.5
    assert result.minimizer is not None and np.abs(result.minimizer.theta).sum() <= 1.5 * (1 + 1e-9)
    assert "(14a)" in result.rate()["statement"]


@pytest.mark.slow
def test_squared_loss_on_a_numeric_label(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (3000, 3))
    y = X @ np.array([0.5, -0.3, 0.2]) + 0.1 + rng.standard_normal(3000) * 0.05
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y})
    pacsv.write_csv(table, tmp_path / "r.csv")
    result = train(tmp_path / "r.csv", label="y", mechanism="separated", epsilon=5000.0, norm_bound=3.0, training=TrainingOptions(loss="squared", epochs=5, holdout=0.2), options=ReleaseOptions(seed=0))
    assert result.features == ("a", "b", "c", "(intercept)") and result.classes is None
    assert result.metrics["private"].accuracy is None
    np.testing.assert_allclose(result.theta, [0.5, -0.3, 0.2, 0.1], atol=0.1)


def test_cli_human_and_json_output(data: Path, tmp_path: Path) -> None:
    human = ldp("train", data, "--label", "label", "--eps", 8, "--holdout", 0.2, "--baseline", "--seed", 1,
                "--classes", "0,1", terminal_width=160)
    assert human.exit_code == 0, human.stderr
    assert "Private logistic model" in human.stdout and "non-private SGD, same pass" in human.stdout
    assert "seeded run" in human.stderr and "class list" not in human.stderr
    as_json = ldp("train", data, "--label", "label", "--eps", 8, "--json", "--seed", 1)
    report = json.loads(as_json.stdout)
    assert report["privacy"]["epsilon_per_row"] == 8 and report["model"]["loss"] == "logistic"
    assert "class list" in as_json.stderr  # classes from the data: warned


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "args, message",
    [
        (["--label", "nope"], "nope"),
        (["--label", "label", "--loss", "squared", "--classes", "a,b"], None),
        (["--label", "label", "--eps", "0"], "--eps"),
        (["--label", "label", "-L", "-1"], "--norm-bound"),
        (["--label", "label", "--holdout", "1.5"], "--holdout"),
        (["--label", "label", "--batch", "0"], "--batch"),
        (["--label", "label", "--loss", "ridge"], "--loss"),
        (["--label", "label", "-m", "scalar"], "vector mechanism"),
        (["--label", "label", "-m", "bcdp"], "vector mechanism"),
        (["--label", "label", "--geometry", "l3"], "--geometry"),
        (["--label", "label", "--radius", "0"], "--radius"),
        (["--label", "label", "-o", "model.txt"], ".json or .npz"),
        (["--label", "label", "--classes", "0,0"], "twice"),
    ],
)
def test_bad_options_are_one_line_errors(data: Path, tmp_path: Path, args: list, message: str | None) -> None:
    base = ["train", data, "--eps", "2"] if "--eps" not in args else ["train", data]
    result = ldp(*base, *args)
    assert result.exit_code in (1, 2)
    assert result.stderr.startswith("ldp: error:") and result.stderr.count("\n") == 1, result.stderr
    if message:
        assert message in result.stderr


def test_bad_labels(tmp_path: Path) -> None:
    three = _csv(tmp_path, "a,b,label\n0.1,0.2,x\n0.3,0.1,y\n0.2,0.2,z\n")
    with pytest.raises(DataError, match="exactly two classes.*softmax"):
        train(three, label="label", epsilon=1.0)
    with pytest.raises(DataError, match="not numbers; loss squared"):
        train(three, label="label", epsilon=1.0, training=TrainingOptions(loss="squared"))
    missing = _csv(tmp_path, "a,b,label\n0.1,0.2,1\n0.3,0.1,\n0.2,0.2,0\n")
    with pytest.raises(DataError, match="row 2 .*label is missing"):
        train(missing, label="label", epsilon=1.0)
    one = _csv(tmp_path, "a,b,label\n0.1,0.2,1\n0.3,0.1,1\n")
    with pytest.raises(DataError, match="one class only"):
        train(one, label="label", epsilon=1.0, training=TrainingOptions(loss="softmax"))
    unknown = _csv(tmp_path, "a,b,label\n0.1,0.2,1\n0.3,0.1,2\n")
    with pytest.raises(DataError, match="row 2 .*not one of the classes"):
        train(unknown, label="label", epsilon=1.0, training=TrainingOptions(classes=["1", "3"]))
    text = _csv(tmp_path, "a,b,label\n0.1,zz,1\n0.3,0.1,0\n")
    with pytest.raises(DataError, match="row 1.*'b'"):
        train(text, label="label", epsilon=1.0, options=ReleaseOptions(columns=Columns(columns=["a", "b"])))


def test_a_test_file_with_other_columns_is_refused(data: Path, tmp_path: Path) -> None:
    other = write_list(tmp_path / "other.parquet", np.ones((5, 3)) / 2, column="x", label=pa.array([0, 1, 0, 1, 0]))
    with pytest.raises(DataError):
        train(data, label="label", epsilon=1.0, training=TrainingOptions(test=other))
    renamed = write_list(tmp_path / "renamed.parquet", np.ones((5, 4)) / 2, column="z", label=pa.array([0, 1, 0, 1, 0]))
    with pytest.raises(UsageError, match="'x'"):
        train(data, label="label", epsilon=1.0, training=TrainingOptions(test=renamed))
    strings = write_list(tmp_path / "strings.parquet", np.ones((5, 4)) / 2, column="x",
                         label=pa.array(["a", "b", "a", "b", "a"]))
    with pytest.raises(DataError, match="cannot hold the model's classes"):
        train(data, label="label", epsilon=1.0, training=TrainingOptions(test=strings))
    no_label = write_list(tmp_path / "nolabel.parquet", np.ones((5, 4)) / 2, column="x")
    with pytest.raises(UsageError, match="label"):
        train(data, label="label", epsilon=1.0, training=TrainingOptions(test=no_label))


def test_existing_output_is_refused_before_training(data: Path, tmp_path: Path) -> None:
    target = tmp_path / "m.json"
    target.write_text("keep me")
    result = ldp("train", data, "--label", "label", "--eps", 2, "-o", target)
    assert result.exit_code == 2 and "--overwrite" in result.stderr
    assert target.read_text() == "keep me"


def test_the_input_is_never_touched(data: Path, tmp_path: Path) -> None:
    before = data.read_bytes()
    train(data, output=tmp_path / "m.json", label="label", epsilon=2.0, options=ReleaseOptions(seed=0))
    assert data.read_bytes() == before
    assert pq.read_table(data).num_rows == 600


def test_an_id_column_is_answered_with_columns_never_with_keep(tmp_path: Path) -> None:
    """ldp train has no --keep (it keeps only its label): an identifier-like column is refused with the
    way out train has, --columns, not with privatize's --keep (issue 26 item 8)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 3))
    table = pa.table({"id": np.arange(200), "a": x[:, 0], "b": x[:, 1], "c": x[:, 2],
                      "label": (x[:, 0] > 0).astype(np.int64)})
    src = tmp_path / "train.parquet"
    pq.write_table(table, src)
    res = ldp("train", src, "--label", "label", "--eps", 4)
    assert res.exit_code == 2, res.stderr
    assert "'id' looks like" in res.stderr and "--columns a:c" in res.stderr, res.stderr
    assert "--keep" not in res.stderr, res.stderr
    privatize = ldp("privatize", src, "--eps", 4, "-o", tmp_path / "p.parquet")
    assert privatize.exit_code == 2 and "--keep" in privatize.stderr  # privatize can keep it
