"""The one commit protocol of every release: reserve in the ledger, publish, confirm.

``ldp privatize`` (a file or a dataset directory), ``ldp train`` and ``ldp queries release`` all
end in :func:`commit_release`, so a release is counted the same way whatever wrote it:

1. **reserve**: for each input, :meth:`ldpcli.budget.Ledger.reserve` checks ``max_budget`` under
   the ledger's lock, against every release and every reservation of other runs (per row when the
   charge carries the release's row hashes), and appends this release as a reservation (with its
   row file); its input tag comes from the key the ledger file holds;
2. **finish**: the caller's ``finish(tags, created)`` writes the sidecars (they carry the tags and the
   release time) as finished temporaries and adds them to the :class:`ldpcli.io.atomic.Publication`;
3. **publish** the outputs together and **confirm** the reservations before the commit point
   (:meth:`ldpcli.io.atomic.Publication.run`).

A failure before the commit point restores the previous outputs and takes the reservations out
again; a kill leaves the reservations in the ledger (counted: the ledger over-counts, never
under-counts) and a journal that the next run in that directory rolls back. ``docs/commit-protocol.md``
states the protocol and what each kind of failure leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ldpcli import faults, interrupts
from ldpcli.budget import BudgetError, Ledger, LedgerEntry, Reservation
from ldpcli.errors import DataError, LdpError
from ldpcli.io.atomic import Publication
from ldpcli.io.messages import _reason
from ldpcli.rowhash import ReleaseRows
from ldpcli.sidecar import utc_now


@dataclass(frozen=True)
class Charge:
    """What one input of a release costs: its ledger entry (tag and time are set at the reservation)."""

    entry: LedgerEntry
    #: The input as messages name it.
    label: str
    #: The release's row hashes (:meth:`ldpcli.budget.Ledger.row_digest`): the budget is then checked per
    #: row and the rows are kept in the ledger; None: per input (by the entry's fingerprint).
    rows: ReleaseRows | None = None


def commit_release(
    publication: Publication,
    finish: Callable[[Sequence[str | None], str], None],
    *,
    ledger: Ledger | None,
    charges: Sequence[Charge],
    max_budget: float | None,
) -> list[Reservation]:
    """Reserve each charge in ``ledger``, ``finish(tags, created)``, publish and confirm (see the module).

    ``tags`` has one input tag per charge (None for each when there is no ledger); ``created`` is
    the release's time, the same in the sidecars and the ledger. Returns the confirmed
    reservations (their ``notice`` says when an input was released before). On any failure the
    previous outputs are back in place, the reservations are taken out where the ledger can still
    be written, and the error is raised (an :class:`~ldpcli.errors.LdpError` says what was kept).
    """
    interrupts.check()
    created = utc_now()
    reservations: list[Reservation] = []
    try:
        if ledger is not None:
            for charge in charges:
                reservations.append(ledger.reserve(replace(charge.entry, created=created), max_budget=max_budget,
                                                   input_label=charge.label, rows=charge.rows))
            faults.checkpoint("reserved")
        finish([reservation.tag for reservation in reservations] if ledger is not None else [None] * len(charges),
               created)

        def confirm() -> None:
            for reservation in reservations:
                reservation.confirm()

        publication.run(confirm=confirm)
    except BaseException as exc:
        kept = _cancel(reservations)
        if isinstance(exc, OSError):  # a full disk, a lost permission: one line, saying what was kept
            raise DataError(f"{publication.label}: cannot publish the release ({_reason(exc)})"
                            f"{_after_failure(kept)}") from exc
        if isinstance(exc, LdpError) and not isinstance(exc, BudgetError):
            raise type(exc)(f"{exc}{_after_failure(kept)}") from exc
        raise
    return reservations


def _cancel(reservations: Sequence[Reservation]) -> list[str]:
    """Take the reservations out; the ids of those the ledger would not let go (they stay counted)."""
    kept = []
    for reservation in reservations:
        try:
            reservation.cancel()
        except (LdpError, OSError):
            kept.append(reservation.release)
    return kept


def _after_failure(kept: Sequence[str]) -> str:
    """The sentence an error gets once its release was rolled back."""
    text = " (nothing was published: any previous output there is unchanged"
    if kept:
        text += (f"; the ledger could not be updated and still counts reservation(s) {', '.join(kept)}: "
                 "`ldp budget` lists them and `ldp budget --release ID` removes one")
    return text + ")"

