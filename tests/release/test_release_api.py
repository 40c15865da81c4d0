"""Issue 25 item 2: the objects a Python user holds. ``ldpcli.open_release`` gives a verified
``Release`` whose methods give the CLI's numbers; ``privatize_file``/``privatize_dataset`` return
one; ``import ldpcli`` is cheap and ``help(ldpcli)`` shows the public API."""

from __future__ import annotations

import json
import pydoc
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import ldp, unit_rows, write_list

import ldpcli
from ldpcli.estimators._queries import marginal_workload

PUBLIC = ("privatize", "privatize_file", "privatize_dataset", "open_release", "Release", "estimate_mean",
          "MechanismSpec", "ReleaseOptions", "Columns", "RiskSection", "Budget", "Resources", "Ledger", "LdpWarning",
          "LdpError", "UsageError", "DataError")


@pytest.fixture()
def labelled(tmp_path: Path) -> Path:
    """400 unit rows of d = 6 with an id and a label column."""
    path = tmp_path / "x.parquet"
    write_list(path, unit_rows(400, 6, seed=2), ids=True)
    frame = pd.read_parquet(path)
    frame["label"] = np.arange(400) % 3
    frame.to_parquet(path, index=False)
    return path


def cli_json(*args: object) -> dict:  # type: ignore[type-arg]
    shown = ldp(*args, "--json")
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.stdout)  # type: ignore[no-any-return]


def test_privatize_file_returns_the_release_it_wrote(tmp_path: Path, labelled: Path) -> None:
    out = tmp_path / "x.private.parquet"
    release = ldpcli.privatize_file(labelled, out, epsilon=4.0,
                                    options=ldpcli.ReleaseOptions(columns=ldpcli.Columns(keep=["id", "label"]), seed=3))
    assert isinstance(release, ldpcli.Release)
    assert release.paths == (out,) and release.sidecar is not None and release.sidecar.path.name == "x.private.parquet.ldp.json"
    assert (release.n, release.d, release.keep, release.reproducible) == (400, 6, ("id", "label"), True)
    assert release.spec == ldpcli.MechanismSpec("privunit2", 4.0, "optimal", 1.0, {})
    assert release.epsilon_total == release.mechanism.epsilon_exact and release.copies == 1
    assert release.result is not None and release.result.output == out and release.n_clipped == release.result.n_clipped
    assert release == ldpcli.open_release(out)  # the counts of the run are not part of the description
    side = json.loads(out.with_name(out.name + ".ldp.json").read_text())
    assert release.expected_error_mean == pytest.approx(side["release"]["expected_error_mean"], rel=1e-12)


def test_methods_give_the_cli_numbers(tmp_path: Path, labelled: Path) -> None:
    out = tmp_path / "x.private.parquet"
    ldpcli.privatize_file(labelled, out, epsilon=4.0,
                                    options=ldpcli.ReleaseOptions(columns=ldpcli.Columns(keep=["id", "label"]), seed=3))
    release = ldpcli.open_release(out)
    shown = cli_json("estimate-mean", out)
    mean = release.mean().to_dict()
    assert mean["mean"] == shown["mean"] and mean["expected_error"] == shown["expected_error"]
    assert mean["lower"] == shown["lower"] and mean["n"] == shown["n"] == 400
    groups = release.group_means("label", where=["label != 2"]).to_dict()
    shown_groups = cli_json("estimate-mean", out, "--group-by", "label", "--where", "label != 2")
    assert [g["value"] for g in groups["groups"]] == [g["value"] for g in shown_groups["groups"]] == [0, 1]
    assert [g["mean"] for g in groups["groups"]] == [g["mean"] for g in shown_groups["groups"]]
    projected = release.mean(project="ball").to_dict()
    assert projected["projected"] == cli_json("estimate-mean", out, "--project", "ball")["projected"]
    attack = release.attack(labelled, k=4).to_dict()
    shown_attack = cli_json("risk", "--attack", out, "--raw", labelled, "--k", "4")
    assert attack["success"] == shown_attack["success"] and attack["release"] == shown_attack["release"]


def test_regress_gives_the_cli_coefficients(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    z = rng.uniform(-1, 1, (3000, 3))
    data = tmp_path / "reg.csv"
    pd.DataFrame({"a": z[:, 0], "b": z[:, 1], "y": np.clip(z[:, :2] @ [0.5, -0.3], -1, 1)}).to_csv(data, index=False)
    out = tmp_path / "reg.parquet"
    release = ldpcli.privatize_file(data, out, epsilon=8.0, norm_bound=2.0,
                                    options=ldpcli.ReleaseOptions(columns=ldpcli.Columns(columns=["a", "b", "y"]), copies=2, seed=4))
    assert release.copies == 2 and release.epsilon_total == pytest.approx(2 * release.mechanism.epsilon_exact)
    fitted = release.regress("y").to_dict()
    assert fitted["coefficients"] == cli_json("regress", out, "--label", "y")["coefficients"]
    assert fitted["epsilon_total"] == release.epsilon_total


def test_answer_gives_the_cli_answers(tmp_path: Path) -> None:
    w = marginal_workload(4)
    workload = tmp_path / "workload.csv"
    frame = pd.DataFrame(w.values, columns=list(w.names))
    frame.insert(0, "item", np.arange(16))
    frame.to_csv(workload, index=False)
    people = tmp_path / "people.csv"
    pd.DataFrame({"item": np.random.default_rng(1).integers(0, 16, 1000)}).to_csv(people, index=False)
    encoded = tmp_path / "encoded.parquet"
    bound = cli_json("queries", "encode", people, "--workload", workload, "--key", "item", "-o", encoded)["norm_bound"]
    out = tmp_path / "answers.parquet"
    release = ldpcli.privatize_file(encoded, out, epsilon=4.0, norm_bound=bound, options=ldpcli.ReleaseOptions(seed=5))
    answers = release.answer(workload).to_dict()
    shown = cli_json("queries", "answer", out, "--workload", workload)
    assert [q["raw"] for q in answers["queries"]] == [q["raw"] for q in shown["queries"]]
    assert [q["projected"] for q in answers["queries"]] == [q["projected"] for q in shown["queries"]]


def test_privatize_dataset_returns_the_release_of_its_parts(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(900, 4, seed=7))
    release = ldpcli.privatize_dataset(src, tmp_path / "ds", epsilon=2.0, part_rows=300, options=ldpcli.ReleaseOptions(seed=1))
    assert isinstance(release, ldpcli.Release) and len(release.paths) >= 2 and release.n == 900
    assert release.result is not None and release.result.parts == release.paths
    assert release.mean().to_dict()["mean"] == cli_json("estimate-mean", tmp_path / "ds")["mean"]
    with pytest.raises(ldpcli.UsageError, match=f"this release has {len(release.paths)} files"):
        release.attack(src)


def test_open_release_refuses_a_tampered_sidecar_naming_the_file(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(50, 4))
    out = tmp_path / "x.private.parquet"
    ldpcli.privatize_file(src, out, epsilon=2.0, options=ldpcli.ReleaseOptions(seed=1))
    side = out.with_name(out.name + ".ldp.json")
    content = json.loads(side.read_text())
    edited = json.loads(json.dumps(content))
    edited["mechanism"]["spec"]["epsilon"] = 1.0  # a smaller ε claimed than was spent
    side.write_text(json.dumps(edited))
    with pytest.raises(ldpcli.DataError, match=str(side).replace(".", r"\.")):
        ldpcli.open_release(out)
    edited = json.loads(json.dumps(content))
    edited["data"]["sha256"] = "0" * 64  # the sidecar of other bytes
    side.write_text(json.dumps(edited))
    with pytest.raises(ldpcli.DataError, match=r"x\.private\.parquet: its bytes are not the ones its sidecar"):
        ldpcli.open_release(out)
    assert ldpcli.open_release(out, verify=False).verified is False  # the caller's choice, reported by the jobs
    side.write_text(json.dumps(content))
    assert ldpcli.open_release(out).n == 50


def test_a_release_in_memory_has_no_files_to_read() -> None:
    z, release = ldpcli.privatize(unit_rows(30, 3), epsilon=2.0, rng=1)
    assert isinstance(release, ldpcli.Release) and release.paths == () and release.sidecar is None
    assert release.epsilon_total == release.mechanism.epsilon_exact and release.spec.epsilon == 2.0
    with pytest.raises(ldpcli.UsageError, match=r"ldpcli\.estimate_mean\(z, release\)"):
        release.mean()
    assert ldpcli.estimate_mean(z, release).n == 30


def test_epsilon_and_its_alias_eps() -> None:
    x = unit_rows(20, 3)
    a, first = ldpcli.privatize(x, epsilon=2.0, rng=1)
    b, second = ldpcli.privatize(x, eps=2.0, rng=1)
    assert np.array_equal(a, b) and first == second
    with pytest.raises(TypeError, match=r"epsilon=2\.0 and its alias eps=3\.0"):
        ldpcli.privatize(x, epsilon=2.0, eps=3.0)
    with pytest.raises(TypeError, match="pass epsilon="):
        ldpcli.privatize(x)
    with pytest.raises(ValueError, match="epsilon = 1e\\+06 is above"):
        ldpcli.privatize(x, epsilon=1e6)


def test_the_public_names_resolve_and_help_shows_them() -> None:
    assert set(PUBLIC) <= set(ldpcli.__all__) and set(PUBLIC) <= set(dir(ldpcli))
    for name in ldpcli.__all__:
        assert getattr(ldpcli, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ldpcli.nope  # type: ignore[attr-defined]  # noqa: B018
    text = pydoc.render_doc(ldpcli, renderer=pydoc.plaintext)
    for name in PUBLIC:
        assert name in text
    assert "open_release(paths" in text and ".regress(label)" in text  # the signatures and the methods, documented


def test_import_ldpcli_loads_neither_pyarrow_nor_scipy() -> None:
    code = "import sys, ldpcli; sys.exit(sorted({'pyarrow', 'scipy'} & set(sys.modules)) or 0)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_numpydoc_sections_on_the_public_api() -> None:
    for name in ("privatize", "privatize_file", "privatize_dataset", "open_release", "estimate_mean", "Release"):
        doc = getattr(ldpcli, name).__doc__
        assert "Parameters\n    ----------" in doc, name
    for method in ("mean", "group_means", "regress", "answer", "attack", "to_dict"):
        assert "Returns\n        -------" in getattr(ldpcli.Release, method).__doc__, method


def test_open_release_with_the_owners_key(tmp_path: Path) -> None:
    from ldpcli.release._signing import create_key

    ledger = tmp_path / "owner" / "ledger.json"
    owner = create_key(ledger)
    src = tmp_path / "x.parquet"
    write_list(src, unit_rows(60, 4))
    out = tmp_path / "x.private.parquet"
    written = ldpcli.privatize_file(src, out, epsilon=2.0,
                                    options=ldpcli.ReleaseOptions(budget=ldpcli.Budget(ldpcli.Ledger.open(ledger))))
    assert written.result is not None and written.result.signed_by == owner.public_key.text
    trusted = ldpcli.open_release(out, trust=owner.public_key.text)
    assert trusted.trust == owner.public_key and written.trust is None
    assert trusted.mean().signature["files"][0]["trusted"] is True  # the jobs check the key too
    assert written.mean().signature["files"][0]["trusted"] is False
    mallory = create_key(tmp_path / "mallory" / "ledger.json")
    with pytest.raises(ldpcli.DataError, match="untrusted signature"):
        ldpcli.open_release(out, trust=mallory.public_key)
