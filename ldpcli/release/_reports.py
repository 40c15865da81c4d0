"""A file release of seed-compressed reports: its layout, what it refuses, and its sidecar block.

With ``ReleaseOptions.report_bits`` (64 or 128) each row of a privunit2 or privunitg release is written as
one seed (:class:`ldpcli.mechanisms.SeedReports`: Feldman & Talwar 2021, Alg. 1, the accepted seed itself
among fresh uniformly random ones), 8 or 16 bytes instead of 8·d. The file is Parquet with one column,
:data:`REPORT_COLUMN`, beside the kept ones (:func:`report_layout`; read back bit for bit by
:func:`ldpcli.io._reports.open_reports`), and the sidecar says so in a top-level ``reports`` block
(:func:`reports_section`): the bits per report, the generator, the computational assumption in one
sentence, T, the fallback probability f, the exact ε with respect to an ideal generator and the exact
errors. The ledger charges the base mechanism's exact ε (the report's is at most that).

Reading a sidecar (:func:`read_reports_section`) rebuilds the reports from the recorded mechanism and bits,
so the decoder never trusts a recorded T or f: a block that disagrees with the rebuilt one is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ldpcli.errors import DataError, LdpError, UsageError, counted
from ldpcli.io import VectorLayout
from ldpcli.mechanisms import Mechanism, SeedReports

if TYPE_CHECKING:
    from ldpcli.release._options import ReleaseOptions

#: The column that holds each row's report.
REPORT_COLUMN = "report"
#: The block's numbers checked against the rebuilt reports, and their relative tolerance.
_CHECKED = ("expected_tries", "fallback_probability", "epsilon_exact", "expected_error", "expected_error_max")
_REL_TOL = 1e-9


def report_layout(bits: int, keep: Sequence[str]) -> VectorLayout:
    """The stored layout of ``bits``-bit reports: one uint64 column (64 bits) or a list of 2 words (128)."""
    if bits == 64:
        return VectorLayout("columns", (REPORT_COLUMN,), 1, tuple(keep))
    return VectorLayout("list", (REPORT_COLUMN,), bits // 64, tuple(keep))


def check_report_options(options: ReleaseOptions, out_format: str, target: Path) -> None:
    """UsageError, before any row is read, for what a release of seed reports cannot honour
    (``options.report_bits`` set)."""
    bits = options.report_bits
    if isinstance(bits, bool) or bits not in (64, 128):
        raise UsageError(f"`report_bits` must be 64 or 128, got {bits!r}")
    clash = {"copies": options.copies != 1, "secure": options.secure, "dtype": options.dtype is not None}
    for name, given in clash.items():
        if given:
            raise UsageError(f"compressed reports do not take `{name}`: each row is one seed of {bits} bits; "
                             f"leave `{name}` out, or release the rows uncompressed")
    if out_format != "parquet":
        raise UsageError(f"{target}: compressed reports are written to Parquet (their words are uint64), not "
                         f"{out_format}; name a .parquet output")
    if REPORT_COLUMN in options.columns.keep:
        raise UsageError(f"the kept column {REPORT_COLUMN!r} would share its name with the reports' column; rename it")


def reports_section(reports: SeedReports) -> dict[str, Any]:
    """The sidecar's ``reports`` block: the column, then :meth:`SeedReports.describe`."""
    return {"column": REPORT_COLUMN, **reports.describe()}


def read_reports_section(path: Path, block: Any, mechanism: Mechanism, layout: VectorLayout) -> SeedReports:
    """The :class:`SeedReports` a sidecar's ``reports`` block describes, rebuilt from ``mechanism`` and its
    bits (never the recorded T); DataError naming the sidecar and the field for a block that is malformed or
    disagrees with the rebuilt reports, or a ``layout`` that is not theirs."""
    remedy = "the sidecar was edited or made by an incompatible ldp version; restore it from the privatize run"
    if not isinstance(block, Mapping):
        raise DataError(f"{path}: field 'reports' must be an object; {remedy}")
    bits = block.get("bits")
    if isinstance(bits, bool) or bits not in (64, 128):
        raise DataError(f"{path}: field 'reports.bits' is {bits!r}, not 64 or 128; {remedy}")
    try:
        reports = SeedReports.build(mechanism, bits, max_expected_tries=math.inf)
    except LdpError as exc:
        raise DataError(f"{path}: its 'reports' block describes no seed reports ({exc.template}); {remedy}") from exc
    if layout != report_layout(bits, layout.keep):
        raise DataError(f"{path}: its layout is not that of {bits}-bit reports (one column {REPORT_COLUMN!r} of "
                        f"{counted(bits // 64, 'uint64 word')}); {remedy}")
    expected = reports_section(reports)
    for key, value in expected.items():
        recorded = block.get(key)
        if key in _CHECKED:
            agrees = (isinstance(recorded, (int, float)) and not isinstance(recorded, bool)
                      and math.isclose(recorded, value, rel_tol=_REL_TOL, abs_tol=1e-300))
        else:
            agrees = recorded == value
        if not agrees:
            raise DataError(f"{path}: field 'reports.{key}' is {recorded!r} but the recorded mechanism's "
                            f"{bits}-bit reports have {value!r}; {remedy}")
    return reports
