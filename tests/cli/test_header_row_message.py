"""The commands that read a CSV file but take no ``--no-header`` (``queries`` workloads, ``risk --attack
--raw``, ``estimate-mean --project hull:FILE``, ``train``; ``open_vectors(offer_no_header=False)``) refuse a
file without a header row in one line that says to add a header row, names the file and no flag they lack,
as the user sees it: in a process of its own (issue 36)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import ldp, ldp_process, write_headerless

D = 3


def _release(tmp_path: Path) -> Path:
    """A privatized CSV release of D columns (x0, x1, x2) with its sidecar, made in process."""
    source = tmp_path / "raw.csv"
    rows = np.random.default_rng(4).uniform(-0.3, 0.3, (20, D))
    source.write_text("x0,x1,x2\n" + "\n".join(",".join(f"{v:.6f}" for v in row) for row in rows) + "\n")
    released = tmp_path / "released.csv"
    run = ldp("privatize", source, "--eps", 2, "-o", released, "--seed", 1, "--ledger", tmp_path / "ledger.json", "-q")
    assert run.exit_code == 0, run.stderr
    return released


def _queries(headerless: Path, tmp_path: Path, command: str) -> list[object]:
    data = tmp_path / "people.csv"
    data.write_text("person,item\n1,0\n2,1\n")
    options = ["--key", "item"] + (["--rho", 1, "--ledger", tmp_path / "ledger.json"] if command == "release" else [])
    return ["queries", command, data, "--workload", headerless, *options]


def _answer(headerless: Path, tmp_path: Path) -> list[object]:
    """``queries answer`` of a privatized encoding (made in process from a workload with a header)."""
    workload = tmp_path / "workload.csv"
    workload.write_text("item,q0,q1\n0,0.1,0.2\n1,0.3,0.1\n")
    encoded = tmp_path / "people.queries.parquet"
    encode = ldp(*_queries(workload, tmp_path, "encode"), "-o", encoded, "--json")
    assert encode.exit_code == 0, encode.stderr
    released = tmp_path / "released.parquet"
    run = ldp("privatize", encoded, "--eps", 2, "-o", released, "--norm-bound", json.loads(encode.stdout)["norm_bound"],
              "--seed", 1, "--ledger", tmp_path / "ledger.json", "-q")
    assert run.exit_code == 0, run.stderr
    return ["queries", "answer", released, "--workload", headerless]


COMMANDS = {
    "queries answer": _answer,
    "queries encode": lambda headerless, tmp_path: _queries(headerless, tmp_path, "encode"),
    "queries release": lambda headerless, tmp_path: _queries(headerless, tmp_path, "release"),
    "risk --attack --raw": lambda headerless, tmp_path: ["risk", "--attack", _release(tmp_path), "--raw", headerless],
    "estimate-mean hull:FILE": lambda headerless, tmp_path: [
        "estimate-mean", _release(tmp_path), "--project", f"hull:{headerless}"],
    "train": lambda headerless, tmp_path: [
        "train", headerless, "--label", "label", "--eps", 4, "--ledger", tmp_path / "ledger.json", "-q"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_headerless_csv_is_refused_with_add_a_header_row(tmp_path: Path, command: str) -> None:
    headerless = tmp_path / "no-names.csv"
    write_headerless(headerless, 8, D, seed=2, scale=0.2)
    run = ldp_process(*COMMANDS[command](headerless, tmp_path))
    assert run.returncode == 1, (run.returncode, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("ldp: error: ") and str(headerless) in lines[0] and "header row" in lines[0], lines[0]
    assert "--no-header" not in lines[0] and "no_header" not in lines[0], lines[0]
    assert "Traceback" not in run.stderr and run.stdout == ""
