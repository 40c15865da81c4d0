"""``privatize --shuffle``: the privatized rows written in a uniformly random order, in flat memory.

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

**The claim** (:func:`shuffled_section`) is the sidecar's ``release.shuffled`` and the ledger entry's
``shuffled``: n, δ, the central ε (upper and lower bounds, and the closed form where it applies), the
theorem, and the trust assumptions in words (:func:`shuffle_assumptions`); a reader gets it back checked
as :class:`ShuffleClaim` (:meth:`ShuffleClaim.from_dict`).
"""

from __future__ import annotations

import contextlib
import decimal
import math
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import numpy as np
import pyarrow as pa

from ldpcli.accounting import ShuffledRelease, compose
from ldpcli.errors import DataError, UsageError, counted
from ldpcli.io import _interrupts as interrupts
from ldpcli.io._faults import checkpoint
from ldpcli.io._messages import _reason
from ldpcli.math._bitgen import require_randomgen
from ldpcli.math._shuffling import default_central_delta
from ldpcli.mechanisms import Mechanism
from ldpcli.mechanisms._composition import ReleaseCost
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
    (ChaCha20 keyed by HMAC-SHA256 of the spawn key ``(*key, SHUFFLE_STREAM, b)`` under ``root``: the noise's
    :func:`~ldpcli.release._randomness.block_generators` with ``rng="secure"``, in a stream of their own), the first
    word the more significant. ``root`` is :func:`order_root`'s: a seeded run's, or a fresh one from the OS.
    """

    root: np.random.SeedSequence
    key: tuple[int, ...]

    def __call__(self, first_row: int, rows: int, d: int) -> np.ndarray:
        """The keys (rows × 2, uint64) of rows [first_row, first_row + rows), a batch aligned to key blocks."""
        keys = np.empty((rows, KEY_WORDS), dtype=np.uint64)
        for part, generator in block_generators(self.root, (*self.key, SHUFFLE_STREAM), first_row, rows, d,
                                                rng="secure"):
            keys[part] = generator.bit_generator.random_raw(KEY_WORDS * (part.stop - part.start)).reshape(-1, KEY_WORDS)
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
    as one float64 array (n × (2 + width)) whose first two columns hold the keys' bits."""
    records = np.empty((values.shape[0], KEY_WORDS + values.shape[1]), dtype=np.float64)
    records[:, :KEY_WORDS] = np.ascontiguousarray(keys, dtype=np.uint64).view(np.float64)
    records[:, KEY_WORDS:] = values
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


def check_pure(mech: Mechanism, cost: ReleaseCost) -> None:
    """UsageError for reports that are not pure ε0-LDP: the shuffle bound is for pure ε0-LDP reports only.

    Refused, each with its own reason: a mechanism that is (ε0, δ0)-LDP itself (the Gaussian baseline),
    and a pure one made (ε0, δ)-LDP by its secure rendering (:mod:`ldpcli.mechanisms._rendering`: a grid
    or sign rendering's δ > 0; a finite one's is 0 and keeps a pure mechanism pure)."""
    delta, mechanism = cost.delta, mech.name
    rendering = getattr(mech, "rendering", None)  # `secure`'s, else None
    rendering_delta = rendering.delta if rendering is not None else 0.0
    if delta > 0 and rendering_delta > 0 and delta <= rendering_delta:
        raise UsageError(
            f"`shuffle` with `secure`: {mechanism}'s secure rendering adds δ = {rendering_delta:g} to its guarantee "
            "(each report is then (ε0, δ)-LDP), and the shuffle bound (Feldman, McMillan and Talwar 2021) holds for "
            "pure ε0-LDP reports only, so it gives these reports no central claim; drop `secure` to shuffle "
            f"{mechanism}'s reports, or `shuffle` to render them securely"
        )
    if delta > 0:
        raise UsageError(
            f"`shuffle`: {mechanism} is (ε0, δ0)-LDP with δ0 = {delta:g}, not pure ε0-LDP, and the shuffle bound "
            f"(Feldman, McMillan and Talwar 2021) is for pure ε0-LDP reports: it gives {mechanism} no shuffle claim; "
            "use a pure ε-LDP mechanism (privunit2, privunitg, …) or release without `shuffle`"
        )


def shuffle_delta(n: int, delta: float | None) -> float:
    """The δ of the central claim for ``n`` rows: ``delta``, or 1/n² by default. UsageError when
    n < 2 (a single report hides among no other) or δ ≥ 1/n
    (:func:`ldpcli.math._shuffling.check_central_delta`: such a δ protects no one)."""
    if n < 2:
        raise UsageError(f"`shuffle`: the release has {counted(n, 'row')}; a shuffle hides each report among the others, so "
                         "it needs at least 2 rows")
    return default_central_delta(n, delta, "shuffle_delta")


def tie_distance(n: int) -> float:
    """n²/2¹²⁹: a bound on the total variation distance between the order of n rows (the sort order of
    i.i.d. 128-bit keys, ties by position) and a uniformly random permutation: the probability that two of
    the n keys are equal is at most n(n − 1)/2 · 2⁻¹²⁸ (a union bound over the pairs)."""
    return float(n) ** 2 / 2.0**129


def _rounded_up(value: float) -> str:
    """A bound in three significant digits, rounded up (so still a bound)."""
    return f"{decimal.Context(prec=3, rounding=decimal.ROUND_CEILING).create_decimal(value):g}"


def shuffle_assumptions(reproducible: bool, n: int, epsilon: float) -> list[str]:
    """What the central claim of a shuffled release rests on, in words (the sidecar's ``assumptions``): ``n``
    the rows, ``epsilon`` the central ε claimed (for the order's distance from uniform, :func:`tie_distance`)."""
    slack = (1 + math.exp(epsilon)) * tie_distance(n)
    said = [
        "an honest shuffler: it drops no report, adds none, and keeps the order secret; here ldp's own process "
        "on the data owner's machine was the shuffler, so the owner must never publish the unshuffled output or "
        "the order (or anything that reveals the input position of a row)",
        "one report per person: each row is one person's only report in this release (no person has two rows)",
        "identical shapes: every report has the same length and type, so none can be told apart by its form",
        "the order was drawn from a cryptographically secure generator (ChaCha20, seeded from the operating "
        "system), so it cannot be predicted",
        f"the order sorts the rows by keys of 128 random bits (equal keys by position): it is within "
        f"n²/2¹²⁹ ≤ {_rounded_up(tie_distance(n))} of a uniformly random order in total variation, so the claim, "
        f"the bound's for a uniform order, holds for this one with δ larger by at most (1 + e^ε)·n²/2¹²⁹ ≤ "
        f"{_rounded_up(slack)}",
    ]
    if reproducible:
        said[3] = ("seeded run: the order was drawn from ChaCha20 keyed by the seed, so whoever knows the seed "
                    "can recompute it and the central claim does not hold against them; not for release")
    return said


def shuffled_section(epsilon0: float, n: int, delta: float, *, reproducible: bool) -> dict[str, Any]:
    """``release.shuffled``: the central (ε, δ) of ``n`` shuffled ε0-LDP reports and what it rests on.

    The numbers and the theorem are :func:`ldpcli.accounting.compose`'s of one
    :class:`~ldpcli.accounting.ShuffledRelease`, :func:`ldpcli.math._shuffling.shuffle_bound`'s (Feldman, McMillan and
    Talwar 2021, Thm 3.2 evaluated numerically; Thm 3.1's closed form): ``epsilon_central_upper`` is a
    certified upper bound on the central ε at ``delta`` (the claim); ``epsilon_central_lower`` is a value
    the reduction's exact ε is at least (how much tighter the method could not be, never a claim);
    ``epsilon_central_closed_form`` is None where Thm 3.1's condition fails. ``epsilon_local`` is ε0.
    """
    (shuffled,) = compose([ShuffledRelease(epsilon0, n, delta)]).shuffles
    bound = shuffled.to_dict()
    return {
        "n": n,
        "delta": delta,
        "epsilon_local": epsilon0,
        "epsilon_central_upper": bound["epsilon_upper"],
        "epsilon_central_lower": bound["epsilon_lower"],
        "epsilon_central_closed_form": bound["epsilon_closed_form"],
        "theorem": bound["theorem"],
        "assumptions": shuffle_assumptions(reproducible, n, bound["epsilon_upper"]),
    }


@dataclass(frozen=True)
class ShuffleClaim:
    """A shuffled release's central claim as a reader gets it (``Sidecar.shuffled``, ``Release.shuffled``):
    the n shuffled ε0-LDP reports are (``epsilon_central_upper``, ``delta``)-DP centrally, under
    ``assumptions`` (:func:`shuffled_section` says what each number is)."""

    n: int
    delta: float
    epsilon_local: float
    epsilon_central_upper: float
    epsilon_central_lower: float
    epsilon_central_closed_form: float | None
    theorem: str
    assumptions: tuple[str, ...]

    @classmethod
    def from_dict(cls, data: Any, n: int | None = None) -> ShuffleClaim:
        """The claim ``release.shuffled`` records, checked: ValueError saying what is wrong (every missing
        field at once, else the first field that has the wrong type or range: n ≥ 2, 0 < δ < 1/n,
        0 < ε_local, 0 ≤ lower ≤ upper, closed form None or > 0, a theorem, at least one assumption).
        ``n``: the rows of the release it came with, which the record's n must equal; None where no row
        count comes with it (a ledger entry counts the input's rows). Readers call :func:`read_shuffle_claim`."""
        if not isinstance(data, Mapping):
            raise ValueError("is not an object")
        missing = [name for name in _REQUIRED if name not in data]
        if missing:
            listed = ", ".join(repr(name) for name in missing)
            raise ValueError(f"field {listed} is missing" if len(missing) == 1 else f"fields {listed} are missing")
        count = int(_number(data, "n", integer=True))
        delta, local = _number(data, "delta"), _number(data, "epsilon_local")
        upper, lower = _number(data, "epsilon_central_upper"), _number(data, "epsilon_central_lower")
        closed = None if data.get("epsilon_central_closed_form") is None else _number(data, "epsilon_central_closed_form")
        if n is not None and count != n:
            raise ValueError(f"field 'n' is {count} but the release has {counted(n, 'row')}")
        if count < 2 or not 0 < delta < 1 / count:
            raise ValueError(f"field 'delta' is {delta!r}, outside (0, 1/n) for n = {count}")
        if not local > 0:
            raise ValueError("field 'epsilon_local' must be > 0")
        if not 0 <= lower <= upper or upper <= 0:
            raise ValueError(f"field 'epsilon_central_upper' ({upper!r}) must be > 0 and at least "
                             f"'epsilon_central_lower' ({lower!r}), which must be >= 0")
        if closed is not None and not closed > 0:
            raise ValueError("field 'epsilon_central_closed_form' must be null or > 0")
        theorem, assumptions = data.get("theorem"), data.get("assumptions")
        if not isinstance(theorem, str) or not theorem:
            raise ValueError("field 'theorem' is missing or not a text")
        if (not isinstance(assumptions, list) or not assumptions
                or not all(isinstance(item, str) and item for item in assumptions)):
            raise ValueError("field 'assumptions' is missing or not a list of texts")
        return cls(count, delta, local, upper, lower, closed, theorem, tuple(assumptions))


#: The fields every ``release.shuffled`` has (``epsilon_central_closed_form`` may be absent or null).
_REQUIRED = ("n", "delta", "epsilon_local", "epsilon_central_upper", "epsilon_central_lower", "theorem", "assumptions")


def read_shuffle_claim(data: Any, n: int | None, *, where: str, remedy: str) -> ShuffleClaim:
    """The one reading of a recorded shuffle claim, for every reader (a sidecar, a ledger entry): ``data``
    checked by :meth:`ShuffleClaim.from_dict` (``n`` as there), or DataError ``"{where} {what is wrong};
    {remedy}"`` on one line, ``where`` naming the file and the record."""
    try:
        return ShuffleClaim.from_dict(data, n)
    except ValueError as exc:
        raise DataError(f"{where} {exc}; {remedy}") from exc


def _number(data: Mapping[str, Any], name: str, *, integer: bool = False) -> float:
    """``data[name]`` when it is a finite number as a float, or an int when ``integer`` (a bool is neither),
    else ValueError naming the field."""
    value = data.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        if integer:
            return value
        with contextlib.suppress(OverflowError):
            return float(value)
    if isinstance(value, float) and not integer and math.isfinite(value):
        return value
    raise ValueError(f"field {name!r} is missing or not a finite {'integer' if integer else 'number'}")
