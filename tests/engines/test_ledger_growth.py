"""A release of many inputs costs the ledger linear work (issue 36).

A dataset of 10,000 tiny files was quadratic: every input's reservation and confirmation rewrote
the whole ledger file, and every input's row check read every earlier release's row file. The
tests count the work, never a wall-clock time: the ledger writes (``_ledger_log.write``) of one run do
not grow with its inputs, and a run reads each earlier release's row file once
(``Ledger._load_rows``), whatever the number of its inputs. The batch reservation must charge each
row exactly what reserving the inputs one by one charged, to the last bit of its ε.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import unit_rows, write_list

from ldpcli.release import _ledger as ledger_module
from ldpcli.release import _rowindex as rowindex
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._ledger import Ledger, LedgerEntry
from ldpcli.release._options import Budget, ReleaseOptions
from ldpcli.release._rowhash import ReleaseRows
from ldpcli.release._rowindex import Charge


class Calls:
    """Counts the ledger's writes (each a log line or a rewrite of the file, ``_ledger_log.write``) and
    row-file reads, passing each through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.dumps = 0
        self.loads = 0
        dump, load = ledger_module.write, Ledger._load_rows

        def counted_dump(*args: object) -> None:
            self.dumps += 1
            dump(*args)  # type: ignore[arg-type]

        def counted_load(ledger: Ledger, entry: LedgerEntry) -> np.ndarray:
            self.loads += 1
            return load(ledger, entry)

        monkeypatch.setattr(ledger_module, "write", counted_dump)
        monkeypatch.setattr(Ledger, "_load_rows", counted_load)

    def reset(self) -> None:
        self.dumps = self.loads = 0


def tiny_inputs(folder: Path, count: int) -> list[Path]:
    folder.mkdir()
    return [write_list(folder / f"f{i:03d}.parquet", unit_rows(3, 4, seed=100 + i)) for i in range(count)]


def two_runs(tmp_path: Path, count: int, calls: Calls) -> tuple[int, int, int, int]:
    """(rewrites, row files read) of a first dataset of ``count`` tiny inputs, then of a second of the same."""
    inputs = tiny_inputs(tmp_path / f"in{count}", count)
    options = ReleaseOptions(budget=Budget(ledger=Ledger.open(tmp_path / f"ledger{count}.json")), seed=1)
    calls.reset()
    write_dataset_release(inputs, tmp_path / f"first{count}", engine=None, epsilon=1.0, options=options)
    first = (calls.dumps, calls.loads)
    calls.reset()
    again = write_dataset_release(inputs, tmp_path / f"again{count}", engine=None, epsilon=1.0, options=options)
    assert sum("was already released 1 time" in text for text in again.warnings) == count  # each charged once
    return (*first, calls.dumps, calls.loads)


def test_a_dataset_of_many_inputs_rewrites_the_ledger_a_fixed_number_of_times_and_reads_each_row_file_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch)
    small = two_runs(tmp_path, 6, calls)
    large = two_runs(tmp_path, 12, calls)
    # the key, the reservations, the confirmations: the same few rewrites for 6 inputs and for 12
    assert small[0] == large[0] <= 3 and small[2] == large[2] <= 2
    assert small[1] == large[1] == 0  # a new ledger has no row file to read
    assert (small[3], large[3]) == (6, 12)  # the second run reads each earlier row file once


def entry(fingerprint: str, epsilon: float) -> LedgerEntry:
    return LedgerEntry(fingerprint=fingerprint, input=f"/in/{fingerprint[:4]}.csv", rows=40, d=3, columns=["x"],
                       output=f"/out/{fingerprint[:4]}.parquet", mechanism="privunit2", epsilon=epsilon,
                       epsilon_exact=epsilon, delta=None, created="2024-01-01T00:00:00+00:00", tag="",
                       reproducible=False)


@pytest.mark.parametrize("merged", [1 << 24, 45])  # every row file merged; or some searched apart
def test_reserving_inputs_together_charges_each_row_to_the_bit_what_one_by_one_did(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merged: int) -> None:
    """Overlapping inputs at ε whose sums depend on their order, an old entry without row file among
    them: the batch's notices (ε to 6 digits, the counts) and its row spends (exact) are those of
    reserving the inputs one after the other."""
    monkeypatch.setattr(rowindex, "_MERGED_ROWS", merged)
    pool = unit_rows(60, 3, seed=21)
    picks = [np.random.default_rng(seed).choice(60, size=40, replace=False) for seed in range(6)]
    epsilons = [0.1, 0.7, 0.3, 0.2, 0.9, 0.6]
    ledgers = {name: Ledger.open(tmp_path / name / "ledger.json") for name in ("together", "apart")}
    for ledger in ledgers.values():
        ledger.record(entry("0" * 64, 0.4))  # an older entry: no row file, holds every row of its input
        ledger.reserve(entry("f" * 64, 0.3), max_budget=None, input_label="first.csv",
                       rows=digest(ledger, pool[picks[0]])).confirm()
    charges = {name: [Charge(entry(("0" if i == 2 else str(i)) * 64, eps), f"in{i}.csv", digest(ledger, pool[pick]))
                      for i, (pick, eps) in enumerate(zip(picks[1:], epsilons[1:]), start=1)]
               for name, ledger in ledgers.items()}
    together = ledgers["together"].reserve_all(charges["together"], max_budget=None)
    apart = [ledgers["apart"].reserve(c.entry, max_budget=None, input_label=c.label, rows=c.rows)
             for c in charges["apart"]]
    assert [r.notice for r in together] == [r.notice for r in apart]
    assert all(r.notice is not None for r in together)
    final = {name: Ledger.open(ledger.path) for name, ledger in ledgers.items()}
    probes = {name: digest(ledger, pool) for name, ledger in final.items()}  # each ledger keys its own hashes
    spends = {name: (ledger.rowspend_of("9" * 64, probes[name]), ledger.rowspend_of("0" * 64, probes[name]))
              for name, ledger in final.items()}
    assert spends["together"] == spends["apart"]
    for name, ledger in final.items():  # what adding each holder in ledger order gives, bit for bit
        assert spends[name][1] is not None
        assert spends[name][1].epsilon == one_by_one(ledger, "0" * 64, probes[name].hashes)


def digest(ledger: Ledger, rows: np.ndarray) -> ReleaseRows:
    row_digest = ledger.row_digest(rows.shape[1])
    row_digest.update(rows)
    return row_digest.finish()


def one_by_one(ledger: Ledger, fingerprint: str, hashes: np.ndarray) -> float:
    """The most spent row's ε, each earlier release added in ledger order (as issue 36's base did)."""
    spent = np.zeros(hashes.shape[0])
    for held in ledger.entries:
        if held.rows_file:
            spent[np.isin(hashes, np.load(ledger.path.parent / held.rows_file))] += held.epsilon_exact
        elif held.fingerprint == fingerprint:
            spent += held.epsilon_exact
    return float(spent.max())


# --- per-file releases (ldp privatize DIR/, --layout files, write_file_releases) -------------------------


def process_io() -> tuple[int, int]:
    """(bytes read, bytes written) by this process's read and write calls so far (Linux's /proc/self/io)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"]), int(fields["wchar"])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts bytes through Linux's /proc/self/io")
def test_per_file_releases_into_one_ledger_cost_linear_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """N tiny inputs released one by one (``write_file_releases``, one release each) into one ledger: the row
    files read and the bytes read and written grow about 2× from N to 2N inputs, not 4× (each release re-read
    and rewrote the whole ledger, and re-read every earlier release's row file: issue 36). Each run's ledger
    starts empty; the inputs' and outputs' own bytes grow linearly and are in the counts too."""
    from ldpcli.release._file import write_file_releases

    loads = []
    load = Ledger._load_rows

    def counted_load(ledger: Ledger, entry: LedgerEntry) -> np.ndarray:
        loads.append(entry.release)
        return load(ledger, entry)

    monkeypatch.setattr(Ledger, "_load_rows", counted_load)
    work = {}
    for count in (4, 40, 80):  # the first: a warm-up (what the first release imports is read once)
        inputs = tiny_inputs(tmp_path / f"in{count}", count)
        options = ReleaseOptions(budget=Budget(ledger=Ledger.open(tmp_path / f"owner{count}" / "ledger.json")), seed=1)
        loads.clear()
        before = process_io()
        results = write_file_releases(inputs, None, epsilon=1.0, options=options)  # each beside its input
        after = process_io()
        assert len(results) == count and len(Ledger.open(tmp_path / f"owner{count}" / "ledger.json").entries) == count
        work[count] = (len(loads), after[0] - before[0], after[1] - before[1])
    (loaded, read, written), (loaded2, read2, written2) = work[40], work[80]
    assert loaded2 <= 2.2 * loaded + 2 and loaded2 <= 80  # each earlier row file read about once, not once a release
    assert read2 < 2.6 * read and written2 < 2.6 * written, work  # about 2× (3.6× to 4× before issue 36)
