"""Privatize inputs into a dataset directory of part files, one task per part, on any engine.

``ldpcli.privatize_dataset`` (and ``ldp privatize INPUTS… -o DIR/``) calls :func:`write_dataset_release`: with
the local engine (``engine=None``) the parts are privatized and written concurrently by ``threads`` threads of this
process (each reading, privatizing, encoding and writing its own file, so that nothing funnels through one
writer), with a :class:`~ldpcli.release._engines.DaskEngine` as tasks on a Dask scheduler. Each input is cut
into parts: row ranges that start on key-block boundaries (:mod:`ldpcli.release._randomness`) and follow the
Parquet row groups (any other input is one range), cut further where a range holds more than 64 MB of
vectors (:func:`part_starts`). Each part is one task (:func:`privatize_part`) that
reads its rows with the local engine's reader, privatizes them with the local engine's
``Privatizer`` (:mod:`ldpcli.release._batches`) (the same generators for the same rows) and writes one Parquet part file. The driver
then writes each part's sidecar (a complete sidecar of that file, with ``release.part`` naming the
dataset and the part) and the dataset's manifest (``_ldp_dataset.json``: every part, its rows and
SHA-256), and renames the staging directory onto ``DIR`` only when everything succeeded. With the
local engine the parts have no name until then (``O_TMPFILE`` in ``DIR``'s parent, each held open):
the staging directory is made and they are linked into it only once the ledger holds the reservation,
so a run killed while it writes them leaves nothing (``docs/commit-protocol.md``: the named staging of
the Dask engine, and where the open-file limit or the file system does not allow it).

Keyed randomness makes the privatized values independent of the engine, the scheduler, the number
of workers and the parts: for a seed, the parts' rows are bit for bit the rows ``privatize_file``
writes for the same input (with the same kernel, :mod:`ldpcli.math._kernels`).

The workers read the inputs and write the parts by path, so on a cluster the paths must be on a
file system that the workers and the driver share. Only task descriptions and counts cross the
network: an unseeded run sends no entropy at all (each task draws its own from the worker's OS), so
a scheduler reached over plain TCP never carries what decides the noise; a seeded run (not for
release) sends the seed's root. The ledger's fingerprint of each input is computed by the driver,
reading the input once while the tasks run (it hashes every value in file order, which cannot be
split across workers).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import secrets
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow.parquet as pq

from ldpcli._version import __version__
from ldpcli.errors import DataError, UsageError, python_text
from ldpcli.io import (
    AtomicVectorWriter,
    VectorLayout,
    atomic_write_text,
    file_format,
    file_sha256,
    open_vectors,
)
from ldpcli.io import (
    _interrupts as interrupts,
)
from ldpcli.io._atomic import AtomicFileSink, anonymous_files, hidden_name
from ldpcli.io._formats import check_codec, data_suffix, file_suffixes
from ldpcli.io._jsonfile import read_json
from ldpcli.io._publication import Publication, entry_list, remove_dataset_directory, sweep_stale, unknown_entries
from ldpcli.io._write import REPORT_DTYPE
from ldpcli.mechanisms import Mechanism, MechanismSpec, SeedReports
from ldpcli.mechanisms._composition import ReleaseCost
from ldpcli.release._batches import Privatizer, run_batches
from ldpcli.release._commit import Commit
from ldpcli.release._engines import DaskEngine, EngineDescription, LocalEngine, describe_engine, run_all
from ldpcli.release._file import check_threads, ledger_entry, release_checks, released_input_warning
from ldpcli.release._inputs import (
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    dataset_parts,
    expand_inputs,
    refuse_output_over_input,
)
from ldpcli.release._ledger import InputFingerprint, Ledger
from ldpcli.release._options import ReleaseOptions
from ldpcli.release._randomness import input_key, key_block_rows, root_seed
from ldpcli.release._reports import check_report_options, report_layout, reports_section
from ldpcli.release._rowhash import RowDigest
from ldpcli.release._rowindex import Charge
from ldpcli.release._safety import check_clipping
from ldpcli.release._sidecar import DatasetPart, build_sidecar, sidecar_path, write_sidecar
from ldpcli.release._signing import Signer, signer_for
from ldpcli.release._steps import Calibrated, calibrate, signed

#: The suffix of every part file (parts are Parquet whatever the inputs' format).
PART_SUFFIX = ".parquet"
#: The release options a dataset cannot honour (see :func:`write_dataset_release`).
_NOT_FOR_DATASETS = ("copies", "resources.batch_rows", "input_label", "output_label", "shuffle", "shuffle_delta",
                     "secure", "secure_delta")
#: A part's batches get 1/8 of the memory budget, and 1/threads when more than 8 threads write parts
#: at once (a task holds one batch as read, privatized and encoded at a time), as ``privatize_file`` sizes its batches.
_MIN_PARTS_PER_BUDGET = 8
#: The most bytes of float64 vectors in one part: an input's row groups are cut further where they
#: are larger, so that one huge row group is still many parts to write at once. Each part costs a
#: file, its sidecar and a sync (milliseconds), against tenths of a second of work for 64 MB.
_MAX_PART_BYTES = 64 * 2**20


@dataclass(frozen=True)
class PartTask:
    """One part: rows [start, stop) of one input (stop None: to the end), and where it goes."""

    source: str
    input_index: int
    index: int
    start: int
    stop: int | None
    target: str
    spec: MechanismSpec  # bound to the vector columns: spec.calibrate(d) is the dataset's mechanism
    d: int
    #: The seeded run's root (None unseeded: the task draws its own from the worker's OS, so the
    #: entropy that decides a release's noise never crosses the network).
    entropy: int | None
    spawn_key: tuple[int, ...]
    key: tuple[int, ...]
    rng: str  # the key blocks' generator (release.randomness): "chacha20", "pcg64" or "secure"
    column: str | None
    columns: tuple[str, ...] | None
    keep: tuple[str, ...]
    keep_unsafe: bool
    skip_invalid: bool
    dtype: str | None
    no_header: bool  # a CSV input without a header row (its columns f0, f1, ...)
    codec: str | None
    memory: int
    #: The local engine's (this process's threads): the part is written as a file without a name in this
    #: directory (the output's parent), returned open in :attr:`PartResult.sink` until the commit links it
    #: into the staging directory. None: renamed onto ``target`` in the staging directory (Dask's workers).
    anonymous_in: str | None = None
    #: ``ReleaseOptions.report_bits``: each row written as its seed report of that many bits (None: d numbers).
    report_bits: int | None = None


@dataclass(frozen=True)
class PartResult:
    """What one task did: the rows it wrote, the public hash of its file, and counts for the operator."""

    task: PartTask
    rows: int
    clipped: int
    sha256: str
    dtype: str
    skipped: int
    skipped_rows: tuple[int, ...]
    #: The finished part without a name (``task.anonymous_in``), held open until the commit places it.
    sink: AtomicFileSink | None = None


def privatize_part(task: PartTask, on_rows: Callable[[int], None] | None = None) -> PartResult:
    """Privatize one part into its file (the body of each engine task; runs on a worker).

    ``on_rows`` is called with the size of each finished batch, from the thread running the part.
    With ``task.anonymous_in`` the part is a finished file without a name in the result's ``sink``;
    else it is renamed onto ``task.target``.
    """
    mech = task.spec.calibrate(task.d)
    reports = SeedReports.build(mech, task.report_bits) if task.report_bits is not None else None
    root = np.random.SeedSequence(task.entropy, spawn_key=task.spawn_key) if task.entropy is not None else (
        root_seed(None))
    with open_vectors(
        task.source, column=task.column, columns=task.columns, keep=task.keep, memory_bytes=task.memory,
        writable=False, granule=key_block_rows, keep_unsafe=task.keep_unsafe, skip_invalid=task.skip_invalid,
        no_header=task.no_header,
    ) as reader:
        reader.restrict(task.start, sys.maxsize if task.stop is None else task.stop)
        layout = reader.layout if reports is None else report_layout(reports.bits, reader.layout.keep)
        with AtomicVectorWriter(
            task.target, layout, format="parquet", keep_schema=reader.keep_schema,
            dtype=task.dtype if reports is None else REPORT_DTYPE, like=reader, codec=task.codec,
            anonymous_in=None if task.anonymous_in is None else Path(task.anonymous_in),
        ) as writer:
            privatizer = Privatizer(mech, root, task.key, reader.precision, rng=task.rng, reports=reports)
            rows, clipped = run_batches(reader, writer, privatizer, 1, on_rows)
            sink = None if task.anonymous_in is None else writer.detach()
            if sink is None:
                writer.commit()
    return PartResult(task, rows, clipped, writer.sha256, writer.dtype, reader.skipped, tuple(reader.skipped_rows), sink)


@dataclass(frozen=True)
class DatasetResult:
    """What ``write_dataset_release`` did: the dataset directory, its parts and the public counts."""

    output: Path
    manifest: Path
    parts: tuple[Path, ...]
    inputs: tuple[Path, ...]
    n: int
    d: int
    mechanism: Mechanism
    layout: VectorLayout
    reproducible: bool
    engine: EngineDescription
    #: What the release spent on each row (:func:`ldpcli.mechanisms._composition.release_cost`), computed once.
    cost: ReleaseCost
    #: Statistics of the raw data, for the operator only (never in a sidecar or the manifest).
    n_clipped: int = 0
    n_skipped: int = 0
    warnings: tuple[str, ...] = ()
    #: The inputs' columns that are neither vectors nor kept, so in no part (of any input, each once).
    dropped_columns: tuple[str, ...] = ()
    #: With ``report_bits``: the seed reports each row was written as (each part's sidecar's ``reports``).
    reports: SeedReports | None = None

    def summary(self) -> dict[str, Any]:
        """The result as a JSON object: what the command line prints for a dataset release as JSON."""
        mech, cost = self.mechanism, self.cost
        return {
            "output": str(self.output), "manifest": str(self.manifest), "parts": [str(p) for p in self.parts],
            "inputs": [str(p) for p in self.inputs], "n": self.n, "d": self.d,
            "mechanism": {"spec": mech.spec.to_dict(), "epsilon_exact": mech.epsilon_exact,
                          "expected_error_max": mech.expected_error_max},
            "epsilon_asked": cost.epsilon, "epsilon_spent": cost.epsilon_exact,
            "expected_error_mean": (self.reports or mech).expected_error_mean(self.n), "layout": self.layout.to_dict(),
            "reproducible": self.reproducible, "engine": self.engine.to_dict(),
            "warnings": [python_text(text) for text in self.warnings],
            "n_clipped": self.n_clipped, "n_skipped": self.n_skipped, "dropped_columns": list(self.dropped_columns),
            "reports": reports_section(self.reports) if self.reports is not None else None,
        }


def part_starts(source: Path, rows: int | None, block: int, part_rows: int | None, max_rows: int) -> list[int]:
    """The first row of each part of an input: multiples of the key block ``block``.

    ``part_rows``: parts of about that many rows. Otherwise a Parquet input's row groups (each
    start rounded up to a block boundary), and one part for any other format (CSV, whose ``rows``
    is None: not known; ``.npy``, whose parts read row ranges of the memory-mapped array), each
    cut into parts of at most ``max_rows`` rows (rounded down to whole blocks, at least one) so
    that a file of few, large row groups still gives the threads or workers parts to share.
    """
    if rows is None:
        return [0]
    if part_rows is not None:
        step = max(1, -(-part_rows // block)) * block
        return list(range(0, rows, step))
    starts = {0}
    if file_format(source) == "parquet":
        metadata = pq.ParquetFile(source).metadata
        first = 0
        for group in range(metadata.num_row_groups):
            aligned = -(-first // block) * block
            if aligned < rows:
                starts.add(aligned)
            first += metadata.row_group(group).num_rows
    step = max(1, max_rows // block) * block
    bounds = [*sorted(starts), rows]
    for first, stop in zip(bounds, bounds[1:]):
        starts.update(range(first, stop, step))
    return sorted(starts)


def write_dataset_release(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output_dir: str | os.PathLike[str],
    *,
    engine: DaskEngine | None,
    mechanism: MechanismSpec | str = "privunit2",
    epsilon: float | None = None,
    norm_bound: float | None = None,
    options: ReleaseOptions = ReleaseOptions(),
    part_rows: int | None = None,
    on_rows: Callable[[int], None] | None = None,
    on_start: Callable[[int | None], None] | None = None,
) -> DatasetResult:
    """Privatize every row of ``inputs`` into the dataset directory ``output_dir`` (see the module).

    Parameters
    ----------
    inputs : path, glob or sequence of them
        The inputs (:func:`ldpcli.release._inputs.expand_inputs`); they must share their vector
        columns (one release, one mechanism). Each is its own ledger entry (its own ``max_budget``
        check), as with :func:`ldpcli.release._file.write_file_release`.
    output_dir : path
        The dataset directory of part files, their sidecars and the manifest.
    engine : DaskEngine or None
        Where the tasks run; None: on ``options.resources.threads`` threads of this process (default
        the available cores), each privatizing and writing one part at a time.
    mechanism, epsilon, norm_bound
        The mechanism, as :func:`ldpcli.release._file.write_file_release` takes it.
    options : ReleaseOptions
        As :func:`ldpcli.release._file.write_file_release`'s, the same for every input;
        ``resources.memory`` is the budget of the parts written at once: each task's batches get
        1/max(8, threads) of it. A Dask engine's workers choose their own threads (``resources.threads``
        is for the local engine only), and a dataset holds one copy of each row under the paths' own
        names: ``copies``, ``resources.batch_rows`` and the labels are refused, and so is ``shuffle``
        (parts are written apart, never shuffled across parts).
    part_rows : int or None
        Parts of about that many rows each (rounded to key blocks) instead of one per row group.
    on_rows : callable or None
        Called with the size of each finished batch of any part (progress; the local engine only:
        a Dask task's batches are not reported). The parts' threads call it one at a time (under a
        lock), so the running sum it is given only grows, whatever order the parts finish in.
    on_start : callable or None
        Called once, before any part starts, with the rows of all the inputs (None when one of
        them has no row count before it is read: CSV).

    Notes
    -----
    Nothing is published unless every part and every check succeeded.
    """
    options.refuse(_NOT_FOR_DATASETS if engine is None else (*_NOT_FOR_DATASETS, "resources.threads"),
                   "write_dataset_release")
    threads = check_threads(options.resources.threads)
    spec, forced, clip_limit = release_checks(mechanism, epsilon, norm_bound, options)
    seed, overwrite, memory = options.seed, options.overwrite, options.resources.memory
    ledger, max_budget = options.budget.ledger, options.budget.max_budget
    if part_rows is not None and (isinstance(part_rows, bool) or not isinstance(part_rows, int) or part_rows < 1):
        raise UsageError(f"`part_rows` must be an integer >= 1, got {part_rows!r}")
    out = Path(output_dir)
    if data_suffix(out).lower() in file_suffixes():  # a data file's name, not a directory's
        raise UsageError(f"-o {out}: the dask engine writes a dataset directory of parts; give a directory (-o DIR/)")
    sources = expand_inputs(inputs, privatized=False)
    for source in sources:
        refuse_output_over_input(source, out)  # first: no overwriting decides this
    if out.exists() and (not out.is_dir() or not overwrite):
        raise UsageError(f"{out} already exists; pass `overwrite=True` to replace it" if out.is_dir()
                         else f"{out}: exists and is not a directory; choose another -o")
    if not out.parent.is_dir():
        raise UsageError(f"-o {out}: {str(out.parent)!r} is not an existing directory; create it first")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise _unwritable(out, "permission denied")
    check_codec("parquet", options.compression, str(out))
    if options.report_bits is not None:
        check_report_options(options, "parquet", out)
    replaces = check_replaceable_dataset(out, sources, ledger) if out.exists() else frozenset()
    sweep_stale(out.parent)
    signer = signer_for(ledger.path) if ledger is not None else None  # the owner's key, if they made one
    chosen = options.columns
    choice = {"column": chosen.column, "columns": tuple(chosen.columns) if chosen.columns else None,
              "keep": tuple(chosen.keep), "keep_unsafe": chosen.keep_unsafe, "skip_invalid": options.skip_invalid,
              "no_header": chosen.no_header}
    layout, rows, dropped = open_inputs(sources, choice)
    released = [released_input_warning(source) for source in sources]
    release = calibrate(spec, layout, forced=forced, options=options, source=sources[0])  # step 3, as a file's
    bound_spec, bound_notes, mech = release.spec, release.notes, release.mechanism
    recorded = release.warnings
    root = root_seed(seed)
    block = key_block_rows(layout.d)
    dataset_id = secrets.token_hex(16)
    staging = hidden_name(out)
    tasks: list[PartTask] = []
    for index, source in enumerate(sources):
        key = input_key(source, layout.columns, spec) if seed is not None else ()
        starts = part_starts(source, rows[index], block, part_rows, _MAX_PART_BYTES // (8 * layout.d))
        for at, start in enumerate(starts):
            stop = starts[at + 1] if at + 1 < len(starts) else None
            tasks.append(PartTask(
                source=os.fspath(source), input_index=index, index=len(tasks), start=start, stop=stop,
                target=os.fspath(staging / _part_name(len(tasks))), spec=bound_spec, d=layout.d,
                entropy=int(root.entropy) if seed is not None else None,  # type: ignore[arg-type]
                spawn_key=tuple(root.spawn_key), key=key, rng=options.rng,
                memory=memory // max(_MIN_PARTS_PER_BUDGET, threads if engine is None else 1),
                dtype=options.dtype, codec=options.compression, report_bits=options.report_bits,
                **choice,  # type: ignore[arg-type]
            ))
    anonymous = engine is None and _anonymous_parts(out.parent, len(tasks))
    if anonymous:  # the parts without a name until the commit: a kill before it leaves nothing
        tasks = [replace(task, anonymous_in=os.fspath(out.parent)) for task in tasks]
    else:  # named staging from the start (Dask's workers, no O_TMPFILE there, or too many parts)
        _make_staging(staging, out)
    notices: list[str] = list(bound_notes)
    row_digest = ledger.row_digest(layout.d) if ledger is not None else None  # makes the ledger's key if none
    if on_start is not None:
        known = [n for n in rows if n is not None]
        on_start(sum(known) if len(known) == len(rows) else None)
    work = privatize_part if engine is not None or on_rows is None else partial(privatize_part, on_rows=_serialized(on_rows))
    results: list[PartResult] = []
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ldp-fingerprint") as pool:
            digests = pool.submit(_fingerprints, sources, layout.d, choice, row_digest) if row_digest is not None else None
            results = run_all(engine or LocalEngine(threads), work, tasks)
            fingerprints = digests.result() if digests is not None else None
        interrupts.check()
        per_input = [[r for r in results if r.task.input_index == i] for i in range(len(sources))]
        for source, parts, why in zip(sources, per_input, released):
            n_input = sum(r.rows for r in parts)
            if n_input == 0:
                raise DataError(f"{source}: every row is invalid; nothing was written")
            check_clipping(sum(r.clipped for r in parts), n_input, clip_limit, os.fspath(source), mech, why=why)
        kept = [r for r in results if r.rows > 0]
        for result in results:
            if result.rows == 0:  # every row of this part was invalid (skip_invalid): no empty part file
                if result.sink is None:
                    Path(result.task.target).unlink()
                else:
                    result.sink.discard()
        files = (_number_parts(staging, [Path(r.task.target) for r in kept]) if not anonymous
                 else [staging / _part_name(index) for index in range(len(kept))])
        charges = [
            Charge(ledger_entry(mech, digest=read.digest, source=source, rows=read.rows, columns=layout.columns,
                                output=out, cost=release.cost, created="", tag="", reproducible=seed is not None), str(source),
                   row_digest.summarize(read.hashes[read.released]) if row_digest is not None else None)
            for source, read in zip(sources, fingerprints or [])
        ]

        publication = Publication(overwrite=overwrite)
        publication.add_directory(staging, out, dataset_id, replaces=replaces)
        with Commit(publication, ledger=ledger, charges=charges, max_budget=max_budget) as commit:
            tags = commit.reserve()
            if anonymous:  # only now: the staging directory, every part linked into it
                _make_staging(staging, out)
                for result, file in zip(kept, files):
                    assert result.sink is not None
                    result.sink.place(file)
            write_dataset_sidecars(_Parts(staging, dataset_id, kept, files, fingerprints, row_digest), release,
                                   tags, commit.created, options=options, signer=signer,
                                   threads=threads if engine is None else 1, engine=engine, inputs=len(sources))
            reservations = commit.publish()
        notices.extend(r.notice for r in reservations if r.notice is not None)
        notices.extend(text for text in released if text)
    finally:
        for result in results:  # the parts never placed (the kernel frees each with its descriptor)
            if result.sink is not None and not result.sink.published:
                result.sink.discard()
        remove_dataset_directory(staging, dataset_id)
    return DatasetResult(
        output=out, manifest=out / MANIFEST_NAME, parts=tuple(out / file.name for file in files),
        inputs=tuple(sources), n=sum(r.rows for r in kept), d=mech.d, mechanism=mech, layout=release.layout,
        reproducible=seed is not None, engine=describe_engine(engine), cost=release.cost, n_clipped=sum(r.clipped for r in results),
        n_skipped=sum(r.skipped for r in results), warnings=(*recorded, *notices),
        dropped_columns=tuple(dict.fromkeys(name for names in dropped for name in names)), reports=release.reports,
    )


def open_inputs(sources: Sequence[Path], choice: Mapping[str, Any]) -> tuple[VectorLayout, list[int | None], list[Any]]:
    """Step 2 of a dataset: each input opened once, before any part runs: their one layout (UsageError
    unless they share their vector columns), each one's row count (None: not known before it is read)
    and the columns left out of each."""
    layouts, rows, dropped = [], [], []
    for source in sources:
        file_format(source)
        with open_vectors(source, writable=False, **choice) as reader:
            layouts.append(reader.layout)
            rows.append(reader.num_rows)
            dropped.append(reader.dropped_columns)
    layout = layouts[0]
    for source, other in zip(sources[1:], layouts[1:]):
        if other != layout:
            raise UsageError(
                f"{source}: its vectors ({other.kind} {list(other.columns)[:4]}…, d = {other.d}) differ from "
                f"{sources[0]}'s (d = {layout.d}); the inputs of one dataset must share their columns"
            )
    return layout, rows, dropped


@dataclass(frozen=True)
class _Parts:
    """Step 4's outcome for a dataset: the parts kept (numbered in the staging directory) and the
    driver's reads of the inputs for the ledger (None without one)."""

    staging: Path
    dataset: str
    kept: list[PartResult]
    files: list[Path]
    reads: list[_InputRead] | None
    row_digest: RowDigest | None


def write_dataset_sidecars(parts: _Parts, release: Calibrated, tags: Sequence[str | None],
                           created: str, *, options: ReleaseOptions, signer: Signer | None, threads: int,
                           engine: DaskEngine | None, inputs: int) -> None:
    """Step 5 of a dataset: every part's sidecar (on ``threads`` of this process: each is synced to the
    disk) and the manifest into the staging directory, with the reservation's tags and time, signed."""
    mech, kept, files = release.mechanism, parts.kept, parts.files

    def write_part(index: int) -> None:
        result, file = kept[index], files[index]
        # No row position: the gaps between parts' positions would count the rows skip_invalid left out.
        part = DatasetPart(parts.dataset, index, result.task.input_index, len(kept))
        content = build_sidecar(
            mech, n=result.rows, layout=release.layout, data_path=file, sha256=result.sha256,
            reproducible=options.seed is not None, dtype=result.dtype, warnings=release.warnings,
            input_tag=tags[result.task.input_index] if tags else None, reconstruction=release.risk, part=part,
            created=created, row_sketch=_part_sketch(result.task, parts.reads, parts.row_digest), rng=options.rng,
            reports=release.reports,
        )
        write_sidecar(sidecar_path(file), signed(content, signer))

    LocalEngine(threads).map(write_part, range(len(kept)))
    manifest = {
        "format": MANIFEST_FORMAT, "schema_version": 1, "tool": {"name": "ldp", "version": __version__},
        "dataset": parts.dataset, "created": created, "engine": describe_engine(engine).to_dict(),
        "mechanism": {"spec": mech.spec.to_dict(), "d": mech.d, "epsilon_exact": mech.epsilon_exact},
        "inputs": inputs, "rows": sum(r.rows for r in kept),
        "parts": [{"file": file.name, "rows": r.rows, "sha256": r.sha256, "input": r.task.input_index}
                  for r, file in zip(kept, files)],
    }
    atomic_write_text(parts.staging / MANIFEST_NAME, json.dumps(signed(manifest, signer), indent=2, allow_nan=False)
                      + "\n")
    _sync_entries(parts.staging)


#: Descriptors left for everything else (the inputs, the sidecars' threads, the ledger) when the parts are held open.
_SPARE_FILES = 64


def _anonymous_parts(directory: Path, parts: int) -> bool:
    """Whether the local engine's parts are written as files without a name in ``directory`` (the output's
    parent, so on the staging directory's file system), each held open until the commit links it into the
    staging directory (:meth:`AtomicFileSink.place`). False (the named staging): where such files cannot
    be made there, or where ``parts`` open descriptors do not fit under the soft ``RLIMIT_NOFILE`` less
    :data:`_SPARE_FILES`, once that is raised as far as the hard limit allows."""
    if not anonymous_files(directory):
        return False
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if parts > soft - _SPARE_FILES and soft != resource.RLIM_INFINITY:
        wanted = parts + _SPARE_FILES if hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft == resource.RLIM_INFINITY or parts <= soft - _SPARE_FILES


def _make_staging(staging: Path, out: Path) -> None:
    """Create the staging directory of ``out`` (a UsageError where its parent cannot hold it)."""
    try:
        staging.mkdir()
    except OSError as exc:  # e.g. a read-only file system, or what os.access cannot tell (root, ACLs)
        raise _unwritable(out, exc.strerror or type(exc).__name__) from exc


def _unwritable(out: Path, reason: str) -> UsageError:
    """The error for an output directory whose parent ldp cannot write in."""
    return UsageError(f"-o {out}: cannot create a directory in {str(out.parent)!r} ({reason}); choose a place you can "
                      "write to")


def _serialized(on_rows: Callable[[int], None]) -> Callable[[int], None]:
    """``on_rows`` called by one thread at a time: the parts' threads report their batches through
    it, and a progress bar's callback that adds them up need not be safe to call from several
    threads at once."""
    lock = threading.Lock()

    def report(rows: int) -> None:
        with lock:
            on_rows(rows)

    return report


@dataclass(frozen=True)
class _InputRead:
    """What the driver's read of one input gives the ledger: its fingerprint, its rows, the keyed hash
    of every row in file order and which of them are released (``skip_invalid`` leaves some out)."""

    digest: str
    rows: int
    hashes: np.ndarray
    released: np.ndarray


def _fingerprints(sources: Sequence[Path], d: int, choice: Mapping[str, Any], row_digest: RowDigest) -> list[_InputRead]:
    """Each input's fingerprint and row hashes, read in file order (for the ledger and the row sketches)."""
    out = []
    for source in sources:
        fingerprint = InputFingerprint(d)
        hashes, released = [], []
        with open_vectors(source, writable=False, **choice) as reader:
            for batch in reader:
                interrupts.check()  # on its own thread: a cancellation ends it at the next batch, not at the input's end
                fingerprint.update(batch.values)
                hashes.append(row_digest.hasher.hash(batch.values))
                released.append(np.ones(batch.values.shape[0], dtype=bool) if batch.valid is None else batch.valid)
        out.append(_InputRead(fingerprint.hexdigest(), fingerprint.rows, np.concatenate(hashes or [np.empty(0, np.uint64)]),
                              np.concatenate(released or [np.empty(0, bool)])))
    return out


def _part_sketch(task: PartTask, reads: Sequence[_InputRead] | None, row_digest: RowDigest | None) -> np.ndarray | None:
    """The row sketch of one part: of the released rows of its input's range (None without a ledger)."""
    if reads is None or row_digest is None:
        return None
    read = reads[task.input_index]
    chosen = slice(task.start, task.stop)
    return row_digest.summarize(read.hashes[chosen][read.released[chosen]]).sketch


def _part_name(index: int) -> str:
    """The file name of part ``index`` of a dataset directory."""
    return f"part-{index:05d}{PART_SUFFIX}"


def _number_parts(staging: Path, written: Sequence[Path]) -> list[Path]:
    """The part files renamed part-00000, part-00001, … in order, so that a part left out because
    every one of its rows was invalid leaves no gap in the numbers (a gap would say so)."""
    files = [staging / _part_name(index) for index in range(len(written))]
    for old, new in zip(written, files):
        if old != new:
            old.rename(new)
    return files


def check_replaceable_dataset(out: Path, sources: Sequence[Path], ledger: Ledger | None) -> frozenset[str]:
    """UsageError unless ``overwrite=True`` may replace the existing directory ``out``: every entry in it
    (hidden ones included) is a file ldp wrote for its dataset, its manifest and the parts it lists
    with their sidecars (:func:`ldpcli.release._inputs.dataset_parts`), each part's bytes still those
    whose SHA-256 the manifest records; and it holds neither an input nor the ledger. Returns the
    names of those entries: the publication lists the directory again once it has swapped it out,
    and rolls back if any other entry appeared meanwhile (:meth:`Publication.add_directory`).
    """
    how = ("`overwrite=True` replaces only a dataset directory written by ldp, and never deletes a file ldp did not "
           "write; choose another -o, or move the directory (or those files) away yourself")
    root = out.resolve()
    for path in [*sources, *([ledger.path] if ledger is not None else [])]:
        if root in Path(os.path.realpath(path)).parents:
            raise UsageError(f"{out}: holds {path}, which `overwrite=True` would delete; {how}")
    try:
        parts = dataset_parts(out)
        recorded = {part["file"]: part["sha256"] for part in read_json(out / MANIFEST_NAME)["parts"]}
    except (DataError, OSError, ValueError) as exc:
        reason = str(exc).split(": ", 1)[-1].split(";")[0].replace("`", "")
        raise UsageError(f"{out}: is not an ldp dataset directory, or not as ldp wrote it ({reason}); {how}") from exc
    known = frozenset({MANIFEST_NAME, *(part.name for part in parts), *(sidecar_path(part).name for part in parts)})
    unknown = unknown_entries(out, known)
    if unknown:
        raise UsageError(f"{out}: holds {entry_list(unknown)}, which ldp did not write for its "
                         f"dataset; {how}")
    for part in parts:
        if file_sha256(part) != recorded[part.name]:
            raise UsageError(f"{part}: its bytes differ from the SHA-256 its manifest records: it was changed after "
                             f"ldp wrote it; {how}")
    return known


def _sync_entries(directory: Path) -> None:
    """Flush a finished staging directory to the disk: its entries (the parts' renumbering by
    :func:`_number_parts`). Its files were each flushed when they were written (the parts by
    ``AtomicVectorWriter.commit``, the sidecars and the manifest by ``atomic_write_text``), so they
    are not flushed again: that cost two syncs per part, one after the other in the driver."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
