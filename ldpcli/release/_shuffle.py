"""``ReleaseOptions.shuffle``: the privatized rows written in a uniformly random order, in flat memory.

A release of n reports of an ε0-LDP mechanism whose order is a uniformly random permutation, unknown to
the reader, is (ε, δ)-DP centrally with an ε far below ε0 (amplification by shuffling: Feldman, McMillan
and Talwar 2021, "Hiding among the clones", computed by :func:`ldpcli.math._shuffling.shuffle_bound`).
This module writes such a release and states what the claim rests on.

**The order** is the sort order of the rows' *order keys*: every row gets a key of 128 bits, uniform and
independent of every other row's (:class:`OrderKeys`: the ChaCha20 stream of the row's key block, keyed
like the noise's key blocks of :mod:`ldpcli.release._randomness` but in a domain of its own,
:data:`SHUFFLE_STREAM`, so the order is independent of the noise), and the rows are written by increasing
key, rows of equal keys by their input position. The order is therefore a function of the run's root,
the input's key and the row positions only: a seeded run gives the same bytes whatever ``memory``,
``threads`` or the batch size. It is uniform up to ties: the keys are i.i.d., so the law of their sort
order is unchanged when the rows are relabelled by any permutation (exchangeability), and on the event
that no two keys are equal every one of the n! orders is equally likely. Two given keys are equal with
probability 2⁻¹²⁸, so some two are with probability at most n(n − 1)/2 · 2⁻¹²⁸ < n²/2¹²⁹, and the order
is within n²/2¹²⁹ of a uniformly random permutation in total variation (n = 10⁹: 1.5·10⁻²¹). The central
claim is the bound's for a uniform order; for this order it holds with δ larger by at most
(1 + e^ε)·n²/2¹²⁹ (a coupling with the uniform order that breaks ties at random: the two differ only on
the tie event, whose probability does not depend on the data), which the claim's assumptions state as a
number (:func:`shuffle_assumptions`).

**The external sort** (:class:`ExternalShuffle`) computes that order in flat memory, as Rao's and
Sandelius's randomization does (Rao 1961, Sankhyā A 23; Sandelius 1962, J. R. Statist. Soc. B 24) but
with the bucket of a row read off its key instead of drawn apart: a most-significant-digit distribution
sort. Rows are held in memory while they fit ``memory`` bytes (values and keys) and otherwise go to K
bucket files: row to bucket ⌊u·K / 2¹²⁸⌋ for its key u, which then becomes u·K mod 2¹²⁸ (the next
base-K digit is the next bucket). Buckets are key intervals in increasing order, and within a bucket the
new key is a strictly increasing function of the old, so writing the buckets one after the other, each
sorted by its keys (stably: rows arrive in input order), gives exactly the sort order of the whole
file, however many levels ran. A bucket still larger than the memory budget is split the same way, one
level deeper; after ⌈128 / log₂ K⌉ levels a bucket's rows share one key and are written in input order.
At most one bucket is read back at a time. The bucket files are made beside the output (its file system
has room for the output) and have no name from the moment they are made (``tempfile.TemporaryFile``:
``O_TMPFILE`` on Linux, elsewhere unlinked at once), so nothing of them is left after any end of the
run: success, error, Ctrl-C or ``kill -9``.

The claim such a release states, and the refusals of a shuffled release, are
:mod:`ldpcli.release._shuffle_claim`.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, cast

import numpy as np
import pyarrow as pa

from ldpcli.errors import DataError
from ldpcli.io import _interrupts as interrupts
from ldpcli.io._faults import checkpoint
from ldpcli.io._messages import _reason
from ldpcli.math._counter_rng import CounterGenerator
from ldpcli.release._randomness import block_generators, root_seed

#: Bucket files per level of the external shuffle. With the default memory budget (256 MB, of which
#: half holds a bucket) one level sorts 64 × 128 MB = 8 GB of rows; a larger file's buckets are
#: split by a second level, and so on.
FANOUT = 64
#: The order keys of key block b are the ChaCha20 stream of the spawn key ``(*input key, SHUFFLE_STREAM, b)``:
#: one word longer than the noise's ``(*input key, b)`` (:func:`ldpcli.release._randomness.block_generators`),
#: so no order key is ever drawn from a block's noise stream.
SHUFFLE_STREAM = 0x5348_5546
#: 64-bit words of an order key (128 bits), stored before each row's values.
KEY_WORDS = 2
#: The fault step (:mod:`ldpcli.io._faults`) between the scatter into bucket files and the gather
#: into the output: the crash tests kill the run there.
SCATTERED = "shuffle-scattered"

#: A batch's work: (input rows, their first row's position) → (privatized rows, rows moved onto the domain).
Privatize = Callable[[np.ndarray, int], tuple[np.ndarray, int]]

_LOW32 = np.uint64(0xFFFF_FFFF)
_SHIFT32 = np.uint64(32)


def order_root(root: np.random.SeedSequence, seeded: bool) -> np.random.SeedSequence:
    """The root of a run's order keys: the run's ``root`` for a seeded run (reproducible), else a root of
    its own with 256 bits from the OS (:func:`ldpcli.release._randomness.root_seed`), so that the order's
    secret shares nothing with the noise's."""
    return root if seeded else root_seed(None)


@dataclass(frozen=True)
class OrderKeys:
    """The order keys of an input's rows: 128 uniform bits per row, a function of (``root``, ``key``, the
    row's position) only.

    Row p of an input of dimension d is row p − b·B of key block b = ⌊p / B⌋, B = :func:`~ldpcli.release._randomness.key_block_rows` (d)
    (the noise's blocks), and its key is words 2(p − b·B) and 2(p − b·B) + 1 of that block's stream
    (ldp's ChaCha20 stream keyed by HMAC-SHA256 of the spawn key ``(*key, SHUFFLE_STREAM, b)`` under ``root``: the
    noise's :func:`~ldpcli.release._randomness.block_generators` with ``rng="chacha20"``, in a stream of their own;
    no extra package), the first
    word the more significant. ``root`` is :func:`order_root`'s: a seeded run's, or a fresh one from the OS.
    """

    root: np.random.SeedSequence
    key: tuple[int, ...]

    def __call__(self, first_row: int, rows: int, d: int) -> np.ndarray:
        """The keys (rows × 2, uint64) of rows [first_row, first_row + rows), a batch aligned to key blocks."""
        keys = np.empty((rows, KEY_WORDS), dtype=np.uint64)
        for part, generator in block_generators(self.root, (*self.key, SHUFFLE_STREAM), first_row, rows, d,
                                                rng="chacha20"):
            keys[part] = cast(CounterGenerator, generator).random_raw(KEY_WORDS * (part.stop - part.start)).reshape(
                -1, KEY_WORDS)
        return keys

    def keyed(self, privatize: Privatize, d: int) -> Privatize:
        """``privatize`` (rows of dimension ``d`` and their first row → privatized rows, rows moved) with each
        row's key put before its values (:func:`keyed_rows`): the records :meth:`ExternalShuffle.write` takes."""

        def with_keys(values: np.ndarray, first_row: int) -> tuple[np.ndarray, int]:
            out, moved = privatize(values, first_row)
            return keyed_rows(self(first_row, out.shape[0], d), out), moved

        return with_keys


def keyed_rows(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The records :meth:`ExternalShuffle.write` takes: each row's key (uint64 words) then its float64 values,
    as one float64 array (n × (2 + width)) whose first two columns hold the keys' bits. Seed reports' uint64
    words go in as their bits too (:meth:`ExternalShuffle.rows` hands them out as float64: view them back)."""
    records = np.empty((values.shape[0], KEY_WORDS + values.shape[1]), dtype=np.float64)
    records[:, :KEY_WORDS] = np.ascontiguousarray(keys, dtype=np.uint64).view(np.float64)
    records[:, KEY_WORDS:] = np.ascontiguousarray(values).view(np.float64) if values.dtype == np.uint64 else values
    return records


def _mulhi(x: np.ndarray, factor: np.uint64) -> np.ndarray:
    """⌊x·factor / 2⁶⁴⌋ for uint64 ``x`` and factor < 2³², in 64-bit arithmetic (x split into 32-bit halves)."""
    return ((x >> _SHIFT32) * factor + (((x & _LOW32) * factor) >> _SHIFT32)) >> _SHIFT32


def split_keys(keys: np.ndarray, fanout: int) -> tuple[np.ndarray, np.ndarray]:
    """(bucket, next key) of 128-bit keys u (rows of [high word, low word]): ⌊u·K / 2¹²⁸⌋ and u·K mod 2¹²⁸,
    K = ``fanout`` < 2³². The bucket is non-decreasing in u, and within a bucket the next key is strictly
    increasing in u."""
    factor = np.uint64(fanout)
    high, low = keys[:, 0], keys[:, 1]
    carry = _mulhi(low, factor)
    high_low = high * factor
    new_high = high_low + carry  # mod 2⁶⁴; it wrapped exactly when it came out below high_low
    bucket = _mulhi(high, factor) + (new_high < high_low)
    return bucket.astype(np.intp), np.stack([new_high, low * factor], axis=1)


class ExternalShuffle:
    """Rows of ``width`` float64 values in, with their order keys; the same rows out, sorted by key.

    Parameters
    ----------
    width : int
        Values per row.
    memory : int
        Bytes of records (keys and values, 8·(2 + width) per row) held in memory at once: rows stay in
        memory while they fit, and each bucket read back holds about this many (one more level of
        buckets where one does not fit).
    directory : path
        Where the bucket files are made (beside the output): files without a name.
    fanout : int
        K, the bucket files per level (:data:`FANOUT`), 2 ≤ K < 2³².
    level : int
        How many levels of buckets split the keys before this one (0 for the whole file).

    :meth:`write` takes the records of the privatized rows in input order (:func:`keyed_rows`; no kept
    column: a shuffled release has none), :meth:`rows` gives the values back sorted by key (the order of
    the module's docstring). A context manager: leaving it closes (and so frees) every bucket file.
    """

    def __init__(self, width: int, *, memory: int, directory: Path, fanout: int = FANOUT, level: int = 0) -> None:
        if width < 1 or not 2 <= fanout < 2**32 or memory < 1:
            raise ValueError(f"width ({width}) and memory ({memory}) must be >= 1 and fanout ({fanout}) in [2, 2**32)")
        self.width = width
        self.directory = Path(directory)
        self.fanout = fanout
        self.memory = memory
        self.level = level
        #: Rows held in memory at once (at least one).
        self.capacity = max(1, memory // (8 * (KEY_WORDS + width)))
        #: Rows written so far.
        self.n = 0
        self._held: list[np.ndarray] = []
        #: The bucket files by bucket, each made when its first row comes (so a large K costs no idle files).
        self._buckets: dict[int, IO[bytes]] = {}
        self._sizes: dict[int, int] = {}
        self._spilled = False

    def __enter__(self) -> ExternalShuffle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Free the rows held and every bucket file (safe to repeat)."""
        self._held.clear()
        for bucket in self._buckets.values():
            with contextlib.suppress(OSError):
                bucket.close()
        self._buckets.clear()

    @property
    def spilled(self) -> bool:
        """Whether the rows went to bucket files (they did not fit in memory)."""
        return self._spilled

    @property
    def exhausted(self) -> bool:
        """Whether the keys have no digit left at this level: K^level ≥ 2¹²⁸, so that every row of a bucket
        here has the same key as every other."""
        return self.level * math.log2(self.fanout) >= 128

    def write(self, records: np.ndarray, keep: pa.Table | None = None) -> None:
        """Add the records of privatized rows (n_b × (2 + width), :func:`keyed_rows`), in input order;
        ``keep`` must be None (no column rides along)."""
        if keep is not None:
            raise ValueError("a shuffled release copies no column: its rows would link back to the input")
        if records.dtype != np.uint64:  # keyed_rows's float64 records: the same bits, read as words
            records = np.ascontiguousarray(records, dtype=np.float64).view(np.uint64)
        if records.ndim != 2 or records.shape[1] != KEY_WORDS + self.width:
            raise ValueError(f"records of {KEY_WORDS} key words and {self.width} values expected, got shape "
                             f"{records.shape}")
        self.n += records.shape[0]
        if self.spilled:
            self._scatter(records)
            return
        self._held.append(records)
        if self.n > self.capacity:  # no longer fits: every row held so far goes to a bucket file
            self._spilled = True
            held, self._held = self._held, []
            for block in held:
                self._scatter(block)

    def rows(self, batch_rows: int) -> Iterator[np.ndarray]:
        """Every row written, sorted by key (equal keys in input order), in batches of at most ``batch_rows``."""
        for batch in self._records(batch_rows):
            yield batch[:, KEY_WORDS:].view(np.float64)  # the values' bits, read as float64 (no copy)

    def _records(self, batch_rows: int) -> Iterator[np.ndarray]:
        """The records of :meth:`rows`, keys included."""
        if not self.spilled:
            held = np.concatenate(self._held) if self._held else np.empty((0, KEY_WORDS + self.width), np.uint64)
            self._held = []
            yield from self._ordered(held, batch_rows)
            return
        try:
            checkpoint(SCATTERED)  # the crash tests' fault: a kill, or a full disk, between scatter and gather
        except OSError as exc:
            raise self._failed(exc) from exc
        for index in sorted(self._buckets):
            interrupts.check()
            bucket, size = self._buckets[index], self._sizes[index]
            bucket.seek(0)
            if size <= self.capacity:
                yield from self._ordered(self._read(bucket, size), batch_rows)
            else:  # larger than the memory budget: one more level of buckets (none left: one key, input order)
                with ExternalShuffle(self.width, memory=self.memory, directory=self.directory, fanout=self.fanout,
                                     level=self.level + 1) as inner:
                    for start in range(0, size, self.capacity):
                        chunk = self._read(bucket, min(self.capacity, size - start))
                        if inner.exhausted:
                            yield from (chunk[i: i + batch_rows] for i in range(0, chunk.shape[0], batch_rows))
                        else:
                            inner.write(chunk)
                    bucket.close()  # its rows are in the inner buckets now
                    yield from inner._records(batch_rows)
            bucket.close()

    def _ordered(self, block: np.ndarray, batch_rows: int) -> Iterator[np.ndarray]:
        """``block``'s records sorted by key (a stable sort: equal keys keep their input order), in batches."""
        order = np.lexsort((block[:, 1], block[:, 0]))  # indices only: a sorted copy would double the memory held
        for start in range(0, block.shape[0], batch_rows):
            yield block[order[start: start + batch_rows]]

    def _scatter(self, records: np.ndarray) -> None:
        """Each record to the bucket its key's next digit names, with that digit taken off the key; a bucket's
        records keep their order (a stable sort)."""
        labels, keys = split_keys(records[:, :KEY_WORDS], self.fanout)
        order = np.argsort(labels, kind="stable")
        grouped = records[order]
        grouped[:, :KEY_WORDS] = keys[order]
        present, starts, counts = np.unique(labels[order], return_index=True, return_counts=True)
        for index, start, count in zip(present.tolist(), starts.tolist(), counts.tolist()):
            if index not in self._buckets:
                self._buckets[index], self._sizes[index] = self._bucket_file(), 0
            try:
                self._buckets[index].write(grouped[start: start + count].data.cast("B"))
            except OSError as exc:
                raise self._failed(exc) from exc
            self._sizes[index] += count

    def _read(self, bucket: IO[bytes], rows: int) -> np.ndarray:
        """The next ``rows`` records of a bucket file."""
        block = np.empty((rows, KEY_WORDS + self.width), dtype=np.uint64)
        try:
            got = bucket.readinto(block.data.cast("B"))  # type: ignore[attr-defined]
        except OSError as exc:
            raise self._failed(exc) from exc
        if got != block.nbytes:
            raise DataError(f"{self.directory}: a temporary file of the shuffle came back short ({got} of "
                            f"{block.nbytes} bytes); nothing was published, run again")
        return block

    def _bucket_file(self) -> IO[bytes]:
        try:
            return tempfile.TemporaryFile(dir=self.directory)
        except OSError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: OSError) -> DataError:
        return DataError(
            f"{self.directory}: could not write the shuffle's temporary files ({_reason(exc)}); they need about "
            "the output's size of free space beside the output (as float64, plus 16 bytes a row): free some, "
            "then run again"
        )
