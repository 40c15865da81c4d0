"""Shared test setup. The shared helpers live in tests/helpers.py (``from helpers import …``).

The test files sit in one folder per layer of the package (math/, io/, mechanisms/, estimators/, risk/,
release/, audit/, analysis/, planning/, learn/, cli/; docs/architecture.md), plus accounting/, engines/
(Dask), arrays/ (the device path) and docs/ (the README replayed); the few that check the whole package
(test_house.py, test_counts.py) or the suite itself (test_home_untouched.py) sit in tests/, and so does
test_properties.py: Hypothesis derives a parametrized test's derandomized examples from its node id, so a
move would change the examples CI has always run. There is no ``__init__.py``: pytest's default
("prepend") import mode puts each file's own folder on sys.path, and this conftest's folder, tests/,
too. The line below makes ``import helpers`` work
under ``--import-mode=importlib`` as well, which puts nothing on sys.path.

The suite never touches the real home directory. :func:`pytest_configure` (before any test module is
imported, any fixture of any scope runs or any subprocess starts, and in every pytest-xdist worker, which
runs this conftest too) points ``HOME``, the XDG base directories and ``$LDP_LEDGER`` into a scratch
folder of this process, removed when the run ends: ``ldp``'s default ledger and the signing key beside
it (:func:`ldpcli.release._ledger_file.default_ledger_path`, :func:`ldpcli.release._signing.key_path`),
and the caches of the libraries the tests load (matplotlib, numba), land there. On top of that,
:func:`_private_ledger` gives each test a ledger of its own.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

#: The environment variables through which ldp and the libraries it loads find the user's directories.
HOME_VARIABLES = ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "LDP_LEDGER")
_saved: dict[str, str | None] = {}
_scratch: list[Path] = []


def scratch_home_environment(scratch: Path) -> dict[str, str]:
    """``HOME``, the XDG base directories and ``LDP_LEDGER``, all inside ``scratch`` (made empty)."""
    home = scratch / "home"
    env = {"HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"),
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_STATE_HOME": str(home / ".local" / "state"), "LDP_LEDGER": str(scratch / "ledger" / "ledger.json")}
    for folder in (home, scratch / "ledger"):
        folder.mkdir(parents=True)
    return env


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Point this process (and every subprocess it starts) at a scratch home for the whole run."""
    scratch = Path(tempfile.mkdtemp(prefix="ldp-tests-home-"))
    _scratch.append(scratch)
    for name, value in scratch_home_environment(scratch).items():
        _saved.setdefault(name, os.environ.get(name))
        os.environ[name] = value


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give the process its own environment back and remove the scratch home."""
    for name, value in _saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _saved.clear()
    while _scratch:
        shutil.rmtree(_scratch.pop(), ignore_errors=True)


@pytest.fixture(autouse=True)
def _private_ledger(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own privacy-budget ledger (``ldp privatize`` records each release in the
    user's ledger by default): no test sees another's releases. (Fixtures of a wider scope run before
    this one: they see the run's scratch ledger of :func:`pytest_configure`, and should name their own.)"""
    monkeypatch.setenv("LDP_LEDGER", str(tmp_path_factory.mktemp("ledger") / "ledger.json"))


@pytest.fixture()
def named_temporaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs are written to named hidden temporaries, as where ``O_TMPFILE`` is missing (issue 36:
    on Linux they have no name until they are finished), in this process and the ``ldp`` it starts."""
    from ldpcli.io._faults import NAMED_TEMPORARIES_ENV

    monkeypatch.setenv(NAMED_TEMPORARIES_ENV, "1")
