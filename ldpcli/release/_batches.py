"""The batch engine of a release: privatize a reader's batches into a writer, in file order.

:class:`Privatizer` is the work on one batch (move the rows onto the domain, then each key block of
rows with its own generator); :func:`run_batches` reads, privatizes on a thread pool and writes in
order through one writer thread, feeding the ledger's fingerprint and row digest on the way. A file
release (:mod:`ldpcli.release._file`) runs it once over its input; a dataset's parts
(:mod:`ldpcli.release._dataset`) each run it on one thread.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from queue import Full, Queue
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ldpcli.io import AtomicVectorWriter, VectorBatch, VectorReader
from ldpcli.io import _interrupts as interrupts
from ldpcli.mechanisms import Mechanism, SeedReports
from ldpcli.release._ledger import InputFingerprint
from ldpcli.release._randomness import DEFAULT_RNG, block_generators
from ldpcli.release._rowhash import RowDigest
from ldpcli.release._shuffle import ExternalShuffle, Privatize

#: Seconds between two looks at a recorded cancellation while :func:`run_batches` waits for its writer thread.
_JOIN_POLL = 0.05


@dataclass(frozen=True)
class Privatizer:
    """The work on one batch: move rows onto the domain, then privatize each key block with its
    own generator (:func:`ldpcli.release._randomness.block_generators`)."""

    mech: Mechanism
    root: np.random.SeedSequence
    key: tuple[int, ...]
    precision: float  # unit roundoff of the input's values (the domain's slack depends on it)
    copies: int = 1  # independent outputs per row, side by side, drawn one after the other per block
    rng: str = DEFAULT_RNG  # the key blocks' generator: "chacha20" (the default), "pcg64" or "secure"
    #: Write each row as its seed report (one copy): (rows, words) uint64 instead of (rows, d) float64.
    reports: SeedReports | None = None

    def __call__(self, values: np.ndarray, first_row: int) -> tuple[np.ndarray, int]:
        """(privatized rows, rows moved onto the domain) for the batch starting at ``first_row``."""
        values, moved = self.mech.project(values, self.precision)
        blocks = list(block_generators(self.root, self.key, first_row, values.shape[0], self.mech.d, rng=self.rng))
        if self.reports is not None:
            seeds = np.empty((values.shape[0], self.reports.words), dtype=np.uint64)
            for rows, rng in blocks:
                seeds[rows] = self.reports.encode(values[rows], rng)
            return seeds, moved
        if len(blocks) == 1 and self.copies == 1:
            return self.mech.privatize(values, blocks[0][1]), moved
        d = self.mech.d
        out = np.empty((values.shape[0], self.copies * d), dtype=np.float64)
        for rows, rng in blocks:
            for copy in range(self.copies):
                out[rows, copy * d: (copy + 1) * d] = self.mech.privatize(values[rows], rng)
        return out, moved


def _feed(batch: VectorBatch, fingerprint: InputFingerprint | None, row_digest: RowDigest | None) -> None:
    """Give a batch as read to the ledger's fingerprint (every row) and row digest (the valid rows)."""
    if fingerprint is not None:
        fingerprint.update(batch.values)
    if row_digest is not None:
        row_digest.update(batch.values, batch.valid)


def run_batches(
    reader: VectorReader,
    writer: AtomicVectorWriter | ExternalShuffle,
    privatize: Privatize,
    threads: int,
    on_rows: Callable[[int], None] | None,
    fingerprint: InputFingerprint | None = None,
    row_digest: RowDigest | None = None,
) -> tuple[int, int]:
    """Privatize every batch of ``reader`` into ``writer`` in order; return (rows, clipped rows).

    ``writer`` is the output, or the shuffle that holds the rows until all are privatized. ``fingerprint`` (the ledger's) is fed every batch's values as read, in file order; ``row_digest``
    (the ledger's row hashes) the rows released (those ``skip_invalid`` left out excepted).

    With several threads, the calling thread only reads and submits batches to the pool, and a writer thread
    takes the results in file order and encodes, hashes and writes them, so that reading,
    privatizing and writing overlap. At most ``threads`` batches wait between reader and writer.
    The one writer is the bound on many cores (see the module's docstring); a dataset directory's
    parts each run this loop on one thread, side by side (:func:`ldpcli.release._dataset.privatize_part`).
    """
    counts = [0, 0]  # rows, clipped rows

    def write(result: tuple[np.ndarray, int], keep: Any, valid: np.ndarray | None) -> None:
        values, clipped = result
        rows = values.shape[0]
        if valid is not None:  # skip_invalid: privatized by position, then the invalid rows left out
            values = values[valid]
            keep = None if keep is None else keep.filter(pa.array(valid))
        writer.write(values, keep)
        counts[0] += values.shape[0]
        counts[1] += clipped
        if on_rows is not None:
            on_rows(rows)

    if threads == 1:
        for batch in reader:
            interrupts.check()
            _feed(batch, fingerprint, row_digest)
            write(privatize(batch.values, batch.first_row), batch.keep, batch.valid)
        return counts[0], counts[1]

    queue: Queue[tuple[Future[tuple[np.ndarray, int]], Any, np.ndarray | None] | None] = Queue(maxsize=threads)
    stop = threading.Event()  # set by the reader on failure or interrupt: discard what is queued
    failure: list[BaseException] = []

    def drain() -> None:
        while (item := queue.get()) is not None:
            if stop.is_set() or failure:
                continue  # keep taking items so that the reader never blocks on a full queue
            try:
                write(item[0].result(), item[1], item[2])
            except BaseException as exc:  # re-raised by the reader below
                failure.append(exc)

    pool = ThreadPoolExecutor(max_workers=threads)
    writing = threading.Thread(target=drain, name="ldp-writer", daemon=True)
    writing.start()
    try:
        for batch in reader:
            interrupts.check()
            if failure:
                break
            _feed(batch, fingerprint, row_digest)
            queue.put((pool.submit(privatize, batch.values, batch.first_row), batch.keep, batch.valid))
    except BaseException:
        stop.set()
        raise
    finally:
        # Never leave the writer running: the output's encoder and file go away once this returns, and a
        # thread still inside pyarrow when the interpreter exits crashes it. A signal meanwhile is
        # recorded (raised once the threads are joined) and tells the writer to skip what is queued.
        with interrupts.held():
            _join_writer(queue, writing, stop)
            pool.shutdown(wait=True, cancel_futures=True)
    interrupts.check()
    if failure:
        raise failure[0]
    return counts[0], counts[1]


def _join_writer(queue: Queue[Any], writing: threading.Thread, stop: threading.Event) -> None:
    """Hand the writer thread of :func:`run_batches` its end mark and wait until it has ended.

    The waits are short and repeated so that a cancellation recorded meanwhile (a signal, held back
    here) sets ``stop`` at once: the writer then finishes only the batch it is writing and skips
    the queued ones, instead of writing them all first.
    """
    while True:
        if interrupts.requested() is not None:
            stop.set()
        try:
            queue.put(None, timeout=_JOIN_POLL)
            break
        except Full:
            continue
    while writing.is_alive():
        writing.join(_JOIN_POLL)
        if interrupts.requested() is not None:
            stop.set()
