"""SIGINT and SIGTERM at each step of the commit, with real processes (docs/commit-protocol.md, issue 36).

Every run is the `ldp` console script as a subprocess; the signal is sent by the process to itself at
the step (``LDP_FAULT=STEP:sigint``, ``:sigterm`` or ``:double``, :mod:`ldpcli.io._faults`), so the
kernel picks the thread that takes it, as with Ctrl-C or ``kill``. A signal

- before the publication (the reservation's steps) cancels the run: exit 128 + signal, "no output
  was left behind", the previous output (if any) unchanged and the ledger as before;
- during the publication (journal … commit point: signals are held back there) comes too late: the
  release completes with its ledger entry, exit 0, "the release is complete";
- after the publication returned: exit 128 + signal, "interrupted after publishing …": the release
  stays complete and counted.

In no case is anything hidden (a journal, a temporary, a backup) left behind, and a published
release always has its confirmed ledger entry. Local engine to a file and to a dataset directory
(`-o DIR/`), and `--engine dask` when Dask is installed; a file of seed-compressed reports
(`--compress-reports`); new outputs and `--overwrite`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import ldp_process, ledger_document, unit_rows, write_list

from ldpcli.io._faults import COMMITTED_STEPS, STEPS

pytestmark = pytest.mark.slow

needs_dask = pytest.mark.skipif(importlib.util.find_spec("dask") is None, reason="pip install 'ldp[dask]'")

#: Where a signal cancels the run (before the publication holds signals back).
CANCELLING = ("reserve-write", "reserved")
#: Where it comes too late: the publication completes (held back from the journal to the commit point).
HELD = tuple(step for step in (*STEPS, *COMMITTED_STEPS) if step not in CANCELLING and step != "done")
#: Where it lands after the publication: the run ends, the release stays.
AFTER = ("done",)
assert set(CANCELLING + HELD + AFTER) == set(STEPS + COMMITTED_STEPS)

KINDS = {
    "file": ([], False),
    "directory": ([], True),
    "dask": (["--engine", "dask"], True),
    "reports": (["--compress-reports"], False),  # seed-compressed reports: uint64 seeds through the same commit
}


def run(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, env=env, timeout=180)


def snapshot(out: Path) -> dict[str, str] | None:
    """Every file of an output (a file and its sidecar, or a dataset directory): name → SHA-256."""
    paths = sorted(out.rglob("*")) if out.is_dir() else [out, out.with_name(out.name + ".ldp.json")]
    found = {str(p.relative_to(out.parent)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}
    return found or None


def state(out: Path, old: dict[str, str] | None) -> str:
    """'none', 'old' (exactly the previous output), 'new' (a complete release other than the old one) or 'mixed'."""
    now = snapshot(out)
    if now is None:
        return "none"
    if now == old:
        return "old"
    if out.is_dir():
        manifest = json.loads((out / "_ldp_dataset.json").read_text())
        parts = {f"{out.name}/{p['file']}": p["sha256"] for p in manifest["parts"]}
        complete = all(now.get(name) == digest for name, digest in parts.items()) and all(
            f"{name}.ldp.json" in now for name in parts)
    else:
        side = json.loads(out.with_name(out.name + ".ldp.json").read_text())
        complete = side["data"]["sha256"] == now.get(out.name)
    return "new" if complete else "mixed"


def hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def spent(ledger: Path) -> tuple[float, list[str]]:
    """The ε that ``ldp budget`` counts for the input, and the states of the ledger's entries."""
    report = run("budget", "--ledger", ledger, "--json")
    assert report.returncode == 0, report.stderr
    inputs = json.loads(report.stdout)["inputs"]
    entries = ledger_document(ledger)["entries"] if ledger.exists() else []
    return (inputs[0]["epsilon"] if inputs else 0.0), [entry["state"] for entry in entries]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("input") / "in.parquet"
    write_list(path, unit_rows(3000, 8, seed=5), row_group_size=1000)
    return path


def release(kind: str, source: Path, tmp_path: Path, overwrite: bool, step: str, action: str) -> None:
    """Run one release with a signal at ``step`` and check what it left (see the module)."""
    if kind == "dask" and importlib.util.find_spec("dask") is None:
        pytest.skip("pip install 'ldp[dask]'")
    flags, directory = KINDS[kind]
    out = tmp_path / ("release" if directory else "out.parquet")
    target = f"{out}/" if directory else str(out)
    ledger = tmp_path / "owner" / "ledger.json"
    old = None
    if overwrite:
        first = run("privatize", source, "--eps", "1", *flags, "-o", target, "--ledger", ledger, "-q")
        assert first.returncode == 0, first.stderr
        old = snapshot(out)
    signum = signal.SIGINT if action in ("sigint", "double") else signal.SIGTERM
    result = run("privatize", source, "--eps", "2", *flags, "-o", target, *(["--overwrite"] if overwrite else []),
                 "--ledger", ledger, "-q", env={"LDP_FAULT": f"{step}:{action}"})
    assert "Traceback" not in result.stderr and "Fatal Python error" not in result.stderr, result.stderr
    assert hidden(tmp_path) == [], hidden(tmp_path)  # no journal, temporary or backup, without any later run
    now = state(out, old)
    epsilon, states = spent(ledger)
    before = 1.0 if overwrite else 0.0
    if step in CANCELLING:
        assert result.returncode == 128 + signum, result.stderr
        assert "ldp: interrupted; no output was left behind" in result.stderr, result.stderr
        assert now == ("old" if overwrite else "none"), now
        assert epsilon == pytest.approx(before) and states == ["confirmed"] * overwrite, states
        return
    assert now == "new", now  # published, and so counted:
    assert epsilon == pytest.approx(before + 2.0), (epsilon, states)
    assert states == ["confirmed"] * (1 + overwrite), states
    assert "no output was left behind" not in result.stderr, result.stderr
    if step in HELD:
        assert result.returncode == 0, result.stderr
        assert f"ldp: signal {int(signum)} arrived while the release was being published; the release is complete" \
            in result.stderr, result.stderr
    else:
        assert result.returncode == 128 + signum, result.stderr
        assert f"ldp: interrupted after publishing {target.rstrip('/')}" in result.stderr, result.stderr
        assert "complete and recorded in the ledger" in result.stderr, result.stderr


STEP_ACTIONS = [(step, "sigint" if index % 2 == 0 else "sigterm")
                for index, step in enumerate((*STEPS, *COMMITTED_STEPS))]


@pytest.mark.parametrize("overwrite", [False, True], ids=["new", "overwrite"])
@pytest.mark.parametrize(("step", "action"), STEP_ACTIONS, ids=[step for step, _ in STEP_ACTIONS])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_signal_at_each_commit_step_leaves_no_output_or_a_counted_one(
    tmp_path: Path, source: Path, kind: str, step: str, action: str, overwrite: bool
) -> None:
    release(kind, source, tmp_path, overwrite, step, action)


@pytest.mark.parametrize("overwrite", [False, True], ids=["new", "overwrite"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_double_signal_when_the_journal_is_placed_leaves_no_journal(
    tmp_path: Path, source: Path, kind: str, overwrite: bool
) -> None:
    """SIGINT then SIGTERM at once (issue 36: the second one cut the rollback short, 11 of 26 runs)."""
    release(kind, source, tmp_path, overwrite, "journal", "double")


@pytest.mark.parametrize("step", ["reserved", "committed"])
def test_a_double_signal_before_or_at_the_commit_point(tmp_path: Path, source: Path, step: str) -> None:
    """A second signal while the first one unwinds the run (before) or while the commit completes (at)."""
    release("file", source, tmp_path, True, step, "double")


def test_a_kill_after_the_commit_point_keeps_the_release_and_its_entry(tmp_path: Path, source: Path) -> None:
    """Killed once the journal is gone: the release is complete and confirmed; the next run removes the backups."""
    out = tmp_path / "out.parquet"
    ledger = tmp_path / "owner" / "ledger.json"
    assert run("privatize", source, "--eps", "1", "-o", out, "--ledger", ledger, "-q").returncode == 0
    old = snapshot(out)
    killed = run("privatize", source, "--eps", "2", "-o", out, "--overwrite", "--ledger", ledger, "-q",
                 env={"LDP_FAULT": "committed:kill"})
    assert killed.returncode == -signal.SIGKILL
    assert state(out, old) == "new"
    assert spent(ledger) == (pytest.approx(3.0), ["confirmed", "confirmed"])
    assert run("privatize", source, "--eps", "1", "-o", tmp_path / "later.parquet", "--ledger", ledger,
               "-q").returncode == 0
    assert hidden(tmp_path) == []  # the later run in the directory removed the dead run's backup
