"""``privatize --shuffle``: the privatized rows written in a uniformly random order, in flat memory.

A release of n reports of an ε0-LDP mechanism whose order is a uniformly random permutation, unknown to
the reader, is (ε, δ)-DP centrally with an ε far below ε0 (amplification by shuffling: Feldman, McMillan
and Talwar 2021, "Hiding among the clones", computed by :func:`ldpcli.math.shuffling.shuffle_bound`).
This module writes such a release and states what the claim rests on.

**The external shuffle** (:class:`ExternalShuffle`) is Rao's and Sandelius's randomization (Rao 1961,
"Generation of random permutations of given number of elements using random sampling numbers",
Sankhyā A 23; Sandelius 1962, "A simple randomization procedure", J. R. Statist. Soc. B 24): every row
goes to one of K buckets chosen uniformly and independently; then each bucket is put in a uniformly
random order and the buckets are written one after the other. A bucket that is still larger than the
memory budget is shuffled the same way, recursively. The result is a uniformly random permutation of
the rows. The proof, by exchangeability: the bucket labels are i.i.d. and independent of the rows, and
within a bucket every order is equally likely, so the probability of any output order is unchanged when
the input rows are relabelled by any permutation σ; all n! orders therefore have the same probability
(and, by induction on the depth, the same holds when a bucket is itself shuffled externally). The
bucket labels (``Generator.integers``, Lemire's unbiased bounded integers) and the in-memory orders
(``Generator.shuffle``, Fisher–Yates with unbiased bounded integers) are exact draws from the given
generator, which for a release is the cryptographically secure one of :mod:`ldpcli.math.bitgen`:
a permutation from a predictable generator would be no secret, and the bound would not apply.

Memory stays flat however large the file: rows are held in memory while they fit ``memory`` bytes
and written to K bucket files beyond that, and at most one bucket is read back at a time. The bucket
files are made beside the output (its file system has room for the output) and have no name from the
moment they are made (``tempfile.TemporaryFile``: ``O_TMPFILE`` on Linux, elsewhere unlinked at once),
so nothing of them is left after any end of the run: success, error, Ctrl-C or ``kill -9``.

**The claim** (:func:`shuffled_section`) is the sidecar's ``release.shuffled`` and the ledger entry's
``shuffled``: n, δ, the central ε (upper and lower bounds, and the closed form where it applies), the
theorem, and the trust assumptions in words (:func:`shuffle_assumptions`).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import numpy as np
import pyarrow as pa

from ldpcli.errors import DataError, UsageError
from ldpcli.io import interrupts
from ldpcli.io.faults import checkpoint
from ldpcli.io.messages import _reason
from ldpcli.math.bitgen import require_randomgen, secure_generator
from ldpcli.math.shuffling import check_central_delta, shuffle_bound

#: Bucket files per level of the external shuffle. With the default memory budget (256 MB, of which
#: half holds a bucket) one level shuffles 64 × 128 MB = 8 GB of float64 rows; a larger file's
#: buckets are shuffled by a second level, and so on.
FANOUT = 64
#: A seeded run's order is keyed by the spawn key ``(*input key, SHUFFLE_STREAM, 0)``: two words after the
#: input key where a key block has one, its index (:func:`ldpcli.release.randomness.block_generators`), so
#: the order's key is never a block's.
SHUFFLE_STREAM = 0x5348_5546
#: The fault step (:mod:`ldpcli.io.faults`) between the scatter into bucket files and the gather
#: into the output: the crash tests kill the run there.
SCATTERED = "shuffle-scattered"


class ExternalShuffle:
    """Rows of ``width`` float64 values in, the same rows out in a uniformly random order.

    Parameters
    ----------
    width : int
        Values per row.
    rng : numpy.random.Generator
        Draws the bucket labels and the orders within buckets (for a release: the secure generator).
    memory : int
        Bytes of rows held in memory at once: rows stay in memory while they fit, and each bucket read
        back holds about this many (one more level of buckets where one does not fit).
    directory : path
        Where the bucket files are made (beside the output): files without a name.
    fanout : int
        K, the bucket files per level (:data:`FANOUT`).

    :meth:`write` takes the privatized rows (as :class:`ldpcli.io.AtomicVectorWriter` does, without
    kept columns: a shuffled release has none), :meth:`rows` gives them back shuffled. A context
    manager: leaving it closes (and so frees) every bucket file.
    """

    def __init__(self, width: int, rng: np.random.Generator, *, memory: int, directory: Path,
                 fanout: int = FANOUT) -> None:
        if width < 1 or fanout < 2 or memory < 1:
            raise ValueError(f"width ({width}) and memory ({memory}) must be >= 1 and fanout ({fanout}) >= 2")
        self.width = width
        self.rng = rng
        self.directory = Path(directory)
        self.fanout = fanout
        self.memory = memory
        #: Rows held in memory at once (at least one).
        self.capacity = max(1, memory // (8 * width))
        #: Rows written so far.
        self.n = 0
        self._held: list[np.ndarray] = []
        self._buckets: list[IO[bytes]] = []
        self._sizes = np.zeros(fanout, dtype=np.int64)

    def __enter__(self) -> ExternalShuffle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Free the rows held and every bucket file (safe to repeat)."""
        self._held.clear()
        for bucket in self._buckets:
            with contextlib.suppress(OSError):
                bucket.close()
        self._buckets.clear()

    @property
    def spilled(self) -> bool:
        """Whether the rows went to bucket files (they did not fit in memory)."""
        return bool(self._buckets)

    def write(self, values: np.ndarray, keep: pa.Table | None = None) -> None:
        """Add privatized rows (n_b × width); ``keep`` must be None (no column rides along)."""
        if keep is not None:
            raise ValueError("a shuffled release copies no column: its rows would link back to the input")
        values = np.ascontiguousarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != self.width:
            raise ValueError(f"rows of width {self.width} expected, got shape {values.shape}")
        self.n += values.shape[0]
        if self.spilled:
            self._scatter(values)
            return
        self._held.append(values)
        if self.n > self.capacity:  # no longer fits: every row held so far goes to a bucket file
            self._buckets = [self._bucket_file() for _ in range(self.fanout)]
            held, self._held = self._held, []
            for block in held:
                self._scatter(block)

    def rows(self, batch_rows: int) -> Iterator[np.ndarray]:
        """Every row written, in a uniformly random order, in batches of at most ``batch_rows`` rows."""
        if not self.spilled:
            held = np.concatenate(self._held) if self._held else np.empty((0, self.width))
            self._held = []
            yield from self._ordered(held, batch_rows)
            return
        try:
            checkpoint(SCATTERED)  # the crash tests' fault: a kill, or a full disk, between scatter and gather
        except OSError as exc:
            raise self._failed(exc) from exc
        for bucket, size in zip(self._buckets, self._sizes.tolist()):
            interrupts.check()
            if size == 0:
                continue
            bucket.seek(0)
            if size <= self.capacity:
                yield from self._ordered(self._read(bucket, size), batch_rows)
            else:  # larger than the memory budget: one more level of buckets
                with ExternalShuffle(self.width, self.rng, memory=self.memory, directory=self.directory,
                                     fanout=self.fanout) as inner:
                    for start in range(0, size, self.capacity):
                        inner.write(self._read(bucket, min(self.capacity, size - start)))
                    bucket.close()  # its rows are in the inner buckets now
                    yield from inner.rows(batch_rows)
            bucket.close()

    def _ordered(self, block: np.ndarray, batch_rows: int) -> Iterator[np.ndarray]:
        """``block``'s rows in a uniformly random order (Fisher–Yates in place), in batches."""
        self.rng.shuffle(block)
        for start in range(0, block.shape[0], batch_rows):
            yield block[start: start + batch_rows]

    def _scatter(self, values: np.ndarray) -> None:
        """Each row to a bucket drawn uniformly; a bucket's rows keep their order (a stable sort)."""
        labels = self.rng.integers(0, self.fanout, size=values.shape[0])
        counts = np.bincount(labels, minlength=self.fanout)
        grouped = values[np.argsort(labels, kind="stable")]
        bounds = np.concatenate(([0], np.cumsum(counts)))
        try:
            for index in np.flatnonzero(counts).tolist():
                self._buckets[index].write(grouped[bounds[index]: bounds[index + 1]].data.cast("B"))
        except OSError as exc:
            raise self._failed(exc) from exc
        self._sizes += counts

    def _read(self, bucket: IO[bytes], rows: int) -> np.ndarray:
        """The next ``rows`` rows of a bucket file."""
        block = np.empty((rows, self.width), dtype=np.float64)
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
            "the output's size of free space beside the output (as float64): free some, then run again"
        )


def order_generator(root: np.random.SeedSequence, key: tuple[int, ...], seeded: bool) -> np.random.Generator:
    """The generator of a shuffle's order: ChaCha20 (:func:`ldpcli.math.bitgen.secure_generator`) with a
    256-bit key from the OS, or, for a seeded run, keyed by the run's ``root`` and the input's ``key``
    (HMAC-SHA256 of the spawn key ``(*key, SHUFFLE_STREAM, 0)``), so that a seeded output is reproducible.
    MissingDependency (``pip install 'ldp[secure]'``) without randomgen."""
    if not seeded:
        return secure_generator(None)
    return secure_generator(np.random.SeedSequence(root.entropy,
                                                   spawn_key=(*root.spawn_key, *key, SHUFFLE_STREAM, 0)))


def check_shuffle(*, shuffle: bool, delta: float | None, keep: Sequence[str], copies: int) -> None:
    """The refusals of a shuffled release that need no row: UsageError for a ``shuffle_delta``
    without ``shuffle`` or outside (0, 1), columns kept beside the vectors (an id or a label would
    link each row back to its person) and several copies of each row (the bound counts one report per
    person); MissingDependency without randomgen (the order's generator)."""
    if not shuffle:
        if delta is not None:
            raise UsageError("`shuffle_delta` is the δ of a shuffled release's central claim: it needs `shuffle`")
        return
    if delta is not None and not (isinstance(delta, (int, float)) and not isinstance(delta, bool)
                                  and 0 < delta < 1):
        raise UsageError(f"`shuffle_delta` must be a number in (0, 1), got {delta!r}")
    if keep:
        raise UsageError(
            f"`shuffle` does not allow `keep` columns ({', '.join(keep)}): a column copied beside the privatized "
            "vector (an id, a label) would link each row back to its person and undo the shuffle; leave them out"
        )
    if copies != 1:
        raise UsageError(
            f"`shuffle` takes one report per person, but `copies` is {copies}: the shuffle bound counts one "
            "ε0-LDP report per row; release the copies without `shuffle`"
        )
    require_randomgen()


def check_pure(delta: float, mechanism: str) -> None:
    """UsageError for a mechanism that is not pure ε0-LDP (its δ > 0: the Gaussian baseline):
    the shuffle bound is for pure ε0-LDP reports only."""
    if delta > 0:
        raise UsageError(
            f"`shuffle`: {mechanism} is (ε0, δ0)-LDP with δ0 = {delta:g}, not pure ε0-LDP, and the shuffle bound "
            f"(Feldman, McMillan and Talwar 2021) is for pure ε0-LDP reports: it gives {mechanism} no shuffle claim; "
            "use a pure ε-LDP mechanism (privunit2, privunitg, …) or release without `shuffle`"
        )


def shuffle_delta(n: int, delta: float | None) -> float:
    """The δ of the central claim for ``n`` rows: ``delta``, or 1/n² by default. UsageError when
    n < 2 (a single report hides among no other) or δ ≥ 1/n
    (:func:`ldpcli.math.shuffling.check_central_delta`: such a δ protects no one)."""
    if n < 2:
        raise UsageError(f"`shuffle`: the release has {n} row; a shuffle hides each report among the others, so "
                         "it needs at least 2 rows")
    chosen = 1.0 / n**2 if delta is None else float(delta)
    check_central_delta(chosen, n, "shuffle_delta")
    return chosen


def shuffle_assumptions(reproducible: bool) -> list[str]:
    """What the central claim of a shuffled release rests on, in words (the sidecar's ``assumptions``)."""
    said = [
        "an honest shuffler: it drops no report, adds none, and keeps the order secret; here ldp's own process "
        "on the data owner's machine was the shuffler, so the owner must never publish the unshuffled output or "
        "the order (or anything that reveals the input position of a row)",
        "one report per person: each row is one person's only report in this release (no person has two rows)",
        "identical shapes: every report has the same length and type, so none can be told apart by its form",
        "the order was drawn from a cryptographically secure generator (ChaCha20, seeded from the operating "
        "system), so it cannot be predicted",
    ]
    if reproducible:
        said[-1] = ("seeded run: the order was drawn from ChaCha20 keyed by the seed, so whoever knows the seed "
                    "can recompute it and the central claim does not hold against them; not for release")
    return said


def shuffled_section(epsilon0: float, n: int, delta: float, *, reproducible: bool) -> dict[str, Any]:
    """``release.shuffled``: the central (ε, δ) of ``n`` shuffled ε0-LDP reports and what it rests on.

    The numbers and the theorem are :func:`ldpcli.math.shuffling.shuffle_bound`'s (Feldman, McMillan and
    Talwar 2021, Thm 3.2 evaluated numerically; Thm 3.1's closed form): ``epsilon_central_upper`` is a
    certified upper bound on the central ε at ``delta`` (the claim); ``epsilon_central_lower`` is a value
    the reduction's exact ε is at least (how much tighter the method could not be, never a claim);
    ``epsilon_central_closed_form`` is None where Thm 3.1's condition fails. ``epsilon_local`` is ε0.
    """
    bound = shuffle_bound(epsilon0, n, delta).to_dict()
    return {
        "n": n,
        "delta": delta,
        "epsilon_local": epsilon0,
        "epsilon_central_upper": bound["epsilon_upper"],
        "epsilon_central_lower": bound["epsilon_lower"],
        "epsilon_central_closed_form": bound["epsilon_closed_form"],
        "theorem": bound["theorem"],
        "assumptions": shuffle_assumptions(reproducible),
    }
