"""``privatize --shuffle``'s external shuffle and its refusals, in process (issue 28 item 2).

The order is a uniformly random permutation (a chi-square test over every order of 4 rows, forced
through several levels of bucket files by a memory budget of one row, and a check that the test sees
a shuffle that leaves out the order within buckets); memory stays bounded by the budget; the bucket
files have no names; and what a shuffled release cannot honour (kept columns, copies, a mechanism
that is not pure ε-LDP, δ ≥ 1/n, a dataset directory) is refused before anything is written.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from helpers import unit_rows, write_list
from scipy import stats

from ldpcli.errors import UsageError
from ldpcli.math._counter_rng import CounterGenerator
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions
from ldpcli.release._randomness import keyed_generator
from ldpcli.release._shuffle import SHUFFLE_STREAM, ExternalShuffle, OrderKeys, keyed_rows, order_root
from ldpcli.release._shuffle_claim import shuffle_delta

ORDERS = list(itertools.permutations(range(4)))
#: Bytes of one record of a row of width 1: its 128-bit order key and its value.
RECORD = 24


def random_keys(rng: np.random.Generator, rows: int) -> np.ndarray:
    """Order keys as the release draws them: 128 uniform bits a row (two uint64 words)."""
    return rng.integers(0, 2**64, size=(rows, 2), dtype=np.uint64)


def shuffled_order(rng: np.random.Generator, directory: Path, *, memory: int, fanout: int) -> tuple[int, ...]:
    """The order an external shuffle gives rows 0, 1, 2, 3 (written in two batches), read back in batches of 3."""
    with ExternalShuffle(1, memory=memory, directory=directory, fanout=fanout) as shuffle:
        shuffle.write(keyed_rows(random_keys(rng, 2), np.array([[0.0], [1.0]])))
        shuffle.write(keyed_rows(random_keys(rng, 2), np.array([[2.0], [3.0]])))
        out = np.concatenate(list(shuffle.rows(3)))
    return tuple(int(v) for v in out[:, 0])


def order_counts(directory: Path, runs: int, *, memory: int, fanout: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(ORDERS), dtype=np.int64)
    index = {order: i for i, order in enumerate(ORDERS)}
    for _ in range(runs):
        counts[index[shuffled_order(rng, directory, memory=memory, fanout=fanout)]] += 1
    return counts


def chi_square_p(counts: np.ndarray) -> float:
    return float(stats.chisquare(counts).pvalue)


#: The family's false-alarm rate: each seeded uniformity test fails with at most this probability.
ALPHA = 1e-4


@pytest.mark.slow
@pytest.mark.parametrize(("memory", "fanout"), [(RECORD, 2), (2 * RECORD, 2), (3 * RECORD, 3), (1024, 2)],
                         ids=["one-row-K2", "two-rows-K2", "three-rows-K3", "in-memory"])
def test_every_order_of_four_rows_is_equally_likely(tmp_path: Path, memory: int, fanout: int) -> None:
    """24 orders × 100 expected each: Pearson's statistic, χ²(23) under uniformity, must not reach its
    1 − ALPHA quantile (seeded: the same counts every run)."""
    counts = order_counts(tmp_path, 2400, memory=memory, fanout=fanout, seed=11)
    assert counts.sum() == 2400
    assert chi_square_p(counts) > ALPHA, counts


@pytest.mark.slow
def test_the_uniformity_test_sees_buckets_left_in_their_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the order within buckets (rows keep their input order inside each bucket) the orders are
    far from uniform, and the test above would fail. (With a budget of one row every bucket is split
    down to single rows, which is itself a uniform shuffle: the buckets of two rows show the order's part.)"""
    monkeypatch.setattr(ExternalShuffle, "_ordered",
                        lambda self, block, batch_rows: iter([block[i: i + batch_rows] for i in range(0, len(block), batch_rows)]))
    counts = order_counts(tmp_path, 2400, memory=2 * RECORD, fanout=2, seed=11)
    assert chi_square_p(counts) < ALPHA, counts


def test_a_large_shuffle_never_holds_more_than_its_memory_and_returns_every_row_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = np.arange(5000, dtype=np.float64).reshape(-1, 1) * np.ones((1, 4))
    read: list[int] = []
    original = ExternalShuffle._read

    def counting(self: ExternalShuffle, bucket: object, size: int) -> np.ndarray:
        read.append(size)
        return original(self, bucket, size)  # type: ignore[arg-type]

    monkeypatch.setattr(ExternalShuffle, "_read", counting)
    memory = 100 * (2 + 4) * 8  # 100 records of a 128-bit key and 4 float64
    keys = random_keys(np.random.default_rng(1), 5000)
    with ExternalShuffle(4, memory=memory, directory=tmp_path, fanout=8) as shuffle:
        for start in range(0, 5000, 700):
            shuffle.write(keyed_rows(keys[start: start + 700], rows[start: start + 700]))
        assert shuffle.spilled and shuffle.n == 5000
        batches = list(shuffle.rows(64))
    out = np.concatenate(batches)
    assert max(read) <= shuffle.capacity == 100  # at most one bucket's rows in memory, whatever n
    assert max(len(batch) for batch in batches) <= 64
    assert sorted(out[:, 0].tolist()) == list(range(5000))  # a permutation: every row once
    assert (out == out[:, :1]).all()  # rows move whole
    assert not np.array_equal(out[:, 0], np.arange(5000))
    assert list(tmp_path.iterdir()) == []  # the bucket files never had names


def order_generator(root: np.random.SeedSequence, key: tuple[int, ...], seeded: bool) -> CounterGenerator:
    """The generator of key block 0's order keys, as ``OrderKeys`` makes it under ``order_root``."""
    return cast(CounterGenerator, keyed_generator(order_root(root, seeded), *key, SHUFFLE_STREAM, 0, rng="chacha20"))


def test_the_order_comes_from_chacha20_keyed_by_the_os_or_by_the_seed() -> None:
    root = np.random.SeedSequence(5)
    secure = order_generator(root, (1, 2), seeded=False)
    assert isinstance(secure, CounterGenerator)  # ldp's ChaCha20 stream, 20 rounds (tests/math/test_chacha20.py)
    one, two = order_generator(root, (1, 2), seeded=True), order_generator(root, (1, 2), seeded=True)
    assert one.integers(0, 2**62, size=4).tolist() == two.integers(0, 2**62, size=4).tolist()
    other = order_generator(root, (1, 3), seeded=True)
    assert one.integers(0, 2**62, size=4).tolist() != other.integers(0, 2**62, size=4).tolist()
    fresh = order_generator(root, (1, 2), seeded=False)
    assert fresh.integers(0, 2**62, size=4).tolist() != secure.integers(0, 2**62, size=4).tolist()
    # the keys of a row are the first two words of its block's stream
    keys = OrderKeys(order_root(root, True), (1, 2))(0, 3, 8)
    assert keys.ravel().tolist() == one_stream(root).random_raw(6).tolist()


def one_stream(root: np.random.SeedSequence) -> CounterGenerator:
    return order_generator(root, (1, 2), seeded=True)


def test_delta_defaults_to_one_over_n_squared_and_must_stay_below_one_over_n() -> None:
    assert shuffle_delta(1000, None) == pytest.approx(1e-6)
    assert shuffle_delta(1000, 1e-4) == 1e-4
    with pytest.raises(UsageError, match=re.escape("(0, 1/n)")):
        shuffle_delta(1000, 1e-3)
    with pytest.raises(UsageError, match="at least 2 rows"):
        shuffle_delta(1, None)


# --- refusals before anything is written ----------------------------------------------------------------------


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    path = tmp_path / "in.parquet"
    write_list(path, unit_rows(50, 4, seed=2), ids=True)
    return path


@pytest.mark.parametrize(("mechanism", "options", "words"), [
    ("privunit2", ReleaseOptions(shuffle=True, columns=Columns(column="vec", keep=("id",))), "`keep` columns (id)"),
    ("privunit2", ReleaseOptions(shuffle=True, columns=Columns(column="vec"), copies=2), "one report per person"),
    ("privunit2", ReleaseOptions(shuffle=True, columns=Columns(column="vec"), shuffle_delta=0.05), "(0, 1/n)"),
    ("privunit2", ReleaseOptions(shuffle=True, columns=Columns(column="vec"), shuffle_delta=1.5), "in (0, 1)"),
    ("privunit2", ReleaseOptions(columns=Columns(column="vec"), shuffle_delta=1e-6), "needs `shuffle`"),
])
def test_what_a_shuffle_cannot_honour_is_refused_before_a_row_is_written(
    tmp_path: Path, source: Path, mechanism: str, options: ReleaseOptions, words: str
) -> None:
    with pytest.raises(UsageError) as info:
        write_file_release(source, tmp_path / "out.parquet", mechanism=mechanism, epsilon=2.0, options=options)
    assert words in info.value.template
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_the_gaussian_baseline_gets_no_shuffle_claim(tmp_path: Path, source: Path) -> None:
    from ldpcli.mechanisms import MechanismSpec

    spec = MechanismSpec("gaussian", 2.0, None, 1.0, {"delta": 1e-6})
    with pytest.raises(UsageError, match="no shuffle claim") as info:
        write_file_release(source, tmp_path / "out.parquet", mechanism=spec,
                       options=ReleaseOptions(shuffle=True, columns=Columns(column="vec")))
    assert "not pure ε0-LDP" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_a_dataset_directory_is_not_shuffled(tmp_path: Path, source: Path) -> None:
    with pytest.raises(UsageError, match="options.shuffle"):
        write_dataset_release([source], tmp_path / "ds", engine=None, mechanism="privunit2", epsilon=2.0,
                          options=ReleaseOptions(shuffle=True, columns=Columns(column="vec")))
    assert not (tmp_path / "ds").exists()



# --- the order is the sort order of the keys, whatever the levels ----------------------------------------------


def sorted_by_keys(keys: np.ndarray, memory: int, fanout: int, directory: Path) -> np.ndarray:
    """Row indices in the order an external shuffle writes rows 0..n−1 with these keys (width 1)."""
    rows = np.arange(keys.shape[0], dtype=np.float64).reshape(-1, 1)
    with ExternalShuffle(1, memory=memory, directory=directory, fanout=fanout) as shuffle:
        for start in range(0, keys.shape[0], 37):
            shuffle.write(keyed_rows(keys[start: start + 37], rows[start: start + 37]))
        return np.concatenate(list(shuffle.rows(50)))[:, 0].astype(np.int64)


@pytest.mark.parametrize(("memory", "fanout"), [(10**6, 64), (20 * RECORD, 2), (RECORD, 3), (7 * RECORD, 64),
                                                (RECORD, 2**32 - 1)])
def test_the_rows_come_out_sorted_by_key_and_ties_by_position(tmp_path: Path, memory: int, fanout: int) -> None:
    """In memory, through one level or many (a budget of one row, K = 3 or K = 2³² − 1): always the stable
    sort by the 128-bit key. Keys drawn from a few values make ties (equal high words, equal whole keys)."""
    rng = np.random.default_rng(3)
    keys = random_keys(rng, 300)
    keys[::3, 0] = keys[0, 0]  # a third of the rows share the high word
    keys[::7] = keys[1]  # and some share the whole key: they must keep their input order
    expected = np.lexsort((keys[:, 1], keys[:, 0]))
    assert np.array_equal(sorted_by_keys(keys, memory, fanout, tmp_path), expected)


def test_rows_of_one_key_leave_the_last_level_in_input_order(tmp_path: Path) -> None:
    """Equal keys cannot be split: after ⌈128 / log₂ K⌉ levels their bucket is written in input order."""
    keys = np.tile(random_keys(np.random.default_rng(4), 1), (5, 1))
    assert sorted_by_keys(keys, RECORD, 2**16, tmp_path).tolist() == [0, 1, 2, 3, 4]


def test_split_keys_is_the_next_base_k_digit_of_the_128_bit_key() -> None:
    from ldpcli.release._shuffle import split_keys

    rng = np.random.default_rng(5)
    keys = np.concatenate([random_keys(rng, 500), np.array([[2**64 - 1, 2**64 - 1], [0, 0], [2**63, 0]],
                                                           dtype=np.uint64)])
    for fanout in (2, 3, 64, 1000, 2**32 - 1):
        bucket, after = split_keys(keys, fanout)
        for row, (digit, (high, low)) in enumerate(zip(bucket.tolist(), after.tolist())):
            u = (int(keys[row, 0]) << 64) | int(keys[row, 1])
            assert digit == (u * fanout) >> 128 and (high << 64 | low) == (u * fanout) % 2**128
