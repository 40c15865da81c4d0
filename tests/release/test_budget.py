"""The privacy-budget ledger, input fingerprints and input tags (ldpcli.release._ledger).

Every test works under tmp_path: the autouse fixture points LDP_LEDGER, XDG_DATA_HOME, HOME and
APPDATA there, so no test can reach the real ledger in the user's home directory.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import ledger_document

from ldpcli.errors import DataError, UsageError
from ldpcli.release._ledger import BudgetError, InputFingerprint, Ledger
from ldpcli.release._ledger_file import LEDGER_ENV, LEDGER_VERSION, LedgerEntry, default_ledger_path

POSIX = os.name == "posix"


@pytest.fixture(autouse=True)
def _private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test away from the real home directory and ledger."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "env-ledger" / "ledger.json"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg"))
    monkeypatch.setenv("APPDATA", str(home / "appdata"))


def fingerprint_of(values: np.ndarray, *splits: int, threaded: bool = False) -> str:
    """The fingerprint of ``values`` fed in batches cut at ``splits``."""
    fingerprint = InputFingerprint(values.shape[1], threaded=threaded)
    for batch in np.split(values, list(splits)):
        fingerprint.update(batch)
    assert fingerprint.rows == values.shape[0]
    return fingerprint.hexdigest()


def make_entry(ledger: Ledger, fingerprint: str = "a" * 64, **changes: object) -> LedgerEntry:
    """A plausible entry for ``fingerprint`` tagged by ``ledger``."""
    entry = LedgerEntry(
        fingerprint=fingerprint,
        input="/data/people.parquet",
        rows=100,
        d=3,
        columns=["x"],
        output="/releases/out.parquet",
        mechanism="privunit",
        epsilon=1.0,
        epsilon_exact=0.999,
        delta=None,
        created="2024-05-01T12:00:00+00:00",
        tag=ledger.tag(fingerprint),
        reproducible=False,
    )
    return replace(entry, **changes)  # type: ignore[arg-type]


# --- fingerprints ------------------------------------------------------------------------------------


def test_fingerprint_does_not_depend_on_batches() -> None:
    values = np.random.default_rng(1).normal(size=(50, 4))
    whole = fingerprint_of(values)
    assert fingerprint_of(values, 1, 2, 30) == whole
    assert fingerprint_of(values, 0, 0, 25, 50) == whole  # empty batches too
    assert fingerprint_of(values, 7, 8, 9, threaded=True) == whole
    assert len(whole) == 64 and int(whole, 16) >= 0


def test_fingerprint_threaded_with_many_batches_matches_plain() -> None:
    values = np.random.default_rng(2).normal(size=(1000, 3))
    cuts = list(range(10, 1000, 10))
    fingerprint = InputFingerprint(3, threaded=True, max_pending=2)
    for batch in np.split(values, cuts):
        fingerprint.update(batch)
    first = fingerprint.hexdigest()
    fingerprint.close()
    assert first == fingerprint.hexdigest() == fingerprint_of(values)


def test_fingerprint_binds_d_and_values() -> None:
    flat = np.arange(6, dtype=float)
    assert fingerprint_of(flat.reshape(3, 2)) != fingerprint_of(flat.reshape(2, 3))
    changed = flat.copy()
    changed[4] = np.nextafter(changed[4], np.inf)
    assert fingerprint_of(changed.reshape(3, 2)) != fingerprint_of(flat.reshape(3, 2))
    assert fingerprint_of(flat.reshape(3, 2)) != fingerprint_of(flat[:4].reshape(2, 2))


def test_fingerprint_of_equal_values_ignores_dtype_and_layout() -> None:
    single = np.random.default_rng(3).normal(size=(20, 5)).astype(np.float32)
    double = single.astype(np.float64)
    assert fingerprint_of(single) == fingerprint_of(double)
    big_endian = double.astype(">f8")
    fortran = np.asfortranarray(double)
    assert fingerprint_of(big_endian) == fingerprint_of(fortran) == fingerprint_of(double)


def test_fingerprint_refuses_wrong_shapes() -> None:
    fingerprint = InputFingerprint(3)
    with pytest.raises(ValueError):
        fingerprint.update(np.zeros((2, 4)))
    with pytest.raises(ValueError):
        fingerprint.update(np.zeros(3))
    with pytest.raises(ValueError):
        InputFingerprint(0)


# --- where the ledger lives --------------------------------------------------------------------------


def test_default_path_honours_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(os.environ["HOME"])
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "mine.json"))
    assert default_ledger_path() == tmp_path / "mine.json"
    monkeypatch.setenv(LEDGER_ENV, "")
    monkeypatch.setattr(sys, "platform", "linux")
    assert default_ledger_path() == home / "xdg" / "ldp" / "ledger.json"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_ledger_path() == home / ".local" / "share" / "ldp" / "ledger.json"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")  # the XDG specification says: ignore it
    assert default_ledger_path() == home / ".local" / "share" / "ldp" / "ledger.json"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert default_ledger_path() == home / "Library" / "Application Support" / "ldp" / "ledger.json"
    monkeypatch.setattr(sys, "platform", "win32")
    assert default_ledger_path() == Path(os.environ["APPDATA"]) / "ldp" / "ledger.json"


def test_open_without_a_path_uses_ldp_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "a" / "b" / "ledger.json"))
    ledger = Ledger.open()
    assert ledger.path == tmp_path / "a" / "b" / "ledger.json"
    ledger.record(make_entry(ledger))
    assert (tmp_path / "a" / "b" / "ledger.json").is_file()
    assert not (Path(os.environ["HOME"]) / "xdg").exists()


# --- recording, spending, checking ---------------------------------------------------------------------


def test_open_check_and_tag_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ledger.json"
    ledger = Ledger.open(path)
    assert ledger.entries == () and ledger.summary() == []
    assert ledger.check("a" * 64, 1.0, max_budget=5.0, input_label="in.csv") is None
    ledger.tag("a" * 64)
    assert ledger.spent("a" * 64) is None
    assert not (tmp_path / "sub").exists()


def test_record_and_reopen_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    ledger = Ledger.open(path)
    tag_before = ledger.tag("a" * 64)
    first = make_entry(ledger)
    second = make_entry(ledger, "b" * 64, delta=1e-6, mechanism="gaussian", columns=["x0", "x1"], reproducible=True)
    ledger.record(first)
    ledger.record(second)
    assert ledger.entries == (first, second)
    reopened = Ledger.open(path)
    assert reopened.entries == (first, second)
    assert reopened.tag("a" * 64) == tag_before == first.tag  # the key made before the first record was kept
    document = ledger_document(path)
    assert document["format"] == "ldp-ledger" and document["version"] == LEDGER_VERSION == 2
    assert len(bytes.fromhex(document["key"])) == 32
    assert [LedgerEntry.from_dict(item, path) for item in document["entries"]] == [first, second]


def test_a_shuffled_release_keeps_its_central_guarantee_through_the_ledger(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    ledger = Ledger.open(path)
    central = {"n": 1000, "delta": 1e-6, "epsilon_central_upper": 0.7, "epsilon_central_lower": 0.6}
    shuffled = make_entry(ledger, shuffled=central)
    plain = make_entry(ledger, "b" * 64)
    ledger.record(shuffled)
    ledger.record(plain)
    assert Ledger.open(path).entries == (shuffled, plain)
    stored = ledger_document(path)["entries"]
    assert stored[0]["shuffled"] == central and "shuffled" not in stored[1]


def test_spent_sums_by_basic_composition(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    fp = "c" * 64
    ledger.record(make_entry(ledger, fp, epsilon=1.0, epsilon_exact=0.9, created="2024-01-01T00:00:00+00:00"))
    ledger.record(make_entry(ledger, "d" * 64))
    ledger.record(make_entry(ledger, fp, epsilon=2.0, epsilon_exact=2.0, input="/copy.csv", output="/o2.csv",
                             created="2024-02-01T00:00:00+00:00"))
    spend = ledger.spent(fp)
    assert spend is not None
    assert spend.releases == 2
    assert spend.epsilon == pytest.approx(2.9) and spend.epsilon_asked == pytest.approx(3.0)
    assert spend.delta is None
    assert spend.inputs == ["/data/people.parquet", "/copy.csv"]
    assert spend.outputs == ["/releases/out.parquet", "/o2.csv"]
    assert (spend.first, spend.last) == ("2024-01-01T00:00:00+00:00", "2024-02-01T00:00:00+00:00")
    ledger.record(make_entry(ledger, fp, delta=1e-6))
    ledger.record(make_entry(ledger, fp, delta=2e-6))
    with_delta = ledger.spent(fp)
    assert with_delta is not None and with_delta.delta == pytest.approx(3e-6) and with_delta.releases == 4
    assert [spend.fingerprint for spend in ledger.summary()] == ["d" * 64, fp]  # most recent last
    ledger.record(make_entry(ledger, "d" * 64))
    assert [spend.fingerprint for spend in Ledger.open(ledger.path).summary()] == [fp, "d" * 64]


def test_the_already_released_message_says_1_time_and_2_times(tmp_path: Path) -> None:
    """The count takes its noun's number: "1 time", "over 1 release", never "time(s)"."""
    ledger = Ledger.open(tmp_path / "ledger.json")
    fp = "f" * 64
    for count, times, releases in [(1, "1 time", "1 release"), (2, "2 times", "2 releases")]:
        ledger.record(make_entry(ledger, fp, epsilon_exact=1.0))
        warning = ledger.check(fp, 0.5, max_budget=None, input_label="people.csv")
        assert warning is not None
        assert warning.startswith(f"people.csv was already released {times} (ε spent so far: {count};"), warning
        with pytest.raises(BudgetError) as refused:
            ledger.check(fp, 1.5, max_budget=count + 1.0, input_label="people.csv")
        assert f"(ε spent so far: {count} over {releases}, with it: {count + 1.5};" in str(refused.value)
        assert "(s)" not in warning + str(refused.value)


def test_check_warns_on_a_second_release_and_refuses_past_the_cap(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    fp = "e" * 64
    assert ledger.check(fp, 1.0, max_budget=2.0, input_label="people.csv") is None
    ledger.record(make_entry(ledger, fp, epsilon_exact=1.0))
    warning = ledger.check(fp, 0.5, max_budget=None, input_label="people.csv")
    assert warning is not None
    assert warning.startswith("people.csv was already released 1 time (ε spent so far: 1; with this release: 1.5)")
    assert "`ldp budget`" in warning and "\n" not in warning
    assert ledger.check(fp, 1.0, max_budget=2.0, input_label="people.csv") is not None  # exactly at the cap
    with pytest.raises(BudgetError) as refused:
        ledger.check(fp, 1.5, max_budget=2.0, input_label="people.csv")
    message = str(refused.value)
    assert isinstance(refused.value, DataError) and refused.value.exit_code == 1
    assert "people.csv" in message and "1.5" in message and "max_budget 2" in message
    assert "spent so far: 1" in message and "nothing was written" in message and "\n" not in message
    assert str(ledger.path) in message
    with pytest.raises(BudgetError, match="never released before"):
        ledger.check("f" * 64, 3.0, max_budget=2.0, input_label="new.csv")


def test_check_allows_decimal_sums_that_meet_the_cap(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    fp = "1" * 64
    for _ in range(2):
        ledger.record(make_entry(ledger, fp, epsilon=0.1, epsilon_exact=0.1))
    assert ledger.check(fp, 0.1, max_budget=0.3, input_label="in.csv") is not None
    with pytest.raises(BudgetError):
        ledger.check(fp, 0.1000001, max_budget=0.3, input_label="in.csv")


@pytest.mark.parametrize("cap", [0.0, -1.0, float("nan")])
def test_check_refuses_a_cap_that_is_not_positive(tmp_path: Path, cap: float) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    with pytest.raises(UsageError, match="max_budget"):
        ledger.check("a" * 64, 1.0, max_budget=cap, input_label="in.csv")


def test_tags(tmp_path: Path) -> None:
    one = Ledger.open(tmp_path / "one.json")
    other = Ledger.open(tmp_path / "other.json")
    fp = "2" * 64
    tag = one.tag(fp)
    assert tag.startswith("ldptag1-") and len(tag) == len("ldptag1-") + 64
    assert one.tag(fp) == tag != one.tag("3" * 64)
    assert other.tag(fp) != tag  # another key
    one.record(make_entry(one, fp))
    other.record(make_entry(other, fp))
    assert Ledger.open(one.path).tag(fp) == tag
    assert Ledger.open(other.path).tag(fp) != tag
    assert fp not in tag


def test_by_tag(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    fp = "4" * 64
    ledger.record(make_entry(ledger, fp, epsilon_exact=1.0))
    ledger.record(make_entry(ledger, fp, epsilon_exact=2.0))
    spend = Ledger.open(ledger.path).by_tag(ledger.tag(fp))
    assert spend is not None and spend.releases == 2 and spend.epsilon == 3.0
    other = Ledger.open(tmp_path / "other.json")
    assert other.by_tag(ledger.tag(fp)) is None
    assert ledger.by_tag(other.tag(fp)) is None
    assert ledger.by_tag("ldptag1-é") is None


@pytest.mark.skipif(not POSIX, reason="file modes are POSIX")
def test_ledger_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "new-dir" / "ledger.json"
    ledger = Ledger.open(path)
    previous = os.umask(0o022)
    try:
        ledger.record(make_entry(ledger))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "new-dir" / "ledger.json.lock").stat().st_mode) == 0o600
        ledger.record(make_entry(ledger))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert os.umask(0o022) == 0o022  # record put the umask back
    finally:
        os.umask(previous)
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


# --- ledgers ldp cannot read -------------------------------------------------------------------------


def _valid_document(ledger: Ledger) -> dict[str, object]:
    return {"format": "ldp-ledger", "version": 1, "key": "ab" * 32, "entries": [make_entry(ledger).to_dict()]}


def _unreadable_contents(case: str, scratch_dir: Path) -> bytes:
    scratch = Ledger.open(scratch_dir / "scratch.json")
    document = _valid_document(scratch)
    if case == "garbage":
        return b"\x00\xff\xfe not json at all \x80"
    if case == "truncated":
        return json.dumps(document).encode()[:-20]
    if case == "list":
        return b"[1, 2, 3]"
    if case == "version":
        return json.dumps({**document, "version": 3}).encode()
    if case == "format":
        return json.dumps({**document, "format": "something-else"}).encode()
    if case == "no-key":
        return json.dumps({key: value for key, value in document.items() if key != "key"}).encode()
    if case == "bad-entry":
        entry = make_entry(scratch).to_dict()
        entry["epsilon"] = "one"
        return json.dumps({**document, "entries": [entry]}).encode()
    if case == "entry-missing-field":
        entry = make_entry(scratch).to_dict()
        del entry["tag"]
        return json.dumps({**document, "entries": [entry]}).encode()
    raise AssertionError(case)


UNREADABLE = ["garbage", "truncated", "list", "version", "format", "no-key", "bad-entry", "entry-missing-field"]


@pytest.mark.parametrize("case", UNREADABLE)
def test_unreadable_ledger_is_refused_and_left_alone(tmp_path: Path, case: str) -> None:
    path = tmp_path / "ledger.json"
    contents = _unreadable_contents(case, tmp_path)
    path.write_bytes(contents)
    with pytest.raises(DataError) as refused:
        Ledger.open(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert "ledger PATH" in message
    if case == "version":
        assert "version 3" in message and "reads version 2" in message
    else:
        assert "cannot read the privacy-budget ledger" in message and "never resets" in message
    assert path.read_bytes() == contents


@pytest.mark.parametrize("case", UNREADABLE)
def test_record_never_overwrites_a_ledger_that_became_unreadable(tmp_path: Path, case: str) -> None:
    path = tmp_path / "ledger.json"
    ledger = Ledger.open(path)
    ledger.record(make_entry(ledger))
    contents = _unreadable_contents(case, tmp_path)
    path.write_bytes(contents)
    with pytest.raises(DataError, match="ledger"):
        ledger.record(make_entry(ledger, "5" * 64))
    assert path.read_bytes() == contents
    assert len(ledger.entries) == 1


def test_a_directory_is_not_a_ledger(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read the privacy-budget ledger"):
        Ledger.open(tmp_path)


def test_from_dict_names_the_ledger(tmp_path: Path) -> None:
    stored = {**make_entry(Ledger.open(tmp_path / "ledger.json")).to_dict(), "rows": -1}
    with pytest.raises(DataError, match=r"^/some/ledger\.json: .*entry 3 \(counting from 1\): 'rows'"):
        LedgerEntry.from_dict(stored, "/some/ledger.json", index=2)


def test_record_refuses_an_invalid_entry(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    with pytest.raises(ValueError):
        ledger.record(make_entry(ledger, epsilon_exact=float("nan")))
    assert not ledger.path.exists()


def test_record_after_others_recorded_keeps_their_entries(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    early = Ledger.open(path)  # opened before the file exists: its in-memory key is never persisted
    early_tag = early.tag("6" * 64)
    late = Ledger.open(path)
    late.record(make_entry(late, "7" * 64))
    early.record(make_entry(early, "6" * 64))
    reopened = Ledger.open(path)
    assert [entry.fingerprint for entry in reopened.entries] == ["7" * 64, "6" * 64]
    assert reopened.tag("7" * 64) == late.tag("7" * 64) == early.tag("7" * 64)
    spend = reopened.by_tag(early_tag)  # found through the tag stored in the entry
    assert spend is not None and spend.fingerprint == "6" * 64


# --- concurrency -------------------------------------------------------------------------------------


def _record_many(path: str, worker: int, count: int) -> None:
    """Open the ledger once, then record ``count`` releases (run in a separate process)."""
    ledger = Ledger.open(path)
    for i in range(count):
        fingerprint = f"{worker:032x}{i:032x}"
        ledger.record(make_entry(ledger, fingerprint, output=f"/out/{worker}-{i}.parquet"))


def test_concurrent_records_from_several_processes_are_all_kept(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "ledger.json"
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_record_many, args=(str(path), worker, 5)) for worker in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    ledger = Ledger.open(path)
    assert len(ledger.entries) == 20
    assert {entry.output for entry in ledger.entries} == {f"/out/{w}-{i}.parquet" for w in range(4) for i in range(5)}
    assert len(ledger.summary()) == 20
