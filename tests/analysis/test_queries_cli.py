"""``ldp queries encode / answer / release`` and ``ldp estimate-mean --project`` end to end, seeded."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from helpers import ldp, ledger_document, write_list

from ldpcli.analysis._answer import answer_queries, read_workload
from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.estimators._queries import marginal_workload
from ldpcli.release._file import write_file_release
from ldpcli.release._options import ReleaseOptions
from ldpcli.release._sidecar import sidecar_path


@pytest.fixture()
def marginals(tmp_path):  # type: ignore[no-untyped-def]
    """The 2-way marginals of 5 bits (40 queries over 32 items) as a CSV workload, and 3000 people."""
    w = marginal_workload(5)
    workload = tmp_path / "workload.csv"
    frame = pd.DataFrame(w.values, columns=list(w.names))
    frame.insert(0, "item", np.arange(32))
    frame.to_csv(workload, index=False)
    rng = np.random.default_rng(1)
    records = (rng.random((3000, 5)) < np.linspace(0.2, 0.7, 5)).astype(int)
    items = records @ (1 << np.arange(4, -1, -1))
    data = tmp_path / "people.csv"
    pd.DataFrame({"person": np.arange(3000), "item": items}).to_csv(data, index=False)
    return w, workload, data, w.values[items].mean(axis=0)


@pytest.mark.parametrize("mechanism", ["privunit2", "gaussian-sign"])
def test_local_release_encode_privatize_answer(tmp_path, marginals, mechanism) -> None:  # type: ignore[no-untyped-def]
    w, workload, data, truth = marginals
    encoded = tmp_path / "people.queries.parquet"
    res = ldp("queries", "encode", data, "--workload", workload, "--key", "item", "-o", encoded, "--json")
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["rows"] == 3000 and info["queries"] == 40
    assert info["norm_bound"] >= w.radius and info["norm_bound"] == pytest.approx(w.radius, rel=1e-6)
    out = tmp_path / "people.priv.parquet"
    res = ldp("privatize", encoded, "-o", out, "-m", mechanism, "--eps", 4, "--norm-bound", info["norm_bound"],
              "--seed", 3, "-q")
    assert res.exit_code == 0, res.output
    res = ldp("queries", "answer", out, "--workload", workload, "--json")
    assert res.exit_code == 0, res.output
    answers = json.loads(res.stdout)
    assert [q["query"] for q in answers["queries"]] == list(w.names)
    raw = np.array([q["raw"] for q in answers["queries"]])
    projected = np.array([q["projected"] for q in answers["queries"]])
    assert np.linalg.norm(projected - truth) <= np.linalg.norm(raw - truth) + 1e-9
    assert answers["projection"]["certificate_gap"] <= 1e-8
    assert "intervals are for the raw answers only" in answers["projection"]["note"]
    assert "unspecified universal constant" in answers["theorem_5_1"]["statement"]
    assert np.sum((raw - truth) ** 2) <= 10 * answers["expected_error"]  # E‖·‖² ≤ bound: 10× is a p < 0.1 event
    human = ldp("queries", "answer", out, "--workload", workload)
    assert human.exit_code == 0 and "Thm 5.1" in human.stdout and "projected" in human.stdout
    totals: list[int | None] = []  # the progress bar's total: the sidecar's n, known before reading
    answer_queries(out, workload, on_start=totals.append)
    assert totals == [3000]


def test_central_release_writes_answers_and_a_sidecar(tmp_path, marginals) -> None:  # type: ignore[no-untyped-def]
    w, workload, data, truth = marginals
    out = tmp_path / "answers.json"
    res = ldp("queries", "release", data, "--workload", workload, "--key", "item", "--rho", 0.5, "-o", out,
              "--seed", 2, "--json")
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    sidecar = json.loads(sidecar_path(out).read_text())
    assert sidecar["format"] == "ldp-central-release" and sidecar["privacy"]["model"] == "central"
    assert sidecar["privacy"]["rho"] == 0.5 and sidecar["release"]["reproducible"] is True
    assert sidecar["mechanism"]["sigma"] == pytest.approx(w.diameter / (3000 * math.sqrt(1.0)))

    def keys(node):  # type: ignore[no-untyped-def]
        return ({*node, *(k for v in node.values() for k in keys(v))} if isinstance(node, dict)
                else {k for v in node for k in keys(v)} if isinstance(node, list) else set())

    assert not any("seed" in key for key in keys(sidecar))  # the seed is never written
    saved = json.loads(out.read_text())
    answers = np.array([q["answer"] for q in saved["queries"]])
    assert np.all(answers >= -1e-9) and np.all(answers <= 1 + 1e-9)
    assert np.linalg.norm(answers - truth) <= np.linalg.norm(np.array([q["noisy"] for q in saved["queries"]]) - truth) + 1e-9
    assert info["privacy"]["epsilon_exact_gaussian"] <= info["privacy"]["epsilon_bun_steinke"]
    again = ldp("queries", "release", data, "--workload", workload, "--key", "item", "--rho", 0.5, "-o", out,
                "--seed", 2, "--json")
    assert again.exit_code != 0 and "exists" in again.stderr
    coarse = ldp("queries", "release", data, "--workload", workload, "--key", "item", "--rho", 0.5, "--cover", 0.5,
                 "-o", tmp_path / "coarse.csv", "--seed", 2)
    assert coarse.exit_code == 0, coarse.output
    side = json.loads(sidecar_path(tmp_path / "coarse.csv").read_text())
    assert side["mechanism"]["name"] == "coarse-projection" and "public" in side["mechanism"]["projected_onto"]
    # a central release is not a per-row release: estimate-mean refuses it
    refused = ldp("estimate-mean", tmp_path / "coarse.csv")
    assert refused.exit_code != 0


def test_central_error_is_within_its_bound_over_seeds(marginals) -> None:  # type: ignore[no-untyped-def]
    """E‖answers − truth‖² ≤ σ·g(K) (constant 1) and ‖noisy − truth‖² averages mσ²."""
    from ldpcli.analysis._answer import release_queries

    w, workload, data, truth = marginals
    loaded = read_workload(workload, key="item")
    errors, noise = [], []
    for seed in range(40):
        release = release_queries(data, loaded, "item", rho=0.05, seed=seed)
        errors.append(np.sum((release.answers - truth) ** 2))
        noise.append(np.sum((release.noisy - truth) ** 2))
    bounds = release.bounds()
    assert np.mean(errors) <= bounds["projected"]
    assert abs(np.mean(noise) - bounds["noisy"]) <= 5 * np.std(noise) / math.sqrt(len(noise))
    assert np.mean(errors) < 0.5 * np.mean(noise)


def test_bad_workloads_and_keys(tmp_path, marginals) -> None:  # type: ignore[no-untyped-def]
    w, workload, data, _ = marginals
    frame = pd.read_csv(workload)
    frame.iloc[3, 2] = 1.5
    outside = tmp_path / "outside.csv"
    frame.to_csv(outside, index=False)
    res = ldp("queries", "encode", data, "--workload", outside, "--key", "item")
    assert res.exit_code != 0 and "row 4" in res.stderr and "outside [−1, 1]" in res.stderr
    missing = tmp_path / "missing.csv"
    pd.read_csv(workload).iloc[:-1].to_csv(missing, index=False)
    res = ldp("queries", "encode", data, "--workload", missing, "--key", "item", "-o", tmp_path / "x.parquet")
    assert res.exit_code != 0 and "is not an item of the workload" in res.stderr and "column 'item'" in res.stderr
    assert not (tmp_path / "x.parquet").exists()
    empty = tmp_path / "empty.csv"
    pd.read_csv(workload).iloc[:0].to_csv(empty, index=False)
    res = ldp("queries", "encode", data, "--workload", empty, "--key", "item")
    assert res.exit_code != 0 and "empty.csv" in res.stderr
    ragged = tmp_path / "ragged.csv"
    pd.read_csv(workload).to_csv(ragged, index=False)
    text = ragged.read_text().splitlines()
    ragged.write_text("\n".join([text[0], text[1].rsplit(",", 1)[0], *text[2:]]) + "\n")
    res = ldp("queries", "encode", data, "--workload", ragged, "--key", "item")
    assert res.exit_code != 0 and "ragged.csv" in res.stderr
    dup = tmp_path / "dup.csv"
    frame = pd.read_csv(workload)
    frame.loc[1, "item"] = 0
    frame.to_csv(dup, index=False)
    res = ldp("queries", "encode", data, "--workload", dup, "--key", "item")
    assert res.exit_code != 0 and "must name each item once" in res.stderr
    res = ldp("queries", "encode", data, "--workload", workload, "--key", "nope")
    assert res.exit_code != 0 and "nope" in res.stderr
    res = ldp("queries", "release", data, "--workload", workload, "--key", "item", "--rho", -1)
    assert res.exit_code != 0 and "--rho" in res.stderr


def test_answer_refuses_a_workload_of_other_queries(tmp_path, marginals) -> None:  # type: ignore[no-untyped-def]
    w, workload, data, _ = marginals
    encoded = tmp_path / "enc.parquet"
    assert ldp("queries", "encode", data, "--workload", workload, "--key", "item", "-o", encoded, "-q").exit_code == 0
    out = tmp_path / "enc.priv.parquet"
    assert ldp("privatize", encoded, "-o", out, "--eps", 2, "--norm-bound", 1.0, "--seed", 1, "-q",
               "--fail-on-clip", 1).exit_code == 0  # clipped on purpose (below): accepted
    other = tmp_path / "other.csv"
    frame = pd.read_csv(workload)
    frame.columns = ["item", *(f"x{j}" for j in range(40))]
    frame.to_csv(other, index=False)
    res = ldp("queries", "answer", out, "--workload", other)
    assert res.exit_code != 0 and "other.csv" in res.stderr
    # a norm bound below the workload's radius clipped the rows: the answer says so
    answers = answer_queries(out, workload)
    assert answers.warnings and "clipped" in answers.warnings[0]


def test_estimate_mean_project(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    histograms = rng.dirichlet(np.ones(6), size=4000)  # probability vectors: the simplex holds the truth
    path = write_list(tmp_path / "h.parquet", histograms)
    out = tmp_path / "h.priv.parquet"
    write_file_release(path, out, epsilon=2.0, norm_bound=1.0, options=ReleaseOptions(seed=5))
    raw = estimate_file_mean(out)
    for spec in ("simplex", "ball", "ball:0.5", "box:0,1", "nonneg", "domain"):
        est = estimate_file_mean(out, project=spec)
        assert est.projected is not None and est.projection is not None
        assert np.array_equal(est.mean, raw.mean) and est.expected_error == raw.expected_error
    simplex = estimate_file_mean(out, project="simplex")
    assert simplex.projected is not None
    assert simplex.projected.sum() == pytest.approx(1.0) and np.all(simplex.projected >= 0)
    truth = histograms.mean(axis=0)
    assert np.linalg.norm(simplex.projected - truth) <= np.linalg.norm(raw.mean - truth)
    assert estimate_file_mean(out, project="domain").projection["contains_domain"] is True  # type: ignore[index]
    hull = tmp_path / "vertices.csv"
    pd.DataFrame(np.eye(6), columns=[f"c{j}" for j in range(6)]).to_csv(hull, index=False)
    by_hull = estimate_file_mean(out, project=f"hull:{hull}")
    assert np.allclose(by_hull.projected, simplex.projected, atol=1e-9)  # type: ignore[arg-type]
    res = ldp("estimate-mean", out, "--project", "simplex", "--json")
    assert res.exit_code == 0
    info = json.loads(res.stdout)
    assert "raw mean only" in info["projected"]["note"] and info["projected"]["contains_domain"] is False
    assert "does not contain the mechanism's domain" in res.stderr
    res = ldp("estimate-mean", out, "--project", "ball")
    assert res.exit_code == 0 and "projected" in res.stdout and "warning" not in res.stderr
    saved = tmp_path / "m.csv"
    assert ldp("estimate-mean", out, "--project", "simplex", "-o", saved, "-q").exit_code == 0
    assert "projected" in pd.read_csv(saved).columns
    for bad in ("sphere", "ball:-1", "box:2,1", "hull:"):
        res = ldp("estimate-mean", out, "--project", bad)
        assert res.exit_code != 0 and "ball[:R]" in res.stderr, (bad, res.stderr)
    res = ldp("estimate-mean", out, "--project", "hull:" + str(tmp_path / "nothere.csv"))
    assert res.exit_code != 0 and "nothere.csv" in res.stderr
    three = tmp_path / "three.csv"
    pd.DataFrame(np.eye(3), columns=["a", "b", "c"]).to_csv(three, index=False)
    res = ldp("estimate-mean", out, "--project", f"hull:{three}")
    assert res.exit_code != 0 and "dimension" in res.stderr


def test_a_central_release_is_recorded_in_the_ledger_and_capped(tmp_path, marginals) -> None:  # type: ignore[no-untyped-def]
    """Issue 24 item 16: `queries release` spends the data's budget like any release."""
    w, workload, data, truth = marginals
    ledger = tmp_path / "ledger.json"
    res = ldp("queries", "release", data, "--workload", workload, "--key", "item", "--rho", 0.5, "-o",
              tmp_path / "a.json", "--ledger", ledger, "--json")
    assert res.exit_code == 0, res.output
    epsilon = json.loads(res.stdout)["privacy"]["epsilon_exact_gaussian"]
    (entry,) = ledger_document(ledger)["entries"]
    assert entry["input"] == str(data.resolve()) and entry["state"] == "confirmed"
    assert entry["epsilon_exact"] == pytest.approx(epsilon) and entry["delta"] == pytest.approx(1e-6)
    assert entry["mechanism"] == "projection" and entry["rows"] == 3000
    capped = ldp("queries", "release", data, "--workload", workload, "--key", "item", "--rho", 0.5, "-o",
                 tmp_path / "b.json", "--ledger", ledger, "--max-budget", 1.5 * epsilon)
    assert capped.exit_code == 1 and "exceed" in capped.stderr
    assert not (tmp_path / "b.json").exists()
    assert len(ledger_document(ledger)["entries"]) == 1
