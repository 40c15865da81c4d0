"""The commit protocol with real processes: kills and failures at each step, concurrent runs on one
ledger and one output, cancellations, and the litter of dead runs (docs/commit-protocol.md).

Every test here runs the `ldp` console script as a subprocess; faults are armed through
``LDP_FAULT=STEP:ACTION`` (:mod:`ldpcli.io._faults`), so a "kill" is a real SIGKILL of the process at
that step and nothing of it runs afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import LDP, ldp_process, ledger_document, unit_rows, write_list

from ldpcli.io._faults import NAMED_TEMPORARIES_ENV, STEPS


def run(*args: object, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``ldp ARGS…`` as a process (the test's environment, plus ``env``)."""
    return ldp_process(*args, env=env, timeout=timeout)


def start(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([LDP, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ledger_entries(ledger: Path) -> list[dict[str, object]]:
    return ledger_document(ledger)["entries"] if ledger.exists() else []


def release_state(out: Path, old: tuple[str, str] | None) -> str:
    """'old' (the previous data and sidecar, both), 'new' (another data file and the sidecar that
    describes it), 'none' (neither file) or 'mixed' (anything else)."""
    side = out.with_name(out.name + ".ldp.json")
    if not out.exists() and not side.exists():
        return "none"
    if not (out.exists() and side.exists()):
        return "mixed"
    now = (sha(out), sha(side))
    if old is not None and now == old:
        return "old"
    described = json.loads(side.read_text())["data"]["sha256"]
    return "new" if described == now[0] and (old is None or now[0] != old[0]) else "mixed"


def hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


@pytest.fixture()
def small(tmp_path: Path) -> Path:
    src = tmp_path / "in.parquet"
    write_list(src, unit_rows(2000, 8, seed=3))
    return src


# --- kills and failures at each step of an overwrite (data loss, items 2 and 5) ----------------------


@pytest.mark.slow
@pytest.mark.parametrize("action", ["kill", "enospc"])
@pytest.mark.parametrize("step", STEPS)
def test_a_failed_overwrite_is_fully_old_or_fully_new_and_never_uncounted(
    tmp_path: Path, small: Path, step: str, action: str
) -> None:
    ledger = tmp_path / "owner" / "ledger.json"
    out = tmp_path / "out.parquet"
    first = run("privatize", small, "--eps", "1", "-o", out, "--ledger", ledger, "-q")
    assert first.returncode == 0, first.stderr
    old = (sha(out), sha(out.with_name("out.parquet.ldp.json")))
    before = sha(small)

    failed = run("privatize", small, "--eps", "2", "-o", out, "--overwrite", "--ledger", ledger, "-q",
                 env={"LDP_FAULT": f"{step}:{action}"})
    if action == "kill":
        assert failed.returncode == -signal.SIGKILL
    else:
        assert failed.returncode == 1, failed.stderr
        assert failed.stderr.count("\n") == 1 and "Traceback" not in failed.stderr, failed.stderr
        assert "nothing was published" in failed.stderr, failed.stderr
    # `ldp budget` (like any later run in the directory) finishes what the dead run left
    report = run("budget", "--ledger", ledger, "--json")
    assert report.returncode == 0, report.stderr
    state = release_state(out, old)
    assert state in ("old", "new"), (step, action, state)
    assert sha(small) == before
    entries = ledger_entries(ledger)
    spent = sum(float(e["epsilon_exact"]) for e in entries)  # type: ignore[arg-type]
    if state == "new":  # published: it must be counted
        assert spent >= 3 - 1e-9, entries
    if action == "enospc":  # a clean failure: the previous state exactly, the new release not counted
        assert state == "old" and spent == pytest.approx(1.0), entries
    # no temporaries, backups or journals are left once a later run has looked at the directory
    again = run("privatize", small, "--eps", "1", "-o", tmp_path / "later.parquet", "--ledger", ledger, "-q")
    assert again.returncode == 0, again.stderr
    assert hidden(tmp_path) == [], hidden(tmp_path)


@pytest.mark.slow
def test_a_kill_at_the_commit_leaves_a_reservation_that_budget_shows_and_the_owner_can_release(
    tmp_path: Path, small: Path
) -> None:
    ledger = tmp_path / "ledger.json"
    out = tmp_path / "out.parquet"
    killed = run("privatize", small, "--eps", "2", "-o", out, "--ledger", ledger, "-q",
                 env={"LDP_FAULT": "data-placed:kill"})
    assert killed.returncode == -signal.SIGKILL
    assert [e["state"] for e in ledger_entries(ledger)] == ["reserved"]  # counted although killed
    report = json.loads(run("budget", "--ledger", ledger, "--json").stdout)
    assert report["inputs"][0]["epsilon"] == pytest.approx(2.0) and report["inputs"][0]["pending"] == 1
    (pending,) = report["pending"]
    assert pending["status"].startswith("not published")
    assert not out.exists()  # the half-published data was rolled back
    capped = run("privatize", small, "--eps", "1", "-o", tmp_path / "b.parquet", "--ledger", ledger,
                 "--max-budget", "2.5", "-q")
    assert capped.returncode == 1 and "exceed" in capped.stderr  # the reservation counts
    released = run("budget", "--ledger", ledger, "--release", pending["id"][:6])
    assert released.returncode == 0, released.stderr
    assert ledger_entries(ledger) == []


@pytest.mark.slow
def test_a_published_but_unconfirmed_release_cannot_be_released(tmp_path: Path, small: Path) -> None:
    """Killed after the commit point of the files but before the ledger's confirmation is durable:
    the files are rolled back; killed after the confirmation: the release stays, confirmed."""
    ledger = tmp_path / "ledger.json"
    out = tmp_path / "out.parquet"
    killed = run("privatize", small, "--eps", "2", "-o", out, "--ledger", ledger, "-q",
                 env={"LDP_FAULT": "confirmed:kill"})
    assert killed.returncode == -signal.SIGKILL
    report = json.loads(run("budget", "--ledger", ledger, "--json").stdout)
    assert report["inputs"][0]["epsilon"] == pytest.approx(2.0)
    assert [e["state"] for e in ledger_entries(ledger)] == ["confirmed"]
    assert release_state(out, None) in ("none", "new")


# --- --overwrite replaces only ldp's own outputs (item 1) -------------------------------------------------


def test_overwrite_refuses_a_file_that_is_not_an_ldp_output(tmp_path: Path, small: Path) -> None:
    precious = tmp_path / "precious.parquet"
    write_list(precious, unit_rows(10, 8, seed=1))
    before = sha(precious)
    result = run("privatize", small, "--eps", "1", "-o", precious, "--overwrite", "-q")
    assert result.returncode == 2 and "not an ldp output" in result.stderr, result.stderr
    assert sha(precious) == before


@pytest.mark.slow
def test_overwrite_refuses_the_ledger(tmp_path: Path, small: Path) -> None:
    ledger = tmp_path / "ledger.parquet"
    assert run("privatize", small, "--eps", "1", "-o", tmp_path / "a.parquet", "--ledger", ledger, "-q").returncode == 0
    before = sha(ledger)
    (tmp_path / "ledger.parquet.ldp.json").write_text("{}")  # even beside a sidecar-looking file
    result = run("privatize", small, "--eps", "1", "-o", ledger, "--overwrite", "--ledger", ledger, "-q")
    assert result.returncode == 2 and "ledger" in result.stderr, result.stderr
    assert sha(ledger) == before


# --- concurrency on one ledger (items 4 and 6) -----------------------------------------------------------


@pytest.mark.slow
def test_concurrent_runs_never_spend_past_the_cap(tmp_path: Path, small: Path) -> None:
    ledger = tmp_path / "ledger.json"
    runs = [start("privatize", small, "--eps", "1", "--max-budget", "3", "-o", tmp_path / f"out{i}.parquet",
                  "--ledger", ledger, "-q") for i in range(8)]
    codes = [proc.wait(timeout=180) for proc in runs]
    assert sorted(codes) == [0, 0, 0, 1, 1, 1, 1, 1], codes
    entries = ledger_entries(ledger)
    assert len(entries) == 3 and sum(float(e["epsilon_exact"]) for e in entries) <= 3 + 1e-9  # type: ignore[arg-type]
    published = sorted(p.name for p in tmp_path.glob("out*.parquet"))
    assert len(published) == 3 and {Path(str(e["output"])).name for e in entries} == set(published)


@pytest.mark.slow
def test_concurrent_first_releases_of_one_input_get_one_tag(tmp_path: Path, small: Path) -> None:
    ledger = tmp_path / "new" / "ledger.json"
    runs = [start("privatize", small, "--eps", "1", "-o", tmp_path / f"out{i}.parquet", "--ledger", ledger, "-q")
            for i in range(6)]
    assert [proc.wait(timeout=180) for proc in runs] == [0] * 6
    tags = {json.loads((tmp_path / f"out{i}.parquet.ldp.json").read_text())["release"]["input_tag"] for i in range(6)}
    assert len(tags) == 1
    assert {e["tag"] for e in ledger_entries(ledger)} == tags
    merged = run("estimate-mean", *(tmp_path / f"out{i}.parquet" for i in range(2)), "--json")
    assert merged.returncode != 0 and "same" in merged.stderr.lower(), merged.stderr


@pytest.mark.slow
def test_two_runs_to_one_output_publish_one(tmp_path: Path, small: Path) -> None:
    ledger = tmp_path / "ledger.json"
    out = tmp_path / "out.parquet"
    runs = [start("privatize", small, "--eps", "1", "-o", out, "--ledger", ledger, "-q") for _ in range(4)]
    codes = [proc.wait(timeout=180) for proc in runs]
    assert codes.count(0) == 1, codes
    assert release_state(out, None) == "new"
    (entry,) = ledger_entries(ledger)
    assert json.loads(out.with_name("out.parquet.ldp.json").read_text())["release"]["input_tag"] == entry["tag"]


# --- cancellation (item 14) and the litter of killed runs (item 9) --------------------------------------


@pytest.fixture(scope="module")
def medium(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("medium") / "in.parquet"
    write_list(path, unit_rows(200_000, 32, seed=0).astype(np.float32))
    return path


def _wait_until_ldp_catches_signals(proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    """Wait until the process catches SIGTERM (its SigCgt mask in /proc; Python itself catches only SIGINT, and
    ldp's entry point installs its SIGINT and SIGTERM handlers first thing, SIGTERM last), or has exited. A signal
    before that meets the default action, which ends the process before it can say anything (CI saw exit -15 and
    no message when a loaded box started the interpreter late)."""
    status = Path(f"/proc/{proc.pid}/status")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            caught = next(line for line in status.read_text().splitlines() if line.startswith("SigCgt:"))
        except (OSError, StopIteration):
            return  # no /proc here: the delays count from the start, as before
        if int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1:
            return
        time.sleep(0.002)


@pytest.mark.slow
def test_a_signal_at_any_moment_either_cancels_everything_or_comes_after_a_complete_release(
    tmp_path: Path, medium: Path
) -> None:
    """pandas is installed here (the test extra), the case where pyarrow swallowed the interrupt."""
    pytest.importorskip("pandas")
    delays = np.linspace(0.3, 3.0, 10)
    outcomes = set()
    for index, delay in enumerate(delays):
        work = tmp_path / f"run{index}"
        work.mkdir()
        ledger = work / "ledger.json"
        out = work / "out.parquet"
        proc = start("privatize", medium, "--eps", "4", "-o", out, "--threads", str(1 + index % 2), "--memory", "8MB",
                     "--ledger", ledger, "-q")
        signum = signal.SIGINT if index % 2 else signal.SIGTERM
        _wait_until_ldp_catches_signals(proc)  # the delays count from ldp's handlers, not the interpreter's start
        time.sleep(float(delay))
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=120)
        assert "Traceback" not in stderr, stderr
        if proc.returncode == -signal.SIGSEGV:
            # Seen once in CI (a fresh virtual environment), never in 66 local tries: a crash in native
            # code while the signal unwound the run. Judged as a kill (the next run finishes what it
            # left); faulthandler's stacks (ldpcli.cli.entry) are printed for the diagnosis.
            outcomes.add("crashed")
            print(f"crash after a signal at {delay:.2f} s:\n{stderr}", file=sys.stderr)
            assert run("budget", "--ledger", ledger, "--json").returncode == 0
            state = release_state(out, None)
            assert state in ("none", "new") and (state == "none" or ledger_entries(ledger)), state
            continue
        entries = ledger_entries(ledger)
        if release_state(out, None) == "new":  # the signal came after the commit: complete, counted, and said
            outcomes.add("complete")
            assert [e["state"] for e in entries] == ["confirmed"]
            assert proc.returncode == 0 or "interrupted after publishing" in stderr, (proc.returncode, stderr)
        else:
            outcomes.add("cancelled")
            assert proc.returncode in (128 + signal.SIGINT, 128 + signal.SIGTERM), (proc.returncode, stderr)
            assert "interrupted" in stderr and stderr.count("\n") == 1, stderr
            assert sorted(p.name for p in work.iterdir()) in ([], ["ledger.json", "ledger.json.lock"]), \
                list(work.iterdir())
            assert entries == []
    assert "cancelled" in outcomes


@pytest.mark.slow
def test_the_next_run_removes_what_a_killed_run_left(tmp_path: Path, medium: Path) -> None:
    """Where temporaries have names while they are written (the fallback of systems without ``O_TMPFILE``;
    on Linux a killed run leaves none: tests/io/test_crash_safety.py), the next run removes them."""
    out = tmp_path / "out.parquet"
    proc = start("privatize", medium, "--eps", "4", "-o", out, "--threads", "1", "--memory", "8MB", "-q",
                 env={NAMED_TEMPORARIES_ENV: "1"})
    deadline = time.monotonic() + 60
    while not hidden(tmp_path):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    assert hidden(tmp_path), "the killed run left its temporary file"
    small = tmp_path / "small.parquet"
    write_list(small, unit_rows(10, 4, seed=1))
    assert run("privatize", small, "--eps", "1", "-q").returncode == 0
    assert hidden(tmp_path) == []
