"""The one verified scan of privatized files that every estimator reads through.

``scan(paths)`` loads each file's sidecar, re-derives the mechanism from its public parameters,
checks that the shards of one job agree, and then yields the rows batch by batch with their kept
columns. When a file has been read to its end its row count and SHA-256 are checked against its
sidecar (the hash is computed on another thread while the rows are read), so an estimate is only
ever made from exactly the bytes that were released.

Privatized rows may be post-processed: ``where`` keeps the rows whose *kept* columns (public:
an id, a label, a split) satisfy conditions such as ``label == 3``, ``split in (train, val)`` or
``year >= 2020``. A file that was itself filtered or re-encoded after privatization cannot match
its sidecar's n and hash; ``verify=False`` accepts it, and the scan then says it is unverified
(``Scan.verified``), which estimates report.

Vectors may be stored as float64 or float32 (the sidecar's ``data.dtype``); the readers hand out
float64 either way. Before any row is read, a verified scan also refuses a Parquet file whose
vector columns are not of the type its sidecar records (CSV text has no types: its hash binds it).

Signatures (:mod:`ldpcli.release._signing`): every sidecar's signature is checked when the scan opens, and
a sidecar (or a dataset manifest) whose signature does not match its content is refused. With
``trust`` (the data owner's public key) every file must be signed by that key, and so must the
manifest of each dataset directory it comes from; without, an unsigned release is read and the
scan says so (:attr:`Scan.signatures`, :meth:`Scan.signature_summary`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ldpcli.analysis._lawcheck import FALSE_ALARM, Dispersion, LawCheck, stored_precision
from ldpcli.errors import DataError, UsageError, counted
from ldpcli.io import file_format, file_sha256, open_vectors
from ldpcli.io._reports import open_reports
from ldpcli.math._domains import FLOAT64_PRECISION
from ldpcli.mechanisms import Mechanism
from ldpcli.release._inputs import expand_inputs
from ldpcli.release._rowhash import estimate_overlap
from ldpcli.release._sidecar import Sidecar, find_sidecar, load_sidecar
from ldpcli.release._signing import PublicKey, Verification, check_signatures, read_public_key, signature_summary

_CONDITION = re.compile(r"^\s*([^\s=!<>]+)\s*(==|!=|<=|>=|<|>|=|\s+in\s+)\s*(.+?)\s*$")
_DTYPE_NAMES = {pa.float16(): "float16", pa.float32(): "float32", pa.float64(): "float64"}
_COMPARE = {"==": pc.equal, "=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
            ">": pc.greater, ">=": pc.greater_equal}


@dataclass(frozen=True)
class Condition:
    """One ``where`` condition on a kept column: ``COLUMN OP VALUE`` or ``COLUMN in (V1, V2, …)``."""

    column: str
    op: str
    values: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Condition:
        """Read ``label == 3``, ``split != test``, ``score >= 0.5`` or ``label in (1, 2)``; quotes optional."""
        match = _CONDITION.match(text)
        if match is None:
            raise UsageError(
                f"`where` {text!r}: write COLUMN OP VALUE with OP one of == != < <= > >=, or COLUMN in (V1, V2)"
            )
        column, op, value = match[1], match[2].strip(), match[3]
        if op == "in":
            inner = value.strip()
            if not (inner.startswith("(") and inner.endswith(")")):
                raise UsageError(f"`where` {text!r}: 'in' takes a list in parentheses, e.g. label in (1, 2)")
            values = tuple(_unquote(part) for part in inner[1:-1].split(",") if part.strip())
        else:
            values = (_unquote(value),)
        if not values:
            raise UsageError(f"`where` {text!r}: no value to compare with")
        return cls(column, op, values)

    def mask(self, keep: pa.Table | None, label: str) -> np.ndarray:
        """Boolean per row of ``keep``: the condition holds (a missing value never matches)."""
        if keep is None or self.column not in keep.column_names:
            kept = [] if keep is None else keep.column_names
            raise UsageError(
                f"{label}: `where` needs a kept column, and {self.column!r} is not one (kept: {kept or 'none'})"
            )
        column = keep.column(self.column)
        try:
            scalars = [pa.scalar(value).cast(column.type) for value in self.values]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise UsageError(
                f"`where`: {', '.join(self.values)} cannot be compared with column {self.column!r} of type {column.type}"
            ) from exc
        if self.op == "in":
            result = pc.is_in(column, value_set=pa.array([s.as_py() for s in scalars], type=column.type))
        else:
            result = _COMPARE[self.op](column, scalars[0])
        return np.asarray(pc.fill_null(result, False).to_numpy(zero_copy_only=False), dtype=bool)


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


@dataclass(frozen=True)
class ScanBatch:
    """Rows of one privatized file (read-only, after ``where``) and their kept columns."""

    values: np.ndarray
    keep: pa.Table | None
    file: int  # index in Scan.files


class Scan:
    """Privatized files checked against their sidecars: the mechanism, then the rows (iterate once)."""

    def __init__(
        self,
        files: Sequence[Path],
        sidecars: Sequence[Sidecar],
        *,
        verify: bool,
        where: Sequence[Condition],
        batch_rows: int | None,
        on_rows: Callable[[int], None] | None,
        combine_copies: bool = True,
        signatures: Sequence[Verification] = (),
        trusted: PublicKey | None = None,
        false_alarm: float | None = None,
    ) -> None:
        """``signatures``: each file's sidecar signature (:func:`ldpcli.release._signing.check_signatures`),
        checked against ``trusted`` when given. ``false_alarm``: each file's level of the dispersion test
        (:mod:`ldpcli.analysis._lawcheck`; default :data:`~ldpcli.analysis._lawcheck.FALSE_ALARM` over the files)."""
        self.files = tuple(files)
        self.sidecars = tuple(sidecars)
        self.verified = verify
        self.where = tuple(where)
        self.combine_copies = combine_copies
        self._batch_rows = batch_rows
        self._on_rows = on_rows
        self.signatures = tuple(signatures)
        self.trusted = trusted
        self.false_alarm = FALSE_ALARM / max(1, len(self.files)) if false_alarm is None else false_alarm
        #: The files read so far whose rows are noisier than their sidecars allow (:class:`~ldpcli.analysis._lawcheck.Dispersion`).
        self.dispersions: list[Dispersion] = []

    def signature_summary(self) -> dict[str, object]:
        """Whether and by whom the files are signed (:func:`ldpcli.release._signing.signature_summary`)."""
        return signature_summary(self.signatures, self.trusted)

    @property
    def mechanism(self) -> Mechanism:
        """The calibrated mechanism that privatized every file (each copy, in a release of copies)."""
        return self.sidecars[0].mechanism

    @property
    def copies(self) -> int:
        """Independent privatized copies of each row in the files (``ReleaseOptions.copies``; 1 usually).

        With ``combine_copies`` (the default) each batch holds one row per person, the average of
        its copies: unbiased, with the per-copy error divided by ``copies``. Without, the copies
        side by side, shape ``(rows, copies·d)``.
        """
        return self.sidecars[0].layout.copies

    def __iter__(self) -> Iterator[ScanBatch]:
        with ThreadPoolExecutor(max_workers=1) as hasher:
            for index, (path, meta) in enumerate(zip(self.files, self.sidecars)):
                digest = hasher.submit(file_sha256, path) if self.verified else None  # overlaps with the read
                rows = 0
                with ExitStack() as stack:
                    read, precision = self._open(path, meta, stack)
                    law = LawCheck(path, meta, stored_precision(meta, precision, self.verified), self.false_alarm)
                    for released, values, keep in _translated(read, path, meta):
                        rows += values.shape[0]
                        law.add(released)
                        if self._on_rows is not None:
                            self._on_rows(values.shape[0])
                        if self.combine_copies and meta.layout.copies > 1:
                            values = values.reshape(values.shape[0], meta.layout.copies, meta.layout.d).mean(axis=1)
                        if self.where:
                            chosen = np.logical_and.reduce([c.mask(keep, os.fspath(path)) for c in self.where])
                            values = values[chosen]
                            keep = keep.filter(pa.array(chosen)) if keep is not None else None
                        yield ScanBatch(values, keep, index)
                if digest is not None:
                    _check_binding(path, meta, rows, digest.result())
                law.refuse()
                found = law.finish()
                if found is not None:
                    self.dispersions.append(found)


    def _open(self, path: Path, meta: Sidecar, stack: ExitStack) -> tuple[Iterable[_Rows], float]:
        """The batches of one file as (the rows as released, the rows to estimate from, the kept columns), and the
        unit roundoff of the values read. Seed reports (:mod:`ldpcli.release._reports`) are decoded here: released,
        D(s), whose law the sidecar's mechanism pins, and D(s)/(1 − f), the unbiased rows."""
        if meta.reports is not None:
            return _decoded(path, meta, self._batch_rows), FLOAT64_PRECISION
        try:
            reader = stack.enter_context(open_vectors(path, layout=meta.layout, batch_rows=self._batch_rows,
                                                      writable=False))
        except DataError as exc:
            raise _another_file(path, meta, exc) from exc
        return ((batch.values, batch.values, batch.keep) for batch in reader), reader.precision


#: One batch of a file as :meth:`Scan._open` reads it.
_Rows = tuple[np.ndarray, np.ndarray, pa.Table | None]
#: Bytes of decoded rows per batch of seed reports (each batch holds them twice: D(s), then D(s)/(1 − f)).
_DECODED_BYTES = 16 * 2**20


def _decoded(path: Path, meta: Sidecar, batch_rows: int | None) -> Iterator[_Rows]:
    """The seed reports of ``path`` decoded batch by batch (:meth:`ldpcli.mechanisms.SeedReports.expand`)."""
    reports = meta.reports
    assert reports is not None
    rows = batch_rows if batch_rows is not None else max(1, _DECODED_BYTES // (8 * meta.d))
    for seeds, keep in open_reports(path, meta.layout, batch_rows=rows):
        released = reports.expand(seeds)
        yield released, released * reports.correction, keep


def scan(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    sidecar: str | os.PathLike[str] | None = None,
    verify: bool = True,
    where: Sequence[str | Condition] = (),
    batch_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
    combine_copies: bool = True,
    trust: PublicKey | str | os.PathLike[str] | None = None,
) -> Scan:
    """Open privatized files (one, or the shards of one job) for estimation.

    ``paths``: files, directories and glob patterns (:func:`ldpcli.release._inputs.expand_inputs`: a
    directory or pattern gives its files that have a sidecar, in sorted order).

    Each file's sidecar is the one beside it (or ``sidecar``, for a single file). Refuses shards
    whose sidecars disagree on the mechanism, its parameters or the layout, and (``verify``, the
    default) a file whose vector type (before any row is read), row count or bytes differ from
    what its sidecar records. ``where``
    conditions select rows by their kept columns. ``on_rows`` is called with each batch's size
    before filtering (progress). A release of several copies of each row (``ReleaseOptions.copies``)
    is read as the average of the copies, or with ``combine_copies=False`` as the copies side by
    side (:attr:`Scan.copies`).

    ``trust``: the data owner's public key (a :class:`~ldpcli.release._signing.PublicKey`, its
    ``ldpkey1-…`` text or a file holding it): refuse any file, or dataset manifest, that is not
    signed by it or was changed since (it needs ``verify``: the data is bound to the signed sidecar by
    its SHA-256). Without it, an unsigned file is read, and one whose signature does not match its
    content is refused all the same.
    """
    if not isinstance(paths, (str, os.PathLike)) and not paths:
        raise UsageError("no privatized file given")
    files = expand_inputs(paths, privatized=True)
    if sidecar is not None and len(files) > 1:
        raise UsageError("`sidecar` names one sidecar; with several files each needs its own .ldp.json beside it")
    conditions = [c if isinstance(c, Condition) else Condition.parse(c) for c in where]
    if trust is not None and not verify:
        raise UsageError("a trusted key needs the files checked against their sidecars (verify): a signature "
                         "authenticates the data only through the SHA-256 its sidecar records")
    trusted = trust if trust is None or isinstance(trust, PublicKey) else read_public_key(trust)
    metas = [_sidecar_of(path, sidecar) for path in files]
    signatures = check_signatures(files, [meta.content for meta in metas], trusted)
    first = metas[0]
    for path, meta in zip(files[1:], metas[1:]):
        if meta.mechanism != first.mechanism or (meta.layout.kind, meta.layout.columns, _bits(meta)) != (
            first.layout.kind, first.layout.columns, _bits(first)
        ):
            raise DataError(
                f"{path}: its sidecar {meta.path} describes {_summary(meta)} but {first.path} describes "
                f"{_summary(first)}; shards of one estimate must come from one privatization"
            )
    _check_dataset_parts(files, metas)
    _check_distinct_inputs(files, metas)
    _check_disjoint_rows(files, metas)
    if verify:
        for path, meta in zip(files, metas):
            _check_dtype(path, meta)
    return Scan(files, metas, verify=verify, where=conditions, batch_rows=batch_rows, on_rows=on_rows,
                combine_copies=combine_copies, signatures=signatures, trusted=trusted)


def _sidecar_of(path: Path, sidecar: str | os.PathLike[str] | None) -> Sidecar:
    """The sidecar of the privatized file ``path``: ``sidecar`` if given, else the one beside it.

    UsageError if ``path`` does not exist, as ``privatize`` says of a missing input; DataError if
    nothing is beside it: a release whose sidecar was moved, or a raw file never privatized.
    """
    if not path.exists():
        raise UsageError(f"{path}: no such file; check the path.")
    if sidecar is not None:
        return load_sidecar(sidecar)
    beside = find_sidecar(path)
    if not beside.exists():
        raise DataError(
            f"{path}: no such sidecar beside it ({beside.name}), so it may not be a privatized file: "
            "privatize raw data first (ldp privatize, ldpcli.privatize_file), or pass the privatized file's "
            "sidecar with `sidecar`"
        )
    return load_sidecar(beside)


def _check_dataset_parts(files: Sequence[Path], metas: Sequence[Sidecar]) -> None:
    """Refuse parts of a dataset directory (:mod:`ldpcli.release._dataset`) given twice, or without the others.

    Every part's sidecar records its dataset, its number and the dataset's number of parts: an
    estimate from some parts would leave the others' rows out as silently as a truncated dataset
    (sidecars written before the number of parts was recorded are only checked for repeats).
    """
    datasets: dict[str, dict[int, Path]] = {}
    counts: dict[str, set[int | None]] = {}
    for path, meta in zip(files, metas):
        if meta.part is None:
            continue
        given = datasets.setdefault(meta.part.dataset, {})
        if meta.part.index in given:
            raise DataError(
                f"{given[meta.part.index]} and {path} are the same part of one dataset (part {meta.part.index} of "
                f"dataset {meta.part.dataset}); an estimate from both would count its rows twice"
            )
        given[meta.part.index] = path
        counts.setdefault(meta.part.dataset, set()).add(meta.part.parts)
    for dataset, given in datasets.items():
        parts = counts[dataset]
        first = given[min(given)]
        if len(parts) > 1:
            raise DataError(f"{first}: the parts of dataset {dataset} given disagree on its number of parts "
                            f"({sorted(p for p in parts if p is not None)}); restore the dataset from the privatize run")
        total = parts.pop()
        if total is not None and sorted(given) != list(range(total)):
            missing = sorted(set(range(total)) - set(given))
            shown = ", ".join(map(str, missing[:5])) + (", …" if len(missing) > 5 else "")
            raise DataError(
                f"{first}: is one of the {total} parts of dataset {dataset} (ldp privatize `engine` dask), but "
                f"{len(missing)} of them (number {shown}) were not given; an estimate from some parts leaves out the "
                "others' rows: give the dataset's directory"
            )


def _check_distinct_inputs(files: Sequence[Path], metas: Sequence[Sidecar]) -> None:
    """Refuse two releases of one input given as shards (their sidecars carry the same input tag).

    Shards are disjoint sets of people; two releases of the same rows are not, and averaging them
    would count each person twice while their privacy loss adds up (basic composition). The parts
    of one input in a dataset directory (:mod:`ldpcli.release._dataset`) share its tag and are one
    release: they pass (:func:`_check_dataset_parts` refuses a part given twice).
    """
    seen: dict[str, tuple[Path, Sidecar]] = {}
    for path, meta in zip(files, metas):
        if meta.input_tag is None:
            continue
        if meta.input_tag in seen:
            other, first = seen[meta.input_tag]
            if first.part is not None and meta.part is not None and first.part.dataset == meta.part.dataset:
                continue
            total = first.mechanism.epsilon_exact + meta.mechanism.epsilon_exact
            raise DataError(
                f"{other} and {path} are two releases of the same input (their sidecars carry the same input tag), "
                f"not shards of one: together they spend ε = {total:.6g} per person (basic composition) and an "
                "estimate from both would count every person twice; estimate from one of them"
            )
        seen[meta.input_tag] = (path, meta)


def _check_disjoint_rows(files: Sequence[Path], metas: Sequence[Sidecar]) -> None:
    """Refuse two releases given as shards whose row sketches share a value (they share rows).

    Each sidecar recorded in the owner's ledger carries ``release.row_sketch``, the smallest keyed
    hashes of its rows (:mod:`ldpcli.release._rowhash`), so a release of some rows of another (a file split
    into shards and released again, say) is found although its input tag differs. Parts of one
    input in a dataset directory are one release and are not compared with each other (an input
    with repeated rows gives its parts equal values); everything else is, in one pass over the
    values. A shared value is never a false alarm between releases of different owners (their keys
    differ); how likely a small overlap escapes is in :mod:`ldpcli.release._rowhash`.
    """
    seen: dict[int, int] = {}  # sketch value -> the first file that holds it
    for index, meta in enumerate(metas):
        group = _release_group(meta, index)
        for value in meta.row_sketch or ():
            other = seen.setdefault(value, index)
            if other != index and _release_group(metas[other], other) != group:
                first = metas[other]
                assert first.row_sketch is not None and meta.row_sketch is not None
                smaller = files[index] if meta.n <= first.n else files[other]
                share = estimate_overlap(np.array(first.row_sketch, dtype=np.uint64), first.n,
                                         np.array(meta.row_sketch, dtype=np.uint64), meta.n)
                raise DataError(
                    f"{files[other]} and {files[index]} share rows of the same people (about {max(1, round(100 * share))}% "
                    f"of the rows of {smaller}, estimated from their sketches); they are not shards of one dataset: "
                    "estimate each on its own"
                )


def _release_group(meta: Sidecar, index: int) -> tuple[str, int]:
    """The release a file belongs to: a dataset's input for a part, else the file itself."""
    return ("", index) if meta.part is None else (meta.part.dataset, meta.part.input)


def _written_for_another(path: Path, meta: Sidecar) -> bool:
    """Whether the sidecar names another data file than ``path`` (a renamed release still matches its hash)."""
    return Path(meta.data_file).name != path.name


def _another_file(path: Path, meta: Sidecar, exc: DataError) -> DataError:
    """The reader's refusal of ``path`` under ``meta``'s layout, said as what it is when the sidecar was written
    for another file: that the sidecar describes another file (its n, d and columns), and to pass the right one."""
    if not _written_for_another(path, meta):
        return exc
    columns = ", ".join(meta.layout.columns[:4]) + (", …" if len(meta.layout.columns) > 4 else "")
    reason = exc.template.split(";")[0].removeprefix(f"{path}: ")
    return DataError(
        f"{path}: its sidecar {meta.path} describes another file, {meta.data_file!r} (n = {meta.n}, d = {meta.d}, "
        f"columns {columns}), and this one does not match it ({reason}); pass this file's own sidecar with `sidecar` "
        "(by default the FILE.ldp.json beside it)"
    )


def _translated(reader: Iterable[Any], path: Path, meta: Sidecar) -> Iterator[Any]:
    """The reader's batches, its refusals said by :func:`_another_file`."""
    try:
        yield from reader
    except DataError as exc:
        raise _another_file(path, meta, exc) from exc


def _check_binding(path: Path, meta: Sidecar, rows: int, sha256: str) -> None:
    """Refuse data that is not exactly the file the sidecar was written for: when the sidecar names another
    file, say so and ask for the right sidecar (not `verify=False`, which would read this file under a
    description of another)."""
    if _written_for_another(path, meta):
        remedy = (f"its sidecar {meta.path} describes another file, {meta.data_file!r} (n = {meta.n}, d = {meta.d}); "
                  "pass this file's own sidecar with `sidecar` (by default the FILE.ldp.json beside it)")
        if rows < meta.n:  # fewer rows of the same layout: possibly rows the analyst filtered from that release
            remedy += (f", or, if you made this file yourself from rows of {meta.data_file!r} (filtered or "
                       "re-encoded), `verify=False`")
    else:
        remedy = ("the file was changed after privatization or the sidecar belongs to another file "
                  "(pass `verify=False` to estimate from a file you filtered or re-encoded yourself)")
    if rows != meta.n:
        raise DataError(f"{path}: has {counted(rows, 'row')} but its sidecar {meta.path} says n = {meta.n}; {remedy}")
    if sha256 != meta.sha256:
        raise DataError(
            f"{path}: its bytes do not match the SHA-256 in its sidecar {meta.path} (written for {meta.data_file!r}); "
            + remedy
        )


def _check_dtype(path: Path, meta: Sidecar) -> None:
    """Refuse a Parquet file whose vector columns are not of the type its sidecar's ``data.dtype`` says.

    Only where the sidecar records a dtype, and only for Parquet (CSV text has no types). A file
    that cannot be opened here is left to the reader, which reports it.
    """
    if not meta.dtype_recorded:
        return
    try:
        if file_format(path) != "parquet":
            return
        schema = pq.read_schema(path)
    except (UsageError, pa.ArrowException, OSError, UnicodeDecodeError):
        return
    for name in meta.layout.columns:
        index = schema.get_field_index(name)
        if index < 0:
            continue  # missing or repeated: the reader names the column
        stored = schema.field(index).type
        value_type = stored.value_type if meta.layout.kind == "list" and hasattr(stored, "value_type") else stored
        found = _DTYPE_NAMES.get(value_type, str(value_type))
        if found != meta.dtype:
            raise DataError(
                f"{path}: column {name!r} holds {stored}, i.e. {found} values, but its sidecar {meta.path} records "
                f"data.dtype {meta.dtype!r}; the file was re-encoded after privatization or the sidecar belongs to "
                "another file (pass `verify=False` to estimate from a file you re-encoded yourself)"
            )


def _bits(meta: Sidecar) -> int | None:
    """The bits of each row's seed report, None for rows of d numbers."""
    return meta.reports.bits if meta.reports is not None else None


def _summary(meta: Sidecar) -> str:
    mech = meta.mechanism
    reports = f" as {meta.reports.bits}-bit seed reports" if meta.reports is not None else ""
    return f"{mech.name} ({mech.calibration}) at ε = {mech.epsilon:g}, d = {mech.d}, L = {mech.norm_bound:g}{reports}"

