"""The sidecar: a JSON file beside each privatized file that records exactly what was done.

The sidecar of ``out.parquet`` is ``out.parquet.ldp.json`` (the data file's whole name plus
``.ldp.json``, so a CSV and a Parquet output of one stem have different sidecars). Schema version
2 has four sections (the JSON Schema ships as ``ldpcli/schemas/sidecar-v2.schema.json``):

``tool``
    the program that wrote it: ``{"name": "ldp", "version": ...}``.
``mechanism``
    ``spec`` (``MechanismSpec.to_dict()``: name, ε, calibration, norm bound, options: what
    re-creates the mechanism with d), then what the mechanism reports about itself: d, domain,
    title, the exact ε, its calibrated ``parameters`` (γ, p, …), scale and the expected errors,
    plus any other key of ``Mechanism.describe()`` (so nothing it reports is lost), and
    ``baseline``: whether it is a baseline kept for comparison (laplace, gaussian), not for release.
``data``
    the data file's name, its SHA-256 (computed while it was written), n, d, the column layout,
    its format (``parquet`` or ``csv``) and ``dtype``, the type the vectors were written as
    (``float64`` or ``float32``; rounding to float32 is post-processing, so privacy is unchanged).
``release``
    the creation time (UTC), whether the run was seeded (``reproducible``, then also a ``note``),
    the worst-case expected error of the mean of the n rows (of the average of each row's copies,
    with ``copies`` and the whole release's ``epsilon_total`` for a release of several independent
    copies of each row: ``ReleaseOptions.copies``), ``unprivatized_columns`` (the
    layout's keep columns: copied to the output as they were, with no privacy protection) and
    ``warnings`` (sentences for whoever receives the file: for a baseline mechanism
    :func:`ldpcli.release._safety.baseline_warning`'s, then the caller's), and ``input_tag`` when the release
    was recorded in the data owner's ledger (:mod:`ldpcli.release._ledger`: a keyed hash, equal for two
    releases of one input, useless to anyone without the ledger's key), ``row_sketch`` with it (the
    k smallest keyed hashes of the released rows, :mod:`ldpcli.release._rowhash`: two releases of one owner
    that share rows share sketch values, whatever their inputs), ``shuffled`` for a release written in a
    uniformly random order (``ReleaseOptions.shuffle``: its central (ε, δ) and the trust it rests on,
    :mod:`ldpcli.release._shuffle`), and ``part`` for a part of
    a dataset directory (:class:`DatasetPart`: the dataset's id, the part's number, its input and
    the dataset's number of parts; no row position, which would count skipped rows).
``reconstruction`` (optional, d ≥ 2)
    bounds on reconstructing the row's direction from one output, from public parameters only
    (:mod:`ldpcli.risk`; Bhowmick et al. 2018 Sec. 2.3.1).
``features`` (optional: ``bcdp``)
    each group of features by its level: the level asked for, the budget c, the BCDP level the
    release grants (recomputed by Prop. 4) and its error, and the sub-releases
    (:func:`ldpcli.mechanisms._hooks.feature_section`).
``reports`` (optional: ``ReleaseOptions.report_bits``)
    the rows are seed-compressed reports, one uint64 column (64 bits) or a list of two (128), ``data.dtype``
    ``uint64`` and the layout theirs (:mod:`ldpcli.release._reports`): the bits, the generator, the assumption,
    T, f, the exact ε with respect to an ideal generator and the exact errors, recomputed when read.
``signature`` (optional)
    the data owner's Ed25519 signature of the rest of the document (:mod:`ldpcli.release._signing`: its
    algorithm, the signer's public key and the value). ``load_sidecar`` reads a sidecar with or
    without one; :func:`ldpcli.release._signing.verify_document` checks it.

It holds only public parameters and counts: never the seed, never a statistic of the raw data
(not even how many rows were clipped).

``load_sidecar`` reads versions 2 and 1 (the flat format written before, read through the one adapter
:func:`ldpcli.release._sidecar_upgrade.upgrade`),
validates by hand (no jsonschema at run time: one-line DataErrors naming the file and the field,
by its dotted path in version 2) and re-derives the mechanism from the public parameters, so the
error bars of ``estimate-mean`` come from the code, and a sidecar whose numbers disagree with its
own parameters is refused. Unknown extra keys are ignored when reading (the schema, for writers,
is strict). Version-2 sidecars without ``data.dtype``, ``mechanism.baseline``,
``release.unprivatized_columns``, ``release.warnings``, ``release.input_tag`` or
``reconstruction`` (and version-1 ones) load too:
the vectors are then float64, the unprivatized columns are the layout's keep columns,
``baseline`` is the mechanism's own and there are no warnings. ``find_sidecar`` finds the
sidecar of a data file, also under the old name ``<stem>.ldp.json`` that version 1 used.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ldpcli._version import __version__
from ldpcli.errors import DataError, LdpError, UsageError, counted, python_text
from ldpcli.io import VectorLayout, atomic_write_text, file_format, file_sha256
from ldpcli.io._formats import binary_format, data_suffix, file_suffixes
from ldpcli.io._jsonfile import indented_json, read_json
from ldpcli.io._write import REPORT_DTYPE
from ldpcli.math._kernels import kernel_name
from ldpcli.mechanisms import Mechanism, SeedReports, get_mechanism
from ldpcli.mechanisms._base import MechanismSpec
from ldpcli.mechanisms._composition import ReleaseCost, release_cost
from ldpcli.mechanisms._hooks import feature_section
from ldpcli.mechanisms._rendering import as_recorded
from ldpcli.release._randomness import DEFAULT_RNG, randomness_record
from ldpcli.release._reports import read_reports_section, reports_section
from ldpcli.release._rowhash import SKETCH_METHOD, SKETCH_SIZE, decode_sketch, encode_sketch
from ldpcli.release._safety import baseline_warning as baseline_warning  # re-exported: the CLI says the same sentence
from ldpcli.release._shuffle_claim import ShuffleClaim, read_shuffle_claim
from ldpcli.release._sidecar_upgrade import CHECKED_FIELDS, upgrade
from ldpcli.risk._section import ReconstructionSection

FORMAT = "ldp-sidecar"
#: The version ``build_sidecar`` writes; ``load_sidecar`` reads this one and every older one.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
SUFFIX = ".ldp.json"
#: The JSON Schema of version 2, inside the package (``sidecar_schema()`` loads it).
SCHEMA_RESOURCE = "schemas/sidecar-v2.schema.json"
#: ``release.input_tag``: "ldptag1-" and an HMAC-SHA256 in hex (:meth:`ldpcli.release._ledger.Ledger.tag`).
INPUT_TAG_PATTERN = r"ldptag1-[0-9a-f]{64}"
#: ``release.part.dataset``: a dataset directory's random id, as in its manifest.
DATASET_ID_PATTERN = r"[0-9a-f]{32}"
REPRODUCIBLE_NOTE = "seeded run: reproducible by whoever knows the seed; not for release"
# Numbers recomputed from the public parameters must agree with the recorded ones to this
# relative tolerance (they differ only if the file was edited or another version computed them).
_REL_TOL = 1e-9
# Keys of ``Mechanism.describe()`` that the ``spec`` of the mechanism section already holds.
_SPEC_KEYS = frozenset({"mechanism", "calibration", "epsilon", "norm_bound"})
_MISSING = object()
#: How much of a file that is not readable JSON is read to tell a data file from a damaged sidecar.
_SNIFF_BYTES = 4096
#: The types vectors are written as (``data.dtype``); absent from older sidecars: float64.
DTYPES = ("float32", "float64")
LEGACY_DTYPE = "float64"


def sidecar_path(data_path: str | os.PathLike[str]) -> Path:
    """The sidecar of a data file, for writing: its whole name plus ``.ldp.json``.

    ``out.parquet`` → ``out.parquet.ldp.json``, so ``out.csv`` and ``out.parquet`` do not collide.
    """
    path = Path(data_path)
    return path.with_name(path.name + SUFFIX)


def legacy_sidecar_path(data_path: str | os.PathLike[str]) -> Path:
    """The name version 1 used: the data file's suffix replaced by ``.ldp.json`` (``out.ldp.json``)."""
    path = Path(data_path)
    return path.with_name(path.stem + SUFFIX)


def find_sidecar(data_path: str | os.PathLike[str]) -> Path:
    """The sidecar of a data file, for reading.

    ``sidecar_path(data_path)`` if it exists, else the old ``<stem>.ldp.json`` if that exists,
    else ``sidecar_path(data_path)`` again (so a "no such sidecar" error names the current name).
    """
    from ldpcli.io._formats import check_local

    check_local(data_path)
    current = sidecar_path(data_path)
    if current.exists():
        return current
    legacy = legacy_sidecar_path(data_path)
    return legacy if legacy.exists() else current


def sidecar_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the sidecar that ``build_sidecar`` writes."""
    text = resources.files("ldpcli").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def build_sidecar(
    mechanism: Mechanism,
    *,
    n: int,
    layout: VectorLayout,
    data_path: Path,
    sha256: str,
    reproducible: bool,
    dtype: str = "float64",
    warnings: Sequence[str] = (),
    input_tag: str | None = None,
    reconstruction: ReconstructionSection | None = None,
    part: DatasetPart | None = None,
    created: str | None = None,
    row_sketch: np.ndarray | None = None,
    rng: str = DEFAULT_RNG,
    shuffled: ShuffleClaim | None = None,
    cost: ReleaseCost | None = None,
    reports: SeedReports | None = None,
) -> dict[str, Any]:
    """The sidecar's content for ``n`` rows privatized by ``mechanism`` into ``data_path``; ``cost``: the release's (default computed).

    ``created`` (UTC ISO-8601, default now) is the release's time: the ledger's reservation sets it,
    so that the sidecar and the ledger entry name the release by the same time.

    ``part`` (a :class:`DatasetPart`, from :mod:`ldpcli.release._dataset`) goes
    to ``release.part``: the file is part ``index`` of the ``parts`` parts of a dataset directory,
    and its input tag is shared with the other parts of the same input. No row position is
    recorded: the gaps between parts' positions would count the rows that ``skip_invalid`` left out.

    ``sha256`` is the hash of the data file's bytes, computed while writing it; it binds the
    sidecar to exactly that file. ``dtype`` is the type the vectors were written as (``float64``
    or ``float32``). ``warnings`` (sentences) go to ``release.warnings`` after
    :func:`baseline_warning`'s for a baseline mechanism (a repeated sentence is recorded once);
    ``release.unprivatized_columns`` are the layout's keep columns. ``input_tag`` (from the data
    owner's ledger, :meth:`ldpcli.release._ledger.Ledger.tag`) goes to ``release.input_tag``;
    ``reconstruction`` (:func:`ldpcli.risk._section.reconstruction_section`) is the top-level section of
    reconstruction bounds. ``row_sketch`` (:class:`ldpcli.release._rowhash.ReleaseRows`' ``sketch`` of these
    ``n`` rows, made with the ledger's key) goes to ``release.row_sketch``. ``release._randomness`` records the
    key blocks' generator ``rng`` (:func:`ldpcli.release._randomness.randomness_record`: its name, package and
    version, whether it is cryptographic, and its entropy: "chosen by the user: not for release" when
    ``reproducible``, else "from the OS"; never the seed or a key) and the kernel that ran the samplers.
    ``shuffled`` (a release written in a uniformly random order: :func:`ldpcli.release._shuffle_claim.shuffled_section`)
    goes to ``release.shuffled``. ``reports``: the rows are those seed reports (the ``reports`` block, dtype
    ``uint64``, the layout of their words). UsageError (from
    ``describe``) if a number is not finite.
    """
    if row_sketch is not None and len(row_sketch) != min(n, SKETCH_SIZE):
        raise ValueError(f"a row sketch of {counted(n, 'row')} has {counted(min(n, SKETCH_SIZE), 'value')}, "
                         f"got {len(row_sketch)}")
    if input_tag is not None and not re.fullmatch(INPUT_TAG_PATTERN, input_tag):
        raise ValueError(f"input_tag must match {INPUT_TAG_PATTERN}, got {input_tag!r}")
    if layout.d != (mechanism.d if reports is None else reports.words):
        raise ValueError(f"the layout has d = {layout.d} but the mechanism has d = {mechanism.d}")
    if dtype not in (DTYPES if reports is None else (REPORT_DTYPE,)):
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if isinstance(warnings, str) or not all(isinstance(text, str) and text.strip() for text in warnings):
        raise ValueError(f"warnings must be a sequence of non-empty strings, got {warnings!r}")
    description = mechanism.describe()
    rendering = description.pop("rendering", None)  # a secure release's (ldpcli.mechanisms._rendering)
    spec = mechanism.spec.to_dict()
    parameters = mechanism.parameters()
    section: dict[str, Any] = {
        "spec": spec,
        "d": mechanism.d,
        "domain": description["domain"],
        "title": mechanism.title,
        "epsilon_exact": description["epsilon_exact"],
        "parameters": parameters,
        "scale": description["scale"],
        "expected_error": description["expected_error"],
        "expected_error_max": description["expected_error_max"],
    }
    covered = _SPEC_KEYS | section.keys() | spec["options"].keys() | parameters.keys() | {"baseline"}
    section.update({key: value for key, value in description.items() if key not in covered})
    section["baseline"] = bool(type(mechanism).baseline)
    recorded: list[str] = []
    for text in (baseline_warning(mechanism), *warnings):
        if text is not None and python_text(text) not in recorded:
            recorded.append(python_text(text))  # a document for any reader: parameters in Python words, unmarked
    release: dict[str, Any] = {
        "created": created if created is not None else utc_now(),
        "reproducible": bool(reproducible),
    }
    if reproducible:
        release["note"] = REPRODUCIBLE_NOTE
    release["expected_error_mean"] = (reports or mechanism).expected_error_mean(n) / layout.copies
    if layout.copies > 1:
        release["copies"] = layout.copies
        release["epsilon_total"] = (cost or release_cost(mechanism, copies=layout.copies)).epsilon_exact
    release["unprivatized_columns"] = list(layout.keep)
    release["warnings"] = recorded
    if input_tag is not None:
        release["input_tag"] = input_tag
    if row_sketch is not None:
        release["row_sketch"] = {"method": SKETCH_METHOD, "k": SKETCH_SIZE, "values": encode_sketch(row_sketch)}
    if part is not None:
        release["part"] = part.to_dict()
    if shuffled is not None:
        release["shuffled"] = shuffled.to_dict()
    if rendering is not None:
        release["rendering"] = rendering
    release["randomness"] = randomness_record(rng, seeded=bool(reproducible)).with_kernel(kernel_name()).to_dict()
    data_path = Path(data_path)
    content = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "ldp", "version": __version__},
        "mechanism": section,
        "data": {
            "file": data_path.name,
            "sha256": sha256,
            "n": n,
            "d": mechanism.d,
            "layout": layout.to_dict(),
            "format": file_format(data_path),
            "dtype": dtype,
        },
        "release": release,
    }
    if reconstruction is not None:
        content["reconstruction"] = reconstruction.to_dict()
    if reports is not None:
        content["reports"] = reports_section(reports)
    features = feature_section(mechanism)
    if features is not None:
        content["features"] = features
    return content


def utc_now() -> str:
    """The current UTC time as a release records it (ISO-8601, seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def sidecar_text(content: dict[str, Any]) -> str:
    """The sidecar file's text (indented JSON, :func:`~ldpcli.io._jsonfile.indented_json`)."""
    return indented_json(content) + "\n"


def write_sidecar(path: Path, content: dict[str, Any], *, overwrite: bool = False) -> None:
    """Write the sidecar atomically (temporary file, then rename)."""
    atomic_write_text(path, sidecar_text(content), overwrite=overwrite)


#: Where the SHA-256 of the data is in the sidecar of each kind of ldp release that has one: a model's
#: (``ldp train``, :func:`ldpcli.learn._model.model_sidecar`) and a central release's (``ldp answer``,
#: :func:`ldpcli.analysis._answer.central_sidecar`); a privatized file's is read by :func:`load_sidecar`.
_OTHER_SIDECARS = {"ldp-model-release": ("model", "sha256"), "ldp-central-release": ("data", "sha256")}


def check_replaceable(target: Path, side: Path, *, ledger_path: str | os.PathLike[str] | None = None) -> None:
    """UsageError unless ``overwrite=True`` may replace ``target`` and its sidecar ``side``: the one rule
    of every one-file output (``privatize``, ``train``, ``answer``; docs/commit-protocol.md).

    Nothing there: nothing to replace. Otherwise ldp must prove it wrote ``target``: ``side`` beside it is
    a valid ldp sidecar (:func:`load_sidecar`; a model's or a central release's by its format) and the
    SHA-256 of the data it records is that of ``target``'s bytes now. A sidecar without its data file,
    a file without a sidecar (or beside an invalid one, even ``{}``, or one of another file) and a file
    changed since ldp wrote it are refused, and so are the ledger ``ledger_path`` and its lock.
    """
    if ledger_path is not None and target.exists():
        book = Path(os.path.realpath(ledger_path))
        if target.resolve() in (book, book.with_name(book.name + ".lock")):
            raise UsageError(f"{target}: is the privacy-budget ledger; choose another -o")
    how = ("`overwrite=True` replaces only a file ldp can prove it wrote (its sidecar records the SHA-256 of its "
           "bytes): move it away yourself, or choose another -o")
    if not os.path.lexists(target):
        if os.path.lexists(side):
            raise UsageError(f"{side}: exists without the data file {target.name} it would describe, so ldp cannot "
                             f"tell that it wrote it; {how}")
        return
    if target.is_symlink() or not target.is_file():
        raise UsageError(f"{target}: exists and is not an ldp output (not a regular file); {how}")
    if not side.is_file():
        raise UsageError(f"{target}: exists and is not an ldp output (not written by ldp: no sidecar {side.name} "
                         f"beside it); {how}")
    key, seen = (os.path.realpath(target), os.path.realpath(side)), (_identity(target), _identity(side))
    if _PROVEN.get(key) == seen:
        return  # proven earlier in this run (the re-check at the commit), and neither file changed since
    try:
        recorded = _recorded_sha256(side)
    except DataError as exc:
        reason = exc.template.split(": ", 1)[-1].split(";")[0].replace("`", "")
        raise UsageError(f"{target}: exists and is not an ldp output (not written by ldp: its sidecar {side.name} is "
                         f"not valid: {reason}); {how}") from exc
    if file_sha256(target) != recorded:
        raise UsageError(f"{target}: exists and its sidecar's hash does not match: it was changed after ldp wrote it, "
                         f"or {side.name} describes another file; {how}")
    _PROVEN[key] = seen


#: (target, sidecar) → their :func:`_identity` when :func:`check_replaceable` last proved the pair, so the
#: re-check just before the commit does not read and hash an unchanged old output a second time.
_PROVEN: dict[tuple[str, str], tuple[tuple[int, ...], tuple[int, ...]]] = {}


def _identity(path: Path) -> tuple[int, ...]:
    """What changes whenever a file is replaced or written: device, inode, size, mtime and ctime (the
    ctime is set by the kernel on every write and cannot be set back by a user)."""
    info = os.stat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _recorded_sha256(side: Path) -> str:
    """The SHA-256 of the data that the ldp sidecar ``side`` records; DataError if it is none."""
    try:
        content = read_json(side)
    except (OSError, ValueError):
        content = None  # load_sidecar says what it is
    kind = content.get("format") if isinstance(content, dict) else None
    if kind not in _OTHER_SIDECARS:
        return load_sidecar(side).sha256
    section, name = _OTHER_SIDECARS[kind]
    assert isinstance(content, dict)
    value = content[section].get(name) if isinstance(content.get(section), dict) else None
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{64}", value):
        raise _malformed(side, f"{section}.{name}")
    return value


@dataclass(frozen=True)
class DatasetPart:
    """``release.part``: the file is part ``index`` (from 0) of dataset ``dataset``, from its input ``input``.

    ``parts`` is the dataset's number of parts (None in sidecars written before it was recorded).
    """

    dataset: str
    index: int
    input: int
    parts: int | None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``release.part``, its keys in the fields' order (``parts`` left out when None)."""
        out: dict[str, Any] = {"dataset": self.dataset, "index": self.index, "input": self.input}
        if self.parts is not None:
            out["parts"] = self.parts
        return out


@dataclass(frozen=True)
class Sidecar:
    """A validated sidecar: its raw content, the mechanism it describes and the data layout."""

    path: Path
    content: dict[str, Any]
    mechanism: Mechanism
    layout: VectorLayout
    n: int
    sha256: str  # of the data file this sidecar describes
    spec: MechanismSpec  # the public choices that re-create the mechanism: spec.calibrate(d)
    version: int  # the schema version it was written in (1 or 2)
    data_file: str  # the name of the data file it was written for
    #: The type the vectors were written as: "float32" or "float64" (float64 when not recorded).
    dtype: str = LEGACY_DTYPE
    #: Whether the sidecar records ``data.dtype`` (version-2 sidecars written since it exists).
    dtype_recorded: bool = False
    #: Columns released as they were, with no privacy protection: the layout's keep columns.
    unprivatized_columns: tuple[str, ...] = ()
    #: ``release.warnings`` as recorded (none in older sidecars; see :func:`baseline_warning`).
    warnings: tuple[str, ...] = ()
    #: Whether the mechanism is a baseline kept for comparison, not for release.
    baseline: bool = False
    #: ``release.input_tag``: equal for two releases of one input (None when not recorded).
    input_tag: str | None = None
    #: ``release.part``: which part of which dataset directory the file is, else None.
    part: DatasetPart | None = None
    #: ``release.row_sketch``'s values (ascending), None when not recorded (no ledger, older sidecars).
    row_sketch: tuple[int, ...] | None = None
    #: ``release.shuffled``: the central claim of a release written in a uniformly random order
    #: (``ReleaseOptions.shuffle``, :class:`ldpcli.release._shuffle_claim.ShuffleClaim`), None for any other.
    shuffled: ShuffleClaim | None = None
    #: ``reports``: the seed reports the rows are (:mod:`ldpcli.release._reports`), None for d numbers per row.
    reports: SeedReports | None = None

    @property
    def d(self) -> int:
        """The dimension of the privatized rows."""
        return self.mechanism.d


def _data_file_kind(path: Path, error: Exception) -> str | None:
    """What ``path``, which ``read_json`` could not read (``error``), is when it was never a sidecar, else
    None (a damaged sidecar: empty, or JSON text that begins like one; or not a regular file).

    A sidecar is a JSON object: a file with a binary format's magic bytes
    (:func:`ldpcli.io._formats.binary_format`), named as a data file (``.parquet``, ``.csv``…), holding
    binary bytes (NUL, not UTF-8) or text that does not begin with ``{`` is some other file, most
    likely the data file itself."""
    if not path.is_file():  # a FIFO or a device: read_json said what it is
        return None
    try:
        with path.open("rb") as file:
            head = file.read(_SNIFF_BYTES)
    except OSError:
        return None
    kind = binary_format(head)
    if kind is not None:
        return kind
    if data_suffix(path).lower() in file_suffixes():
        return f"a {data_suffix(path).lower()} file"
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{") or not head.strip():
        return None
    return "a binary file" if b"\0" in head or isinstance(error, UnicodeDecodeError) else "text that is not JSON"


def _given_a_data_file(path: Path, kind: str) -> DataError:
    """The error for a data file given where its sidecar belongs, naming that sidecar when it exists."""
    beside = find_sidecar(path)
    remedy = (f"its sidecar is {beside}: pass that as `sidecar`" if beside.is_file() else
              f"it has no sidecar beside it ({beside.name}): pass the sidecar of the privatized file as `sidecar`")
    return DataError(f"{path}: is {kind}, not an ldp sidecar (a sidecar is a JSON object; this looks like a data "
                     f"file); {remedy}")


def load_sidecar(path: str | os.PathLike[str]) -> Sidecar:
    """Read and validate a sidecar (version 2 or 1); DataError naming the file and the field if anything is off."""
    path = Path(path)
    try:
        content = read_json(path)
    except FileNotFoundError:
        raise DataError(f"{path}: no such sidecar; pass the privatized file's sidecar with `sidecar`") from None
    except (OSError, ValueError) as exc:
        # OSError: unreadable, not a regular file, too large; ValueError: not UTF-8, not JSON, too deeply nested,
        # or an integer beyond Python's digit limit.
        data = _data_file_kind(path, exc)
        if data is not None:
            raise _given_a_data_file(path, data) from exc
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable ldp sidecar ({reason}); restore it from the privatize run") from exc
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise DataError(f"{path}: not an ldp sidecar (no \"format\": \"{FORMAT}\"); pass the right `sidecar`")

    version = content.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _malformed(path, "schema_version")
    if version > SCHEMA_VERSION:
        raise DataError(
            f"{path}: schema_version {version} was written by a newer ldp (this is ldp {__version__}, which reads "
            f"versions {', '.join(map(str, READABLE_VERSIONS))}); upgrade ldp to read it"
        )
    view, named = upgrade(content, version)  # an older layout read as the current one; errors name its fields

    def field(dotted: str, kind: type | tuple[type, ...]) -> Any:
        return _field(path, view, dotted, kind, named(dotted))

    for section in ("mechanism", "mechanism.spec", "mechanism.parameters", "data"):
        field(section, dict)

    n = field("data.n", int)
    if n < 1:
        raise DataError(f"{path}: field {named('data.n')!r} must be >= 1")
    name, d = field("mechanism.spec.name", str), field("mechanism.d", int)
    epsilon, norm_bound = field("mechanism.spec.epsilon", (int, float)), field("mechanism.spec.norm_bound", (int, float))
    calibration = field("mechanism.spec.calibration", str)
    try:
        get_mechanism(name)
        options = field("mechanism.spec.options", dict)
        spec = MechanismSpec.from_dict(
            {"name": name, "epsilon": epsilon, "calibration": calibration, "norm_bound": norm_bound, "options": options}
        )
        mechanism = spec.calibrate(d)
        # a secure release (``secure=True``): its rendering, recomputed and checked against the record
        mechanism = as_recorded(mechanism, view.get("release", {}).get("rendering"))
        recomputed = mechanism.describe()
        recorded_parameters = set(mechanism.parameters())
    except LdpError as exc:
        raise DataError(f"{path}: describes no valid mechanism ({exc.template})") from exc
    except (ArithmeticError, ValueError, TypeError) as exc:  # absurd values (d = 10**30) the checks let through
        raise DataError(
            f"{path}: describes no valid mechanism (its parameters cannot be evaluated: {type(exc).__name__}: {exc}); "
            "restore the sidecar from the privatize run"
        ) from exc
    for checked in CHECKED_FIELDS:
        if checked in recomputed:
            dotted = f"mechanism.parameters.{checked}" if checked in recorded_parameters else f"mechanism.{checked}"
            recorded, expected = _lookup(view, dotted), recomputed[checked]
            recorded = None if recorded is _MISSING else recorded
            if expected is None:
                agrees = recorded is None
            else:
                agrees = (
                    isinstance(recorded, (int, float)) and not isinstance(recorded, bool)
                    and math.isclose(recorded, expected, rel_tol=_REL_TOL)
                )
            if not agrees:
                raise DataError(
                    f"{path}: field {named(dotted)!r} is {recorded!r} but the recorded parameters give {expected!r}; "
                    "the sidecar was edited or made by an incompatible ldp version"
                )
    sha256 = field("data.sha256", str)
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise DataError(
            f"{path}: field {named('data.sha256')!r} is not a SHA-256 hex digest; restore the sidecar from the privatize run"
        )
    data_file = field("data.file", str)
    layout = VectorLayout.from_dict(field("data.layout", dict), source=path)
    reports = read_reports_section(path, view["reports"], mechanism, layout) if "reports" in view else None
    if reports is None and layout.d != mechanism.d:
        raise DataError(f"{path}: the layout has d = {layout.d} but the mechanism has d = {mechanism.d}")
    data_d = field("data.d", int)
    if data_d != mechanism.d:
        raise DataError(f"{path}: field 'data.d' is {data_d} but the mechanism has d = {mechanism.d}")
    dtype, dtype_recorded = LEGACY_DTYPE, False
    unprivatized: tuple[str, ...] = layout.keep
    warnings: tuple[str, ...] = ()
    baseline = bool(type(mechanism).baseline)
    input_tag: str | None = None
    part: DatasetPart | None = None
    row_sketch: tuple[int, ...] | None = None
    shuffled: ShuffleClaim | None = None
    # fields that not every sidecar has (an older layout has none of them)
    if _lookup(view, "data.dtype") is not _MISSING:
        dtype, dtype_recorded = field("data.dtype", str), True
        if dtype not in (DTYPES if reports is None else (REPORT_DTYPE,)):
            raise _malformed(path, "data.dtype")
    if _lookup(view, "release.unprivatized_columns") is not _MISSING:
        recorded = tuple(_strings(path, view, "release.unprivatized_columns"))
        if recorded != layout.keep:
            raise DataError(
                f"{path}: field 'release.unprivatized_columns' is {list(recorded)} but the layout keeps "
                f"{list(layout.keep)}; the sidecar was edited, restore it from the privatize run"
            )
    if _lookup(view, "release.warnings") is not _MISSING:
        warnings = tuple(_strings(path, view, "release.warnings"))
    if _lookup(view, "release.input_tag") is not _MISSING:
        input_tag = field("release.input_tag", str)
        if not re.fullmatch(INPUT_TAG_PATTERN, input_tag):
            raise _malformed(path, "release.input_tag")
    if _lookup(view, "release.part") is not _MISSING:
        part = _dataset_part(path, view)
    if _lookup(view, "release.row_sketch") is not _MISSING:
        row_sketch = _row_sketch(path, view, n)
    if _lookup(view, "release.shuffled") is not _MISSING:
        shuffled = read_shuffle_claim(view["release"]["shuffled"], n, where=f"{path}: 'release.shuffled'",
                                      remedy="the sidecar was edited, restore it from the privatize run")
    if _lookup(view, "mechanism.baseline") is not _MISSING:
        recorded_baseline = field("mechanism.baseline", bool)
        if recorded_baseline != baseline:
            raise DataError(
                f"{path}: field 'mechanism.baseline' is {str(recorded_baseline).lower()} but {mechanism.name} "
                f"{'is' if baseline else 'is not'} a baseline; the sidecar was edited or made by an "
                "incompatible ldp version"
            )
    return Sidecar(
        path=path, content=content, mechanism=mechanism, layout=layout, n=n, sha256=sha256,
        spec=mechanism.spec, version=version, data_file=data_file, dtype=dtype, dtype_recorded=dtype_recorded,
        unprivatized_columns=unprivatized, warnings=warnings, baseline=baseline, input_tag=input_tag, part=part,
        row_sketch=row_sketch, shuffled=shuffled, reports=reports,
    )


def _dataset_part(path: Path, content: dict[str, Any]) -> DatasetPart:
    """``release.part``, each field checked (DataError naming the one that is malformed)."""
    dataset = _field(path, content, "release.part.dataset", str)
    if not re.fullmatch(DATASET_ID_PATTERN, dataset):
        raise _malformed(path, "release.part.dataset")
    numbers = {}
    for name in ("index", "input", "parts"):
        dotted = f"release.part.{name}"
        if name == "parts" and _lookup(content, dotted) is _MISSING:
            continue
        numbers[name] = _field(path, content, dotted, int)
        if numbers[name] < (1 if name == "parts" else 0):
            raise _malformed(path, dotted)
    parts = numbers.get("parts")
    if parts is not None and numbers["index"] >= parts:
        raise DataError(f"{path}: field 'release.part.index' is {numbers['index']} but the dataset has {counted(parts, 'part')} "
                        "(numbered from 0); restore the sidecar from the privatize run")
    return DatasetPart(dataset, numbers["index"], numbers["input"], parts)


def _row_sketch(path: Path, content: dict[str, Any], n: int) -> tuple[int, ...]:
    """``release.row_sketch``'s values: min(n, k) distinct ascending uint64 (DataError naming the field if not)."""
    if _field(path, content, "release.row_sketch.method", str) != SKETCH_METHOD:
        raise _malformed(path, "release.row_sketch.method")
    if _field(path, content, "release.row_sketch.k", int) != SKETCH_SIZE:
        raise _malformed(path, "release.row_sketch.k")
    values = decode_sketch(_field(path, content, "release.row_sketch.values", str))
    if values is None:
        raise _malformed(path, "release.row_sketch.values")
    if values.shape[0] != min(n, SKETCH_SIZE):
        raise DataError(
            f"{path}: release.row_sketch.values holds {counted(values.shape[0], 'row hash', 'row hashes')}, but a release of "
            f"n = {counted(n, 'row')} has "
            f"{min(n, SKETCH_SIZE)}; the sidecar was edited: restore it from the privatize run"
        )
    return tuple(int(value) for value in values)


def _lookup(content: Any, dotted: str) -> Any:
    """The value at a dotted path (``"mechanism.spec.name"``), or ``_MISSING``."""
    node = content
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _field(path: Path, content: dict[str, Any], dotted: str, kind: type | tuple[type, ...],
           shown: str | None = None) -> Any:
    """The value at ``dotted`` if it has type ``kind`` (a bool is no number), else a DataError naming it (as
    ``shown``, the field's name in the file, when given)."""
    value = _lookup(content, dotted)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _malformed(path, dotted if shown is None else shown)
    return value


def _strings(path: Path, content: dict[str, Any], dotted: str) -> list[str]:
    """The list of strings at ``dotted``, else a DataError naming it."""
    value = _field(path, content, dotted, list)
    if not all(isinstance(item, str) for item in value):
        raise _malformed(path, dotted)
    return value


def _malformed(path: Path, dotted: str) -> DataError:
    return DataError(f"{path}: field {dotted!r} is missing or malformed; restore the sidecar from the privatize run")
