"""``ldp verify`` without ``--trust`` (issue 36): a release signed by an attacker's key was called "valid",
exit 0. A signature that checks out under a key nobody trusted is not a verified release: it is reported as
signed by an untrusted key, with what to pass, and the command exits 1; with ``--trust`` the owner's key
verifies (exit 0) and another key is untrusted (exit 1), as before. Real keys (``ldp keys init``), real
releases (``ldp privatize``) and real ``ldp verify`` processes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import ldp_process, unit_rows, write_list

from ldpcli.release._sidecar import load_sidecar, sidecar_path

pytestmark = pytest.mark.slow

pytest.importorskip("cryptography")


def ldp_run(*args: Any, ledger: Path) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, env={"COLUMNS": "250", "NO_COLOR": "1", "LDP_LEDGER": str(ledger)})


def test_a_release_signed_by_an_attackers_key_is_not_verified_without_trust(tmp_path: Path) -> None:
    owner, mallory = tmp_path / "owner" / "ledger.json", tmp_path / "mallory" / "ledger.json"
    owner_key = ldp_run("keys", "init", ledger=owner).stdout.strip()
    mallory_key = ldp_run("keys", "init", ledger=mallory).stdout.strip()
    assert owner_key.startswith("ldpkey1-") and mallory_key.startswith("ldpkey1-") and owner_key != mallory_key
    source = write_list(tmp_path / "in.parquet", unit_rows(500, 4, seed=1))
    # Mallory privatizes (or re-signs) a release with her own key: its signature checks out.
    release = tmp_path / "out.parquet"
    assert ldp_run("privatize", source, "-o", release, "--eps", 1, "-q", ledger=mallory).returncode == 0
    assert load_sidecar(sidecar_path(release)).content["signature"]["public_key"] == mallory_key

    plain = ldp_run("verify", release, ledger=owner)
    assert plain.returncode == 1, plain.stdout
    assert "VALID, UNTRUSTED KEY" in plain.stdout and "signed by an untrusted key" in plain.stdout
    assert "pass --trust KEY" in plain.stdout and "ldp keys show" in plain.stdout
    shown = json.loads(ldp_run("verify", release, "--json", ledger=owner).stdout)
    assert shown["ok"] is False
    [entry] = shown["releases"]
    assert entry["status"] == "valid" and entry["verified"] is False and entry["key"] == mallory_key
    assert entry["note"].startswith("signed by an untrusted key")

    # --trust as before: the owner's key refuses Mallory's signature, Mallory's own key accepts it.
    refused = ldp_run("verify", release, "--trust", owner_key, ledger=owner)
    assert refused.returncode == 1 and "UNTRUSTED" in refused.stdout
    accepted = ldp_run("verify", release, "--trust", mallory_key, ledger=owner)
    assert accepted.returncode == 0 and "valid" in accepted.stdout and "untrusted" not in accepted.stdout.lower()
    assert json.loads(ldp_run("verify", release, "--trust", mallory_key, "--json", ledger=owner).stdout)["ok"] is True
