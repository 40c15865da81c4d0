"""The ledger's file: its entries, what they add up to, its JSON format, and its lock.

:class:`ldpcli.release._ledger.Ledger` reads and rewrites the file only through this module:
:func:`parse_base` (every entry checked, DataError naming the first malformed one, a file of
another version refused), :func:`dump_ledger` (the compacted base; the append-only log beside it is
:mod:`ldpcli.release._ledger_log`'s), and :func:`locked`, the exclusive lock on the sibling
``<ledger>.lock`` (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows; on a platform with
neither, no lock) under which every read-modify-write runs. What the entries of one input spent
is their costs added up by basic composition (:func:`spend_of`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ldpcli.errors import DataError, LdpError, counted
from ldpcli.io._jsonfile import indented_json
from ldpcli.io._messages import _reason
from ldpcli.mechanisms import get_mechanism
from ldpcli.mechanisms._composition import ReleaseCost, total_cost
from ldpcli.mechanisms._hooks import FeatureSection
from ldpcli.release._central_claim import CentralTrainingClaim
from ldpcli.release._shuffle_claim import ShuffleClaim

if sys.platform == "win32":
    import msvcrt

    def _lock(descriptor: int) -> None:
        """Take the exclusive lock on byte 0 of the lock file, waiting as long as it takes."""
        os.lseek(descriptor, 0, os.SEEK_SET)
        while True:
            try:
                msvcrt.locking(descriptor, msvcrt.LK_LOCK, 1)  # retries for about 10 s, then raises
                return
            except OSError:
                continue

    def _unlock(descriptor: int) -> None:
        """Release the lock taken by :func:`_lock`."""
        os.lseek(descriptor, 0, os.SEEK_SET)
        msvcrt.locking(descriptor, msvcrt.LK_UNLCK, 1)

else:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - e.g. WebAssembly builds: no locking, documented above
        fcntl = None  # type: ignore[assignment]

    def _lock(descriptor: int) -> None:
        """Take the exclusive ``flock`` on the lock file, waiting as long as it takes."""
        if fcntl is not None:
            fcntl.flock(descriptor, fcntl.LOCK_EX)

    def _unlock(descriptor: int) -> None:
        """Release the lock taken by :func:`_lock`."""
        if fcntl is not None:
            fcntl.flock(descriptor, fcntl.LOCK_UN)


#: The ledger file's version: 2 has a generation and may have a log beside it; 1 is read too.
LEDGER_VERSION = 2
LEDGER_ENV = "LDP_LEDGER"

#: The ``"format"`` of a ledger file.
LEDGER_FORMAT = "ldp-ledger"
#: The states of an entry: published and confirmed, or reserved by a run that has not confirmed it (yet).
CONFIRMED = "confirmed"
RESERVED = "reserved"

HEX64 = re.compile(r"[0-9a-f]{64}")
_FIX = "ldp never resets a ledger: fix or move it, or choose another with `ledger` PATH"


def default_ledger_path() -> Path:
    """Where the ledger lives when no path is given (``Ledger.open()``).

    ``$LDP_LEDGER`` if set and non-empty; else the user data directory: ``%APPDATA%\\ldp`` on
    Windows, ``~/Library/Application Support/ldp`` on macOS, ``$XDG_DATA_HOME/ldp`` elsewhere
    (``~/.local/share/ldp`` when ``XDG_DATA_HOME`` is unset, empty or relative, as the XDG
    specification asks); the file is ``ledger.json`` there.
    """
    configured = os.environ.get(LEDGER_ENV)
    if configured:
        return Path(configured).expanduser()
    if sys.platform == "win32":
        appdata = os.environ.get("APPDATA")
        base = Path(appdata) if appdata else Path.home() / "AppData" / "Roaming"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        xdg = os.environ.get("XDG_DATA_HOME")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "ldp" / "ledger.json"


# --- entries and spends ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReservationOwner:
    """The process that reserved an entry and has not confirmed it (yet): its ``host`` name and ``pid``, to
    tell a running reservation from a dead one (the entry's ``owner``; a confirmed entry has none)."""

    host: str
    pid: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON record, ``{"host": ..., "pid": ...}``."""
        return {"host": self.host, "pid": self.pid}

    @classmethod
    def from_dict(cls, data: Any) -> ReservationOwner:
        """The owner ``data`` records: ValueError unless it has a text ``host`` and an integer ``pid``."""
        if not isinstance(data, Mapping) or not isinstance(data.get("host"), str):
            raise ValueError("has no host name")
        pid = data.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise ValueError("has no integer pid")
        return cls(data["host"], pid)


#: A section of an entry: its record, or (an edited or older ledger's) the object as the file stored it.
_Record = TypeVar("_Record", ReservationOwner, ShuffleClaim, CentralTrainingClaim)


def _section(kind: type[_Record], value: _Record | Mapping[str, Any] | None) -> _Record | dict[str, Any] | None:
    """``value`` as the entry keeps it: a record, None, or an object read from a ledger file (or given by a
    caller) as the record when it is exactly the record's JSON (``kind.from_dict``, then ``to_dict`` gives the
    same text: the same keys in the same order, the same numbers), else as it was stored, so that the ledger
    is written back unchanged. Anything else a caller gives is kept as given (a reader refuses it)."""
    if value is None or isinstance(value, kind) or not isinstance(value, Mapping):
        return value
    stored = dict(value)
    try:
        record = kind.from_dict(stored)
        if json.dumps(record.to_dict()) == json.dumps(stored):
            return record
    except (TypeError, ValueError):  # not the record (a missing field, a value no number), or not JSON
        pass
    return stored


def _stored(value: ReservationOwner | ShuffleClaim | CentralTrainingClaim | Mapping[str, Any]) -> dict[str, Any]:
    """A section as the ledger file stores it: a record's JSON, or the object it was read as."""
    return dict(value) if isinstance(value, Mapping) else value.to_dict()


@dataclass(frozen=True)
class LedgerEntry:
    """One release as the ledger records it.

    ``input`` and ``output`` are the paths as given, resolved; ``epsilon`` is the ε asked for and
    ``epsilon_exact`` the mechanism's exact worst-case ε (what the budget counts: the privacy loss the
    release incurs, never the ε asked when the release spends less, and never below its guarantee); ``delta`` is
    None for pure ε-LDP; ``created`` is UTC ISO-8601 (the release's ``created``, as its sidecar records it); ``tag`` is the input tag
    written into the release's sidecar; ``reproducible`` says whether the run was seeded.

    **Sections.** ``owner``, ``shuffled`` and ``central`` are typed records (:class:`ReservationOwner`,
    :class:`~ldpcli.release._shuffle_claim.ShuffleClaim`, :class:`~ldpcli.release._central_claim.CentralTrainingClaim`)
    when the ledger stored exactly a record's JSON, which is what ldp writes. An object that is not (a ledger
    edited by hand, damaged, or written by an older ldp: a field missing, one more, a number stored otherwise)
    is kept as the dict it was stored as, so that such a ledger still loads and is written back byte for byte;
    whoever reads the section's numbers checks that dict as the record's reader does and refuses it when it is
    unusable (``ldp budget`` names the entry), and a reservation's dict owner is judged by the host and pid it
    names. A caller may give a section as a dict too: it becomes the record under the same rule.
    """

    fingerprint: str
    input: str
    rows: int
    d: int
    columns: list[str]
    output: str
    mechanism: str
    epsilon: float
    epsilon_exact: float
    delta: float | None
    created: str
    tag: str
    reproducible: bool
    state: str = "confirmed"
    release: str = ""
    owner: ReservationOwner | dict[str, Any] | None = None
    #: The release's row file (its distinct keyed row hashes, :mod:`ldpcli.release._rowhash`), relative to the
    #: ledger's directory; "" for a release recorded without one (older ledgers, ``record``).
    rows_file: str = ""
    #: Why the release spends less than the ε asked (bcdp whose levels bind: ``epsilon_exact`` below
    #: ``epsilon``, and the budget counts ``epsilon_exact``); "" when it spends the ε asked.
    note: str = ""
    #: For a release written in a uniformly random order by an honest shuffler (``ReleaseOptions.shuffle``): its
    #: central claim, as the sidecar's ``release.shuffled`` records it; None for an unshuffled release.
    shuffled: ShuffleClaim | dict[str, Any] | None = None
    #: For a model trained with the central layer (``TrainingOptions.central``): its central guarantee, as the
    #: model's sidecar's ``central`` section records it; None for any other release (older ledgers included).
    central: CentralTrainingClaim | dict[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "owner", _section(ReservationOwner, self.owner))
        object.__setattr__(self, "shuffled", _section(ShuffleClaim, self.shuffled))
        object.__setattr__(self, "central", _section(CentralTrainingClaim, self.central))

    def to_dict(self) -> dict[str, Any]:
        """The entry as the ledger file stores it (JSON-able)."""
        return {
            "fingerprint": self.fingerprint,
            "input": self.input,
            "rows": self.rows,
            "d": self.d,
            "columns": list(self.columns),
            "output": self.output,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "epsilon_exact": self.epsilon_exact,
            "delta": self.delta,
            "created": self.created,
            "tag": self.tag,
            "reproducible": self.reproducible,
            "state": self.state,
            "release": self.release,
            **({"owner": _stored(self.owner)} if self.owner is not None else {}),
            **({"rows_file": self.rows_file} if self.rows_file else {}),
            **({"note": self.note} if self.note else {}),
            **({"shuffled": _stored(self.shuffled)} if self.shuffled is not None else {}),
            **({"central": _stored(self.central)} if self.central is not None else {}),
        }

    @property
    def cost(self) -> ReleaseCost:
        """What this release spent on each of its rows (δ 0 when it has none)."""
        return ReleaseCost(self.epsilon, self.epsilon_exact, self.delta or 0.0)

    @classmethod
    def from_dict(cls, data: Any, ledger: str | os.PathLike[str], *, index: int | None = None) -> LedgerEntry:
        """The entry stored as ``data`` in the ledger ``ledger`` (named in the DataError if malformed).

        ``index`` (0-based) names the entry in that message. Extra keys are ignored.
        """
        where = "an entry" if index is None else f"entry {index + 1} (counting from 1)"
        problem = entry_problem(data)
        if problem is not None:
            raise unreadable(os.fspath(ledger), f"{where}: {problem}")
        delta = data["delta"]
        return cls(
            fingerprint=data["fingerprint"],
            input=data["input"],
            rows=int(data["rows"]),
            d=int(data["d"]),
            columns=list(data["columns"]),
            output=data["output"],
            mechanism=data["mechanism"],
            epsilon=float(data["epsilon"]),
            epsilon_exact=float(data["epsilon_exact"]),
            delta=None if delta is None else float(delta),
            created=data["created"],
            tag=data["tag"],
            reproducible=data["reproducible"],
            state=data.get("state", CONFIRMED),
            release=data.get("release", ""),
            owner=data["owner"] if isinstance(data.get("owner"), Mapping) else None,
            rows_file=data.get("rows_file", ""),
            note=str(data.get("note", "")),
            shuffled=data["shuffled"] if isinstance(data.get("shuffled"), Mapping) else None,
            central=data["central"] if isinstance(data.get("central"), Mapping) else None,
        )


#: The fields every stored entry has (those added with reservations are optional: older entries lack them).
_ENTRY_FIELDS = tuple(name for name in LedgerEntry.__dataclass_fields__
                      if name not in ("state", "release", "owner", "rows_file", "note", "shuffled", "central"))
#: A row file's name: in the ledger's rows directory, named by its release id (nothing else is
#: ever read or removed through an entry, whatever a ledger file says).
_ROWS_FILE = re.compile(r"[^/\\]+-rows/([0-9a-f]{16})\.npy")



def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def entry_problem(data: Any) -> str | None:
    """Why ``data`` is not a valid stored entry, or None when it is."""
    if not isinstance(data, Mapping):
        return "not a JSON object"
    missing = [name for name in _ENTRY_FIELDS if name not in data]
    if missing:
        return f"missing field {', '.join(repr(name) for name in missing)}"
    fingerprint = data["fingerprint"]
    if not isinstance(fingerprint, str) or not HEX64.fullmatch(fingerprint):
        return "'fingerprint' is not 64 lowercase hex digits"
    for name in ("input", "output", "mechanism", "created", "tag"):
        if not isinstance(data[name], str):
            return f"{name!r} is not a string"
    if not _is_int(data["rows"]) or data["rows"] < 0:
        return "'rows' is not a non-negative integer"
    if not _is_int(data["d"]) or data["d"] < 1:
        return "'d' is not a positive integer"
    columns = data["columns"]
    if not isinstance(columns, (list, tuple)) or not all(isinstance(name, str) for name in columns):
        return "'columns' is not a list of strings"
    for name in ("epsilon", "epsilon_exact"):
        value = data[name]
        if not _is_number(value) or not math.isfinite(value) or value <= 0:
            return f"{name!r} is not a positive finite number"
    delta = data["delta"]
    if delta is not None and (not _is_number(delta) or not 0 <= delta < 1):
        return "'delta' is neither null nor a number in [0, 1)"
    if not isinstance(data["reproducible"], bool):
        return "'reproducible' is not true or false"
    if data.get("state", CONFIRMED) not in (CONFIRMED, RESERVED):
        return f"'state' is neither {CONFIRMED!r} nor {RESERVED!r}"
    if not isinstance(data.get("release", ""), str):
        return "'release' is not a string"
    rows_file = data.get("rows_file", "")
    if rows_file and not (isinstance(rows_file, str) and (match := _ROWS_FILE.fullmatch(rows_file))
                          and match[1] == data.get("release")):
        return "'rows_file' is not the row file of its release (<ledger>-rows/<release>.npy)"
    return None


@dataclass(frozen=True)
class Spend:
    """What the releases of one input (one fingerprint) have spent, by basic composition.

    ``epsilon`` is the sum of the exact ε (the privacy loss), ``epsilon_asked`` the sum of the ε
    asked for, ``delta`` the sum of δ when any release had one (else None: pure ε-LDP);
    ``inputs`` and ``outputs`` are the distinct paths in the order first seen; ``first`` and
    ``last`` are the creation times of the first and last release in the ledger. ``reserved`` of
    the ``releases`` are reservations not (yet) confirmed: they are counted in full. ``mechanisms``
    are the distinct mechanisms of the releases, in the order first seen.

    Only the overall ε (and δ) is composed: a mechanism with per-feature levels (bcdp) states them
    for one release, and :attr:`feature_levels` says what they are worth across several.
    """

    fingerprint: str
    releases: int
    epsilon: float
    epsilon_asked: float
    delta: float | None
    inputs: list[str]
    outputs: list[str]
    first: str
    last: str
    reserved: int = 0
    mechanisms: tuple[str, ...] = ()

    @property
    def feature_levels(self) -> str | None:
        """The sentence on per-feature levels when this input has several releases and one of them
        has such levels (bcdp), else None.

        The ledger composes the overall ε only. Each bcdp release states its features' levels for
        itself (the sidecar's ``features`` section); across releases the levels do not add up: by
        Prop. 4 of Aliakbarpour et al. (2024) feature i of the releases together is at most
        c_i + log(1 + q·e^{c_d} − q) with c the summed budget vectors, and the log term grows with the
        total c_d, so for two releases that each grant feature i the level δ it gives more than 2δ: the
        sum is no bound ldp can state. The bound that holds is the overall one: no feature is more
        exposed than the whole row, which has lost the ε spent.
        """
        if self.releases < 2 or not any(map(_has_feature_levels, self.mechanisms)):
            return None
        return (
            "the ledger composes the overall ε only: per-feature levels (bcdp) hold for each release alone, and "
            "across these releases their sum is not a bound ldp can state (Prop. 4's dependence term grows with "
            "the total); what bounds every feature here is the ε spent"
        )


def _has_feature_levels(name: str) -> bool:
    """Whether the registered mechanism ``name`` grants per-feature levels (:class:`FeatureSection`)."""
    try:
        return isinstance(get_mechanism(name), FeatureSection)
    except LdpError:  # a name the ledger recorded for a release of another kind
        return False


@dataclass(frozen=True)
class RowSpend:
    """What earlier releases spent on a new release's rows (:meth:`Ledger.row_spend`).

    ``epsilon``: the most any one row spent (sum of exact ε); ``times`` and ``least``: the most and
    fewest earlier releases that held one of its rows (of those released before); ``held`` of its
    ``rows`` distinct rows were released before (``rows`` 0: counted per input, not per row).
    """

    epsilon: float
    times: int
    least: int
    held: int
    rows: int

    def where(self) -> str:
        """What the spend is of, for a message."""
        if not self.rows:
            return f" over {counted(self.times, 'release')}"
        return (f" on its most released row ({self.held} of its {counted(self.rows, 'row')} "
                f"{'was' if self.held == 1 else 'were'} released before, up to {counted(self.times, 'time')})")


def spend_of(entries: list[LedgerEntry]) -> Spend:
    """The spend of ``entries`` (non-empty, all of one fingerprint, in ledger order): their costs added
    up (basic composition, :func:`ldpcli.mechanisms._composition.total_cost`)."""
    total = total_cost(entry.cost for entry in entries)
    return Spend(
        fingerprint=entries[0].fingerprint,
        releases=len(entries),
        epsilon=total.epsilon_exact,
        epsilon_asked=total.epsilon,
        delta=total.delta if any(entry.delta is not None for entry in entries) else None,
        inputs=distinct(entry.input for entry in entries),
        outputs=distinct(entry.output for entry in entries),
        first=entries[0].created,
        last=entries[-1].created,
        reserved=sum(entry.state == RESERVED for entry in entries),
        mechanisms=tuple(distinct(entry.mechanism for entry in entries)),
    )


def distinct(values: Iterable[str]) -> list[str]:
    """``values`` without repeats, in the order first seen."""
    return list(dict.fromkeys(values))


# --- the file ------------------------------------------------------------------------------------


def unreadable(label: str, reason: str) -> DataError:
    """The error for a ledger file ldp cannot use."""
    return DataError(f"{label}: cannot read the privacy-budget ledger ({reason}); {_FIX}")


def parse_base(raw: bytes, label: str) -> tuple[bytes, list[LedgerEntry], int, int]:
    """The key, entries, version and generation of the ledger file's bytes ``raw`` (its compacted base;
    the log beside it is :mod:`ldpcli.release._ledger_log`'s); DataError when unusable.

    Version 1 (a ledger without a log) has no generation: it is read as generation 0, and the next
    write converts it. A version newer than :data:`LEDGER_VERSION` is refused: ldp never guesses at
    a ledger it does not know (an older ldp refuses a version-2 ledger the same way, so it never
    reads the base without its log, which would under-count).
    """
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise unreadable(label, f"not JSON: {_reason(exc)}") from exc
    if not isinstance(data, dict):
        raise unreadable(label, f"not a JSON object but a {type(data).__name__}")
    if data.get("format") != LEDGER_FORMAT:
        raise unreadable(label, f'no "format": "{LEDGER_FORMAT}"')
    version = data.get("version")
    if not _is_int(version):
        raise unreadable(label, "no integer \"version\"")
    if version not in (1, LEDGER_VERSION):
        raise DataError(
            f"{label}: this privacy-budget ledger is version {version}, and this ldp reads version "
            f"{LEDGER_VERSION} (and 1); use the ldp that wrote it, or choose another ledger with `ledger` PATH "
            "(ldp never resets a ledger)"
        )
    generation: Any = data.get("generation", 0)  # none: no log was ever written beside it (version 1)
    if not _is_int(generation) or generation < 0:
        raise unreadable(label, 'no non-negative integer "generation"')
    key = data.get("key")
    if not isinstance(key, str) or not HEX64.fullmatch(key):
        raise unreadable(label, 'no "key" of 64 lowercase hex digits')
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise unreadable(label, 'no "entries" list')
    return (bytes.fromhex(key), [LedgerEntry.from_dict(item, label, index=i) for i, item in enumerate(entries)],
            int(version), int(generation))


def dump_ledger(key: bytes, entries: list[LedgerEntry], generation: int) -> str:
    """The ledger file's text (ASCII JSON, so paths that are not valid UTF-8 survive as escapes): the
    compacted base of ``generation`` (a log of that generation may follow it, :mod:`ldpcli.release._ledger_log`)."""
    document = {
        "format": LEDGER_FORMAT,
        "version": LEDGER_VERSION,
        "generation": generation,
        "key": key.hex(),
        "entries": [entry.to_dict() for entry in entries],
    }
    return indented_json(document, ensure_ascii=True) + "\n"


@contextlib.contextmanager
def locked(lock_path: Path, label: str) -> Iterator[None]:
    """Hold the exclusive lock on ``lock_path`` (created 0600 and left in place) for the block."""
    try:
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise DataError(
            f"{label}: cannot open the ledger's lock file {str(lock_path)!r} ({_reason(exc)}); "
            "check the directory's permissions, or choose another ledger with `ledger` PATH"
        ) from exc
    try:
        try:
            _lock(descriptor)
        except OSError as exc:
            raise DataError(
                f"{label}: cannot lock the ledger ({_reason(exc)}); "
                "keep the ledger on a local file system, or choose another with `ledger` PATH"
            ) from exc
        try:
            yield
        finally:
            _unlock(descriptor)
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Create files 0600 and directories 0700 in this block (the umask is per process, see record)."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)
