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
    plus any other key of ``Mechanism.describe()`` (so nothing it reports is lost).
``data``
    the data file's name, its SHA-256 (computed while it was written), n, d, the column layout
    and its format (``parquet`` or ``csv``).
``release``
    the creation time (UTC), whether the run was seeded (``reproducible``, then also a ``note``)
    and the worst-case expected error of the mean of the n rows.

It holds only public parameters and counts: never the seed, never a statistic of the raw data
(not even how many rows were clipped).

``load_sidecar`` reads versions 2 and 1 (the flat format written before; see ``_V1_FIELDS``),
validates by hand (no jsonschema at run time: one-line DataErrors naming the file and the field,
by its dotted path in version 2) and re-derives the mechanism from the public parameters, so the
error bars of ``estimate-mean`` come from the code, and a sidecar whose numbers disagree with its
own parameters is refused. Unknown extra keys are ignored when reading (the schema, for writers,
is strict). ``find_sidecar`` finds the sidecar of a data file, also under the old name
``<stem>.ldp.json`` that version 1 used.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from ldpcli import __version__
from ldpcli.errors import DataError, LdpError
from ldpcli.io import VectorLayout, atomic_write_text, file_format
from ldpcli.mechanisms import Mechanism, get_mechanism
from ldpcli.mechanisms.base import MechanismSpec

FORMAT = "ldp-sidecar"
#: The version ``build_sidecar`` writes; ``load_sidecar`` reads this one and every older one.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
SUFFIX = ".ldp.json"
#: The JSON Schema of version 2, inside the package (``sidecar_schema()`` loads it).
SCHEMA_RESOURCE = "schemas/sidecar-v2.schema.json"
REPRODUCIBLE_NOTE = "seeded run: reproducible by whoever knows the seed; not for release"
# Numbers recomputed from the public parameters must agree with the recorded ones to this
# relative tolerance (they differ only if the file was edited or another version computed them).
_REL_TOL = 1e-9
_CHECKED_FIELDS = ("epsilon_exact", "gamma", "p", "scale", "expected_error_max")
# Keys of ``Mechanism.describe()`` that the ``spec`` of the mechanism section already holds.
_SPEC_KEYS = frozenset({"mechanism", "calibration", "epsilon", "norm_bound"})
# Where the logical fields are: (version 1, version 2).
_FIELDS = {
    "n": ("n", "data.n"),
    "d": ("d", "mechanism.d"),
    "name": ("mechanism", "mechanism.spec.name"),
    "epsilon": ("epsilon", "mechanism.spec.epsilon"),
    "norm_bound": ("norm_bound", "mechanism.spec.norm_bound"),
    "calibration": ("calibration", "mechanism.spec.calibration"),
    "sha256": ("sha256", "data.sha256"),
    "layout": ("layout", "data.layout"),
    "data_file": ("data_file", "data.file"),
}
_MISSING = object()


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
    mechanism: Mechanism, *, n: int, layout: VectorLayout, data_path: Path, sha256: str, reproducible: bool
) -> dict[str, Any]:
    """The sidecar's content for ``n`` rows privatized by ``mechanism`` into ``data_path``.

    ``sha256`` is the hash of the data file's bytes, computed while writing it; it binds the
    sidecar to exactly that file. UsageError (from ``describe``) if a number is not finite.
    """
    if layout.d != mechanism.d:
        raise ValueError(f"the layout has d = {layout.d} but the mechanism has d = {mechanism.d}")
    description = mechanism.describe()
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
    covered = _SPEC_KEYS | section.keys() | spec["options"].keys() | parameters.keys()
    section.update({key: value for key, value in description.items() if key not in covered})
    release: dict[str, Any] = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "reproducible": bool(reproducible),
    }
    if reproducible:
        release["note"] = REPRODUCIBLE_NOTE
    release["expected_error_mean"] = mechanism.expected_error_mean(n)
    data_path = Path(data_path)
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "ldp", "version": __version__},
        "mechanism": section,
        "data": {
            "file": data_path.name,
            "sha256": sha256,
            "n": n,
            "d": layout.d,
            "layout": layout.to_dict(),
            "format": file_format(data_path),
        },
        "release": release,
    }


def write_sidecar(path: Path, content: dict[str, Any], *, overwrite: bool = False) -> None:
    """Write the sidecar atomically (temporary file, then rename)."""
    atomic_write_text(path, json.dumps(content, indent=2, allow_nan=False) + "\n", overwrite=overwrite)


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

    @property
    def d(self) -> int:
        """The dimension of the privatized rows."""
        return self.mechanism.d


def load_sidecar(path: str | os.PathLike[str]) -> Sidecar:
    """Read and validate a sidecar (version 2 or 1); DataError naming the file and the field if anything is off."""
    path = Path(path)
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: no such sidecar; pass the privatized file's sidecar with --sidecar") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        # ValueError: JSONDecodeError, or an integer beyond Python's digit limit; RecursionError: deep nesting.
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable ldp sidecar ({reason}); restore it from the privatize run") from exc
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise DataError(f"{path}: not an ldp sidecar (no \"format\": \"{FORMAT}\"); pass the right --sidecar")

    version = content.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _malformed(path, "schema_version")
    if version > SCHEMA_VERSION:
        raise DataError(
            f"{path}: schema_version {version} was written by a newer ldp (this is ldp {__version__}, which reads "
            f"versions {', '.join(map(str, READABLE_VERSIONS))}); upgrade ldp to read it"
        )
    v2 = version == 2

    def where(name: str) -> str:
        return _FIELDS[name][1] if v2 else _FIELDS[name][0]

    def field(name: str, kind: type | tuple[type, ...]) -> Any:
        return _field(path, content, where(name), kind)

    if v2:  # the sections; in version 1 everything is at the top level
        for section in ("mechanism", "mechanism.spec", "mechanism.parameters", "data"):
            _field(path, content, section, dict)

    n = field("n", int)
    if n < 1:
        raise DataError(f"{path}: field {where('n')!r} must be >= 1")
    name, d = field("name", str), field("d", int)
    epsilon, norm_bound = field("epsilon", (int, float)), field("norm_bound", (int, float))
    calibration = field("calibration", str)
    try:
        cls = get_mechanism(name)
        if v2:
            options = _field(path, content, "mechanism.spec.options", dict)
        else:
            options = {option: content.get(option) for option in cls.options}
        spec = MechanismSpec.from_dict(
            {"name": name, "epsilon": epsilon, "calibration": calibration, "norm_bound": norm_bound, "options": options}
        )
        mechanism = spec.calibrate(d)
        recomputed = mechanism.describe()
        recorded_parameters = set(mechanism.parameters())
    except LdpError as exc:
        raise DataError(f"{path}: describes no valid mechanism ({exc})") from exc
    except (ArithmeticError, ValueError, TypeError) as exc:  # absurd values (d = 10**30) the checks let through
        raise DataError(
            f"{path}: describes no valid mechanism (its parameters cannot be evaluated: {type(exc).__name__}: {exc}); "
            "restore the sidecar from the privatize run"
        ) from exc
    for checked in _CHECKED_FIELDS:
        if checked in recomputed:
            dotted = checked
            if v2:
                dotted = f"mechanism.parameters.{checked}" if checked in recorded_parameters else f"mechanism.{checked}"
            recorded, expected = _lookup(content, dotted), recomputed[checked]
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
                    f"{path}: field {dotted!r} is {recorded!r} but the recorded parameters give {expected!r}; "
                    "the sidecar was edited or made by an incompatible ldp version"
                )
    sha256 = field("sha256", str)
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise DataError(
            f"{path}: field {where('sha256')!r} is not a SHA-256 hex digest; restore the sidecar from the privatize run"
        )
    data_file = field("data_file", str)
    layout = VectorLayout.from_dict(field("layout", dict), source=path)
    if layout.d != mechanism.d:
        raise DataError(f"{path}: the layout has d = {layout.d} but the mechanism has d = {mechanism.d}")
    if v2:
        data_d = _field(path, content, "data.d", int)
        if data_d != mechanism.d:
            raise DataError(f"{path}: field 'data.d' is {data_d} but the mechanism has d = {mechanism.d}")
    return Sidecar(
        path=path, content=content, mechanism=mechanism, layout=layout, n=n, sha256=sha256,
        spec=mechanism.spec, version=version, data_file=data_file,
    )


def _lookup(content: Any, dotted: str) -> Any:
    """The value at a dotted path (``"mechanism.spec.name"``), or ``_MISSING``."""
    node = content
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _field(path: Path, content: dict[str, Any], dotted: str, kind: type | tuple[type, ...]) -> Any:
    """The value at ``dotted`` if it has type ``kind`` (a bool is no number), else a DataError naming it."""
    value = _lookup(content, dotted)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _malformed(path, dotted)
    return value


def _malformed(path: Path, dotted: str) -> DataError:
    return DataError(f"{path}: field {dotted!r} is missing or malformed; restore the sidecar from the privatize run")
