"""``ldp verify``: who signed each release, and that nothing changed since."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.cli._typer_compat import Command
from ldpcli.cli.flags import text_in_flags
from ldpcli.cli.options import command_app
from ldpcli.cli.render import out, render
from ldpcli.errors import counted
from ldpcli.release._signing import Status, read_public_key, verify_paths

app = command_app()


@app.command("verify", cls=Command)
def verify_cmd(
    releases: list[Path] = typer.Argument(
        ..., help="Privatized files, directories of them, quoted globs, or dataset directories (their manifest and "
        "every part).", show_default=False, metavar="PATHS...",
    ),
    trust: Optional[str] = typer.Option(
        None, "--trust", metavar="KEY", help="The data owner's public key (ldpkey1-…, a PEM key, or a file holding "
        "either): a release signed by another key is untrusted."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Check who signed each release and that nothing changed since: its sidecar's signature and its bytes.

    Status per file: valid, unsigned, untrusted (signed by another key than --trust) or invalid (changed
    after signing). Exit 0 only if every release is valid and signed by KEY (--trust), else 1: without
    --trust a valid signature says only that someone signed it (anyone can, with a key of their own).
    """
    trusted = None if trust is None else read_public_key(trust)
    results = verify_paths(releases, trusted)
    ok = all(result.verified for result in results)
    payload = {"ok": ok, "trusted_key": None if trusted is None else trusted.text,
               "releases": [result.to_dict() for result in results]}
    render(payload, as_json, lambda: _print_signatures(results, trusted))
    if not ok:
        raise typer.Exit(1)


def _print_signatures(results: list[Any], trusted: Any) -> None:
    """One line per release: its signature's status and key (``ldp verify``)."""
    title = "Signatures" + ("" if trusted is None else f" (trusted key {trusted.short})")
    table = Table(title=title, title_justify="left")
    for name in ("release", "status", "key", "note"):
        table.add_column(name)
    for result in results:
        status = result.status.value if result.verified else result.status.value.upper()
        if result.status is Status.VALID and not result.trusted:
            status = "VALID, UNTRUSTED KEY"
        table.add_row(str(result.path), status, "—" if result.key is None else result.key.short,
                      text_in_flags(result.note))
    out.print(table)
    bad = sum(not result.ok for result in results)
    untrusted = sum(result.ok and not result.verified for result in results)
    if bad:
        out.print(f"{bad} of {counted(len(results), 'release')} {'is' if bad == 1 else 'are'} not valid"
                  + ("" if trusted is None else " for this key")
                  + ".", markup=False)
    if untrusted:
        keys = sorted({result.key.short for result in results if result.ok and result.key is not None})
        out.print(f"{untrusted} of {counted(len(results), 'release')} {'is' if untrusted == 1 else 'are'} signed by an "
                  f"untrusted key ({', '.join(keys)}) and not verified: the signatures check out, but anyone can sign; "
                  "pass --trust KEY with the data owner's public key (`ldp keys show` prints it on their machine).",
                  markup=False)
