"""``ldp budget``: the privacy budget each input has spent, from the data owner's ledger (basic composition)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import LEDGER_OPTION, command_app
from ldpcli.cli.render import err, fmt, out, render
from ldpcli.release.commit import pending_releases, release_reservation
from ldpcli.release.ledger import Ledger

app = command_app()


@app.command("budget", cls=Command)
def budget(
    ledger: Optional[Path] = LEDGER_OPTION,
    release: Optional[str] = typer.Option(
        None, "--release", metavar="ID", help="Remove the reservation ID (or a unique prefix of it) of a release that "
        "never appeared: its run ended before publishing. A reservation still running, or whose output is in place, "
        "is refused."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The privacy budget each input has spent: every release recorded in the data owner's ledger.

    Releasing the same people's rows k times at ε₁, …, ε_k is (ε₁ + … + ε_k)-LDP (basic composition;
    for the Gaussian baseline also δ₁ + … + δ_k). Inputs are identified by a fingerprint of their
    values, so a copy or a re-encoded file counts as the same input. `ldp privatize` records every
    release; --max-budget there refuses one that would go past a cap. Only the overall ε is composed:
    bcdp's per-feature levels hold for each release alone (an input with several says so).

    A release is reserved in the ledger before it is published and confirmed after; a run killed in
    between leaves its reservation, counted in full, and listed here as pending with what became of
    it. Remove one whose release never appeared with --release ID.
    """
    book = Ledger.open(ledger)
    pending = pending_releases(book)  # rolls back what dead runs left first
    if release is not None:
        removed = release_reservation(book, release)
        err.print(f"ldp: removed reservation {removed.release} (ε = {fmt(removed.epsilon_exact)} of "
                  f"{removed.input}, never published)", markup=False)
        book = Ledger.open(ledger)
        pending = pending_releases(book)
    spends = book.summary()
    payload = {"ledger": str(book.path), "inputs": [_spend_dict(s) for s in spends],
               "pending": [_pending_dict(p) for p in pending]}
    render(payload, as_json, lambda: _print_budget(book, spends, pending))


def _print_budget(book: Any, spends: list[Any], pending: list[Any]) -> None:
    """The budget spent per input and the reservations not confirmed (``ldp budget``)."""
    if not spends:
        out.print(f"No release recorded in {book.path}.", markup=False)
        return
    table = Table(title=f"Privacy budget spent per input ({book.path})", title_justify="left")
    for name in ("input", "releases", "ε spent", "δ", "last release", "outputs"):
        table.add_column(name, justify="right" if name in ("releases", "ε spent", "δ") else "left")
    for spend in spends:
        releases = str(spend.releases) + (f" ({spend.reserved} pending)" if spend.reserved else "")
        table.add_row(", ".join(spend.inputs), releases, fmt(spend.epsilon),
                      "—" if spend.delta is None else fmt(spend.delta), spend.last, ", ".join(spend.outputs))
    out.print(table)
    out.print("Reading: each person in an input has lost at most 'ε spent' of privacy across its releases "
              "(the sum of their exact ε).", markup=False)
    for spend in spends:
        if spend.feature_levels is not None:
            out.print(f"{', '.join(spend.inputs)}: {spend.feature_levels}.", markup=False)
    if pending:
        table = Table(title="Reserved releases not confirmed (counted above)", title_justify="left")
        for name in ("id", "input", "ε", "output", "status"):
            table.add_column(name, justify="right" if name == "ε" else "left")
        for item in pending:
            table.add_row(item.entry.release, item.entry.input, fmt(item.entry.epsilon_exact), item.entry.output,
                          item.status)
        out.print(table)
        out.print("A release 'not published' can be removed with `ldp budget --release ID`.", markup=False)


def _pending_dict(item: Any) -> dict[str, Any]:
    """One reservation of ``ldp budget --json``."""
    entry = item.entry
    return {"id": entry.release, "input": entry.input, "epsilon": entry.epsilon_exact, "output": entry.output,
            "created": entry.created, "status": item.status}


def _spend_dict(spend: Any) -> dict[str, Any]:
    """One input's line of ``ldp budget --json`` (the fingerprint stays in the ledger)."""
    return {"inputs": list(spend.inputs), "releases": spend.releases, "pending": spend.reserved,
            "epsilon": spend.epsilon,
            "epsilon_asked": spend.epsilon_asked, "delta": spend.delta, "first": spend.first, "last": spend.last,
            "outputs": list(spend.outputs),
            **({"feature_levels": spend.feature_levels} if spend.feature_levels is not None else {})}
