"""``ldp budget``: the privacy budget each input has spent, from the data owner's ledger: basic composition, and at
``--delta`` the (ε, δ) of optimal or advanced composition; the central (ε, δ) of shuffled releases and of
training runs with the central layer (:mod:`ldpcli.release._accounting`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.accounting import Guarantee
from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import LEDGER_OPTION, command_app
from ldpcli.cli.render import err, fmt, fmt_bound, out, render
from ldpcli.release._accounting import compose_central, compose_local
from ldpcli.release._commit import pending_releases, release_reservation
from ldpcli.release._ledger import Ledger
from ldpcli.release._ledger_file import spend_of

app = command_app()


@app.command("budget", cls=Command)
def budget(
    ledger: Optional[Path] = LEDGER_OPTION,
    release: Optional[str] = typer.Option(
        None, "--release", metavar="ID", help="Remove the reservation ID (or a unique prefix of it) of a release that "
        "never appeared: its run ended before publishing. A reservation still running, or whose output is in place, "
        "is refused."
    ),
    delta: Optional[float] = typer.Option(
        None, "--delta", metavar="D", help="Also state each input's (ε, δ) at δ = D (0 < D < 1) on top of the "
        "releases' own δ: the optimal composition of Kairouz, Oh & Viswanath (Thm 3.3) when its releases share one "
        "ε, else the smallest of their Thm 3.5, Dwork-Rothblum-Vadhan's advanced composition and dp-accounting's "
        "privacy loss distributions; never more than the sum of the ε's. Each number names its theorem. Without it, "
        "basic composition only (the sum, valid at δ = 0). Central guarantees (shuffled releases, training runs with "
        "the central layer): D is added to their δ's too."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The privacy budget each input has spent: every release recorded in the data owner's ledger.

    Releasing the same people's rows k times at ε₁, …, ε_k is (ε₁ + … + ε_k)-LDP (basic composition;
    for the Gaussian baseline also δ₁ + … + δ_k), exact at δ = 0. With --delta D each input also gets
    the smallest ε at δ = D that composition theorems prove (plus the releases' own δ's), and the
    theorem that proves it. Local guarantees protect each person against the server and anyone else
    who holds the released rows. Releases written by `ldp privatize --shuffle` also have a central (ε, δ): it
    protects against the analyst and every user of the output, and rests on an honest shuffler (one
    report per person, in a uniformly random order nobody else sees). So do models trained by
    `ldp train --central-radius`: their (ε, δ) protects against whoever sees the model, for adding or
    removing one row, and rests on the server running the central layer honestly. An input gets a
    central line only when all its releases have a central guarantee; several are composed (among
    shuffled releases, whose neighbours replace one row, a training run's (ε, δ) counts as
    (2ε, (1 + e^ε)δ)). Inputs are identified by a fingerprint of their
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
    groups = book.by_input()  # grouped once: the spends and the guarantees line up by construction
    spends = [spend_of(entries) for entries in groups]
    local = [compose_local(entries, delta) for entries in groups]
    central = [compose_central(entries, delta) for entries in groups]
    payload = {"ledger": str(book.path), "delta": delta,
               "inputs": [{**_spend_dict(s), "local": guarantees.to_dict(),
                           "central": None if shuffled is None else shuffled.to_dict(), "central_note": note}
                          for s, guarantees, (shuffled, note) in zip(spends, local, central)],
               "pending": [_pending_dict(p) for p in pending]}

    def show() -> None:
        _print_budget(book, spends, pending)
        _print_guarantees(spends, local, central, delta)

    render(payload, as_json, show)


def _print_guarantees(spends: list[Any], local: list[Any], central: list[tuple[Guarantee | None, str]],
                      delta: float | None) -> None:
    """Each input's (ε, δ) by theorem: local at --delta, central for shuffled releases (``ldp budget``)."""
    if not spends or (delta is None and not any(note for _, note in central)):
        return
    title = "Guarantees per input" + ("" if delta is None else f" (composition at δ = {fmt(delta)} beyond the releases' own)")
    table = Table(title=title, title_justify="left")
    for name in ("input", "guarantee", "ε", "δ", "theorem"):
        table.add_column(name, justify="right" if name in ("ε", "δ") else "left")
    notes = []
    for spend, guarantees, (shuffled, note) in zip(spends, local, central):
        name = ", ".join(spend.inputs)
        rows = [("local, sum", guarantees.basic)]
        if guarantees.advanced is not None:
            rows.append(("local, at δ", guarantees.advanced))
        if shuffled is not None:
            rows.append(("central", shuffled))
        for index, (label, guarantee) in enumerate(rows):
            table.add_row("" if index else name, label, fmt_bound(guarantee.epsilon), fmt_bound(guarantee.delta),
                          guarantee.theorem)
        if note:
            notes.append(f"{name}: {'central: ' if shuffled is not None else 'no central ε: '}{note}.")
    out.print(table)
    out.print("Reading: each person in an input is (ε, δ)-DP on each line, ε an upper bound proved by the theorem "
              "named (exact for the optimal composition). Local: against the server, who sees the rows as released. "
              "Central: against the analyst and every user of the output, who see the rows only through an honest "
              "shuffler, or only a model trained by an honest server with the central layer.", markup=False)
    for line in notes:
        out.print(line, markup=False)


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
