"""The one commit protocol of every release: reserve in the ledger, publish, confirm.

``ldp privatize`` (a file or a dataset directory), ``ldp train`` and ``ldp queries release`` all
end in a :class:`Commit` that they drive, so a release is counted the same way whatever wrote it:

1. **reserve**: :meth:`ldpcli.release._ledger.Ledger.reserve_all` checks ``max_budget`` for every input
   under the ledger's lock, against every release and every reservation of other runs and the inputs
   before it (per row when the charge carries the release's row hashes), and appends every input as
   a reservation (with its row file) in one rewrite; the input tags come from the key the ledger
   file holds;
2. **finish**: the caller writes the sidecars (they carry the tags and the release time
   :attr:`Commit.created`) as finished temporaries and adds them to the
   :class:`ldpcli.io._publication.Publication`;
3. **publish** (:meth:`Commit.publish`) the outputs together and **confirm** the reservations (one
   rewrite) before the commit point (the block of :meth:`ldpcli.io._publication.Publication.publishing`).

A failure before the commit point restores the previous outputs and takes the reservations out
again (a signal during the publication comes too late: it completes); after the commit point nothing
takes a release back; a kill leaves the reservations in the ledger (counted: the ledger over-counts, never
under-counts) and a journal that the next run in that directory rolls back. ``docs/commit-protocol.md``
states the protocol and what each kind of failure leaves.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ldpcli.errors import DataError, LdpError, counted
from ldpcli.io import _faults as faults
from ldpcli.io import _interrupts as interrupts
from ldpcli.io._atomic import process_alive
from ldpcli.io._messages import _reason
from ldpcli.io._publication import Publication, sweep_stale
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._ledger import BudgetError, Ledger, LedgerEntry, Reservation
from ldpcli.release._ledger_file import ReservationOwner
from ldpcli.release._rowindex import Charge
from ldpcli.release._sidecar import SUFFIX as SIDECAR_SUFFIX
from ldpcli.release._sidecar import sidecar_path, utc_now


class Commit:
    """One release's commit, driven by the caller: reserve, (write the sidecars), publish and confirm.

    ::

        with Commit(publication, ledger=ledger, charges=charges, max_budget=max_budget) as commit:
            tags = commit.reserve()             # step 1: one input tag per charge (None without a ledger)
            publication.add_file(sidecar_sink)  # step 2: the sidecars carry the tags and commit.created
            reservations = commit.publish()     # steps 3-5: publish, confirm, the commit point

    ``created`` is the release's time, the same in the sidecars and the ledger. On any failure in the
    block before the commit point the previous outputs are back in place, the reservations are taken
    out where the ledger can still be written, and the error goes on (an :class:`~ldpcli.errors.LdpError`,
    or an OSError made one, says what was kept). Once the publication passed its commit point the
    release is complete: an interrupt that surfaces after it (a signal held back during the commit is
    not raised at all) goes on, and the confirmed reservations stay.
    """

    def __init__(self, publication: Publication, *, ledger: Ledger | None, charges: Sequence[Charge],
                 max_budget: float | None) -> None:
        self.publication = publication
        self._ledger = ledger
        self._charges = charges
        self._max_budget = max_budget
        #: The confirmed reservations once :meth:`publish` returned (their ``notice`` says when an input
        #: was released before).
        self.reservations: list[Reservation] = []
        self.created = ""

    def __enter__(self) -> Commit:
        interrupts.check()
        self.created = utc_now()
        return self

    def reserve(self) -> list[str | None]:
        """Step 1: reserve every charge in the ledger at once; the input tags (None for each without a ledger)."""
        if self._ledger is None:
            return [None] * len(self._charges)
        with interrupts.held():  # a reservation written is one this run knows of, to take out again
            # every input in one rewrite of the ledger: a run of thousands of inputs stays linear
            self.reservations = self._ledger.reserve_all(
                [replace(charge, entry=replace(charge.entry, created=self.created)) for charge in self._charges],
                max_budget=self._max_budget)
        faults.checkpoint("reserved")
        return [reservation.tag for reservation in self.reservations]

    def publish(self) -> list[Reservation]:
        """Steps 3-5: publish the outputs together, confirm the reservations (one rewrite), commit."""
        with self.publication.publishing():
            if self._ledger is not None and self.reservations:
                self._ledger.confirm_all([reservation.release for reservation in self.reservations])
        return self.reservations

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, trace: object) -> None:
        if exc is None or self.publication.committed:  # past the commit point: nothing takes the release back
            return
        with interrupts.held():  # a signal now must not cut the cancellation short
            kept = _cancel(self._ledger, self.reservations)
        if isinstance(exc, OSError):  # a full disk, a lost permission: one line, saying what was kept
            raise DataError(f"{self.publication.label}: cannot publish the release ({_reason(exc)})"
                            f"{_after_failure(kept)}") from exc
        if isinstance(exc, LdpError) and not isinstance(exc, BudgetError):
            raise type(exc)(f"{exc.template}{_after_failure(kept)}") from exc


def _cancel(ledger: Ledger | None, reservations: Sequence[Reservation]) -> list[str]:
    """Take the reservations out, in one rewrite; the ids of those the ledger would not let go (they stay counted)."""
    if ledger is None or not reservations:
        return []
    try:
        ledger.cancel_all([reservation.release for reservation in reservations])
    except (LdpError, OSError):
        return [reservation.release for reservation in reservations]
    return []


def _after_failure(kept: Sequence[str]) -> str:
    """The sentence an error gets once its release was rolled back."""
    text = " (nothing was published: any previous output there is unchanged"
    if kept:
        text += (f"; the ledger could not be updated and still counts {counted(len(kept), 'reservation')} "
                 f"{', '.join(kept)}: `ldp budget` lists {'it' if len(kept) == 1 else 'them'} and "
                 "`ldp budget --release ID` removes one")
    return text + ")"



# --- what became of a reservation -------------------------------------------------------------------

#: What :func:`pending_releases` says of a reservation.
IN_PROGRESS = "in progress (its run is still running)"
PUBLISHED = "published but not confirmed (its run was interrupted after publishing)"
NOT_PUBLISHED = "not published (its run ended before publishing)"


@dataclass(frozen=True)
class PendingRelease:
    """A reservation not confirmed and its status (:data:`IN_PROGRESS`, :data:`PUBLISHED`, :data:`NOT_PUBLISHED`)."""

    entry: LedgerEntry
    status: str


def pending_releases(ledger: Ledger) -> list[PendingRelease]:
    """The ledger's reservations and what became of each, once the interrupted commits of dead runs
    in their output directories are rolled back (:func:`ldpcli.io._publication.sweep_stale`), so that
    what is judged published really is."""
    for directory in dict.fromkeys(Path(entry.output).parent for entry in ledger.pending()):
        sweep_stale(directory)
    return [PendingRelease(entry, _status(entry)) for entry in ledger.pending()]


def release_reservation(ledger: Ledger, release: str) -> LedgerEntry:
    """Remove the reservation ``release`` (or a unique prefix of it) if its release never appeared:
    refused while its run still runs on this host, or when its output is in place."""
    return ledger.release_reservation(release, lambda entry: None if (s := _status(entry)) == NOT_PUBLISHED else s)


def _status(entry: LedgerEntry) -> str:
    """Whether the run of a reservation is still running, published its outputs, or never did."""
    owner = entry.owner
    host: object
    pid: object
    if isinstance(owner, ReservationOwner):
        host, pid = owner.host, owner.pid
    else:  # none, or an edited ledger's owner kept as stored: judged by the host and pid it names
        host, pid = (owner or {}).get("host"), (owner or {}).get("pid")
    if host != socket.gethostname() or not isinstance(pid, int):
        return IN_PROGRESS if owner else NOT_PUBLISHED  # another host's run: it cannot be judged from here
    if process_alive(pid):
        return IN_PROGRESS
    return PUBLISHED if _published(entry) else NOT_PUBLISHED


def _published(entry: LedgerEntry) -> bool:
    """Whether the reserved release's output is in place with the reservation's tag and time: its
    sidecar (a file) or its manifest and one of its part sidecars (a dataset directory)."""
    output = Path(entry.output)
    if output.is_dir():
        return _mentions(output / MANIFEST_NAME, entry.created) and any(
            _mentions(part, entry.tag) for part in sorted(output.glob("*" + SIDECAR_SUFFIX)))
    side = sidecar_path(output)
    return _mentions(side, entry.tag) and _mentions(side, entry.created)


def _mentions(path: Path, text: str) -> bool:
    """Whether the small JSON file ``path`` holds ``text`` (True when it is there but unreadable: the safe side)."""
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as handle:
            return text.encode("utf-8") in handle.read(2**20)
    except OSError:
        return True
