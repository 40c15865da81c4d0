"""Shared test setup. The shared helpers live in tests/helpers.py (``from helpers import …``).

The test files sit in one folder per room of the package (mechanisms/, io/, pipeline/, audit/, docs/),
without ``__init__.py``: pytest's default ("prepend") import mode puts each file's own folder on
sys.path, and this conftest's folder, tests/, too. The line below makes ``import helpers`` work
under ``--import-mode=importlib`` as well, which puts nothing on sys.path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


@pytest.fixture(autouse=True)
def _private_ledger(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own privacy-budget ledger (``ldp privatize`` records each release in the
    user's ledger by default): nothing is written under the real home directory, and no test sees
    another's releases."""
    monkeypatch.setenv("LDP_LEDGER", str(tmp_path_factory.mktemp("ledger") / "ledger.json"))
