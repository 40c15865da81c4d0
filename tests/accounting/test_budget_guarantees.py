"""``ldp budget --delta`` and the central column, end to end on a real ledger file (issue 28 item 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import ldp, ledger_document

from ldpcli.release._accounting import (
    BASIC,
    KOV_OPTIMAL,
    RECORDED,
    compose_central,
    compose_local,
    optimal_homogeneous_epsilon,
)
from ldpcli.release._ledger import Ledger
from ldpcli.release._ledger_file import LedgerEntry


def release(ledger: Ledger, fingerprint: str, epsilon: float, *, delta: float | None = None,
            shuffled: dict[str, Any] | None = None, name: str = "people") -> LedgerEntry:
    """Record one release of the input ``fingerprint`` in ``ledger`` (as ``privatize`` would) and return it."""
    entry = LedgerEntry(
        fingerprint=fingerprint, input=f"/data/{name}.parquet", rows=10_000, d=8, columns=["x"],
        output=f"/releases/{name}-{len(ledger.entries)}.parquet", mechanism="gaussian" if delta else "privunit2",
        epsilon=epsilon, epsilon_exact=epsilon, delta=delta, created=f"2026-01-0{len(ledger.entries) % 9 + 1}T00:00:00+00:00",
        tag=ledger.tag(fingerprint), reproducible=False, shuffled=shuffled,
    )
    ledger.record(entry)
    return entry


def central(epsilon: float, delta: float = 1e-7, n: int = 100_000) -> dict[str, Any]:
    """A shuffled release's central record, with every field ``privatize --shuffle`` writes."""
    return {"n": n, "delta": delta, "epsilon_local": 4.0, "epsilon_central_upper": epsilon,
            "epsilon_central_lower": epsilon / 3, "epsilon_central_closed_form": None, "theorem": "a theorem",
            "assumptions": ["an honest shuffler"]}


@pytest.fixture()
def ledger_path(tmp_path: Path) -> Path:
    """A ledger of four inputs: 100 releases at ε = 0.05; three of different ε; two shuffled; one shuffled and one not."""
    path = tmp_path / "ledger.json"
    book = Ledger.open(path)
    for _ in range(100):
        release(book, "a" * 64, 0.05, name="same")
    for epsilon in (0.5, 1.0, 2.0):
        release(book, "b" * 64, epsilon, delta=1e-6, name="gaussian")
    for _ in range(2):
        release(book, "c" * 64, 4.0, shuffled=central(0.4), name="shuffled")
    release(book, "d" * 64, 4.0, shuffled=central(0.4), name="mixed")
    release(book, "d" * 64, 4.0, name="mixed")
    return path


def by_input(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["inputs"][0].split("/")[-1].split(".")[0]: item for item in payload["inputs"]}


def test_budget_delta_json_states_each_inputs_local_and_central_guarantees(ledger_path: Path) -> None:
    result = ldp("budget", "--ledger", ledger_path, "--delta", "1e-6", "--json")
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["delta"] == 1e-6
    inputs = by_input(payload)
    assert set(inputs) == {"same", "gaussian", "shuffled", "mixed"}
    entries = {name: [entry for entry in Ledger.open(ledger_path).entries if name in entry.input] for name in inputs}
    for name, item in inputs.items():
        # the existing keys are kept, with their values
        assert item["releases"] == len(entries[name])
        assert item["epsilon"] == pytest.approx(sum(entry.epsilon_exact for entry in entries[name]))
        local = compose_local(entries[name], 1e-6)
        assert item["local"] == json.loads(json.dumps(local.to_dict()))
        assert item["local"]["basic"]["epsilon"] == pytest.approx(item["epsilon"])
        assert item["local"]["advanced"]["epsilon"] <= item["local"]["basic"]["epsilon"]
        # the smallest bound is said, unless it is within six digits of the sum (then the sum, at its own δ)
        assert all(bound["epsilon"] >= item["local"]["advanced"]["epsilon"] * (1 - 1e-6)
                   for bound in item["local"]["bounds"])
    same = inputs["same"]["local"]["advanced"]
    assert same == {"epsilon": optimal_homogeneous_epsilon(0.05, 100, 1e-6), "delta": 1e-6, "theorem": KOV_OPTIMAL}
    assert same["epsilon"] < 0.5 * inputs["same"]["epsilon"]
    gaussian = inputs["gaussian"]
    assert gaussian["delta"] == pytest.approx(3e-6) and gaussian["local"]["basic"]["delta"] == pytest.approx(3e-6)
    assert 1e-6 < gaussian["local"]["advanced"]["delta"] <= 4e-6 + 1e-18
    # central: only the input whose releases were all shuffled
    assert inputs["same"]["central"] is None and inputs["same"]["central_note"] == ""
    assert inputs["mixed"]["central"] is None and "1 of its 2 releases was shuffled" in inputs["mixed"]["central_note"]
    shuffled = inputs["shuffled"]["central"]
    expected, _ = compose_central(entries["shuffled"], 1e-6)
    assert expected is not None and shuffled == expected.to_dict()
    assert shuffled["epsilon"] <= 0.8 and shuffled["delta"] <= 2e-7 + 1e-6


@pytest.mark.slow
def test_the_console_command_prints_the_same_document(ledger_path: Path) -> None:
    """``ldp budget --ledger PATH --delta 1e-6 --json`` as a user runs it (a new process) prints what the
    in-process command prints."""
    command = [sys.executable, "-m", "ldpcli", "budget", "--ledger", str(ledger_path), "--delta", "1e-6", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    in_process = ldp("budget", "--ledger", ledger_path, "--delta", "1e-6", "--json")
    assert json.loads(done.stdout) == json.loads(in_process.stdout)


def test_budget_without_delta_is_basic_composition_only(ledger_path: Path) -> None:
    result = ldp("budget", "--ledger", ledger_path, "--json")
    assert result.exit_code == 0, result.stderr
    inputs = by_input(json.loads(result.stdout))
    for item in inputs.values():
        assert item["local"]["advanced"] is None and item["local"]["bounds"] == []
        assert item["local"]["basic"]["theorem"] == BASIC
    one = ldp("budget", "--ledger", ledger_path, "--json")
    assert json.loads(one.stdout) == json.loads(result.stdout)
    assert inputs["shuffled"]["central"]["epsilon"] == pytest.approx(0.8)  # the sum of two recorded guarantees


def test_budget_table_shows_the_theorem_and_the_central_column(ledger_path: Path) -> None:
    result = ldp("budget", "--ledger", ledger_path, "--delta", "1e-6", terminal_width=250)
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "Guarantees per input" in text and "theorem" in text and "local, at δ" in text
    assert "Viswanath" in text and "Thm 3.3" in text
    assert "central" in text and "against the analyst" in text and "against the server" in text
    assert "mixed.parquet: no central ε: 1 of its 2 releases was shuffled" in " ".join(text.split())


def test_one_shuffled_release_shows_what_it_recorded(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    release(Ledger.open(path), "e" * 64, 4.0, shuffled=central(0.7, 1e-8, n=5000))
    result = ldp("budget", "--ledger", path, "--json")
    item = json.loads(result.stdout)["inputs"][0]
    assert item["central"] == {"epsilon": 0.7, "delta": 1e-8, "theorem": RECORDED}
    assert "n = 5000" in item["central_note"]


@pytest.mark.parametrize("delta", ["0", "1", "-0.5"])
def test_budget_refuses_a_delta_outside_zero_one(ledger_path: Path, delta: str) -> None:
    result = ldp("budget", "--ledger", ledger_path, "--delta", delta)
    assert result.exit_code == 2
    assert "--delta must be a number in (0, 1)" in result.stderr


def test_budget_help_says_whom_each_guarantee_protects_against() -> None:
    text = " ".join(ldp("budget", "--help", terminal_width=200).stdout.split())
    assert "--delta" in text and "protect each person against the server" in text
    assert "honest shuffler" in text and "against the analyst" in text


def test_an_unreadable_shuffled_record_is_an_error_not_a_guarantee(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    book = Ledger.open(path)
    entry = release(book, "f" * 64, 1.0, shuffled=central(0.3))
    raw = ledger_document(path)
    raw["entries"][0]["shuffled"] = {"n": 10}
    path.write_text(json.dumps(raw))
    assert replace(entry, shuffled={"n": 10}).shuffled == {"n": 10}
    result = ldp("budget", "--ledger", path)
    assert result.exit_code == 1 and "epsilon_central_upper" in result.stderr
