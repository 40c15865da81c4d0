"""The suite leaves the user's home untouched (issue 36): its ledger fixtures, run with a read-only ``HOME``.

A fresh pytest runs, in a subprocess, the tests whose fixtures released before the per-test ledger was set
(the module-scoped ones of tests/accounting/, which left 5 releases in ``~/.local/share/ldp/ledger.json``),
a test that creates a signing key through the real ``ldp`` script, and a ``privatize`` that records in the
default ledger, with ``HOME`` a fresh empty directory made read-only, no ``XDG_*`` variable and no
``$LDP_LEDGER``: the inner run must pass, and ``HOME`` must still be empty. ``-p no:cacheprovider`` keeps
the inner pytest from writing its cache in the repository, ``-p no:xdist`` runs it in one process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
INNER = (
    "tests/accounting/test_shuffle_rows_claim.py",
    "tests/accounting/test_shuffle_claim_readers.py",
    "tests/release/test_signing.py::test_keys_init_and_show_through_the_real_script",
    "tests/release/test_release_budget.py::test_a_second_release_of_one_input_warns_and_carries_the_same_tag",
)


def test_the_suites_ledger_fixtures_leave_a_read_only_home_empty(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {name: value for name, value in os.environ.items() if not name.startswith(("XDG_", "LDP_"))}
    env.update(HOME=str(home), PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p))
    home.chmod(0o555)
    try:
        inner = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
             "--basetemp", str(tmp_path / "inner"), *INNER],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
        left = sorted(str(path.relative_to(home)) for path in home.rglob("*"))
    finally:
        home.chmod(0o755)
    assert inner.returncode == 0, inner.stdout[-4000:] + inner.stderr[-2000:]
    assert left == [], f"the tests wrote into HOME: {left}"
