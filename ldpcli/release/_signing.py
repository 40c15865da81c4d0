"""Signed releases: the data owner signs each sidecar and manifest; an analyst verifies them.

A sidecar is checked against its data (n, SHA-256) and against its own parameters, but that does
not say who wrote it: anyone can edit ε and recompute every derived number, or delete
``release.input_tag``. A signature does. The data owner holds an Ed25519 key pair (through the
``cryptography`` package, the optional extra ``pip install 'ldp[sign]'``, imported only when a key
is used); each sidecar and each dataset manifest is signed with the private key, and whoever holds
the owner's public key checks that the document is exactly what the owner wrote. Because the
sidecar records the SHA-256 of its data file (and a manifest the SHA-256 of every part), and ldp's
readers check the data against it, a valid signature on the sidecar authenticates the data too.

**Keys.** The private key lives beside the owner's ledger (:func:`ldpcli.release._ledger.default_ledger_path`
or any ledger path): ``signing-key.pem`` in the ledger's directory (:func:`key_path`), an
unencrypted PKCS#8 PEM file created with mode 0600 (never readable by others, not even while it is
being written) and never replaced. :func:`create_key` makes it, :func:`load_signer` reads it
(refusing one that others can read), :func:`signer_for` reads it if it exists. The public key's
text form is ``ldpkey1-`` followed by the standard base64 of its 32 raw bytes (44 characters,
padded); :meth:`PublicKey.parse` reads that or a PEM ``PUBLIC KEY`` block, and
:func:`read_public_key` either of them or a file that holds one.

**The signature section.** :func:`sign_document` returns the document (a sidecar or a manifest, any
JSON object) with a top-level ``signature`` section::

    "signature": {"algorithm": "ed25519", "public_key": "ldpkey1-…", "value": "<base64 of 64 bytes>"}

The signed message is the **canonical form** of the document without its ``signature`` key
(:func:`canonical_bytes`): ``json.dumps(document, sort_keys=True, separators=(",", ":"),
ensure_ascii=True, allow_nan=False)`` encoded as ASCII, i.e. Python's JSON with keys sorted at
every level, no whitespace, every non-ASCII character escaped as ``\\uXXXX`` and floats written as
Python's shortest round-trip ``repr``. The file's own layout (indentation, key order) is free:
the document is parsed and re-serialised before the signature is checked, so a signature made on
the dictionary before it was written verifies on the file after it was read.

**Verifying.** :func:`verify_document` says one of :class:`Status`: ``unsigned``; ``valid`` (and,
when a trusted key is given, by that key); ``untrusted`` (a valid signature, by another key);
``invalid`` (the document was changed after it was signed, or the section is malformed); or
``unchecked`` (signed, but ``cryptography`` is not installed, so it could not be checked: only
without a trusted key, which requires the check). :func:`verify_paths` checks data files (their
sidecars and their bytes) and dataset directories (the manifest, then every part it lists), for
``ldp verify``; :func:`check_signatures` is what :func:`ldpcli.analysis._scan.scan` runs on the sidecars it
reads: an invalid signature is always refused, and with a trusted key anything but ``valid`` is.
A release is *verified* (:attr:`Verification.verified`, what ``ldp verify`` exits 0 for) only when its
signature is valid and by a trusted key: a valid signature checked against no key says only that
someone signed it, and anyone can (an attacker signs an edited sidecar with a key of their own).

**Wiring it into a release.** Where a sidecar or manifest dictionary is built, before it is
written::

    signer = signer_for(ledger.path)          # once, before any work: None when the owner has no key
    ...
    content = build_sidecar(...)
    if signer is not None:
        content = signer.sign(content)
    write_sidecar(path, content)

An unsigned release stays readable; readers label it ``unsigned`` (:func:`signature_label`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import enum
import json
import os
import secrets
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ldpcli.errors import DataError, MissingDependency, UsageError, install_hint, quoted

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

#: The private key's file name, in the ledger's directory.
KEY_NAME = "signing-key.pem"
#: The prefix of a public key's text form.
PUBLIC_KEY_PREFIX = "ldpkey1-"
ALGORITHM = "ed25519"
SECTION = "signature"
#: How to install the package that signs and verifies.
INSTALL_HINT = install_hint("sign")
#: Characters of the base64 key shown in a short form (72 bits: enough to tell keys apart by eye).
SHORT_CHARS = 12
# Sidecars and manifests are small; a larger "document" is refused before it is read.
_MAX_DOCUMENT_BYTES = 64 * 2**20
_MAX_KEY_BYTES = 64 * 2**10
_PEM_PUBLIC = "-----BEGIN PUBLIC KEY-----"


#: A valid signature checked against no trusted key (:attr:`Verification.note`).
UNTRUSTED_KEY = ("signed by an untrusted key {key} (the signature checks out, but anyone can sign with a key of "
                 "their own): pass `trust` KEY, the data owner's public key, to verify who wrote it")


class Status(str, enum.Enum):
    """What a document's signature says (see the module's docstring)."""

    UNSIGNED = "unsigned"
    VALID = "valid"
    UNTRUSTED = "untrusted"
    INVALID = "invalid"
    UNCHECKED = "unchecked"


def _ed25519() -> ModuleType:
    """The ``cryptography`` Ed25519 module; :class:`MissingDependency` with the install line if absent."""
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise MissingDependency(
            f"signing and verifying releases need the cryptography package, which is not installed: {INSTALL_HINT}"
        ) from None
    return ed25519


def require_cryptography() -> None:
    """:class:`MissingDependency` (one line naming ``pip install 'ldp[sign]'``) unless it is installed."""
    _ed25519()


# --- public keys ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key: its 32 raw bytes, shown as ``ldpkey1-<base64>``."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != 32:
            raise ValueError(f"an Ed25519 public key has 32 bytes, got {len(self.raw)}")

    @property
    def text(self) -> str:
        """The text form: ``ldpkey1-`` and the standard, padded base64 of the raw bytes."""
        return PUBLIC_KEY_PREFIX + base64.b64encode(self.raw).decode("ascii")

    @property
    def short(self) -> str:
        """The first characters of :attr:`text`, followed by ``…``: for tables and labels."""
        return self.text[: len(PUBLIC_KEY_PREFIX) + SHORT_CHARS] + "…"

    def pem(self) -> str:
        """The key as a PEM ``PUBLIC KEY`` block (SubjectPublicKeyInfo), for other tools."""
        ed25519 = _ed25519()
        from cryptography.hazmat.primitives import serialization

        key = ed25519.Ed25519PublicKey.from_public_bytes(self.raw)
        pem: bytes = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        return pem.decode("ascii")

    @classmethod
    def parse(cls, text: str) -> PublicKey:
        """Read ``ldpkey1-<base64>`` or a PEM ``PUBLIC KEY`` block; ValueError saying why not."""
        text = text.strip()
        if text.startswith(PUBLIC_KEY_PREFIX):
            try:
                raw = base64.b64decode(text[len(PUBLIC_KEY_PREFIX):], validate=True)
            except binascii.Error:
                raise ValueError(f"{PUBLIC_KEY_PREFIX}… must be followed by base64") from None
            if len(raw) != 32:
                raise ValueError(f"{PUBLIC_KEY_PREFIX}… must hold 32 bytes, this one holds {len(raw)}")
            return cls(raw)
        if text.startswith(_PEM_PUBLIC):
            ed25519 = _ed25519()
            from cryptography.hazmat.primitives import serialization

            try:
                key = serialization.load_pem_public_key(text.encode("ascii"))
            except (ValueError, UnicodeEncodeError) as exc:
                raise ValueError(f"not a readable PEM public key ({exc})") from None
            if not isinstance(key, ed25519.Ed25519PublicKey):
                raise ValueError("the PEM public key is not an Ed25519 key")
            return cls(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
        raise ValueError(f"a public key starts with {PUBLIC_KEY_PREFIX!r} or {_PEM_PUBLIC!r}")


def read_public_key(value: str | os.PathLike[str]) -> PublicKey:
    """A public key given as its text (``ldpkey1-…`` or PEM) or as the path of a file that holds it.

    UsageError naming what was given when it is neither.
    """
    text = os.fspath(value)
    try:
        return PublicKey.parse(text)
    except ValueError as exc:
        as_text = exc
    path = Path(text)
    if not text.strip().startswith((PUBLIC_KEY_PREFIX, _PEM_PUBLIC)) and path.is_file():
        try:
            return PublicKey.parse(_read_bounded(path, _MAX_KEY_BYTES, "public key file").decode("ascii"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: does not hold a public key ({quoted(str(exc))}); give the owner's ldpkey1-… key") from None
    if len(text) > 80:
        text = text[:77] + "..."
    raise UsageError(f"trusted key {text!r}: not a public key ({as_text}) nor a file holding one; "
                     "give the data owner's key as printed by `ldp keys show`")


# --- the private key --------------------------------------------------------------------------------


def key_path(ledger_path: str | os.PathLike[str] | None = None) -> Path:
    """Where the signing key of the ledger at ``ledger_path`` lives: ``signing-key.pem`` beside it
    (default ledger: :func:`ldpcli.release._ledger.default_ledger_path`)."""
    if ledger_path is None:
        from ldpcli.release._ledger import default_ledger_path

        ledger_path = default_ledger_path()
    return Path(ledger_path).expanduser().parent / KEY_NAME


class Signer:
    """The data owner's private key, ready to sign documents (:meth:`sign`)."""

    def __init__(self, private_key: Ed25519PrivateKey, path: Path | None = None) -> None:
        """``path``: the key file it was read from, if any (for messages)."""
        from cryptography.hazmat.primitives import serialization

        self._key = private_key
        self.path = path
        raw = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.public_key = PublicKey(raw)

    def sign(self, content: dict[str, Any]) -> dict[str, Any]:
        """``content`` with a ``signature`` section by this key (:func:`sign_document`)."""
        return sign_document(content, self._key)


def create_key(ledger_path: str | os.PathLike[str] | None = None) -> Signer:
    """Create the owner's signing key beside the ledger (:func:`key_path`) and return its signer.

    The file is written under a temporary name created exclusively with mode 0600 and then linked
    to its name, which fails if a key is already there: an existing key is never replaced (the
    releases it signed would no longer verify against the new public key), and a crash never
    leaves half a key under the name. UsageError if one exists.
    """
    ed25519 = _ed25519()  # first: a missing package is a MissingDependency
    from cryptography.hazmat.primitives import serialization

    target = key_path(ledger_path)
    if target.exists():
        raise UsageError(f"{target}: a signing key exists already; it is never replaced (releases signed with it "
                         "would no longer verify)")
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"{target.parent}: cannot create the key's directory ({_reason(exc)})") from exc
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(descriptor, 0o600)  # exactly 0600, whatever the umask
            os.write(descriptor, pem)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.link(temporary, target)
    except FileExistsError:
        raise UsageError(f"{target}: a signing key exists already (created meanwhile); it is never replaced") from None
    except OSError as exc:
        raise DataError(f"{target}: cannot write the signing key ({_reason(exc)})") from exc
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    return Signer(key, target)


def load_signer(ledger_path: str | os.PathLike[str] | None = None) -> Signer:
    """The signer of the key beside the ledger; DataError if there is none, if others can read it
    (POSIX: any group or other permission bit) or if it is not an unencrypted Ed25519 PEM key."""
    ed25519 = _ed25519()  # first: a missing package is a MissingDependency
    from cryptography.hazmat.primitives import serialization

    path = key_path(ledger_path)
    if not path.exists():
        raise DataError(f"{path}: no signing key; create one with `ldp keys init` (or ldpcli.release._signing.create_key)")
    data = _read_bounded(path, _MAX_KEY_BYTES, "signing key")
    if os.name == "posix":
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise DataError(f"{path}: the signing key is readable by other users (mode {mode:04o}); anyone who read it "
                            "can sign as you: restrict it with chmod 600, or make a new key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise DataError(f"{path}: not a readable signing key ({quoted(str(exc))}); restore it or make a new one") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise DataError(f"{path}: not an Ed25519 key; ldp signs with Ed25519 keys made by `ldp keys init`")
    return Signer(key, path)


def signer_for(ledger_path: str | os.PathLike[str] | None = None) -> Signer | None:
    """The owner's signer if a key lives beside the ledger (:func:`load_signer`), else None."""
    return load_signer(ledger_path) if key_path(ledger_path).exists() else None


# --- signing and verifying documents ----------------------------------------------------------------


def canonical_bytes(content: dict[str, Any]) -> bytes:
    """The signed message: the document without ``signature``, as canonical JSON (module docstring).

    ValueError or TypeError for what JSON cannot hold (NaN, infinities, other objects).
    """
    body = {key: value for key, value in content.items() if key != SECTION}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text.encode("ascii")


def sign_document(content: dict[str, Any], private_key: Ed25519PrivateKey) -> dict[str, Any]:
    """A copy of ``content`` (a sidecar or a manifest) with a ``signature`` section by ``private_key``.

    The document is first passed through JSON (tuples become lists), so what is signed is what a
    reader parses from the written file; an existing ``signature`` is replaced. ``content`` is not
    changed. ValueError if it holds what JSON cannot (NaN, infinity).
    """
    from cryptography.hazmat.primitives import serialization

    if not isinstance(content, dict):
        raise TypeError(f"a signed document is a JSON object (dict), got {type(content).__name__}")
    document = json.loads(json.dumps(content, allow_nan=False))
    document.pop(SECTION, None)
    signature = private_key.sign(canonical_bytes(document))
    raw = private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    document[SECTION] = {
        "algorithm": ALGORITHM,
        "public_key": PublicKey(raw).text,
        "value": base64.b64encode(signature).decode("ascii"),
    }
    return document


@dataclass(frozen=True)
class Verification:
    """What the signature of one document says: its :class:`Status`, the signer's key and why."""

    status: Status
    #: The key that signed it (as the section names it), None when unsigned or unreadable.
    key: PublicKey | None = None
    #: One sentence: why it is invalid, unchecked or untrusted; empty when valid or unsigned.
    reason: str = ""
    #: The file it concerns: a data file (its sidecar's signature) or a manifest; None for a bare document.
    path: Path | None = None
    #: Whether it was checked against a trusted key and signed by it.
    trusted: bool = False

    @property
    def ok(self) -> bool:
        """Valid (and, where a trusted key was given, by that key)."""
        return self.status is Status.VALID

    @property
    def verified(self) -> bool:
        """Valid *and* signed by the key the reader trusted: only then does the signature say who wrote the
        release. A valid signature checked against no trusted key says only that *someone* signed it (an
        attacker can sign an edited sidecar with a key of their own): :data:`UNTRUSTED_KEY` says so."""
        return self.status is Status.VALID and self.trusted

    @property
    def note(self) -> str:
        """Why it is not verified, in one sentence: :attr:`reason`, or for a valid signature checked against no
        trusted key, :data:`UNTRUSTED_KEY`; empty when verified or unsigned."""
        if self.status is Status.VALID and not self.trusted and self.key is not None:
            return UNTRUSTED_KEY.format(key=self.key.short)
        return self.reason

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able view: path, status, key (text), trusted, verified, reason and :attr:`note`."""
        return {"path": None if self.path is None else os.fspath(self.path), "status": self.status.value,
                "key": None if self.key is None else self.key.text, "trusted": self.trusted,
                "verified": self.verified, "reason": self.reason, "note": self.note}


def verify_document(
    content: dict[str, Any], trusted: PublicKey | None = None, *, path: Path | None = None
) -> Verification:
    """The :class:`Verification` of a parsed document's ``signature`` section (see the module's docstring).

    ``trusted``: the data owner's public key; a valid signature by another key is then
    ``untrusted``. Without ``cryptography``, a signed document is ``unchecked`` when no key is
    trusted and a :class:`MissingDependency` when one is.
    """
    section = content.get(SECTION)
    if section is None:
        return Verification(Status.UNSIGNED, path=path)

    def invalid(reason: str, key: PublicKey | None = None) -> Verification:
        return Verification(Status.INVALID, key, reason, path)

    if not isinstance(section, dict) or section.get("algorithm") != ALGORITHM:
        return invalid(f"its signature section is malformed or not {ALGORITHM}")
    written, value_text = section.get("public_key"), section.get("value")
    if not isinstance(written, str) or not written.startswith(PUBLIC_KEY_PREFIX) or not isinstance(value_text, str):
        return invalid(f"its signature section needs a public_key ({PUBLIC_KEY_PREFIX}…) and a value (base64)")
    try:
        key = PublicKey.parse(written)
        value = base64.b64decode(value_text, validate=True)
    except (ValueError, binascii.Error) as exc:
        return invalid(f"its signature section is malformed ({exc})")
    try:
        ed25519 = _ed25519()
    except MissingDependency:
        if trusted is not None:
            raise
        return Verification(Status.UNCHECKED, key, f"the signature was not checked: {INSTALL_HINT} to check it", path)
    from cryptography.exceptions import InvalidSignature

    try:
        ed25519.Ed25519PublicKey.from_public_bytes(key.raw).verify(value, canonical_bytes(content))
    except (InvalidSignature, ValueError, TypeError, RecursionError):
        return invalid("the content was changed after it was signed", key)
    if trusted is not None and key != trusted:
        return Verification(Status.UNTRUSTED, key, f"signed by {key.short}, not by the trusted key {trusted.short}",
                            path)
    return Verification(Status.VALID, key, "", path, trusted=trusted is not None)


def verify_paths(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], trusted: PublicKey | None = None
) -> list[Verification]:
    """Check the releases that ``paths`` name: data files (their sidecars' signatures and their bytes
    against the SHA-256 those record), directories and patterns of them, and dataset directories
    (the manifest's signature, then each part it lists). One :class:`Verification` per file.

    A file whose sidecar is missing or unreadable, or whose bytes differ from what its sidecar
    records, is ``invalid`` with the reason; so is a dataset directory whose parts do not match its
    manifest (:func:`ldpcli.release._inputs.dataset_parts`). MissingDependency without ``cryptography``.
    """
    from ldpcli.release._inputs import MANIFEST_NAME, dataset_parts, expand_inputs

    require_cryptography()
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise UsageError("no release given to verify")
    results: list[Verification] = []
    for item in items:
        directory = Path(item)
        if directory.is_dir() and (directory / MANIFEST_NAME).is_file():
            manifest = directory / MANIFEST_NAME
            try:
                results.append(verify_document(read_document(manifest), trusted, path=manifest))
                parts = dataset_parts(directory)
            except DataError as exc:
                results.append(Verification(Status.INVALID, reason=str(exc), path=directory))
                continue
        else:
            parts = expand_inputs(item, privatized=True)
        results += [_verify_release(part, trusted) for part in parts]
    return results


def _verify_release(data_path: Path, trusted: PublicKey | None) -> Verification:
    """The signature of a data file's sidecar, then its bytes against the SHA-256 the sidecar records."""
    from ldpcli.io._atomic import file_sha256
    from ldpcli.release._sidecar import find_sidecar, load_sidecar

    try:
        meta = load_sidecar(find_sidecar(data_path))
        found = verify_document(meta.content, trusted, path=data_path)
        if found.status is not Status.INVALID and file_sha256(data_path) != meta.sha256:
            return Verification(Status.INVALID, found.key, f"its bytes differ from the SHA-256 its sidecar "
                                f"{meta.path.name} records: the file was changed after it was released", data_path)
    except DataError as exc:
        return Verification(Status.INVALID, reason=str(exc), path=data_path)
    return found


def check_signatures(
    files: Sequence[Path], contents: Sequence[dict[str, Any]], trusted: PublicKey | None = None
) -> tuple[Verification, ...]:
    """The signature of each file's sidecar ``contents``, for a reader (:func:`ldpcli.analysis._scan.scan`).

    Also checks the manifest of each dataset directory a part comes from (a sidecar with
    ``release.part``, beside a ``_ldp_dataset.json``). DataError naming the file when a signature
    is invalid, and, with ``trusted``, when any sidecar or manifest is not signed by that key.
    Returns the files' verifications, in order.
    """
    from ldpcli.release._inputs import MANIFEST_NAME

    found = tuple(verify_document(content, trusted, path=path) for path, content in zip(files, contents))
    manifests = dict.fromkeys(
        path.parent / MANIFEST_NAME for path, content in zip(files, contents)
        if isinstance(content.get("release"), dict) and "part" in content["release"]
    )
    checked = [*found, *(verify_document(read_document(manifest), trusted, path=manifest)
                         for manifest in manifests if manifest.is_file())]
    for result in checked:
        if result.status is Status.INVALID or (trusted is not None and not result.ok):
            what = "the manifest" if result.path is not None and result.path.name == MANIFEST_NAME else "its sidecar"
            if result.status is Status.UNSIGNED:
                assert trusted is not None
                problem = f"is not signed, and only releases signed by the trusted key {trusted.short} are accepted"
            else:
                problem = f"has an {result.status.value} signature: {result.reason}"
            raise DataError(f"{result.path}: {what} {problem}")
    return found


def signature_label(verifications: Sequence[Verification]) -> str:
    """One line for a reader's output: ``unsigned``, ``signed by ldpkey1-… (trusted)``, or counts
    per kind when the files differ (``2 of 3 files signed by …; 1 of 3 unsigned``)."""

    def name(status: Status, key: PublicKey | None, trusted: bool) -> str:
        if status is Status.UNSIGNED or key is None:
            return status.value
        signed = f"signed by {key.short}"
        if status is Status.UNCHECKED:
            return f"{signed}, not checked ({INSTALL_HINT} to check it)"
        if status is Status.VALID:
            return signed + (" (trusted)" if trusted else "")
        return f"{signed} ({status.value})"

    groups = Counter((v.status, v.key, v.trusted) for v in verifications)
    if len(groups) == 1:
        return name(*next(iter(groups)))
    total = len(verifications)
    return "; ".join(f"{count} of {total} files {name(*group)}" for group, count in groups.items())


def signature_summary(verifications: Sequence[Verification], trusted: PublicKey | None) -> dict[str, Any]:
    """A JSON-able summary for a reader's result: the label, whether every file is signed and
    valid, the trusted key (or None) and each file's :meth:`Verification.to_dict`."""
    return {
        "label": signature_label(verifications),
        "signed": all(v.status is Status.VALID for v in verifications),
        "trusted_key": None if trusted is None else trusted.text,
        "files": [v.to_dict() for v in verifications],
    }


def read_document(path: Path) -> dict[str, Any]:
    """A JSON object read from a regular file of bounded size; DataError naming the file otherwise."""
    try:
        content = json.loads(_read_bounded(path, _MAX_DOCUMENT_BYTES, "document").decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DataError(f"{path}: not readable JSON ({type(exc).__name__}); restore it from the release") from None
    if not isinstance(content, dict):
        raise DataError(f"{path}: not a JSON object; restore it from the release")
    return content


def _read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (never a FIFO, device or huge file)."""
    try:
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags | getattr(os, "O_NONBLOCK", 0))) as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise DataError(f"{path}: the {what} is not a regular file")
            if info.st_size > limit:
                raise DataError(f"{path}: the {what} is {info.st_size} bytes, more than a {what} can be ({limit})")
            data = handle.read(limit + 1)
    except OSError as exc:
        raise DataError(f"{path}: cannot read the {what} ({_reason(exc)})") from exc
    if len(data) > limit:
        raise DataError(f"{path}: the {what} grew past {limit} bytes while it was read")
    return data


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
