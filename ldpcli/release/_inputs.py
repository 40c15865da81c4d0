"""Which files the command line's inputs name: files, directories of files, glob patterns.

``ldp privatize`` and every command that reads privatized files (``estimate-mean``, ``queries``,
``regress``, ``risk attack``, through :func:`ldpcli.analysis._scan.scan`) accept several inputs, each one

- a file, taken as it is (the reader says if it does not exist or cannot be read);
- a directory: every ``.parquet``/``.pq``/``.csv`` (also ``.csv.gz``, ``.csv.zst``) file directly in it, in sorted order, hidden
  files (ldp's temporaries among them) left out;
- a glob pattern (``'shards/part-*.parquet'``, quoted so that ldp expands it, not the shell), in
  sorted order;
- a URL of one file, ``s3://``, ``gs://``, ``hf://`` or ``file://`` (:mod:`ldpcli.io._remote`): read
  from a local copy.

A directory written by :func:`ldpcli.privatize_dataset` (:mod:`ldpcli.release._dataset`) holds a manifest,
``_ldp_dataset.json``, that binds its parts: reading the directory gives exactly the parts it lists,
in its order, and refuses a directory where a listed part is missing, is a link, or disagrees with
the manifest (:func:`dataset_parts`), and a directory of parts whose manifest is gone. A part given
by name is one part of its dataset: :func:`ldpcli.analysis._scan.scan` refuses it without the others.

A directory or a pattern picks the files that fit the command: for privatizing, raw files (a file
with an ldp sidecar beside it is ldp's own output and is skipped, so privatizing a directory twice
does not privatize the first run's outputs); for estimating, privatized files (those with a
sidecar; other files are skipped). A file named twice is refused: a shard counted twice, or an
input privatized twice in one run, is never what was meant.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

from ldpcli.errors import DataError, UsageError, counted
from ldpcli.io._formats import check_local, data_suffix, file_suffixes
from ldpcli.io._jsonfile import read_json
from ldpcli.io._remote import fetched_url, local_copy
from ldpcli.release._sidecar import DATASET_ID_PATTERN, legacy_sidecar_path, load_sidecar, sidecar_path

#: The manifest of a dataset directory, and its ``format`` field.
MANIFEST_NAME = "_ldp_dataset.json"
MANIFEST_FORMAT = "ldp-dataset"

#: The characters that make an input a glob pattern (when no file has that very name).
GLOB_CHARACTERS = "*?["

Inputs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def has_sidecar(path: Path) -> bool:
    """Whether ``path`` has an ldp sidecar beside it (current or version-1 name): ldp wrote it."""
    return sidecar_path(path).is_file() or legacy_sidecar_path(path).is_file()


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once links and ``..`` are resolved, or one
    file on disk by two names (a hard link, a bind mount: :func:`os.path.samefile`)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def refuse_output_over_input(source: Path, target: Path, what: str = "output") -> None:
    """UsageError when ``target`` is ``source`` under any name (:func:`same_file`), or a directory that holds it.

    Checked before anything about replacing an existing output: ldp never writes over the data it
    reads, whatever else the call allows, so the only way on is another output name.
    """
    if same_file(source, target):
        how = "" if os.path.abspath(source) == os.path.abspath(target) else f" ({source} by another name)"
        raise UsageError(f"{target}: the {what} would be the input itself{how}; ldp never writes over its input: "
                         f"choose another `output` file")
    if target.is_dir() and any(same_file(target, parent) for parent in source.parents):
        raise UsageError(f"{target}: the {what} directory holds the input {source}, and replacing it would delete "
                         "the input (`overwrite=True` replaces only a dataset directory written by ldp): choose "
                         "another `output` directory")


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
        if url is not None:  # s3://, gs://, hf://, file://: a local copy (ldpcli.io._remote)
            files.append(local_copy(url, sidecar=privatized))
            continue
        check_local(text)
        path = Path(text)
        if path.is_dir() and privatized and (path / MANIFEST_NAME).is_file():
            files += dataset_parts(path)
        elif path.is_dir():
            chosen = _pick(sorted(path.iterdir()), text, "is a directory with {} in it", privatized)
            part = next((file for file in chosen if privatized and _dataset_of(file) is not None), None)
            if part is not None:
                raise DataError(
                    f"{path}: holds parts of an ldp dataset ({part.name} is a part of dataset {_dataset_of(part)}) "
                    f"but no manifest {MANIFEST_NAME}; without it nobody can tell whether parts are missing: "
                    "restore the directory from the privatize run"
                )
            files += chosen
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
        skipped = (f"; {counted(len(data), 'file')} with an ldp sidecar, ldp's own outputs, "
                   f"{'was' if len(data) == 1 else 'were'} skipped"
                   if data and not privatized else "")
        raise UsageError(f"{label}: {where.format(found)}{skipped}")
    return chosen


def dataset_parts(directory: Path) -> list[Path]:
    """The part files a dataset directory's manifest lists, in its order, each checked against it.

    The manifest must be whole (its dataset id, number of inputs, row total and a non-empty list
    of parts that add up to it), and each listed part a file in the directory (not a link) whose
    sidecar records the manifest's dataset id, the part's place in the list, its input, the
    number of parts, its rows and its SHA-256; the scan then checks the part's bytes against its
    sidecar. DataError otherwise. Neither file is signed: these checks make a truncated or spliced
    directory fail unless the manifest and every affected sidecar were edited to agree.
    """
    manifest = directory / MANIFEST_NAME
    dataset, inputs, total, listed = _read_manifest(manifest)
    if sum(rows for _, rows, _, _ in listed) != total:
        raise _tampered(manifest, f"lists parts of {counted(sum(rows for _, rows, _, _ in listed), 'row')} in all but says "
                                  f"\"rows\": {total}")
    if [source for *_, source in listed] != sorted(source for *_, source in listed) or (
            {source for *_, source in listed} != set(range(inputs))):
        raise _tampered(manifest, f"says \"inputs\": {inputs} but its parts come from inputs "
                                  f"{sorted({source for *_, source in listed})}")
    inside = directory.resolve()
    parts = []
    for index, (name, rows, sha256, source) in enumerate(listed):
        path = directory / name
        if Path(name).name != name or not path.is_file():
            raise DataError(
                f"{directory}: its manifest lists the part {name} but there is no such file; an estimate without it "
                "would leave out its rows: restore it from the privatize run"
            )
        for file in (path, sidecar_path(path)):
            if file.is_symlink() or file.resolve().parent != inside:
                raise DataError(f"{file}: is a link (to {file.resolve()}); a dataset's parts and their sidecars are "
                                "files in its directory: restore the directory from the privatize run")
        if not sidecar_path(path).is_file():
            raise DataError(f"{path}: a part of the dataset {directory} without its sidecar "
                            f"{sidecar_path(path).name}; restore it from the privatize run")
        meta = load_sidecar(sidecar_path(path))
        part = meta.part
        recorded = {"dataset": part.dataset if part else None, "part": part.index if part else None,
                    "input": part.input if part else None, "parts": part.parts if part else len(listed),
                    "rows": meta.n, "SHA-256": meta.sha256}
        expected = {"dataset": dataset, "part": index, "input": source, "parts": len(listed), "rows": rows,
                    "SHA-256": sha256}
        for field, value in expected.items():
            if recorded[field] != value and not (field == "parts" and recorded[field] is None):  # None: older ldp
                raise _tampered(path, f"its sidecar records {field} {recorded[field]} but the manifest {value}")
        parts.append(path)
    return parts


def _read_manifest(manifest: Path) -> tuple[str, int, int, list[tuple[str, int, str, int]]]:
    """(dataset id, inputs, rows, [(file, rows, sha256, input) per part]) of a manifest; DataError if
    it is unreadable or any of these is missing or malformed."""
    try:
        content = read_json(manifest)
        if not isinstance(content, dict) or content.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format is not {MANIFEST_FORMAT!r}")
        dataset, inputs, rows = content["dataset"], content["inputs"], content["rows"]
        if not isinstance(dataset, str) or not re.fullmatch(DATASET_ID_PATTERN, dataset):
            raise ValueError("\"dataset\" is not a dataset id")
        if not (_integer(inputs, 1) and _integer(rows, 1)):
            raise ValueError("\"inputs\" and \"rows\" must be integers >= 1")
        if not isinstance(content["parts"], list) or not content["parts"]:
            raise ValueError("\"parts\" must be a non-empty list")
        listed = [(part["file"], part["rows"], part["sha256"], part["input"]) for part in content["parts"]]
        if not all(isinstance(name, str) and isinstance(sha256, str) and _integer(count, 1) and _integer(source, 0)
                   for name, count, sha256, source in listed):
            raise ValueError("a part's \"file\", \"rows\", \"sha256\" or \"input\" is malformed")
    except KeyError as exc:
        raise DataError(f"{manifest}: not a readable ldp dataset manifest (no \"{exc.args[0]}\" field); restore it "
                        "from the privatize run") from exc
    except (OSError, ValueError, TypeError) as exc:
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{manifest}: not a readable ldp dataset manifest ({reason}); restore it from the privatize "
                        "run") from exc
    return dataset, inputs, rows, listed


def _integer(value: object, least: int) -> bool:
    """Whether ``value`` is an integer >= ``least`` (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _tampered(path: Path, what: str) -> DataError:
    return DataError(f"{path}: {what}; the dataset's parts were removed, replaced or reordered after it was written "
                     "(restore the directory from the privatize run)")


def _dataset_of(path: Path) -> str | None:
    """The dataset id a privatized file's sidecar records in ``release.part`` (None when it records none)."""
    try:
        dataset = read_json(sidecar_path(path))["release"]["part"]["dataset"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a part, or a sidecar the scan reports
    return dataset if isinstance(dataset, str) else None
