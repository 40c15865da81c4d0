"""Typed release records (issue 37 item 3): a shuffled release's central claim is one record,
:class:`~ldpcli.release._shuffle_claim.ShuffleClaim`, from the writer (``PrivatizeResult.shuffled``) to the
sidecar's ``release.shuffled`` and the ledger entry's ``shuffled`` and back (``load_sidecar``): it round-trips,
its JSON is the dict the writer recorded before (the same keys in the same order, so the sidecar's bytes and
hash are unchanged), and its fields are the schema's properties for ``release.shuffled``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers import ldp, ledger_document, unit_rows, write_list

from ldpcli.mechanisms import MechanismSpec
from ldpcli.release._central_claim import CentralTrainingClaim
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._engines import DaskEngine, EngineDescription, describe_engine
from ldpcli.release._file import write_file_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, ReleaseOptions
from ldpcli.release._randomness import RandomnessRecord, randomness_record
from ldpcli.release._shuffle_claim import ShuffleClaim
from ldpcli.release._sidecar import load_sidecar, sidecar_schema
from ldpcli.release._steps import calibrate
from ldpcli.risk._section import (
    ReconstructionBound,
    ReconstructionLevel,
    ReconstructionSection,
    reconstruction,
    reconstruction_section,
)

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


#: ``release.randomness``'s keys as the writer has always emitted them, in order (pcg64 has no ``rounds``).
RANDOMNESS_KEYS = {"chacha20": ["bit_generator", "package", "version", "rounds", "cryptographic", "entropy", "kernel"],
                   "pcg64": ["bit_generator", "package", "version", "cryptographic", "entropy", "kernel"]}


@pytest.mark.parametrize("rng", ["chacha20", "pcg64"])
def test_a_release_states_its_randomness_as_one_record_and_writes_its_dict(tmp_path: Path, rng: str) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(50, 3, seed=1))
    write_file_release(source, tmp_path / "out.parquet", epsilon=2.0, options=ReleaseOptions(seed=4, rng=rng))
    recorded = json.loads((tmp_path / "out.parquet.ldp.json").read_text())["release"]["randomness"]
    assert list(recorded) == RANDOMNESS_KEYS[rng]
    record = RandomnessRecord.from_dict(recorded)
    assert record.to_dict() == recorded and json.dumps(record.to_dict()) == json.dumps(recorded)
    assert record == randomness_record(rng, seeded=True).with_kernel(recorded["kernel"])
    assert record.cryptographic is (rng == "chacha20")


def test_the_randomness_record_has_the_schema_properties_and_refuses_what_is_not_one() -> None:
    section = sidecar_schema()["properties"]["release"]["properties"]["randomness"]
    assert [field.name for field in dataclasses.fields(RandomnessRecord)] == RANDOMNESS_KEYS["chacha20"]
    assert set(RANDOMNESS_KEYS["chacha20"]) == set(section["properties"])
    older = {"bit_generator": "PCG64", "kernel": "numpy"}  # a sidecar written before rng 'secure'
    assert RandomnessRecord.from_dict(older).to_dict() == older
    for bad, named in (({"kernel": "numba"}, "bit_generator"), ({"bit_generator": "PCG64", "seed": 3}, "seed"),
                       ({"bit_generator": "PCG64", "rounds": "20"}, "rounds"),
                       ({"bit_generator": "PCG64", "cryptographic": 1}, "cryptographic"), ([], "object")):
        with pytest.raises(ValueError, match=named):
            RandomnessRecord.from_dict(bad)


def test_a_central_claim_holds_its_randomness_as_a_record_and_refuses_a_bad_one() -> None:
    claim = {"radius": 1.0, "noise_multiplier": 1.0, "sampling_rate": 0.1, "steps": 3, "delta": 1e-6,
             "epsilon_pld": 1.0, "epsilon_rdp": 1.2, "rdp_order": 8.0, "epsilon": 1.0, "claim": "c",
             "target_epsilon": None, "noise_std": 0.1, "expected_batch": 4.0, "accountant": "a",
             "neighbouring": "n", "protects_against": "p", "statement": "s",
             "randomness": randomness_record("secure", seeded=False).to_dict()}
    record = CentralTrainingClaim.from_dict(claim)
    assert isinstance(record.randomness, RandomnessRecord) and record.randomness.bit_generator == "ChaCha"
    assert json.dumps(record.to_dict()) == json.dumps(claim)
    with pytest.raises(ValueError, match="in field 'randomness', field 'rounds'"):
        CentralTrainingClaim.from_dict({**claim, "randomness": {"bit_generator": "ChaCha", "rounds": 2.5}})


#: A bound's keys as the writer has always emitted them, in order.
BOUND_KEYS = ["a", "alpha", "log_prior", "log_exact", "log_bound", "probability_bound", "guarantee", "verdict",
              "impossible", "log_prop1_small", "log_prop1_large", "log_prop1"]


def test_a_level_s_bounds_are_records_with_the_schema_s_properties() -> None:
    section = reconstruction_section(MechanismSpec("privunit2", 4.0, None, 1.0, {}).calibrate(30))
    assert section is not None
    bounds = [bound for level in section.levels for bound in level.bounds]
    assert bounds and all(isinstance(bound, ReconstructionBound) for bound in bounds)
    assert [list(bound.to_dict()) for bound in bounds] == [BOUND_KEYS] * len(bounds)
    assert ReconstructionSection.from_dict(section.to_dict()) == section
    items = sidecar_schema()["properties"]["reconstruction"]["properties"]["levels"]["items"]
    assert set(BOUND_KEYS) == set(items["properties"]["bounds"]["items"]["properties"])


def test_a_dataset_part_is_one_record_from_writer_to_sidecar(tmp_path: Path) -> None:
    source = write_list(tmp_path / "in.parquet", unit_rows(300, 4, seed=6))
    write_dataset_release([source], tmp_path / "out", engine=None, epsilon=3.0, options=ReleaseOptions(seed=1))
    (first, *_) = sorted((tmp_path / "out").glob("*.ldp.json"))
    recorded = json.loads(first.read_text())["release"]["part"]
    assert list(recorded) == ["dataset", "index", "input", "parts"]
    part = load_sidecar(first).part
    assert part is not None and part.to_dict() == recorded and part.index == recorded["index"]
