"""Signed releases (issue 24, item 13): a sidecar was checked for consistency with its data, never for
who wrote it. A sidecar forged from ε = 1 to ε = 8 with every derived number recomputed, or stripped of
its input tag, loads today; signed by the data owner (ldpcli.release._signing) it is refused.

Every release here is made by the real privatize path and then signed with the library's own call, as
the privatize path does once it is wired (``signer.sign(content)`` before the sidecar is written).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from helpers import ldp_process, ldp_without, unit_rows, write_list

from ldpcli.analysis._estimate import estimate_file_mean
from ldpcli.errors import DataError, UsageError
from ldpcli.io import VectorLayout
from ldpcli.mechanisms import MechanismSpec
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._file import write_file_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, ReleaseOptions
from ldpcli.release._sidecar import build_sidecar, load_sidecar, sidecar_path, sidecar_schema
from ldpcli.release._signing import (
    KEY_NAME,
    PublicKey,
    Signer,
    Status,
    canonical_bytes,
    create_key,
    key_path,
    load_signer,
    read_public_key,
    signer_for,
    verify_document,
    verify_paths,
)
from ldpcli.risk._section import ReconstructionSection

N, D = 3000, 8


def ldp_run(*args: Any, ledger: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``ldp`` script, with this worktree's package first on the path."""
    owner = {} if ledger is None else {"LDP_LEDGER": str(ledger)}
    return ldp_process(*args, env={"COLUMNS": "200", "NO_COLOR": "1", **owner})


def resign(path: Path, signer: Signer) -> dict[str, Any]:
    """Sign the JSON document at ``path`` in place, as the wired privatize path will before writing it."""
    content = signer.sign(json.loads(path.read_text(encoding="utf-8")))
    path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    return content


def edit(path: Path, change: Any) -> None:
    content = json.loads(path.read_text(encoding="utf-8"))
    change(content)
    path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")


@pytest.fixture
def owner(tmp_path: Path) -> tuple[Path, Signer]:
    """The data owner's ledger path and signer (key created beside the ledger)."""
    ledger = tmp_path / "owner" / "ledger.json"
    return ledger, create_key(ledger)


@pytest.fixture
def release(tmp_path: Path, owner: tuple[Path, Signer]) -> Path:
    """A real ε = 1 release recorded in the owner's ledger, its sidecar signed by the owner."""
    ledger, signer = owner
    source = write_list(tmp_path / "in.parquet", unit_rows(N, D, seed=3))
    out = tmp_path / "out.parquet"
    write_file_release(source, out, epsilon=1.0, options=ReleaseOptions(budget=Budget(ledger=Ledger.open(ledger))))
    resign(sidecar_path(out), signer)
    return out


# --------------------------------------------------------------------------- the key


def test_the_key_is_created_0600_beside_the_ledger_whatever_the_umask_and_never_replaced(tmp_path: Path) -> None:
    ledger = tmp_path / "deep" / "owner" / "ledger.json"
    previous = os.umask(0)  # a permissive umask must not make the key readable by others
    try:
        signer = create_key(ledger)
    finally:
        os.umask(previous)
    assert signer.path == key_path(ledger) == ledger.parent / KEY_NAME
    assert stat.S_IMODE(signer.path.stat().st_mode) == 0o600
    assert [p.name for p in ledger.parent.iterdir()] == [KEY_NAME]  # no temporary left behind
    pem = signer.path.read_bytes()
    with pytest.raises(UsageError, match="exists already"):
        create_key(ledger)
    assert signer.path.read_bytes() == pem
    assert load_signer(ledger).public_key == signer.public_key == signer_for(ledger).public_key  # type: ignore[union-attr]


def test_no_key_means_no_signer_and_a_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    assert signer_for(ledger) is None
    with pytest.raises(DataError, match="no signing key"):
        load_signer(ledger)
    signer = create_key(ledger)
    assert signer.path is not None
    signer.path.chmod(0o644)
    with pytest.raises(DataError, match="readable by other users"):
        signer_for(ledger)


def test_the_default_key_lives_beside_the_default_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LDP_LEDGER", str(tmp_path / "books" / "ledger.json"))
    assert key_path() == tmp_path / "books" / KEY_NAME


def test_a_public_key_reads_as_text_as_pem_and_from_a_file(tmp_path: Path, owner: tuple[Path, Signer]) -> None:
    key = owner[1].public_key
    assert key.text.startswith("ldpkey1-") and len(key.text) == 8 + 44
    assert PublicKey.parse(key.text) == PublicKey.parse(key.pem()) == key
    (tmp_path / "owner.pub").write_text(key.text + "\n")
    (tmp_path / "owner.pem").write_text(key.pem())
    assert read_public_key(tmp_path / "owner.pub") == read_public_key(str(tmp_path / "owner.pem")) == key
    with pytest.raises(UsageError, match="not a public key"):
        read_public_key("ldpkey1-AAAA")
    with pytest.raises(UsageError, match="not a public key"):
        read_public_key(tmp_path / "missing.pub")


# --------------------------------------------------------------------------- documents


def test_the_signature_covers_the_canonical_form_whatever_the_layout(owner: tuple[Path, Signer]) -> None:
    signer = owner[1]
    content = {"format": "x", "b": [1, 2.5, (3, 4)], "a": {"z": "é", "y": None, "x": 0.1 + 0.2}}
    signed = signer.sign(content)
    assert "signature" not in content  # not changed in place
    assert signed["signature"]["algorithm"] == "ed25519" and signed["signature"]["public_key"] == signer.public_key.text
    assert canonical_bytes(signed) == (
        b'{"a":{"x":0.30000000000000004,"y":null,"z":"\\u00e9"},"b":[1,2.5,[3,4]],"format":"x"}'
    )
    # Written indented, in another key order, and read back: still valid.
    shuffled = json.loads(json.dumps(dict(reversed(list(signed.items()))), indent=4, ensure_ascii=False))
    assert verify_document(shuffled).status is Status.VALID
    assert verify_document(shuffled, signer.public_key).trusted
    assert verify_document(content).status is Status.UNSIGNED
    for change in (lambda c: c["a"].update(x=0.3), lambda c: c.update(extra=1), lambda c: c["b"].pop()):
        tampered = copy.deepcopy(signed)
        change(tampered)
        assert verify_document(tampered).status is Status.INVALID
    for change in (lambda c: c["signature"].update(value="AAAA"), lambda c: c["signature"].update(algorithm="rsa"),
                   lambda c: c.update(signature="yes"), lambda c: c["signature"].pop("public_key")):
        broken = copy.deepcopy(signed)
        change(broken)
        assert verify_document(broken).status is Status.INVALID


def test_a_signed_sidecar_matches_the_schema_and_still_loads(release: Path) -> None:
    content = json.loads(sidecar_path(release).read_text())
    errors = sorted(jsonschema.Draft202012Validator(sidecar_schema()).iter_errors(content), key=str)
    assert not errors, [e.message for e in errors]
    assert load_sidecar(sidecar_path(release)).n == N


# --------------------------------------------------------------------------- the forgeries


def forged_epsilon(release: Path) -> dict[str, Any]:
    """The release's sidecar rebuilt at ε = 8 with every derived number recomputed, its signature kept."""
    meta = load_sidecar(sidecar_path(release))
    mechanism = MechanismSpec.from_dict({**meta.spec.to_dict(), "epsilon": 8.0}).calibrate(meta.d)
    layout = VectorLayout.from_dict(meta.content["data"]["layout"])
    forged = build_sidecar(mechanism, n=meta.n, layout=layout, data_path=release, sha256=meta.sha256,
                           reproducible=False, dtype=meta.dtype, input_tag=meta.input_tag,
                           reconstruction=ReconstructionSection.from_dict(meta.content["reconstruction"])
                           if "reconstruction" in meta.content else None)
    forged["signature"] = meta.content["signature"]
    return forged


def test_a_sidecar_forged_from_eps_1_to_8_is_invalid(release: Path, owner: tuple[Path, Signer]) -> None:
    sidecar_path(release).write_text(json.dumps(forged_epsilon(release), indent=2))
    # The forgery is consistent: the unsigned checks alone accept it (the finding).
    assert load_sidecar(sidecar_path(release)).mechanism.epsilon == 8.0
    [found] = verify_paths(release, owner[1].public_key)
    assert found.status is Status.INVALID and found.key == owner[1].public_key
    with pytest.raises(DataError, match="invalid signature: the content was changed after it was signed"):
        estimate_file_mean(release)  # refused even without a trusted key: the signature says it was edited
    result = ldp_run("verify", release)
    assert result.returncode == 1 and "INVALID" in result.stdout


def test_removing_the_input_tag_is_invalid(release: Path, owner: tuple[Path, Signer]) -> None:
    assert load_sidecar(sidecar_path(release)).input_tag is not None
    edit(sidecar_path(release), lambda c: c["release"].pop("input_tag"))
    assert load_sidecar(sidecar_path(release)).input_tag is None  # loads: the same-input check is off
    [found] = verify_paths([release], owner[1].public_key)
    assert found.status is Status.INVALID
    with pytest.raises(DataError, match=r"out\.parquet: its sidecar has an invalid signature"):
        estimate_file_mean(release, trust=owner[1].public_key)


def test_changed_data_under_a_valid_signature_is_invalid(release: Path) -> None:
    data = bytearray(release.read_bytes())
    data[len(data) // 2] ^= 1
    release.write_bytes(bytes(data))
    [found] = verify_paths(release)
    assert found.status is Status.INVALID and "bytes differ" in found.reason


@pytest.mark.slow
def test_a_release_signed_by_another_key_is_untrusted(release: Path, tmp_path: Path, owner: tuple[Path, Signer]) -> None:
    mallory = create_key(tmp_path / "mallory" / "ledger.json")
    sidecar_path(release).write_text(json.dumps(mallory.sign(forged_epsilon(release)), indent=2))
    assert verify_paths(release)[0].status is Status.VALID  # validly signed, by someone
    [found] = verify_paths(release, owner[1].public_key)
    assert found.status is Status.UNTRUSTED and found.key == mallory.public_key
    with pytest.raises(DataError, match="untrusted signature"):
        estimate_file_mean(release, trust=owner[1].public_key.text)
    assert ldp_run("verify", release).returncode == 1  # issue 36: an untrusted key verifies nothing (was 0)
    refused = ldp_run("verify", release, "--trust", owner[1].public_key.text)
    assert refused.returncode == 1 and "UNTRUSTED" in refused.stdout
    refused = ldp_run("estimate-mean", release, "--trust", owner[1].public_key.text)
    assert refused.returncode == 1 and "untrusted signature" in refused.stderr


# --------------------------------------------------------------------------- readers


@pytest.mark.slow
def test_signed_and_unsigned_releases_through_estimate_mean(tmp_path: Path, release: Path,
                                                            owner: tuple[Path, Signer]) -> None:
    ledger, signer = owner
    key_file = tmp_path / "owner.pub"
    key_file.write_text(signer.public_key.text + "\n")
    est = estimate_file_mean(release, trust=key_file)
    assert est.signature is not None and est.signature["signed"] and est.signature["files"][0]["trusted"]
    trusted = ldp_run("estimate-mean", release, "--trust", key_file)
    assert trusted.returncode == 0, trusted.stderr
    assert f"signed by {signer.public_key.short} (trusted)" in trusted.stdout

    unsigned = tmp_path / "unsigned.parquet"
    write_file_release(tmp_path / "in.parquet", unsigned, epsilon=1.0)
    est = estimate_file_mean(unsigned)
    assert est.n == N and est.signature is not None and est.signature["label"] == "unsigned"
    shown = ldp_run("estimate-mean", unsigned)
    assert shown.returncode == 0 and "unsigned" in shown.stdout
    as_json = ldp_run("estimate-mean", unsigned, "--json")
    assert json.loads(as_json.stdout)["signature"]["label"] == "unsigned"
    refused = ldp_run("estimate-mean", unsigned, "--trust", signer.public_key.text)
    assert refused.returncode == 1 and "is not signed" in refused.stderr and "Traceback" not in refused.stderr
    assert ldp_run("verify", unsigned).returncode == 1
    both = ldp_run("verify", release, unsigned, "--json")
    assert both.returncode == 1
    assert [r["status"] for r in json.loads(both.stdout)["releases"]] == ["valid", "unsigned"]


# --------------------------------------------------------------------------- dataset directories


@pytest.fixture
def dataset(tmp_path: Path, owner: tuple[Path, Signer]) -> Path:
    """A dataset directory (local engine) whose manifest and part sidecars the owner signed."""
    ledger, signer = owner
    rows = unit_rows(5000, D, seed=5)
    source = write_list(tmp_path / "big.parquet", rows, row_group_size=1000)
    out = tmp_path / "release"
    write_dataset_release([source], out, engine=None, epsilon=4.0, options=ReleaseOptions(budget=Budget(ledger=Ledger.open(ledger))))
    for part in sorted(out.glob("*.ldp.json")):
        resign(part, signer)
    resign(out / MANIFEST_NAME, signer)
    return out


@pytest.mark.slow
def test_a_signed_dataset_verifies_and_a_tampered_part_sidecar_is_invalid(dataset: Path,
                                                                          owner: tuple[Path, Signer]) -> None:
    key = owner[1].public_key
    found = verify_paths(dataset, key)
    assert len(found) >= 3 and all(v.ok for v in found)
    assert found[0].path == dataset / MANIFEST_NAME
    assert ldp_run("verify", dataset, "--trust", key.text).returncode == 0
    est = estimate_file_mean(dataset, trust=key)
    assert est.n == 5000

    part = sorted(dataset.glob("*.ldp.json"))[1]
    edit(part, lambda c: c["release"].pop("input_tag"))
    found = verify_paths(dataset, key)
    assert [v.status for v in found].count(Status.INVALID) == 1
    result = ldp_run("verify", dataset)
    assert result.returncode == 1 and "INVALID" in result.stdout
    with pytest.raises(DataError, match="invalid signature"):
        estimate_file_mean(dataset)


def test_a_tampered_or_unsigned_manifest_is_refused_under_trust(dataset: Path, owner: tuple[Path, Signer]) -> None:
    key = owner[1].public_key
    manifest = dataset / MANIFEST_NAME
    original = manifest.read_text()
    edit(manifest, lambda c: c.update(rows=c["rows"] - 1))
    assert verify_paths(dataset, key)[0].status is Status.INVALID
    # the dataset's own cross-checks see the edited total first; either way the directory is refused
    with pytest.raises(DataError, match="the manifest has an invalid signature|removed, replaced or reordered"):
        estimate_file_mean(dataset)
    manifest.write_text(original)
    edit(manifest, lambda c: c.pop("signature"))
    assert verify_paths(dataset, key)[0].status is Status.UNSIGNED
    with pytest.raises(DataError, match="the manifest is not signed"):
        estimate_file_mean(dataset, trust=key)
    manifest.write_text(original)
    assert estimate_file_mean(dataset, trust=key).n == 5000


# --------------------------------------------------------------------------- the command line


@pytest.mark.slow
def test_keys_init_and_show_through_the_real_script(tmp_path: Path) -> None:
    ledger = tmp_path / "books" / "ledger.json"
    made = ldp_run("keys", "init", ledger=ledger)
    assert made.returncode == 0, made.stderr
    key = PublicKey.parse(made.stdout)
    assert str(ledger.parent / KEY_NAME) in made.stderr
    assert stat.S_IMODE((ledger.parent / KEY_NAME).stat().st_mode) == 0o600
    again = ldp_run("keys", "init", "--ledger", ledger)
    assert again.returncode == 2 and "exists already" in again.stderr
    assert PublicKey.parse(ldp_run("keys", "show", ledger=ledger).stdout) == key
    assert PublicKey.parse(ldp_run("keys", "show", "--pem", "--ledger", ledger).stdout) == key
    missing = ldp_run("keys", "show", "--ledger", tmp_path / "none" / "ledger.json")
    assert missing.returncode == 1 and "ldp keys init" in missing.stderr


@pytest.mark.slow
def test_without_cryptography_signing_names_the_extra_and_unsigned_files_stay_readable(tmp_path: Path,
                                                                                        release: Path) -> None:
    unsigned = tmp_path / "unsigned.parquet"
    write_file_release(tmp_path / "in.parquet", unsigned, epsilon=1.0)

    def without(*args: Any) -> subprocess.CompletedProcess[str]:
        return ldp_without("cryptography", *args, ledger=tmp_path / "l" / "ledger.json")

    for args in (("keys", "init"), ("verify", release)):
        result = without(*args)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines() == [
            "ldp: error: signing and verifying releases need the cryptography package, which is not installed: "
            "pip install 'ldp[sign]' (from a clone of ldp: pip install -e '.[sign]')"]
    assert without("estimate-mean", unsigned).returncode == 0
    signed = without("estimate-mean", release, "--json")
    assert signed.returncode == 0
    assert json.loads(signed.stdout)["signature"]["files"][0]["status"] == "unchecked"


def test_estimates_are_unchanged_by_signing(tmp_path: Path, release: Path, owner: tuple[Path, Signer]) -> None:
    signed = estimate_file_mean(release, trust=owner[1].public_key)
    content = json.loads(sidecar_path(release).read_text())
    content.pop("signature")
    sidecar_path(release).write_text(json.dumps(content, indent=2))
    unsigned = estimate_file_mean(release)
    assert np.array_equal(signed.mean, unsigned.mean) and signed.n == unsigned.n


@pytest.mark.slow
def test_regress_takes_trust_too(tmp_path: Path, owner: tuple[Path, Signer]) -> None:
    ledger, signer = owner
    rows = unit_rows(2000, 4, seed=8)
    source = write_list(tmp_path / "pairs.parquet", rows)
    out = tmp_path / "pairs.privatized.parquet"
    released = write_file_release(source, out, epsilon=4.0, options=ReleaseOptions(copies=2, budget=Budget(ledger=Ledger.open(ledger))))
    assert released.signed_by == signer.public_key.text  # the owner's key beside the ledger signs the release
    edit(sidecar_path(out), lambda c: c.pop("signature"))
    refused = ldp_run("regress", out, "--label", "-1", "--trust", signer.public_key.text)
    assert refused.returncode == 1 and "is not signed" in refused.stderr
    resign(sidecar_path(out), signer)
    fitted = ldp_run("regress", out, "--label", "-1", "--trust", signer.public_key.text, "--json")
    assert fitted.returncode == 0, fitted.stderr
    assert json.loads(fitted.stdout)["signature"]["files"][0]["trusted"] is True


def test_trust_needs_the_data_checked_against_the_signed_hash(release: Path, owner: tuple[Path, Signer]) -> None:
    with pytest.raises(UsageError, match="needs the files checked against their sidecars"):
        estimate_file_mean(release, trust=owner[1].public_key, verify=False)
    refused = ldp_run("estimate-mean", release, "--no-verify", "--trust", owner[1].public_key.text)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr


@pytest.mark.slow
def test_privatize_signs_with_the_owners_key_and_verify_trusts_it(tmp_path: Path) -> None:
    """The wired path: once the owner has a key beside the ledger, every release is signed (a file
    and a dataset directory), and `ldp verify --trust` accepts them; before that they are unsigned."""
    ldp_script = str(Path(sys.executable).with_name("ldp"))
    ledger = tmp_path / "owner" / "ledger.json"
    source = tmp_path / "in.parquet"
    write_list(source, unit_rows(600, 5, seed=2))

    def run(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ldp_script, *map(str, args)], capture_output=True, text=True, timeout=120)

    unsigned = run("privatize", source, "--eps", "1", "-o", tmp_path / "before.parquet", "--ledger", ledger, "--json")
    assert unsigned.returncode == 0 and json.loads(unsigned.stdout)["signed_by"] is None
    made = run("keys", "init", "--ledger", ledger)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    signed = run("privatize", source, "--eps", "1", "-o", tmp_path / "after.parquet", "--ledger", ledger, "--json")
    assert signed.returncode == 0, signed.stderr
    assert json.loads(signed.stdout)["signed_by"] == key
    assert run("verify", tmp_path / "after.parquet", "--trust", key).returncode == 0
    assert run("verify", tmp_path / "before.parquet", "--trust", key).returncode == 1
    if importlib.util.find_spec("dask") is not None:
        dataset = run("privatize", source, "--eps", "1", "--engine", "dask", "-o", f"{tmp_path / 'ds'}/",
                      "--ledger", ledger, "-q")
        assert dataset.returncode == 0, dataset.stderr
        assert run("verify", tmp_path / "ds", "--trust", key).returncode == 0
        assert run("estimate-mean", tmp_path / "ds", "--trust", key, "--json").returncode == 0
