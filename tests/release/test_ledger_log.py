"""The ledger's journal (issue 36): ``ledger.json`` is the compacted base, ``<ledger>.log`` the changes since.

A change is one fsynced JSON line appended to the log; the base is rewritten when the log outgrows it.
What a kill, a torn line, a damaged line, an older ldp's ledger or a compaction cut short leaves must
read, never under-count, and let the next run go on (``docs/commit-protocol.md``). The kills are real
SIGKILLs of ``ldp`` processes at the journal's fault points (``LDP_FAULT``, :mod:`ldpcli.io._faults`).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from helpers import LDP_MODULE, ROOT, ldp_process, unit_rows, write_list

from ldpcli.errors import DataError
from ldpcli.io._faults import LEDGER_STEPS
from ldpcli.release._ledger import Ledger, LedgerEntry
from ldpcli.release._ledger_log import log_path


def entry(fingerprint: str, epsilon: float = 1.0) -> LedgerEntry:
    return LedgerEntry(fingerprint=fingerprint, input=f"/in/{fingerprint[:4]}.csv", rows=40, d=3, columns=["x"],
                       output=f"/out/{fingerprint[:4]}.parquet", mechanism="privunit2", epsilon=epsilon,
                       epsilon_exact=epsilon, delta=None, created="2024-01-01T00:00:00+00:00", tag="",
                       reproducible=False)


def with_log(tmp_path: Path) -> tuple[Ledger, list[LedgerEntry]]:
    """A ledger whose file holds some entries and whose log one more (compaction: when the log outgrows the file)."""
    ledger = Ledger.open(tmp_path / "ledger.json")
    recorded: list[LedgerEntry] = []
    for c in "abc":
        recorded.append(entry(c * 64))
        ledger.record(recorded[-1])
        log = log_path(ledger.path)
        if log.exists() and log.read_bytes().count(b"\n") == 2:
            assert len(json.loads(ledger.path.read_text())["entries"]) == len(recorded) - 1
            return ledger, recorded
    raise AssertionError("the log was folded in at every record")


def test_a_change_is_one_private_line_of_the_log_and_the_log_is_folded_in_when_it_outgrows_the_file(
        tmp_path: Path) -> None:
    ledger, recorded = with_log(tmp_path)
    log = log_path(ledger.path)
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b"" and json.loads(lines[0]) == {"format": "ldp-ledger-log",
                                                         "generation": json.loads(ledger.path.read_text())["generation"]}
    assert len(lines) == 3 and json.loads(lines[1])["n"] == len(recorded) - 1  # the header, then one change
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(ledger.path.stat().st_mode) == 0o600
    assert Ledger.open(ledger.path).entries == tuple(recorded)
    generation = json.loads(ledger.path.read_text())["generation"]
    more = [entry(c * 64) for c in "def0"]
    for item in more:
        ledger.record(item)
        assert not log.exists() or log.stat().st_size <= ledger.path.stat().st_size  # folded in once it outgrew it
    document = json.loads(ledger.path.read_text())
    assert document["version"] == 2 and document["generation"] > generation
    assert Ledger.open(ledger.path).entries == (*recorded, *more)


def test_a_torn_last_line_is_ignored_and_cut_off_by_the_next_write(tmp_path: Path) -> None:
    ledger, recorded = with_log(tmp_path)
    log = log_path(ledger.path)
    whole = log.read_bytes()
    torn = json.dumps({"n": len(recorded), "add": [entry("f" * 64).to_dict()]}).encode()
    log.write_bytes(whole + torn[:len(torn) // 2])  # a kill mid-append: no newline, never acknowledged
    assert Ledger.open(ledger.path).entries == tuple(recorded)
    log.write_bytes(whole + torn)  # complete JSON, still no newline: still not acknowledged
    assert Ledger.open(ledger.path).entries == tuple(recorded)
    again = Ledger.open(ledger.path)
    again.record(entry("d" * 64))
    assert Ledger.open(ledger.path).entries == (*recorded, entry("d" * 64))
    left = log.read_bytes() if log.exists() else b""  # cut off before the append (or the log folded in since)
    assert b'"ffff' not in left and left.endswith(b"\n") or not left
    assert all(json.loads(line) for line in left.splitlines())


@pytest.mark.parametrize("damage", ["garbage", "wrong-count", "bad-entry"])
def test_a_damaged_line_is_a_one_line_error_naming_the_ledger_and_the_line(tmp_path: Path, damage: str) -> None:
    ledger, _ = with_log(tmp_path)
    log = log_path(ledger.path)
    header, change, _ = log.read_bytes().split(b"\n")
    count = json.loads(change)["n"] + 1
    bad = {"garbage": b"{not json",
           "wrong-count": json.dumps({"n": 7, "add": []}).encode(),
           "bad-entry": json.dumps({"n": count, "add": [{**entry("f" * 64).to_dict(), "epsilon": "one"}]}).encode()}[damage]
    later = json.dumps({"n": count, "add": [entry("e" * 64).to_dict()]}).encode()
    log.write_bytes(b"\n".join([header, change, bad, later, b""]))  # a damaged line in the middle
    before = (ledger.path.read_bytes(), log.read_bytes())
    for attempt in (lambda: Ledger.open(ledger.path), lambda: ledger.record(entry("d" * 64))):
        with pytest.raises(DataError) as refused:
            attempt()
        message = str(refused.value)
        assert message.startswith(f"{ledger.path}: cannot read the privacy-budget ledger") and "\n" not in message
        assert "line 3 of its log" in message and "never resets" in message
    assert (ledger.path.read_bytes(), log.read_bytes()) == before  # left as it is


def test_a_version_1_ledger_is_read_and_converted_by_the_first_write(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    old = entry("a" * 64)
    path.write_text(json.dumps({"format": "ldp-ledger", "version": 1, "key": "ab" * 32, "entries": [old.to_dict()]}))
    ledger = Ledger.open(path)
    assert ledger.entries == (old,) and not log_path(path).exists()
    ledger.record(entry("b" * 64))
    document = json.loads(path.read_text())
    assert (document["version"], document["generation"], document["key"]) == (2, 1, "ab" * 32)
    assert Ledger.open(path).entries == (old, entry("b" * 64)) and not log_path(path).exists()


def test_a_log_of_an_older_generation_is_ignored_and_replaced_and_a_newer_one_refused(tmp_path: Path) -> None:
    ledger, recorded = with_log(tmp_path)
    log = log_path(ledger.path)
    header, change, _ = log.read_bytes().split(b"\n")
    document = json.loads(ledger.path.read_text())
    document["entries"].append(recorded[-1].to_dict())  # a compaction that was cut short: the base folded it in ...
    ledger.path.write_text(json.dumps({**document, "generation": document["generation"] + 1}))
    assert Ledger.open(ledger.path).entries == tuple(recorded)  # ... and its old log, still there, is ignored
    Ledger.open(ledger.path).record(entry("d" * 64))
    assert Ledger.open(ledger.path).entries == (*recorded, entry("d" * 64))
    if log.exists():  # replaced by a log of the file's generation (unless folded in at once)
        assert json.loads(log.read_bytes().split(b"\n")[0])["generation"] == json.loads(ledger.path.read_text())["generation"]
    log.write_bytes(json.dumps({"format": "ldp-ledger-log", "generation": 99}).encode() + b"\n")
    with pytest.raises(DataError, match="newer than the ledger file"):
        Ledger.open(ledger.path)


def test_one_ledger_reads_only_the_new_bytes_of_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ldpcli.release import _ledger_log as journal

    ledger = Ledger.open(tmp_path / "ledger.json")
    for c in "abcde":
        ledger.record(entry(c * 64))
    journal.compact_ledger(ledger.path)  # a file of five entries, no log
    ledger.ensure_key()  # this ledger reads the new file once
    other = Ledger.open(ledger.path)
    bases: list[int] = []
    parse = journal.parse_base
    monkeypatch.setattr(journal, "parse_base", lambda raw, label: bases.append(len(raw)) or parse(raw, label))
    other.record(entry("f" * 64))  # another writer appends a line ...
    assert log_path(ledger.path).exists()
    ledger.ensure_key()  # ... and this one reads that line, not the file again
    assert bases == [] and ledger.entries[-1] == entry("f" * 64) and len(ledger.entries) == 6


# --- kills at the journal's steps (real processes) ------------------------------------------------------


def ldp(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return ldp_process(*args, env=env, timeout=180)


def published(out: Path) -> bool:
    return out.exists() and Path(f"{out}.ldp.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("step", LEDGER_STEPS)
def test_a_kill_at_any_step_of_the_journal_leaves_a_ledger_that_reads_counts_every_release_and_goes_on(
        tmp_path: Path, step: str) -> None:
    ledger = tmp_path / "owner" / "ledger.json"
    inputs = [write_list(tmp_path / f"in{i}.parquet", unit_rows(5, 4, seed=i)) for i in range(6)]
    outs = [tmp_path / f"out{i}.parquet" for i in range(6)]
    assert ldp("privatize", inputs[0], "--eps", "1", "-o", outs[0], "--ledger", ledger, "-q").returncode == 0
    killed = None
    for i in range(1, 5):  # each run passes several journal writes: the first at ``step`` is killed there
        run = ldp("privatize", inputs[i], "--eps", "1", "-o", outs[i], "--ledger", ledger, "-q",
                  env={"LDP_FAULT": f"{step}:kill"})
        if run.returncode == -9:
            killed = i
            break
        assert run.returncode == 0, run.stderr
    assert killed is not None, f"no run passed {step}"
    budget = ldp("budget", "--ledger", ledger, "--json")
    assert budget.returncode == 0, budget.stderr  # the ledger reads
    counted = {entry.output: entry.state for entry in Ledger.open(ledger).entries}
    for out in outs[:killed + 1]:
        if published(out):  # never under-counts: every published release is counted, reserved or confirmed
            assert str(out.resolve()) in counted, (step, out, counted)
    assert all(state == "confirmed" for out, state in counted.items() if out != str(outs[killed].resolve()))
    after = ldp("privatize", inputs[5], "--eps", "1", "-o", outs[5], "--ledger", ledger, "-q")
    assert after.returncode == 0, after.stderr  # the next run goes on
    final = {entry.output: entry.state for entry in Ledger.open(ledger).entries}
    assert final[str(outs[5].resolve())] == "confirmed" and set(counted) <= set(final)


@pytest.mark.slow
def test_two_runs_into_a_ledger_with_a_log_and_room_for_one_release_exactly_one_succeeds(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.json"
    shared = write_list(tmp_path / "shared.parquet", unit_rows(20, 4, seed=7))
    for i in range(3):  # other inputs first: the ledger has a file and a log when the two runs start
        other = write_list(tmp_path / f"other{i}.parquet", unit_rows(5, 4, seed=30 + i))
        assert ldp("privatize", other, "--eps", "1", "-o", tmp_path / f"o{i}.parquet", "--ledger", ledger,
                   "-q").returncode == 0
    assert log_path(ledger).exists() or ledger.exists()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    runs = [subprocess.Popen([*LDP_MODULE, "privatize", str(shared), "--eps", "1", "-o",
                              str(tmp_path / f"s{i}.parquet"), "--ledger", str(ledger), "--max-budget", "1.5", "-q"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    codes = sorted(run.wait(timeout=180) for run in runs)
    assert codes == [0, 1]
    own = [e for e in Ledger.open(ledger).entries if e.input == str(shared.resolve())]
    assert [e.state for e in own] == ["confirmed"]
