"""Typed release records (issue 37 item 3): a shuffled release's central claim is one record,
:class:`~ldpcli.release._shuffle_claim.ShuffleClaim`, from the writer (``PrivatizeResult.shuffled``) to the
sidecar's ``release.shuffled`` and the ledger entry's ``shuffled`` and back (``load_sidecar``): it round-trips,
its JSON is the dict the writer recorded before (the same keys in the same order, so the sidecar's bytes and
hash are unchanged), and its fields are the schema's properties for ``release.shuffled``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from helpers import ldp, ledger_document, unit_rows, write_list

from ldpcli.mechanisms import MechanismSpec
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._engines import DaskEngine, EngineDescription, describe_engine
from ldpcli.release._file import write_file_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, ReleaseOptions
from ldpcli.release._shuffle_claim import ShuffleClaim
from ldpcli.release._sidecar import load_sidecar, sidecar_schema
from ldpcli.release._steps import calibrate
from ldpcli.risk._section import ReconstructionLevel, ReconstructionSection, reconstruction, reconstruction_section

#: ``release.shuffled``'s keys as the writer has always emitted them, in order (the sidecar is hashed and signed).
RECORDED_KEYS = ["n", "delta", "epsilon_local", "epsilon_central_upper", "epsilon_central_lower",
                 "epsilon_central_closed_form", "theorem", "assumptions"]


def test_a_shuffled_release_carries_one_typed_claim_from_writer_to_sidecar_and_ledger(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(400, 6, seed=3))
    ledger = tmp_path / "ledger.json"
    result = write_file_release(source, tmp_path / "out.parquet", epsilon=3.0, options=ReleaseOptions(
        seed=5, shuffle=True, budget=Budget(ledger=Ledger.open(ledger))))
    claim = result.shuffled
    assert isinstance(claim, ShuffleClaim) and claim.n == 400
    assert ShuffleClaim.from_dict(claim.to_dict(), 400) == claim  # the round trip
    recorded = json.loads((tmp_path / "out.parquet.ldp.json").read_text())["release"]["shuffled"]
    assert list(recorded) == RECORDED_KEYS and recorded == claim.to_dict()
    assert load_sidecar(tmp_path / "out.parquet.ldp.json").shuffled == claim
    assert result.summary()["shuffled"] == recorded
    (entry,) = ledger_document(ledger)["entries"]
    assert list(entry["shuffled"]) == RECORDED_KEYS and entry["shuffled"] == recorded


def test_the_claim_record_has_the_schema_properties_of_release_shuffled() -> None:
    section = sidecar_schema()["properties"]["release"]["properties"]["shuffled"]
    fields = [field.name for field in dataclasses.fields(ShuffleClaim)]
    assert fields == RECORDED_KEYS
    assert set(fields) == set(section["properties"])
    assert set(section["required"]) <= set(fields)


def test_a_dataset_release_describes_its_engine_with_one_typed_record(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(300, 4, seed=2))
    result = write_dataset_release([source], tmp_path / "out", engine=None, epsilon=3.0, options=ReleaseOptions(seed=1))
    assert result.engine == EngineDescription("local") and result.engine.to_dict() == {"name": "local"}
    recorded = json.loads((tmp_path / "out" / MANIFEST_NAME).read_text())["engine"]
    assert recorded == result.engine.to_dict() and result.summary()["engine"] == recorded
    dask = describe_engine(DaskEngine("threads")).to_dict()  # a Dask engine's: the name, then the scheduler
    assert list(dask) == ["name", "scheduler"] and dask == {"name": "dask", "scheduler": "threads"}
    assert describe_engine(DaskEngine("tcp://10.0.0.7:8786")).to_dict() == {"name": "dask", "scheduler": "distributed"}


#: ``reconstruction``'s keys as the writer has always emitted them, in order.
RECONSTRUCTION_KEYS = ["target", "k", "rho0", "a", "threshold", "levels"]


def test_a_release_calibrates_one_typed_reconstruction_section_and_writes_its_dict(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(200, 5, seed=4))
    result = write_file_release(source, tmp_path / "out.parquet", epsilon=2.0, options=ReleaseOptions(seed=2))
    risk = calibrate(result.mechanism.spec, result.layout, forced=None, options=ReleaseOptions(seed=2), source=source).risk
    assert isinstance(risk, ReconstructionSection) and risk.k == 5
    assert ReconstructionSection.from_dict(risk.to_dict()) == risk  # the round trip
    recorded = json.loads((tmp_path / "out.parquet.ldp.json").read_text())["reconstruction"]
    assert list(recorded) == RECONSTRUCTION_KEYS and recorded == risk.to_dict()


def test_the_reconstruction_record_has_the_schema_properties_of_reconstruction() -> None:
    section = sidecar_schema()["properties"]["reconstruction"]
    fields = [field.name for field in dataclasses.fields(ReconstructionSection)]
    assert fields == RECONSTRUCTION_KEYS and set(fields) == set(section["properties"])
    assert set(section["required"]) <= set(fields)


#: A level's keys as the writer has always emitted them, in order.
LEVEL_KEYS = ["name", "epsilon", "applies", "conservative", "bounds"]


def test_the_section_s_levels_are_records_and_a_cli_sidecar_reads_back_to_its_bytes(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(200, 6, seed=8))
    result = ldp("privatize", source, "-o", tmp_path / "out.parquet", "--mechanism", "separated", "--eps", 6,
                 "--copies", 2, "--seed", 1, "-q")
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "out.parquet.ldp.json").read_text()
    recorded = json.loads(text)["reconstruction"]
    section = ReconstructionSection.from_dict(recorded)
    assert all(isinstance(level, ReconstructionLevel) for level in section.levels) and len(section.levels) == 2
    assert [list(level) for level in recorded["levels"]] == [LEVEL_KEYS] * 2
    assert json.dumps(section.to_dict()) == json.dumps(recorded)  # the same keys, in the same order


def test_the_json_functions_are_the_record_s_to_dict() -> None:
    mech = MechanismSpec("separated", 20.0, None, 1.0, {}).calibrate(50)
    section = reconstruction_section(mech, k=5)
    assert section is not None and section.levels[0].conservative and not section.levels[1].conservative
    assert reconstruction(mech, k=5) == section.to_dict()
    assert reconstruction_section(MechanismSpec("scalar", 2.0, None, 1.0, {}).calibrate(1)) is None
