"""A ledger entry's sections are typed records (issue 37 item 3): ``owner`` a
:class:`~ldpcli.release._ledger_file.ReservationOwner`, ``shuffled`` the release's
:class:`~ldpcli.release._shuffle_claim.ShuffleClaim`, ``central`` a training run's
:class:`~ldpcli.release._central_claim.CentralTrainingClaim` (the model sidecar's ``central`` section too), each
written as the JSON ldp wrote before (the same keys in the same order); a section that is not exactly a record's JSON
(an edited, damaged or older ledger) is kept as stored, so the ledger still loads and is written back unchanged."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import ledger_document, unit_rows, write_list

from ldpcli.release._central_claim import CentralTrainingClaim
from ldpcli.release._commit import IN_PROGRESS, pending_releases
from ldpcli.release._file import write_file_release
from ldpcli.release._ledger import Ledger
from ldpcli.release._ledger_file import LedgerEntry, ReservationOwner
from ldpcli.release._options import Budget, ReleaseOptions
from ldpcli.release._shuffle_claim import ShuffleClaim

#: The model sidecar's ``central`` keys as the training run has always written them, in order.
CENTRAL_KEYS = ["radius", "noise_multiplier", "sampling_rate", "steps", "delta", "epsilon_pld", "epsilon_rdp",
                "rdp_order", "epsilon", "claim", "target_epsilon", "noise_std", "expected_batch", "accountant",
                "neighbouring", "protects_against", "statement", "randomness"]


def _entry(**fields: Any) -> LedgerEntry:
    return LedgerEntry(**{"fingerprint": "a" * 64, "input": "/data/people.parquet", "rows": 400, "d": 3,
                          "columns": ["x"], "output": "/releases/out.parquet", "mechanism": "privunit2",
                          "epsilon": 3.0, "epsilon_exact": 3.0, "delta": None, "created": "2026-01-01T00:00:00+00:00",
                          "tag": "t", "reproducible": False, **fields})


def _stored_text(path: Path) -> list[str]:
    """Each stored entry's JSON text, as the ledger file holds it (its log folded in)."""
    return [json.dumps(entry) for entry in ledger_document(path)["entries"]]


def test_a_shuffled_release_s_ledger_entry_holds_its_claim_and_writes_the_bytes_it_read(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(300, 4, seed=7))
    path = tmp_path / "ledger.json"
    result = write_file_release(source, tmp_path / "out.parquet", epsilon=3.0, options=ReleaseOptions(
        seed=5, shuffle=True, budget=Budget(ledger=Ledger.open(path))))
    stored = _stored_text(path)
    (entry,) = Ledger.open(path).entries
    assert isinstance(entry.shuffled, ShuffleClaim) and entry.shuffled == result.shuffled
    assert entry.owner is None and entry.central is None
    assert [json.dumps(entry.to_dict())] == stored  # the same keys, in the same order, the same numbers


def test_a_reservation_names_its_process_as_a_typed_owner(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    reservation = ledger.reserve(_entry(), max_budget=None, input_label="people")
    (pending,) = ledger.pending()
    assert pending.owner == ReservationOwner(socket.gethostname(), os.getpid())
    assert list(ledger_document(ledger.path)["entries"][0]["owner"]) == ["host", "pid"]
    assert [item.status for item in pending_releases(ledger)] == [IN_PROGRESS]
    reservation.confirm()
    assert Ledger.open(ledger.path).entries[0].owner is None


def _train_rows(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ np.array([2.0, -1.0, 0.5]) > 0).astype(np.int64)
    return write_list(tmp_path / "train.parquet", X, column="x", label=pa.array(y))


@pytest.mark.slow
def test_a_central_training_run_writes_one_typed_claim_to_its_sidecar_and_the_ledger(tmp_path: Path) -> None:
    from ldpcli.learn import CentralOptions, TrainingOptions, train

    path = tmp_path / "ledger.json"
    result = train(_train_rows(tmp_path), tmp_path / "model.json", label="label", mechanism="separated", epsilon=4.0,
                   training=TrainingOptions(central=CentralOptions(1.5, 0.5, noise_multiplier=1.2, central_delta=1e-6),
                                            epochs=1, classes=[0, 1]),
                   options=ReleaseOptions(seed=3, budget=Budget(ledger=Ledger.open(path))))
    claim = result.central_section()
    assert isinstance(claim, CentralTrainingClaim) and claim.steps == 2 and claim.delta == 1e-6
    assert CentralTrainingClaim.from_dict(claim.to_dict()) == claim  # the round trip
    section = json.loads((tmp_path / "model.json.ldp.json").read_text())["central"]
    assert list(section) == CENTRAL_KEYS and section == claim.to_dict() == result.to_dict()["central"]
    stored = _stored_text(path)
    (entry,) = Ledger.open(path).entries
    assert entry.central == claim and [json.dumps(entry.to_dict())] == stored
    assert json.loads(stored[0])["central"] == section


#: Sections ldp never writes: one field more, one missing, a number stored as text, an owner without a pid.
EDITED = {
    "shuffled": {"n": 1000, "delta": 1e-7, "epsilon_local": 4.0, "epsilon_central_upper": 0.3,
                 "epsilon_central_lower": 0.1, "theorem": "a theorem", "assumptions": ["an honest shuffler"],
                 "note": "copied by hand"},
    "central": {"epsilon": 1.1, "delta": 1e-6, "neighbouring": "add/remove one row", "steps": 20},
    "owner": {"host": "elsewhere", "pid": "4242"},
}


@pytest.mark.parametrize("name", sorted(EDITED))
def test_an_edited_section_loads_as_stored_and_is_written_back_byte_for_byte(tmp_path: Path, name: str) -> None:
    """The decision of :class:`LedgerEntry`: what is not exactly a record's JSON stays the dict it was stored as."""
    path = tmp_path / "ledger.json"
    ledger = Ledger.open(path)
    ledger.record(_entry())
    document = ledger_document(path)
    document["entries"][0][name] = EDITED[name]
    path.write_text(json.dumps(document))
    edited = _stored_text(path)
    (entry,) = Ledger.open(path).entries
    assert getattr(entry, name) == EDITED[name] and type(getattr(entry, name)) is dict
    Ledger.open(path).record(_entry(tag="u"))  # a change: the file is written again, the log folded in
    assert _stored_text(path)[:1] == edited


def test_a_section_given_as_its_json_becomes_the_record(tmp_path: Path) -> None:
    owner = ReservationOwner("host", 12)
    assert _entry(owner=owner.to_dict()).owner == owner
    assert LedgerEntry.from_dict(_entry(owner=owner).to_dict(), tmp_path / "ledger.json").owner == owner
    with pytest.raises(ValueError, match="pid"):
        ReservationOwner.from_dict({"host": "host", "pid": True})
