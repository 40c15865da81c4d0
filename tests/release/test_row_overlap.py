"""Issue 24 item 15: releases that share rows, whatever their input files (ldpcli.release._rowhash).

Release a file, split it into shards, release the shards: the ledger charges each shard's rows the
ε they already spent (keyed row hashes kept beside the ledger) and ``estimate-mean`` refuses to
combine the shards with the first release (the sidecars' row sketches share values). The CLI tests
run the ``ldp`` console script as a process, on real CSV and Parquet files.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from helpers import ldp_process, ledger_document, unit_rows

from ldpcli.analysis._scan import scan
from ldpcli.errors import DataError
from ldpcli.release import _rowhash as rowhash
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._ledger import BudgetError, Ledger
from ldpcli.release._ledger_file import LedgerEntry
from ldpcli.release._options import Budget, ReleaseOptions
from ldpcli.release._rowhash import SKETCH_SIZE, RowDigest, RowHasher, estimate_overlap, summarize
from ldpcli.release._sidecar import load_sidecar, sidecar_path, sidecar_schema

KEY = bytes(range(32))


def run(*args: object) -> subprocess.CompletedProcess[str]:
    """``ldp ARGS…`` as a process."""
    return ldp_process(*args, timeout=300)


def write_parquet(path: Path, rows: np.ndarray) -> Path:
    """One float64 column per coordinate (x0, x1, …), as the CSV twin has."""
    pq.write_table(pa.table({f"x{j}": rows[:, j] for j in range(rows.shape[1])}), path)
    return path


def write_csv(path: Path, rows: np.ndarray) -> Path:
    pacsv.write_csv(pa.table({f"x{j}": rows[:, j] for j in range(rows.shape[1])}), path)
    return path


def sketch_key(key: bytes = KEY) -> bytes:
    return rowhash.derived_key(key, rowhash.SKETCH_LABEL)


# --- the row hash --------------------------------------------------------------------------------------


def test_equal_rows_hash_equal_whatever_the_batch_split_and_type() -> None:
    rows = unit_rows(5000, 7, seed=1)
    hasher = RowHasher(KEY, 7)
    whole = hasher.hash(rows)
    assert whole.dtype == np.uint64 and whole.shape == (5000,)
    pieces = np.concatenate([hasher.hash(rows[a:b]) for a, b in [(0, 1), (1, 999), (999, 4321), (4321, 5000)]])
    assert np.array_equal(whole, pieces)
    assert np.array_equal(RowHasher(KEY, 7).hash(rows[::-1]), whole[::-1])  # a row's hash is its own
    narrow = rows.astype(np.float32)
    assert np.array_equal(hasher.hash(narrow), hasher.hash(narrow.astype(np.float64)))  # widened: the same values
    assert np.unique(whole).size == 5000


def test_the_hash_depends_on_every_bit_and_on_the_key() -> None:
    rows = unit_rows(20000, 3, seed=2)
    hasher = RowHasher(KEY, 3)
    base = hasher.hash(rows)
    flipped = rows.copy()
    flipped[:, :2] *= -1  # a multilinear hash mod 2^64 maps these onto the same value
    assert not np.any(hasher.hash(flipped) == base)
    swapped = rows[:, [1, 0, 2]]
    assert not np.any(hasher.hash(swapped) == base)
    zero = np.zeros((2, 3))
    zero[1, 0] = -0.0
    assert hasher.hash(zero)[0] != hasher.hash(zero)[1]  # the sign of zero is a bit, as in the fingerprint
    nans = np.full((2, 3), np.nan)
    nans.view(np.uint64)[1, 2] ^= 1  # another NaN payload
    assert hasher.hash(nans)[0] != hasher.hash(nans)[1]
    other = RowHasher(bytes(32), 3).hash(rows)
    assert np.intersect1d(other, base).size == 0  # another ledger's key: unrelated values
    assert RowHasher(KEY, 4).hash(np.zeros((1, 4)))[0] != RowHasher(KEY, 3).hash(np.zeros((1, 3)))[0]


def test_rows_are_hashed_in_chunks_not_one_python_call_per_row() -> None:
    calls = []

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call" and frame.f_code is rowhash._nh.__code__:
            calls.append(1)

    rows = unit_rows(200_000, 4, seed=3)
    sys.setprofile(profile)
    try:
        RowHasher(KEY, 4).hash(rows)
    finally:
        sys.setprofile(None)
    assert 0 < len(calls) <= 2 * (200_000 * 4 // (1 << 18) + 1)  # two NH sums per chunk of 2^18 values


def test_the_sketch_has_min_n_k_distinct_values_that_do_not_count_equal_rows() -> None:
    hasher = RowHasher(KEY, 5)
    rows = unit_rows(300, 5, seed=4)
    distinct, sketch = summarize(hasher.hash(rows), sketch_key())
    assert distinct.size == 300 and np.all(np.diff(distinct.astype(np.float64)) > 0)
    assert sketch.size == SKETCH_SIZE and np.all(sketch[1:] > sketch[:-1])
    repeated = np.repeat(rows[:10], 30, axis=0)  # 300 rows, 10 distinct
    distinct, repeated_sketch = summarize(hasher.hash(repeated), sketch_key())
    assert distinct.size == 10 and repeated_sketch.size == SKETCH_SIZE  # the sidecar cannot tell
    assert np.intersect1d(repeated_sketch, hasher.hash(rows)).size == 0  # not the ledger's row hashes
    order = np.random.default_rng(0).permutation(300)
    assert np.array_equal(summarize(hasher.hash(rows[order]), sketch_key())[1], sketch)
    small = summarize(hasher.hash(rows[:7]), sketch_key())[1]
    assert small.size == 7


@pytest.mark.slow
def test_the_sketch_detects_an_overlap_as_the_bottom_k_bound_says() -> None:
    """Two releases sharing m of a union of N rows have no common sketch value with probability
    about (1 − m/N)^k. At m/N = 1/99 that is 0.074: over 400 keys (fixed, so the test is
    deterministic), the misses must be within a wide binomial band of it; at m/N = 1/16 (a miss
    probability of 7e-8 per key) and whenever both releases are within k rows (exact), never."""
    rows = unit_rows(20_000, 3, seed=5)
    shared_a, shared_b = rows[:10_000], rows[9_800:19_800]  # 200 shared of 19,800: m/N ≈ 1/99
    misses = 0
    for trial in range(400):
        key = trial.to_bytes(32, "little")
        hasher, skey = RowHasher(key, 3), sketch_key(key)
        first = summarize(hasher.hash(shared_a), skey)[1]
        second = summarize(hasher.hash(shared_b), skey)[1]
        misses += np.intersect1d(first, second).size == 0
    expected = (1 - 200 / 19_800) ** SKETCH_SIZE * 400
    assert abs(misses - expected) < 6 * np.sqrt(expected), (misses, expected)
    for trial in range(50):
        key = (1000 + trial).to_bytes(32, "little")
        hasher, skey = RowHasher(key, 3), sketch_key(key)
        first = summarize(hasher.hash(rows[:9_000]), skey)[1]  # 1000 shared of a union of 16,000
        second = summarize(hasher.hash(rows[8_000:16_000]), skey)[1]
        assert np.intersect1d(first, second).size > 0
        one = summarize(hasher.hash(rows[:200]), skey)[1]  # both within k: every row is in the sketch
        other = summarize(hasher.hash(rows[199:399]), skey)[1]
        assert np.intersect1d(one, other).size == 1
        assert estimate_overlap(one, 200, other, 200) == pytest.approx(1 / 200)


# --- the ledger: row-level budget ------------------------------------------------------------------------


def entry(ledger: Ledger, fingerprint: str, rows: int, epsilon: float = 1.0) -> LedgerEntry:
    return LedgerEntry(fingerprint=fingerprint, input=f"/data/{fingerprint[:4]}.csv", rows=rows, d=3, columns=["vec"],
                       output=f"/out/{fingerprint[:4]}.parquet", mechanism="privunit2", epsilon=epsilon,
                       epsilon_exact=epsilon, delta=None, created="2024-01-01T00:00:00+00:00", tag="",
                       reproducible=False)


def digest_of(ledger: Ledger, rows: np.ndarray) -> rowhash.ReleaseRows:
    digest = ledger.row_digest(rows.shape[1])
    digest.update(rows)
    return digest.finish()


def test_the_ledger_charges_each_row_what_it_spent_and_keeps_the_rows_privately(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "owner" / "ledger.json")
    key = ledger.ensure_key()
    assert ledger.path.exists() and ledger_document(ledger.path)["entries"] == []
    assert Ledger.open(ledger.path).ensure_key() == key  # once
    rows = unit_rows(1000, 3, seed=6)
    first = ledger.reserve(entry(ledger, "a" * 64, 1000), max_budget=None, input_label="all.csv",
                           rows=digest_of(ledger, rows))
    first.confirm()
    assert first.notice is None
    stored = Ledger.open(ledger.path).entries[0]
    row_file = ledger.path.parent / stored.rows_file
    assert stored.rows_file == f"ledger-rows/{first.release}.npy"
    assert stat.S_IMODE(row_file.stat().st_mode) == 0o600 and stat.S_IMODE(row_file.parent.stat().st_mode) == 0o700
    assert np.array_equal(np.load(row_file), np.sort(RowHasher(key, 3).hash(rows)))
    # a shard: every row released once before, though its fingerprint is new
    shard = ledger.reserve(entry(ledger, "b" * 64, 300), max_budget=None, input_label="shard.csv",
                           rows=digest_of(ledger, rows[:300]))
    assert shard.notice is not None and shard.notice.startswith("shard.csv was already released 1 time (ε spent so far: 1")
    assert "all 300 of its rows were in earlier releases" in shard.notice
    # a partial overlap, exact: 3 rows of the shard (released twice now) among new ones
    mixed = np.concatenate([unit_rows(500, 3, seed=7), rows[:3]])
    with pytest.raises(BudgetError) as refused:
        ledger.reserve(entry(ledger, "c" * 64, 503, 0.5), max_budget=2.4, input_label="mixed.csv",
                       rows=digest_of(ledger, mixed))
    assert "3 of its 503 rows were released before, up to 2 times" in str(refused.value)
    assert len(Ledger.open(ledger.path).entries) == 2 and len(list(row_file.parent.iterdir())) == 2
    partial = ledger.reserve(entry(ledger, "c" * 64, 503, 0.5), max_budget=2.5, input_label="mixed.csv",
                             rows=digest_of(ledger, mixed))
    assert partial.notice is not None and partial.notice.startswith(
        "mixed.csv: 3 of its 503 rows were already released, up to 2 times (ε spent so far: 2 on the most released row")
    fresh = ledger.reserve(entry(ledger, "d" * 64, 50), max_budget=1.0, input_label="new.csv",
                           rows=digest_of(ledger, unit_rows(50, 3, seed=8)))
    assert fresh.notice is None
    # a cancelled reservation takes its row file with it
    shard.cancel()
    assert not (ledger.path.parent / shard.entry.rows_file).exists()
    assert sorted(p.name for p in row_file.parent.iterdir()) == sorted(
        f"{r.release}.npy" for r in (first, partial, fresh))


def test_row_counts_say_1_row_1_time_and_2_times(tmp_path: Path) -> None:
    """A count of 1 takes the singular and its verb agrees ("1 of its 2 rows was", "up to 1 time"); an
    input of one row released twice reads "2 times" and "its one row", never "time(s)" or "all 1 of its rows"."""
    ledger = Ledger.open(tmp_path / "owner" / "ledger.json")
    rows = unit_rows(2, 3, seed=11)
    ledger.reserve(entry(ledger, "a" * 64, 2), max_budget=None, input_label="two.csv",
                   rows=digest_of(ledger, rows)).confirm()
    mixed = np.concatenate([rows[:1], unit_rows(1, 3, seed=12)])
    with pytest.raises(BudgetError) as refused:
        ledger.reserve(entry(ledger, "b" * 64, 2), max_budget=1.5, input_label="mixed.csv",
                       rows=digest_of(ledger, mixed))
    assert "on its most released row (1 of its 2 rows was released before, up to 1 time)" in str(refused.value)
    partial = ledger.reserve(entry(ledger, "b" * 64, 2), max_budget=None, input_label="mixed.csv",
                             rows=digest_of(ledger, mixed))
    assert partial.notice is not None and partial.notice.startswith(
        "mixed.csv: 1 of its 2 rows was already released, up to 1 time (ε spent so far: 1 on the most released row")
    partial.confirm()
    one = ledger.reserve(entry(ledger, "c" * 64, 1), max_budget=None, input_label="one.csv",
                         rows=digest_of(ledger, rows[:1]))
    assert one.notice is not None and one.notice.startswith(
        "one.csv was already released 2 times (ε spent so far: 2 on the most released row")
    assert "its one row was in earlier releases" in one.notice
    assert "(s)" not in str(refused.value) + partial.notice + one.notice


def test_a_row_file_outside_the_rows_directory_or_damaged_is_refused(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    rows = unit_rows(20, 3, seed=9)
    ledger.reserve(entry(ledger, "a" * 64, 20), max_budget=None, input_label="a.csv", rows=digest_of(ledger, rows))
    document = ledger_document(ledger.path)
    release = document["entries"][0]["release"]
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    document["entries"][0]["rows_file"] = f"../{victim.name}"
    ledger.path.write_text(json.dumps(document))
    with pytest.raises(DataError, match="rows_file"):
        Ledger.open(ledger.path)
    document["entries"][0]["rows_file"] = f"ledger-rows/{release}.npy"
    ledger.path.write_text(json.dumps(document))
    (tmp_path / "ledger-rows" / f"{release}.npy").write_bytes(b"not an array")
    again = Ledger.open(ledger.path)
    with pytest.raises(DataError, match="row file"):
        again.reserve(entry(again, "b" * 64, 20), max_budget=None, input_label="b.csv", rows=digest_of(again, rows))
    assert victim.read_text() == "keep me"


def test_rows_hashed_under_another_key_are_refused(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.json")
    digest = RowDigest(bytes(32), 3)
    digest.update(unit_rows(10, 3))
    with pytest.raises(DataError, match="key changed"):
        ledger.reserve(entry(ledger, "a" * 64, 10), max_budget=None, input_label="a.csv", rows=digest.finish())
    assert Ledger.open(ledger.path).entries == ()


# --- the scenario, through the ldp script ----------------------------------------------------------


@pytest.fixture()
def split(tmp_path: Path) -> dict[str, Path]:
    """first.parquet (2059 rows) and the same rows in three shards: CSV, Parquet, CSV."""
    rows = unit_rows(2059, 4, seed=24)
    return {
        "first": write_parquet(tmp_path / "first.parquet", rows),
        "a": write_csv(tmp_path / "a.csv", rows[:700]),
        "b": write_parquet(tmp_path / "b.parquet", rows[700:1400]),
        "c": write_csv(tmp_path / "c.csv", rows[1400:]),
        "b_plus": write_parquet(tmp_path / "b_plus.parquet", np.concatenate([rows[700:1400], rows[:150]])),
    }


@pytest.mark.slow
def test_released_shards_are_charged_and_refused_as_shards_of_the_first_release(
        tmp_path: Path, split: dict[str, Path]) -> None:
    ledger = tmp_path / "owner" / "ledger.json"
    first = run("privatize", split["first"], "--eps", "1", "--ledger", ledger, "-q")
    assert first.returncode == 0, first.stderr
    out = tmp_path / "shards_out"
    capped = run("privatize", split["a"], "--eps", "1", "--ledger", ledger, "-o", f"{out}/", "--layout", "files",
                 "--max-budget", "1")
    assert capped.returncode == 1 and "would exceed --max-budget 1" in capped.stderr, capped.stderr
    assert "700 of its 700 rows were released before" in capped.stderr
    assert not out.exists()
    shards = run("privatize", split["a"], split["b"], split["c"], "--eps", "1", "--ledger", ledger, "-o", f"{out}/",
                 "--layout", "files")
    assert shards.returncode == 0, shards.stderr
    for name, count in (("a.csv", 700), ("b.parquet", 700), ("c.csv", 659)):
        assert (f"{name} was already released 1 time (ε spent so far: 1 on the most released row; with this "
                f"release: 2; all {count} of its rows were in earlier releases)") in shards.stderr, shards.stderr
    together = run("estimate-mean", f"{out}/", tmp_path / "first.privatized.parquet", "--json")
    assert together.returncode == 1, together.stdout
    assert "share rows of the same people" in together.stderr and "first.privatized.parquet" in together.stderr
    assert "not shards of one dataset: estimate each on its own" in together.stderr
    alone = run("estimate-mean", f"{out}/", "--json")
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout)["n"] == 2059
    side = load_sidecar(sidecar_path(out / "b.privatized.parquet"))
    assert side.row_sketch is not None and len(side.row_sketch) == SKETCH_SIZE


@pytest.mark.slow
def test_a_partial_overlap_is_charged_exactly_and_found_by_the_sketches(tmp_path: Path, split: dict[str, Path]) -> None:
    """b_plus holds shard b and 150 rows of shard a: 150 shared rows of a union of 1350 (a 700, b_plus
    850), so the sketches miss it with probability about (1 − 150/1350)^256 < 1e-13."""
    ledger = tmp_path / "ledger.json"
    assert run("privatize", split["a"], "--eps", "1", "--ledger", ledger, "-q").returncode == 0
    plus = run("privatize", split["b_plus"], "--eps", "1", "--ledger", ledger)
    assert plus.returncode == 0, plus.stderr
    assert "b_plus.parquet: 150 of its 850 rows were already released, up to 1 time (ε spent" in plus.stderr, plus.stderr
    refused = run("estimate-mean", tmp_path / "a.privatized.csv", tmp_path / "b_plus.privatized.parquet")
    assert refused.returncode == 1 and "share rows of the same people" in refused.stderr, refused.stderr
    capped = run("privatize", split["b_plus"], "--eps", "1", "--ledger", ledger, "-o", tmp_path / "x.parquet",
                 "--max-budget", "1.5")
    assert capped.returncode == 1 and "850 of its 850 rows were released before, up to 2 times" in capped.stderr


def test_a_dataset_directory_is_one_release_even_with_repeated_rows(tmp_path: Path) -> None:
    """Parts of one input are disjoint by position; equal rows in two parts give equal sketch values,
    which must not make the dataset's own parts look like overlapping releases."""
    rows = unit_rows(3000, 3, seed=10)
    rows[2500:] = rows[:500]  # repeated rows, in other parts than their first occurrence
    source = write_parquet(tmp_path / "in.parquet", rows)
    ledger = Ledger.open(tmp_path / "ledger.json")
    result = write_dataset_release([source], tmp_path / "ds", engine=None, epsilon=2.0, options=ReleaseOptions(budget=Budget(ledger=ledger)), part_rows=1000)
    assert len(result.parts) == 3
    sketches = [load_sidecar(sidecar_path(part)).row_sketch for part in result.parts]
    assert all(s is not None and len(s) == SKETCH_SIZE for s in sketches)
    assert scan(tmp_path / "ds").files == result.parts  # accepted as one release
    entry_rows = np.load(ledger.path.parent / Ledger.open(ledger.path).entries[0].rows_file)
    assert entry_rows.size == 2500  # the distinct rows
    again = write_parquet(tmp_path / "some.parquet", rows[:1200])
    write_dataset_release([again], tmp_path / "ds2", engine=None, epsilon=2.0, options=ReleaseOptions(budget=Budget(ledger=ledger)), part_rows=1000)
    with pytest.raises(DataError, match="share rows of the same people"):
        scan([tmp_path / "ds", tmp_path / "ds2"])


@pytest.mark.slow
def test_the_sidecars_row_sketch_is_checked_and_in_the_schema(tmp_path: Path, split: dict[str, Path]) -> None:
    assert run("privatize", split["b"], "--eps", "1", "-o", tmp_path / "b.out.parquet").returncode == 0
    side = sidecar_path(tmp_path / "b.out.parquet")
    content = json.loads(side.read_text())
    sketch = content["release"]["row_sketch"]
    assert sketch["method"] == "ldp-bottom-k-v1" and sketch["k"] == SKETCH_SIZE
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(content, sidecar_schema())
    values = np.frombuffer(rowhash.base64.b64decode(sketch["values"]), dtype="<u8")
    for broken in (values[::-1], values[:-1], np.concatenate([values[:-1], values[:1]])):
        content["release"]["row_sketch"]["values"] = rowhash.encode_sketch(broken)
        side.write_text(json.dumps(content))
        with pytest.raises(DataError, match="release.row_sketch.values"):
            load_sidecar(side)
