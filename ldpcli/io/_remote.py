"""Inputs named by URL (``s3://``, ``gs://``, ``hf://``, ``file://``), through pyarrow's filesystems.

``ldp privatize`` and the commands that read privatized files accept an input given as a URL that
pyarrow's filesystems resolve (:func:`ldpcli.release._inputs.expand_inputs` calls :func:`local_copy`):
``s3://bucket/key`` (S3), ``gs://bucket/key`` (Google Cloud Storage), ``hf://datasets/…`` (Hugging
Face, when ``huggingface_hub`` is installed) and ``file:///path`` (a local file, used in place).
Credentials are pyarrow's usual ones (environment variables, configuration files, instance roles).

A remote file is copied once, as it is read, into a private spool directory that is removed when
the process ends; a privatized file's sidecar (``URL.ldp.json``) comes with it. From there on it is
a local file: the seeded key is the SHA-256 of the same bytes, the sidecar's hash is checked
against them, and the ledger fingerprints the same values. Outputs are local files only (write,
then upload): an object store cannot rename a finished file into place, which is how ldp never
leaves a half-written output. Any other URL (``https://``) keeps :func:`~ldpcli.io._formats.check_local`'s
one-line refusal.
"""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from ldpcli.errors import DataError, UsageError, quoted
from ldpcli.io._formats import _URL
from ldpcli.io._messages import _reason

#: The URL schemes ldp reads inputs from.
FETCHED_SCHEMES = ("s3", "gs", "gcs", "hf", "file")
_CHUNK = 8 * 2**20
_SPOOL: list[Path] = []
_COUNT = itertools.count()


def fetched_url(text: str) -> str | None:
    """The URL ``text`` names (its ``//`` restored after ``pathlib`` collapsed it) when its scheme
    is one ldp reads inputs from, else None."""
    match = _URL.match(text)
    if match is None or match.group("scheme").lower() not in FETCHED_SCHEMES:
        return None
    scheme, rest = match.group("scheme").lower(), match.group("rest")
    return f"file:///{rest}" if scheme == "file" else f"{scheme}://{rest}"


def local_copy(url: str, *, sidecar: bool) -> Path:
    """A local path holding the bytes of ``url`` (``file://``: the file itself; else a spool copy),
    with ``URL.ldp.json`` copied beside it when ``sidecar`` and it exists. DataError when the file
    cannot be read, UsageError for a directory or pattern (only single files are fetched)."""
    scheme, rest = url.split("://", 1)
    if scheme == "file":
        return Path("/" + rest.lstrip("/"))
    if rest.endswith("/") or any(char in rest for char in "*?["):
        raise UsageError(f"{url}: remote directories and patterns are not expanded; name each file")
    filesystem, path = _filesystem(url)
    folder = _spool() / str(next(_COUNT))
    folder.mkdir()
    target = folder / PurePosixPath(path).name
    _copy(filesystem, path, target, url, required=True)
    if sidecar:
        _copy(filesystem, path + ".ldp.json", target.with_name(target.name + ".ldp.json"), url + ".ldp.json",
              required=False)
    return target


def _filesystem(url: str) -> tuple[Any, str]:
    """pyarrow's filesystem for ``url`` and the path within it."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(url)
    except ImportError as exc:  # hf:// without huggingface_hub
        raise UsageError(f"{url}: {quoted(str(exc))}") from exc
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{url}: cannot open ({_reason(exc)}); check the address, your credentials and the "
                        "network") from exc


def _copy(filesystem: Any, path: str, target: Path, url: str, *, required: bool) -> None:
    """Copy one remote file to ``target``; a missing file is a DataError when ``required``, else nothing."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        kind = filesystem.get_file_info(path).type
        if kind == pafs.FileType.NotFound:
            if required:
                raise DataError(f"{url}: no such file; check the address")
            return
        if kind == pafs.FileType.Directory:
            raise UsageError(f"{url}: is a directory; remote directories are not expanded, name each file")
        with filesystem.open_input_stream(path) as source, target.open("wb") as out:
            shutil.copyfileobj(source, out, _CHUNK)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{url}: cannot read ({_reason(exc)}); check the address, your credentials and the "
                        "network") from exc


def _spool() -> Path:
    """This process's private directory of fetched inputs (removed at exit)."""
    if not _SPOOL:
        folder = Path(tempfile.mkdtemp(prefix="ldp-remote-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _SPOOL.append(folder)
    return _SPOOL[0]
