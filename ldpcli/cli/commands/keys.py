"""``ldp keys``: the data owner's Ed25519 signing key, beside the ledger (``init``, ``show``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import KEYS_LEDGER_OPTION, command_app
from ldpcli.cli.render import err, out
from ldpcli.release._signing import create_key, load_signer

app = command_app(
    help="The data owner's signing key (Ed25519, beside the ledger): sign releases so that analysts can check who wrote "
    "them (`ldp verify`, `estimate-mean --trust`). Needs `pip install 'ldp[sign]'`.",
)


@app.command("init", cls=Command)
def keys_init(ledger: Optional[Path] = KEYS_LEDGER_OPTION) -> None:
    """Create the data owner's signing key beside the ledger (signing-key.pem, mode 0600) and print its public key.

    An existing key is never replaced. The private key stays with the ledger; give analysts the
    public key printed on stdout (`ldp keys show` prints it again).
    """
    signer = create_key(ledger)
    err.print(f"wrote {signer.path} (the private key: keep it as private as the ledger; share the public key below)",
              markup=False)
    out.print(signer.public_key.text, markup=False)


@app.command("show", cls=Command)
def keys_show(
    ledger: Optional[Path] = KEYS_LEDGER_OPTION,
    pem: bool = typer.Option(False, "--pem", help="Print the public key as a PEM block instead of ldpkey1-…."),
) -> None:
    """Print the data owner's public key: what analysts pass to `ldp verify --trust` and `estimate-mean --trust`."""
    key = load_signer(ledger).public_key
    text = key.pem().rstrip("\n") if pem else key.text
    out.print(text, markup=False)
