"""A training run with the central layer in the ledger and ``ldp budget``: its central (ε, δ) is recorded in its
entry (``central``, the sidecar's section), read back, and composed with the input's other central guarantees
(release.accounting.compose_central); ledgers without the field still read."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import ldp, ledger_document, write_list

from ldpcli.release._accounting import (
    ADD_OR_REMOVE_ONE,
    BASIC,
    TRAINED,
    compose_central,
    pld_epsilon,
)
from ldpcli.release._ledger import Ledger
from ldpcli.release._ledger_file import LEDGER_FORMAT, LEDGER_VERSION, LedgerEntry

pytest.importorskip("dp_accounting")


def _data(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ np.array([2.0, -1.0, 0.5]) > 0).astype(np.int64)
    path = write_list(tmp_path / "people.parquet", X, column="x", label=pa.array(y))
    assert isinstance(path, Path)
    return path


@pytest.mark.slow
def test_a_central_training_run_shows_its_central_claim_in_the_budget(tmp_path: Path) -> None:
    """``ldp train`` with the central flags, then ``ldp budget --json``: the input's central guarantee is the
    (ε, δ) the model's sidecar claims, for add/remove-one neighbours; a second run composes with it."""
    data, ledger = _data(tmp_path), tmp_path / "ledger.json"
    runs = []
    for number, z in enumerate(("1.2", "2.0")):
        model = tmp_path / f"model{number}.json"
        run = ldp("train", data, "--label", "label", "--eps", "4", "--classes", "0,1", "--central-radius", "1.5",
                  "--sampling-rate", "0.1", "--noise-multiplier", z, "--central-delta", "1e-6", "--seed", number,
                  "-o", model, "--ledger", ledger)
        assert run.exit_code == 0, run.output
        runs.append(json.loads(Path(f"{model}.ldp.json").read_text())["central"])
        if number == 0:
            budget = ldp("budget", "--ledger", ledger, "--json")
            assert budget.exit_code == 0, budget.output
            item = json.loads(budget.stdout)["inputs"][0]
            assert item["central"] == {"epsilon": runs[0]["epsilon"], "delta": 1e-6, "theorem": TRAINED}
            assert "trained with the central layer (z = 1.2, q = 0.1, T = 10)" in item["central_note"]
            assert "adding or removing one row" in item["central_note"]
    stored = ledger_document(ledger)["entries"]
    assert [entry["central"] for entry in stored] == runs
    item = json.loads(ldp("budget", "--ledger", ledger, "--json").stdout)["inputs"][0]
    assert item["releases"] == 2
    assert item["central"]["epsilon"] == pytest.approx(runs[0]["epsilon"] + runs[1]["epsilon"])
    assert item["central"]["delta"] == pytest.approx(2e-6)
    assert item["central"]["theorem"] == f"{BASIC} of the recorded central guarantees"
    table = ldp("budget", "--ledger", ledger, terminal_width=250)
    assert "central" in table.stdout and "a model trained by an honest server" in " ".join(table.stdout.split())


def _entry(ledger: Ledger, epsilon: float = 4.0, **fields: Any) -> LedgerEntry:
    """An entry of the input "a"·64, as a release would record it."""
    return LedgerEntry(
        fingerprint="a" * 64, input="/data/people.parquet", rows=400, d=3, columns=["x"],
        output=f"/models/m{len(ledger.entries)}.json", mechanism="separated", epsilon=epsilon, epsilon_exact=epsilon,
        delta=None, created="2026-01-01T00:00:00+00:00", tag=ledger.tag("a" * 64), reproducible=False, **fields,
    )


def _run(epsilon: float, delta: float = 1e-6) -> dict[str, Any]:
    """A training run's recorded central section (the numbers ``ldp budget`` reads, and a few others)."""
    return {"epsilon": epsilon, "delta": delta, "neighbouring": ADD_OR_REMOVE_ONE, "noise_multiplier": 1.2,
            "sampling_rate": 0.1, "steps": 20, "claim": "pld", "accountant": "dp-accounting 0.6.0"}


def _shuffled(epsilon: float, delta: float = 1e-7) -> dict[str, Any]:
    return {"n": 1000, "delta": delta, "epsilon_local": 4.0, "epsilon_central_upper": epsilon,
            "epsilon_central_lower": epsilon / 3, "epsilon_central_closed_form": None, "theorem": "a theorem",
            "assumptions": ["an honest shuffler"]}


def test_the_central_record_makes_the_round_trip_through_the_ledger_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    ledger = Ledger.open(path)
    trained, plain = _entry(ledger, central=_run(1.1)), _entry(ledger)
    ledger.record(trained)
    ledger.record(plain)
    assert Ledger.open(path).entries == (trained, plain)
    stored = ledger_document(path)["entries"]
    assert stored[0]["central"] == _run(1.1) and "central" not in stored[1]
    assert LedgerEntry.from_dict(trained.to_dict(), path) == trained


def test_a_ledger_written_before_the_field_still_reads(tmp_path: Path) -> None:
    """An entry as the first ledgers wrote it (no state, release, row file, note, shuffled or central) reads as
    a confirmed release with no central guarantee, and ``ldp budget`` states none for it."""
    path = tmp_path / "ledger.json"
    old = {"fingerprint": "b" * 64, "input": "/data/old.csv", "rows": 10, "d": 2, "columns": ["a", "b"],
           "output": "/out/old.csv", "mechanism": "privunit2", "epsilon": 2.0, "epsilon_exact": 2.0, "delta": None,
           "created": "2024-01-01T00:00:00+00:00", "tag": "ldptag1-" + "0" * 64, "reproducible": True}
    path.write_text(json.dumps({"format": LEDGER_FORMAT, "version": LEDGER_VERSION, "key": "c" * 64,
                                "entries": [old]}))
    (entry,) = Ledger.open(path).entries
    assert entry.central is None and entry.shuffled is None and entry.state == "confirmed"
    item = json.loads(ldp("budget", "--ledger", path, "--json").stdout)["inputs"][0]
    assert item["epsilon"] == 2.0 and item["central"] is None and item["central_note"] == ""


def test_a_training_run_among_shuffled_releases_counts_for_replacing_a_row(tmp_path: Path) -> None:
    """Shuffled claims are for replace-one neighbours, a training run's for add/remove-one: among shuffled
    releases a run's (ε, δ) counts as (2ε, (1 + e^ε)δ), never less."""
    ledger = Ledger.open(tmp_path / "ledger.json")
    entries = [_entry(ledger, central=_run(0.5, 1e-6)), _entry(ledger, shuffled=_shuffled(0.3, 1e-7))]
    guarantee, note = compose_central(entries, None)
    assert guarantee is not None
    assert guarantee.epsilon == pytest.approx(2 * 0.5 + 0.3)
    assert guarantee.delta == pytest.approx((1 + math.exp(0.5)) * 1e-6 + 1e-7)
    assert "replacing one person's row" in note and "(2ε, (1 + e^ε)·δ)" in note
    assert "1 shuffled by an honest shuffler (n = 1000)" in note and "1 trained with the central layer" in note
    at_delta, _ = compose_central(entries, 1e-6)
    assert at_delta is not None and at_delta.epsilon <= guarantee.epsilon
    # a run whose (1 + e^ε)δ reaches 1 leaves no guarantee to state
    vacuous, why = compose_central([_entry(ledger, central=_run(30.0, 1e-9)), entries[1]], None)
    assert vacuous is None and "add up to 1 or more" in why


def test_several_training_runs_compose_and_a_release_without_a_central_claim_stops_it(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    runs = [_entry(ledger, central=_run(0.2)) for _ in range(20)]
    basic, _ = compose_central(runs, None)
    assert basic is not None and basic.epsilon == pytest.approx(4.0) and basic.delta == pytest.approx(2e-5)
    composed, note = compose_central(runs, 1e-6)
    assert composed is not None and composed.epsilon < basic.epsilon  # the PLD of the 20 pairs, below their sum
    assert composed.epsilon == pytest.approx(pld_epsilon([(0.2, 1e-6)] * 20, 2e-5 + 1e-6))
    assert "20 releases: 20 trained with the central layer" in note and "adding or removing one row" in note
    none, why = compose_central([*runs[:1], _entry(ledger)], None)
    assert none is None and "1 of its 2 releases was trained with the central layer" in why


@pytest.mark.parametrize("record", [{"epsilon": 1.0, "delta": 1e-6}, {"delta": 1e-6, "neighbouring": ADD_OR_REMOVE_ONE},
                                    {**_run(1.0), "neighbouring": "replace one user"}])
def test_an_unusable_central_record_is_an_error_not_a_guarantee(tmp_path: Path, record: dict[str, Any]) -> None:
    path = tmp_path / "ledger.json"
    ledger = Ledger.open(path)
    ledger.record(_entry(ledger, central=record))
    result = ldp("budget", "--ledger", path)
    assert result.exit_code == 1 and "training run with the central layer" in result.stderr
    assert "no usable central guarantee" in result.stderr


def test_budget_at_a_delta_survives_releases_past_the_pld_range(tmp_path: Path) -> None:
    """dp-accounting computes e^ε of each pair: at ε = 1000 it overflowed and ``ldp budget --delta`` stopped with
    a traceback; the PLD now states no bound there and the sum stands."""
    assert pld_epsilon([(1000.0, 0.0), (500.0, 0.0)], 1e-6) == math.inf
    path = tmp_path / "ledger.json"
    ledger = Ledger.open(path)
    ledger.record(_entry(ledger, 1000.0))
    ledger.record(_entry(ledger, 500.0))
    result = ldp("budget", "--ledger", path, "--delta", "1e-6", "--json")
    assert result.exit_code == 0, result.output
    local = json.loads(result.stdout)["inputs"][0]["local"]
    assert local["advanced"]["epsilon"] == pytest.approx(1500.0)
