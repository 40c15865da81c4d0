"""Keyed row hashes: which rows two releases of one data owner have in common.

A release's input fingerprint (:class:`ldpcli.release._ledger.InputFingerprint`) names the whole input, so
a release of *some* of its rows (a shard, a sample, the rows of a file split in three) is a new
input to it. The ledger therefore also keeps a keyed 64-bit hash of every row (:class:`RowHasher`)
and each sidecar a small public sketch of them (:func:`summarize`), so that any overlap between two
releases of the same owner is found: exactly by the owner's ledger, which charges every row the ε
of every earlier release that held it, and approximately by whoever holds two sidecars
(:func:`estimate_overlap`), which is how ``estimate-mean`` refuses overlapping releases as shards.

The row hash
    A row is hashed as the fingerprint sees it: its d values as little-endian float64 bits (so
    equal values in CSV and Parquet, or float32 widened, hash equal; -0.0 and 0.0, and NaN
    payloads, are different bits and hash differently). Each value's 64 bits are two 32-bit words
    (lo, hi), and the row's hash is the NH hash of UMAC (Black et al., 1999) of those words under
    two independent keys, ``Σ_j ((lo_j + a_j) mod 2³²)·((hi_j + b_j) mod 2³²) mod 2⁶⁴``, then the two
    64-bit sums and d are mixed by the murmur3 finalizer (fmix64). NH is 2⁻³²-almost-universal, so
    two distinct rows agree on both sums with probability at most 2⁻⁶⁴ over the key; the final mix
    is a fixed function, so the collision probability of the 64-bit output is about 2⁻⁶⁴ per pair
    of rows (heuristically, not proved): among n distinct rows, about n²/2⁶⁵ collisions are
    expected (10⁷ rows: 3·10⁻⁶). The keys (2·2·d words) come from numpy's PCG64 seeded with
    HMAC-SHA256(ledger key, label). Everything is numpy arithmetic on whole batches: no per-row
    Python.

    (A plain multilinear hash, ``Σ_j m_j·x_j mod 2⁶⁴`` with odd m_j, was not used: flipping the sign
    of any two coordinates adds 2⁶³·(m_1 + m_2) ≡ 0 mod 2⁶⁴, so (x, y, …) and (−x, −y, …) would always
    collide.)

    It is a keyed universal hash, not a cryptographic MAC: it says nothing to anyone without the
    key (nobody can test a guess of a row against it), but whoever holds the key can, and a
    determined adversary who sees many hashes *and* chooses rows might learn about the key. The
    row hashes never leave the ledger's directory.

The sketch
    What a sidecar carries (``release.row_sketch``): the :data:`SKETCH_SIZE` smallest values of a
    *second* keyed hash of the release's rows (a bottom-k MinHash sketch), with a key derived from
    the ledger's under another label, so the sidecar's values are not the ledger's row hashes. The
    j-th repeat of one row in a release is hashed with j, so the sketch's values are always
    distinct and their number is min(n, k): it depends on n (public) only, and does not tell how
    many rows of the release are equal (a statistic of the raw data). Two releases of one owner
    that share m rows out of a union of N have no sketch value in common with probability about
    (1 − m/N)ᵏ (the k smallest values of the union hold no shared row): 2·10⁻¹⁰ for m/N = 1/12 at
    k = 256, 10⁻⁴⁵ for a shard against the file it came from (m/N = 1/3). Rows with equal values are
    indistinguishable: two people whose vectors are bit for bit equal count as one row, in the
    ledger and the sketch.

Memory: a release of n rows holds 8n bytes of row hashes while it is read and committed (10⁷ rows:
80 MB), and twice that for a moment while the batches' hashes are gathered into one uint64 array,
sorted and made distinct in place (:func:`summarize_sorted`), with
temporaries of one chunk (:data:`_SUMMARY_CHUNK` rows) beside it; the ledger's reservation step reads
each earlier release's row file in turn, memory-mapped, and checks the new rows against it a chunk
at a time.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import hmac
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

#: The labels of the two keyed hashes: the ledger's row hashes and the sidecar's sketch.
ROW_HASH_LABEL = b"ldp-row-hash-v1"
SKETCH_LABEL = b"ldp-row-sketch-v1"
#: k of the bottom-k sketch in each sidecar.
SKETCH_SIZE = 256
#: The method named in ``release.row_sketch``.
SKETCH_METHOD = "ldp-bottom-k-v1"

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
#: Values hashed per chunk (bounds the temporaries: a few MB whatever the batch).
_CHUNK_VALUES = 1 << 18
#: Sorted row hashes summarized per chunk (:func:`summarize_sorted`; its temporaries are a few times this, in bytes ×8).
_SUMMARY_CHUNK = 1 << 16
#: Batches a threaded :class:`RowDigest` lets wait.
_MAX_PENDING = 4


def derived_key(key: bytes, label: bytes) -> bytes:
    """HMAC-SHA256(``key``, ``label``): a key for one use of the ledger's secret key."""
    return hmac.new(key, label, hashlib.sha256).digest()


def fmix64(values: np.ndarray) -> np.ndarray:
    """The murmur3 64-bit finalizer (a bijection of uint64) of each element (a new array)."""
    h = np.array(values, dtype=_U64, copy=True)
    h ^= h >> _U64(33)
    h *= _U64(0xFF51AFD7ED558CCD)
    h ^= h >> _U64(33)
    h *= _U64(0xC4CEB9FE1A85EC53)
    h ^= h >> _U64(33)
    return h


class RowHasher:
    """The keyed 64-bit hash of each row of d float64 values (see the module)."""

    def __init__(self, key: bytes, d: int, *, label: bytes = ROW_HASH_LABEL) -> None:
        """Hash rows of ``d`` values with the key derived from ``key`` (the ledger's) under ``label``."""
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
            raise ValueError(f"d must be a positive integer, got {d!r}")
        seed = int.from_bytes(derived_key(key, label), "little")
        words = np.random.Generator(np.random.PCG64(seed)).integers(0, 1 << 32, size=(4, int(d)), dtype=np.uint32)
        self._a1, self._b1, self._a2, self._b2 = words
        self._d = int(d)
        self._tweak = _U64((int(d) * 0x9E3779B97F4A7C15) & _MASK64)

    @property
    def d(self) -> int:
        """The number of values of each row."""
        return self._d

    def hash(self, values: np.ndarray) -> np.ndarray:
        """The hash of each row of an (n, d) array (any real dtype, read as float64): shape (n,), uint64."""
        batch = np.ascontiguousarray(values, dtype="<f8")
        if batch.ndim != 2 or batch.shape[1] != self._d:
            raise ValueError(f"expected an (n, {self._d}) array of rows, got shape {batch.shape}")
        words = batch.view("<u4").reshape(batch.shape[0], self._d, 2)  # (lo, hi) of each value, whatever the host
        out = np.empty(batch.shape[0], dtype=_U64)
        step = max(1, _CHUNK_VALUES // self._d)
        for start in range(0, batch.shape[0], step):
            chunk = words[start:start + step]
            lo, hi = chunk[..., 0], chunk[..., 1]
            first = _nh(lo, hi, self._a1, self._b1)
            second = _nh(lo, hi, self._a2, self._b2)
            out[start:start + step] = fmix64(first ^ fmix64(second ^ self._tweak))
        return out


def _nh(lo: np.ndarray, hi: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NH: Σ_j ((lo_j + a_j) mod 2³²)·((hi_j + b_j) mod 2³²) mod 2⁶⁴ of each row (uint32 sums wrap mod 2³²)."""
    product = (lo + a).astype(_U64)
    product *= (hi + b)
    return product.sum(axis=1, dtype=_U64)


def summarize(hashes: np.ndarray, sketch_key: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(the sorted distinct row hashes, the bottom-k sketch) of one release's row hashes.

    ``hashes``: the ledger row hash (:class:`RowHasher`) of each row released, in any order.
    ``sketch_key``: :func:`derived_key` of the ledger's key and :data:`SKETCH_LABEL`. The sketch
    hashes each (row hash, repeat number) pair with that key (a keyed bijection of the row hash
    for a row's first occurrence) and keeps the :data:`SKETCH_SIZE` smallest, ascending. Works on
    one sorted copy of ``hashes`` (8 bytes a row) and temporaries of a chunk's size.
    """
    return summarize_sorted(np.sort(np.asarray(hashes, dtype=_U64)), sketch_key)


def summarize_sorted(ordered: np.ndarray, sketch_key: bytes) -> tuple[np.ndarray, np.ndarray]:
    """:func:`summarize` of ``ordered``, an ascending uint64 array that it takes over: the distinct
    values are compacted into its front and it is shrunk to them in place, so no temporary larger
    than a chunk's (:data:`_SUMMARY_CHUNK`) is made, whatever n."""
    n = ordered.shape[0]
    if n == 0:
        return ordered, np.empty(0, dtype=_U64)
    mix, step = np.frombuffer(sketch_key[:16], dtype="<u8").astype(_U64)
    step |= _U64(1)
    best = np.empty(0, dtype=_U64)
    kept = 0  # distinct values moved to the front so far
    run_start = 0  # position of the first occurrence of the value ending the previous chunk
    last = _U64(0)
    for start in range(0, n, _SUMMARY_CHUNK):
        chunk = ordered[start:start + _SUMMARY_CHUNK]
        first = np.empty(chunk.shape[0], dtype=bool)
        first[0] = start == 0 or chunk[0] != last
        np.not_equal(chunk[1:], chunk[:-1], out=first[1:])
        positions = np.arange(start, start + chunk.shape[0], dtype=np.int64)
        starts = np.where(first, positions, 0)
        if not first[0]:
            starts[0] = run_start
        np.maximum.accumulate(starts, out=starts)
        run_start = int(starts[-1])
        repeat = (positions - starts).astype(_U64)
        values = fmix64(fmix64(chunk ^ mix) ^ (repeat * step))
        best = np.concatenate([best, values])
        if best.shape[0] > SKETCH_SIZE:
            best = np.partition(best, SKETCH_SIZE - 1)[:SKETCH_SIZE]
        last = chunk[-1]
        distinct = chunk[first]  # a copy: the chunk may be overwritten below
        ordered[kept:kept + distinct.shape[0]] = distinct
        kept += distinct.shape[0]
    del chunk  # no view of the buffer may outlive its resize
    if kept < n:
        ordered.resize((kept,), refcheck=False)  # in place: no second buffer (no view of it is alive)
    return ordered, np.sort(best)


def contains(sorted_values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Which of ``queries`` are in ``sorted_values`` (ascending uint64, e.g. a memory-mapped row file)."""
    if sorted_values.shape[0] == 0:
        return np.zeros(queries.shape[0], dtype=bool)
    at = np.searchsorted(sorted_values, queries)
    at[at == sorted_values.shape[0]] = 0
    return np.asarray(sorted_values[at] == queries)


def encode_sketch(sketch: np.ndarray) -> str:
    """The sketch's values as base64 of little-endian uint64, ascending (``release.row_sketch.values``)."""
    return base64.b64encode(np.ascontiguousarray(sketch, dtype="<u8").tobytes()).decode("ascii")


def decode_sketch(text: str) -> np.ndarray | None:
    """The values of :func:`encode_sketch`'s text; None when it is not such a text (strictly ascending)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    if len(raw) % 8 or len(raw) > 8 * SKETCH_SIZE:
        return None
    values = np.frombuffer(raw, dtype="<u8").astype(_U64)
    if values.shape[0] > 1 and not np.all(values[1:] > values[:-1]):
        return None
    return values


def estimate_overlap(first: np.ndarray, n_first: int, second: np.ndarray, n_second: int) -> float:
    """The fraction of the smaller release's rows that the other one holds too, from two sketches.

    The k smallest values of the two sketches together are the k smallest of the union of the two
    releases; the share of them found in both estimates the Jaccard similarity J, and the shared
    rows are J·(n₁ + n₂)/(1 + J). Exact when both sketches hold every row (n ≤ k). Clipped to [0, 1].
    """
    complete = first.shape[0] == n_first and second.shape[0] == n_second  # each sketch holds every row
    union = np.union1d(first, second)
    union = union if complete else union[:SKETCH_SIZE]
    if union.shape[0] == 0:
        return 0.0
    both = np.intersect1d(first, second, assume_unique=True)
    jaccard = np.count_nonzero(both <= union[-1]) / union.shape[0]
    shared = jaccard * (n_first + n_second) / (1 + jaccard)
    return float(min(1.0, shared / max(1, min(n_first, n_second))))


@dataclass(frozen=True)
class ReleaseRows:
    """What the ledger and the sidecar keep of one release's rows (:meth:`RowDigest.finish`)."""

    #: The distinct ledger row hashes, ascending (the ledger's row file).
    hashes: np.ndarray
    #: The bottom-k sketch, ascending (the sidecar's ``release.row_sketch``).
    sketch: np.ndarray
    #: Names the key they were made with (:func:`key_check`), so a ledger whose key changed refuses them.
    key_check: str


def key_check(key: bytes) -> str:
    """A short public name of a ledger key (16 hex digits of HMAC-SHA256(key, label)); reveals nothing of it."""
    return derived_key(key, b"ldp-row-key-check-v1")[:8].hex()


class RowDigest:
    """The row hashes of one release, fed batch by batch as read (:meth:`update`), then :meth:`finish`.

    With ``threaded=True`` the hashing runs in one background thread (numpy's arithmetic releases
    the GIL), overlapping with the caller's work; :meth:`update` then keeps a reference to each
    batch until it is hashed, so pass arrays that nobody writes to afterwards.
    """

    def __init__(self, key: bytes, d: int, *, threaded: bool = False) -> None:
        """Hash rows of ``d`` values under the ledger key ``key``."""
        self.hasher = RowHasher(key, d)
        self._sketch_key = derived_key(key, SKETCH_LABEL)
        self._check = key_check(key)
        self._parts: list[np.ndarray | Future[np.ndarray]] = []
        self._pending: collections.deque[Future[np.ndarray]] = collections.deque()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ldp-rowhash") if threaded else None

    def update(self, values: np.ndarray, valid: np.ndarray | None = None) -> None:
        """Hash a batch of rows as read; ``valid`` (a mask, as :class:`ldpcli.io.VectorBatch` has it) keeps only
        the rows released."""
        if self._executor is None:
            self._parts.append(self._hash(values, valid))
            return
        while len(self._pending) >= _MAX_PENDING:
            self._pending.popleft().result()
        future = self._executor.submit(self._hash, values, valid)
        self._pending.append(future)
        self._parts.append(future)

    def _hash(self, values: np.ndarray, valid: np.ndarray | None) -> np.ndarray:
        return self.hasher.hash(values if valid is None else values[valid])

    def summarize(self, hashes: np.ndarray) -> ReleaseRows:
        """The :class:`ReleaseRows` of the rows whose ledger hashes are ``hashes`` (:func:`summarize`)."""
        distinct, sketch = summarize(hashes, self._sketch_key)
        return ReleaseRows(distinct, sketch, self._check)

    def finish(self) -> ReleaseRows:
        """The :class:`ReleaseRows` of every row passed to :meth:`update`."""
        parts = [part.result() if isinstance(part, Future) else part for part in self._parts]
        self._parts.clear()
        self.close()
        buffer = np.empty(sum(part.shape[0] for part in parts), dtype=_U64)
        at = 0
        while parts:  # each batch's hashes are freed as copied: 8 bytes a row at most, once
            part = parts.pop(0)
            buffer[at:at + part.shape[0]] = part
            at += part.shape[0]
        buffer.sort()
        distinct, sketch = summarize_sorted(buffer, self._sketch_key)
        return ReleaseRows(distinct, sketch, self._check)

    def close(self) -> None:
        """Stop the background thread, if any, after the pending batches."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
