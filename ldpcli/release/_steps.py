"""The steps every release of files takes, in order: plan → open → calibrate → privatize batches →
build the sidecar → commit.

A file release (:func:`ldpcli.release._file.write_file_release`) and a dataset release
(:func:`ldpcli.release._dataset.write_dataset_release`) each plan and open their inputs their own way
(one file read once; many inputs, each part on its own worker). From the input's layout on they share
the steps here: :func:`calibrate` makes the mechanism and everything the sidecar says of it, with
the release's cost computed once (:func:`ldpcli.mechanisms._composition.release_cost`) and carried on
:class:`Calibrated`; the batches go through :mod:`ldpcli.release._batches`; the sidecar is
:func:`ldpcli.release._sidecar.build_sidecar`'s, :func:`signed` by the owner's key; and the commit is a
:class:`ldpcli.release._commit.Commit` that the release drives.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldpcli.errors import UsageError
from ldpcli.io import VectorLayout
from ldpcli.mechanisms import Mechanism, MechanismSpec, SeedReports
from ldpcli.mechanisms._composition import ReleaseCost, release_cost
from ldpcli.mechanisms._rendering import secured
from ldpcli.release._options import ReleaseOptions
from ldpcli.release._reports import report_layout
from ldpcli.release._rowhash import decode_sketch
from ldpcli.release._safety import release_warnings
from ldpcli.release._shuffle_claim import read_shuffle_claim
from ldpcli.release._sidecar import SCHEMA_VERSION, Sidecar
from ldpcli.release._signing import Signer
from ldpcli.risk._section import ReconstructionSection, reconstruction_section


@dataclass(frozen=True)
class Calibrated:
    """What a release's mechanism is and says, fixed before any row is read (:func:`calibrate`)."""

    #: The spec bound to the input's columns (what each part's worker calibrates again).
    spec: MechanismSpec
    mechanism: Mechanism
    #: What the release spends on each row, its copies together: computed once, here.
    cost: ReleaseCost
    #: The output's layout (the input's, with its copies side by side).
    layout: VectorLayout
    #: The sidecar's reconstruction section (:func:`ldpcli.risk._section.reconstruction_section`; written as its ``to_dict()``).
    risk: ReconstructionSection | None
    #: The sentences the sidecar records (:func:`ldpcli.release._safety.release_warnings`).
    warnings: tuple[str, ...]
    #: The notes of binding the spec to the columns, for the operator only.
    notes: tuple[str, ...]
    #: With ``options.report_bits``: the seed reports each row is written as (:mod:`ldpcli.release._reports`).
    reports: SeedReports | None = None


def calibrate(spec: MechanismSpec, layout: VectorLayout, *, forced: str | None, options: ReleaseOptions,
              source: object, copies: int = 1) -> Calibrated:
    """Step 3: bind ``spec`` (each copy's) to the input's ``layout``, calibrate it (made secure with
    ``options.secure``) and describe it (UsageError now, before any row is read, if a number would not
    be finite); the output layout with ``copies`` (or of the seed reports of ``options.report_bits``, UsageError
    where they cannot be made), the reconstruction section, the recorded warnings and the release's cost."""
    names = layout.columns if layout.kind == "columns" else None
    bound_spec, notes = spec.bind_columns(names, layout.d)
    mech = bound_spec.calibrate(layout.d)
    if options.secure:
        mech = secured(mech, options.secure_delta)
    mech.describe()
    bits = options.report_bits
    reports = SeedReports.build(mech, bits) if bits is not None else None
    try:
        out = layout.with_copies(copies) if bits is None else report_layout(bits, layout.keep)
    except ValueError as exc:
        raise UsageError(f"{source}: `copies` {copies}: {exc}; rename that column") from exc
    risk = reconstruction_section(mech, k=options.risk.k, rho0=options.risk.rho0, a=options.risk.a, copies=copies,
                                  threshold=options.risk.threshold)
    recorded = release_warnings(mech, layout.keep, forced, options.warnings, copies)
    return Calibrated(bound_spec, mech, release_cost(mech, copies=copies), out, risk, recorded, tuple(notes), reports)


def signed(content: dict[str, Any], signer: Signer | None) -> dict[str, Any]:
    """Step 5's last touch: ``content`` signed with the owner's key, when they made one."""
    return signer.sign(content) if signer is not None else content


def written_sidecar(path: Path, content: dict[str, Any], mechanism: Mechanism, layout: VectorLayout,
                    reports: SeedReports | None = None) -> Sidecar:
    """The :class:`~ldpcli.release._sidecar.Sidecar` of a one-file sidecar this run just wrote to ``path``
    (``content``, :func:`~ldpcli.release._sidecar.build_sidecar`'s for ``mechanism`` and ``layout``): what
    :func:`~ldpcli.release._sidecar.load_sidecar` reads back, without reading the file or checking it again."""
    data, release = content["data"], content["release"]
    sketch, shuffled = release.get("row_sketch"), release.get("shuffled")
    decoded = decode_sketch(sketch["values"]) if sketch is not None else None
    return Sidecar(
        path=path, content=content, mechanism=mechanism, layout=layout, n=data["n"], sha256=data["sha256"],
        spec=mechanism.spec, version=SCHEMA_VERSION, data_file=data["file"], dtype=data["dtype"], dtype_recorded=True,
        unprivatized_columns=layout.keep, warnings=tuple(release["warnings"]),
        baseline=content["mechanism"]["baseline"], input_tag=release.get("input_tag"),
        row_sketch=tuple(int(value) for value in decoded) if decoded is not None else None,
        shuffled=read_shuffle_claim(shuffled, data["n"], where=f"{path}: 'release.shuffled'", remedy="")
        if shuffled is not None else None, reports=reports,
    )
