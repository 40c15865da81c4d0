"""The ledger's row hashes cost a few bytes a row, whatever n (issue 36: 60 B a row peaked a 16 M-row run).

Measured with tracemalloc (numpy reports its array buffers to it), so the bound is exact and
deterministic: it counts what the hashing, the summary and the reservation step allocate, not the
process's RSS.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from ldpcli.release._rowhash import RowDigest, summarize

ROWS = 1_000_000
BATCH = 65_536
KEY = b"k" * 32
#: Bytes a row allowed at the peak: the hashes themselves (8) plus one copy while they are gathered (8) and slack.
BOUND = 24


def _batches(rows: int, d: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(36)
    values = rng.normal(size=(rows, d))
    values[rows // 2:] = values[:rows - rows // 2]  # half the rows repeat: the summary must drop them
    return [values[start:start + BATCH] for start in range(0, rows, BATCH)]


def _peak(fn) -> tuple[int, object]:  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        return tracemalloc.get_traced_memory()[1] - base, result
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("threaded", [False, True])
def test_hashing_and_summarizing_a_release_stays_within_a_few_bytes_a_row(threaded: bool) -> None:
    """Was 65 B a row (the temporaries of a whole-array summary); now the batches' hashes are copied once
    into one array, sorted and made distinct in place: about 16."""
    batches = _batches(ROWS)

    def run() -> object:
        digest = RowDigest(KEY, 4, threaded=threaded)
        for batch in batches:
            digest.update(batch)
        return digest.finish()

    peak, rows = _peak(run)
    assert peak <= BOUND * ROWS, f"{peak / ROWS:.1f} B a row"
    hashes = RowDigest(KEY, 4).hasher.hash(np.concatenate(batches))
    expected_distinct, expected_sketch = summarize(hashes, RowDigest(KEY, 4)._sketch_key)
    assert np.array_equal(rows.hashes, np.unique(hashes))  # type: ignore[attr-defined]
    assert np.array_equal(rows.hashes, expected_distinct)  # type: ignore[attr-defined]
    assert np.array_equal(rows.sketch, expected_sketch)  # type: ignore[attr-defined]


def test_summarize_sorted_chunks_match_the_whole_array_summary() -> None:
    """Runs of equal hashes that cross a chunk's border are counted as one run (their repeat numbers go on)."""
    from ldpcli.release import _rowhash as rowhash

    rng = np.random.default_rng(7)
    hashes = rng.integers(0, 50, size=5_000).astype(np.uint64)  # long runs once sorted
    key = rowhash.derived_key(KEY, rowhash.SKETCH_LABEL)
    ordered = np.sort(hashes)
    first = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    positions = np.arange(ordered.shape[0])
    repeat = (positions - np.maximum.accumulate(np.where(first, positions, 0))).astype(np.uint64)
    mix, step = np.frombuffer(key[:16], dtype="<u8").astype(np.uint64)
    values = rowhash.fmix64(rowhash.fmix64(ordered ^ mix) ^ (repeat * (step | np.uint64(1))))
    expected = np.sort(values)[:rowhash.SKETCH_SIZE]
    for chunk in (1, 3, 64, 4_999, 5_000, 1 << 16):
        saved = rowhash._SUMMARY_CHUNK
        rowhash._SUMMARY_CHUNK = chunk
        try:
            distinct, sketch = rowhash.summarize(hashes, key)
        finally:
            rowhash._SUMMARY_CHUNK = saved
        assert np.array_equal(distinct, np.unique(hashes)), chunk
        assert np.array_equal(sketch, expected), chunk
