"""Which files the command line's inputs name: files, directories of files, glob patterns.

``ldp privatize`` and every command that reads privatized files (``estimate-mean``, ``queries``,
``regress``, ``risk attack``, through :func:`ldpcli.scan.scan`) accept several inputs, each one

- a file, taken as it is (the reader says if it does not exist or cannot be read);
- a directory: every ``.parquet``/``.pq``/``.csv`` (also ``.csv.gz``, ``.csv.zst``) file directly in it, in sorted order, hidden
  files (ldp's temporaries among them) left out;
- a glob pattern (``'shards/part-*.parquet'``, quoted so that ldp expands it, not the shell), in
  sorted order;
- a URL of one file, ``s3://``, ``gs://``, ``hf://`` or ``file://`` (:mod:`ldpcli.io.remote`): read
  from a local copy.

A directory written by ``ldp privatize --engine dask`` (:mod:`ldpcli.partitioned`) holds a manifest,
``_ldp_dataset.json``, that binds its parts: reading the directory gives exactly the parts it lists,
in its order, and refuses a directory where a listed part is missing or is not the file it lists.

A directory or a pattern picks the files that fit the command: for privatizing, raw files (a file
with an ldp sidecar beside it is ldp's own output and is skipped, so privatizing a directory twice
does not privatize the first run's outputs); for estimating, privatized files (those with a
sidecar; other files are skipped). A file named twice is refused: a shard counted twice, or an
input privatized twice in one run, is never what was meant.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence
from pathlib import Path

from ldpcli.errors import DataError, UsageError
from ldpcli.io.formats import check_local, data_suffix, file_suffixes
from ldpcli.io.remote import fetched_url, local_copy
from ldpcli.sidecar import legacy_sidecar_path, sidecar_path

#: The manifest of a dataset directory, and its ``format`` field.
MANIFEST_NAME = "_ldp_dataset.json"
MANIFEST_FORMAT = "ldp-dataset"

#: The characters that make an input a glob pattern (when no file has that very name).
GLOB_CHARACTERS = "*?["

Inputs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def has_sidecar(path: Path) -> bool:
    """Whether ``path`` has an ldp sidecar beside it (current or version-1 name): ldp wrote it."""
    return sidecar_path(path).is_file() or legacy_sidecar_path(path).is_file()


def expand_inputs(inputs: Inputs, *, privatized: bool) -> list[Path]:
    """The files that ``inputs`` name, in order (see the module's docstring).

    ``privatized``: the command reads ldp's outputs (directories and patterns keep the files with
    a sidecar) rather than raw data (they skip them). UsageError for no input, a directory or a
    pattern that names no such file, and a file named twice.
    """
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not items:
        raise UsageError("no input file given")
    files: list[Path] = []
    for item in items:
        text = os.fspath(item)
        url = fetched_url(text)
        if url is not None:  # s3://, gs://, hf://, file://: a local copy (ldpcli.io.remote)
            files.append(local_copy(url, sidecar=privatized))
            continue
        check_local(text)
        path = Path(text)
        if path.is_dir() and privatized and (path / MANIFEST_NAME).is_file():
            files += dataset_parts(path)
        elif path.is_dir():
            files += _pick(sorted(path.iterdir()), text, "is a directory with {} in it", privatized)
        elif any(char in text for char in GLOB_CHARACTERS) and not path.exists():
            files += _pick([Path(name) for name in sorted(glob.glob(text))], text, "matches {}", privatized)
        else:
            files.append(path)
    seen: dict[Path, Path] = {}
    for path in files:
        key = path.resolve()
        if key in seen:
            also = "" if os.fspath(seen[key]) == os.fspath(path) else f" (also as {seen[key]})"
            rule = "each shard must be counted once" if privatized else "each input is privatized once"
            raise UsageError(f"{path}: given twice{also}; {rule}")
        seen[key] = path
    return files


def _pick(candidates: list[Path], label: str, where: str, privatized: bool) -> list[Path]:
    """The data files among ``candidates`` that suit the command; UsageError if there are none
    (``where`` is the message's sentence, with ``{}`` for what was not found)."""
    suffixes = file_suffixes()
    data = [path for path in candidates
            if path.is_file() and not path.name.startswith(".") and data_suffix(path).lower() in suffixes]
    chosen = [path for path in data if has_sidecar(path) == privatized]
    if not chosen:
        kinds = "/".join(sorted(suffixes))
        if privatized:
            found = f"no privatized file ({kinds} with a .ldp.json sidecar beside it)"
        else:
            found = f"no {kinds} file to privatize"
        skipped = (f"; {len(data)} file(s) with an ldp sidecar, ldp's own outputs, were skipped"
                   if data and not privatized else "")
        raise UsageError(f"{label}: {where.format(found)}{skipped}")
    return chosen


def dataset_parts(directory: Path) -> list[Path]:
    """The part files a dataset directory's manifest lists, in its order, each checked to be
    there with the SHA-256 its sidecar records as the manifest does (DataError otherwise)."""
    manifest = directory / MANIFEST_NAME
    try:
        content = json.loads(manifest.read_text(encoding="utf-8"))
        if content.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format is not {MANIFEST_FORMAT!r}")
        listed = [(str(part["file"]), str(part["sha256"])) for part in content["parts"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{manifest}: not a readable ldp dataset manifest ({exc}); restore it from the privatize run") from exc
    parts = []
    for name, sha256 in listed:
        path = directory / name
        if Path(name).name != name or not path.is_file():
            raise DataError(
                f"{directory}: its manifest lists the part {name} but there is no such file; an estimate without it "
                "would leave out its rows: restore it, or give the other parts by name"
            )
        recorded = _sidecar_sha256(path)
        if recorded != sha256:
            raise DataError(f"{path}: its sidecar records SHA-256 {recorded} but the manifest {sha256}; the part was "
                            "replaced after the dataset was written")
        parts.append(path)
    return parts


def _sidecar_sha256(path: Path) -> str | None:
    """The ``data.sha256`` a part's sidecar records (None when it has no readable sidecar)."""
    try:
        return str(json.loads(sidecar_path(path).read_text(encoding="utf-8"))["data"]["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
