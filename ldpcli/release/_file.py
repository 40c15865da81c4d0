"""Privatize a whole file, batch by batch: read → clip to the public bound → mechanism → write.

``write_file_release`` is the library call behind ``ldp privatize`` into one file. Rows are streamed in
batches sized from a memory budget (memory stays flat as files grow, whatever d), batches are
privatized on a thread pool (numpy and scipy release the GIL in the heavy loops) and written in
file order by one writer thread. That writer bounds the run: one file is one byte stream, and
pyarrow (as of 26) encodes and writes the row groups of a ``ParquetWriter`` one after the other on
the calling thread. It releases the GIL while it encodes, so the writer overlaps the reading and
the privatizing, but it offers no way to encode row groups on other threads and stitch them into
one file (its C++ writer's per-column threading, ``ArrowWriterProperties::use_threads``, is not
exposed, and buffers encoded apart would need their footer offsets rewritten). With enough threads
a run takes about as long as encoding and writing the file alone. A dataset directory of part files
(:func:`ldpcli.privatize_dataset`, :func:`ldpcli.release._dataset.write_dataset_release`) has no such bound:
each thread writes its own parts.
Randomness is keyed (:mod:`ldpcli.release._randomness`): each block of rows has its own generator named by
(run, input, block index), so a given seed gives the same output whatever the thread count, the
memory budget or the batch size, and different inputs get independent noise (with ``shuffle``, their
order too: each row's order key is keyed the same way, :mod:`ldpcli.release._shuffle`). The
output and the sidecar are written to temporary files in the target directory and renamed only
when everything succeeded; the input is only ever read.

Randomness comes from OS entropy unless a seed is given; a seeded run is marked
``"reproducible": true`` in the sidecar (and so not for release). The seed itself is never
written anywhere.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ldpcli.errors import DataError, LdpError, UsageError, counted, python_text
from ldpcli.io import AtomicVectorWriter, VectorLayout, VectorReader, file_format, open_vectors
from ldpcli.io import _interrupts as interrupts
from ldpcli.io._atomic import finished_text
from ldpcli.io._formats import check_codec, check_local, data_suffix
from ldpcli.io._publication import Publication, sweep_stale, sweeping_once
from ldpcli.io._write import REPORT_DTYPE, check_dtype
from ldpcli.math._bitgen import require_randomgen
from ldpcli.mechanisms import Mechanism, MechanismSpec, SeedReports
from ldpcli.mechanisms._composition import ReleaseCost
from ldpcli.mechanisms._hooks import spending_note
from ldpcli.release._batches import Privatizer, run_batches
from ldpcli.release._commit import Commit
from ldpcli.release._inputs import expand_inputs, refuse_output_over_input
from ldpcli.release._ledger import InputFingerprint, Ledger
from ldpcli.release._ledger_file import LedgerEntry
from ldpcli.release._options import ReleaseOptions, mechanism_spec
from ldpcli.release._randomness import check_rng, input_key, key_block_rows, root_seed
from ldpcli.release._reports import check_report_options, reports_section
from ldpcli.release._rowhash import ReleaseRows, RowDigest
from ldpcli.release._rowindex import Charge
from ldpcli.release._safety import check_clip_fraction, check_clipping, check_epsilon
from ldpcli.release._shuffle import ExternalShuffle, OrderKeys, order_root
from ldpcli.release._shuffle_claim import ShuffleClaim, check_pure, check_shuffle, shuffle_delta, shuffled_section
from ldpcli.release._sidecar import (
    Sidecar,
    build_sidecar,
    check_replaceable,
    find_sidecar,
    load_sidecar,
    sidecar_path,
    sidecar_text,
)
from ldpcli.release._signing import Signer, signer_for
from ldpcli.release._steps import Calibrated, calibrate, signed, written_sidecar

#: A batch gets 1/8 of the budget when 6 threads or fewer privatize (one batch being read, one per
#: thread, one being written), and 1/(threads + 2) beyond, so the budget holds whatever the thread count.
_MIN_BATCHES_PER_BUDGET = 8


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def check_threads(threads: object) -> int:
    """The thread count ``threads`` asks for (None: :func:`available_cores`); UsageError unless an integer >= 1."""
    threads = available_cores() if threads is None else threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise UsageError(f"`threads` must be an integer >= 1, got {threads!r}")
    return threads


@dataclass(frozen=True)
class PrivatizeResult:
    """What ``write_file_release`` did: where the outputs are and the public counts."""

    output: Path
    sidecar: Path
    n: int
    d: int
    mechanism: Mechanism
    layout: VectorLayout
    reproducible: bool
    #: Rows whose norm exceeded the bound by more than the rounding of their values and were scaled
    #: onto it (:meth:`ldpcli.math._domains.Domain.rounded`). A statistic of the raw data: shown to
    #: the person running the command, never written to the sidecar.
    n_clipped: int
    #: What the release spent on each row: its copies together (basic composition,
    #: :func:`ldpcli.mechanisms._composition.release_cost`), computed once by the release (:func:`calibrate`).
    cost: ReleaseCost
    #: The sentences recorded in the sidecar's ``release.warnings`` (ε forced out of range, a
    #: baseline, a near-exact release, kept columns released unprivatized), to show on stderr; then,
    #: for the operator only (not in the sidecar), the ledger's notice that the input was released before
    #: and the warning that the input is itself an ldp release (:func:`released_input_warning`).
    warnings: tuple[str, ...] = ()
    #: The type the vectors were written as (``"float32"`` or ``"float64"``).
    dtype: str = "float64"
    #: With ``skip_invalid``: rows left out, and the first of their row numbers (counting from 1).
    #: Like ``n_clipped``, shown to the person running the command and never stored.
    n_skipped: int = 0
    skipped_rows: tuple[int, ...] = ()
    #: The sidecar's ``release.input_tag`` (None without a ledger).
    input_tag: str | None = None
    #: The public key (``ldpkey1-…``) that signed the sidecar (None: unsigned).
    signed_by: str | None = None
    #: The input's columns that are neither vectors nor kept, so in no output
    #: (:attr:`ldpcli.io.VectorReader.dropped_columns`).
    dropped_columns: tuple[str, ...] = ()
    #: With ``shuffle``: the sidecar's ``release.shuffled`` (the central claim and what it rests on).
    shuffled: ShuffleClaim | None = None
    #: The SHA-256 of the output's bytes, as the writer hashed them.
    sha256: str | None = None
    #: The sidecar written, as :func:`ldpcli.release._sidecar.load_sidecar` would read it back.
    written: Sidecar | None = field(default=None, repr=False, compare=False)
    #: With ``report_bits``: the seed reports each row was written as (the sidecar's ``reports`` block).
    reports: SeedReports | None = None
    #: Where the vectors were in the input (``layout`` is the output's: with its copies, or the reports' column).
    source_layout: VectorLayout | None = None

    def summary(self) -> dict[str, Any]:
        """What the ``ldp privatize`` command prints as JSON: the outputs, the public description, the ε asked and
        the ε spent (the exact ε the ledger charges, all copies together), and the counts for the operator (``n_clipped``, ``n_skipped``: statistics of the raw data, kept out
        of the sidecar; do not publish them)."""
        mech = self.mechanism
        return {
            "output": str(self.output),
            "sidecar": str(self.sidecar),
            "n": self.n,
            "d": self.d,
            "mechanism": {"spec": mech.spec.to_dict(), "epsilon_exact": mech.epsilon_exact,
                          "expected_error_max": mech.expected_error_max},
            "epsilon_asked": self.cost.epsilon,
            "epsilon_spent": self.cost.epsilon_exact,
            "expected_error_mean": (self.reports or mech).expected_error_mean(self.n) / self.layout.copies,
            "copies": self.layout.copies,
            "layout": self.layout.to_dict(),
            "unprivatized_columns": list(self.layout.keep),
            "dtype": self.dtype,
            "reproducible": self.reproducible,
            "warnings": [python_text(text) for text in self.warnings],
            "input_tag": self.input_tag,
            "signed_by": self.signed_by,
            "n_clipped": self.n_clipped,
            "n_skipped": self.n_skipped,
            "dropped_columns": list(self.dropped_columns),
            "shuffled": self.shuffled.to_dict() if self.shuffled is not None else None,
            "reports": reports_section(self.reports) if self.reports is not None else None,
        }


def release_checks(
    mechanism: MechanismSpec | str, epsilon: float | None, norm_bound: float | None, options: ReleaseOptions,
) -> tuple[MechanismSpec, str | None, float | None]:
    """The options every release checks before reading a row: (the validated spec, the warning for
    an ε forced out of range, the clip limit). UsageError for any that cannot be used."""
    spec = mechanism_spec(mechanism, epsilon, norm_bound).validated()
    forced = check_epsilon(spec.epsilon, force=options.force)
    clip_limit = check_clip_fraction(options.fail_on_clip)
    if options.dtype is not None:
        check_dtype(options.dtype)
    if options.budget.max_budget is not None and options.budget.ledger is None:
        raise UsageError("`max_budget` needs the privacy-budget ledger (it counts what each input has spent)")
    if options.secure_delta is not None and not options.secure:
        raise UsageError("`secure_delta` is the target δ of the secure rendering: give it with `secure`")
    seed = options.seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise UsageError("`seed` must be a non-negative integer")
    if check_rng(options.rng) == "secure":
        require_randomgen()  # MissingDependency with the install line now, before any row is read
    return spec, forced, clip_limit


def ledger_entry(
    mech: Mechanism, *, digest: str, source: Path, rows: int, columns: Sequence[str], output: Path, cost: ReleaseCost,
    created: str, tag: str, reproducible: bool, label: str | None = None, output_label: str | None = None,
    shuffled: ShuffleClaim | None = None,
) -> LedgerEntry:
    """The ledger's record of one input released by ``mech`` into ``output``, at the release's ``cost``.

    ``label`` and ``output_label`` name an input or output that is no file of its own (``"<stdin>"``,
    ``"<stdout>"``); by default the resolved paths. The ε and δ are the release's ``cost``, its copies
    together (:func:`ldpcli.mechanisms._composition.release_cost`, computed once per release); the budget counts the exact ε, and
    ``note`` says why it is below the ε asked (:func:`~ldpcli.mechanisms._hooks.spending_note`); ``shuffled``
    is a shuffled release's central claim (:func:`ldpcli.release._shuffle_claim.shuffled_section`)."""
    return LedgerEntry(
        fingerprint=digest, input=label if label is not None else str(source.resolve()), rows=rows, d=mech.d,
        columns=list(columns), output=output_label if output_label is not None else str(output.resolve()),
        mechanism=mech.name, epsilon=cost.epsilon, epsilon_exact=cost.epsilon_exact,
        delta=cost.delta if cost.delta > 0 else None, created=created, tag=tag, reproducible=reproducible,
        note=python_text(spending_note(mech) or ""),
        shuffled=shuffled,
    )


def released_input_warning(source: Path) -> str | None:
    """The warning for an input that is already an ldp release (it has an ldp sidecar beside it; ldp
    writes no marker into the data file itself), None for any other input; UsageError for a release of seed
    reports, whose column holds seeds, not vectors.

    Privatizing a release again is post-processing of it: it spends no more privacy of the raw rows,
    and only adds noise (and clips the released rows, whose norm is the mechanism's scale·L). A new
    ε for the raw rows is spent only by privatizing the raw file, and then adds to the first one
    (basic composition).
    """
    side = find_sidecar(source)
    if not side.is_file():
        return None
    try:
        meta = load_sidecar(side)
        what = f"{meta.mechanism.name} at ε = {meta.mechanism.epsilon:g}"
    except LdpError:
        meta, what = None, "by ldp"
    if meta is not None and meta.reports is not None:
        raise UsageError(f"{source}: holds seed-compressed reports ({what}; its sidecar {side.name} is beside it), whose "
                         "column is seeds, not vectors: privatizing it would release noise about the seeds. Estimate "
                         "from it as it is (ldp estimate-mean), or privatize the raw file")
    return (
        f"{source} is already privatized ({what}; its sidecar {side.name} is beside it): privatizing it again "
        "spends no more privacy of the raw rows and only adds a second layer of noise, and the new sidecar's "
        "error bars count only that second layer. To release the raw rows at another ε, privatize the raw file: "
        "the ledger then adds the two ε"
    )


def default_output_path(input_path: str | os.PathLike[str]) -> Path:
    """``<stem>.privatized.<ext>`` beside the input (``x.csv.gz`` → ``x.privatized.csv.gz``)."""
    path = Path(input_path)
    suffix = data_suffix(path)
    stem = path.name[: len(path.name) - len(suffix)] if suffix else path.name
    return path.with_name(f"{stem}.privatized{suffix}")


def output_paths(
    inputs: Sequence[Path], output: str | os.PathLike[str] | None
) -> tuple[list[Path], Path | None]:
    """Where each input's privatized file goes, and the directory to create first (or None).

    No ``output``: :func:`default_output_path` beside each input. An ``output`` that is an existing
    directory, or ends with a path separator (``DIR/``, created if its parent exists): that name
    inside it. Any other ``output`` is one file, for one input only. UsageError for a file output
    with several inputs and for two inputs that would write the same file.
    """
    if output is None:
        targets = [default_output_path(path) for path in inputs]
        folder = None
    else:
        text = os.fspath(output)
        folder = Path(text)
        if folder.is_dir() or text.endswith((os.sep, "/")):
            targets = [folder / default_output_path(path).name for path in inputs]
        elif len(inputs) > 1:
            raise UsageError(
                f"-o {text}: names one file but {len(inputs)} inputs were given; give a directory for their "
                f"outputs (-o {text.rstrip(os.sep)}{os.sep}) or leave -o out to write each beside its input"
            )
        else:
            return [folder], None
        if folder.is_dir():
            folder = None
        elif not folder.parent.is_dir():
            raise UsageError(f"-o {text}: {str(folder.parent)!r} is not an existing directory; create it first")
    seen: dict[Path, Path] = {}
    for source, target in zip(inputs, targets):
        key = target.resolve()
        if key in seen:
            raise UsageError(
                f"{seen[key]} and {source} would both be privatized into {target}; write each beside its input "
                "(no -o) or rename one"
            )
        seen[key] = source
    return targets, folder


def write_file_releases(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str] | None = None,
    *,
    mechanism: MechanismSpec | str = "privunit2",
    epsilon: float | None = None,
    norm_bound: float | None = None,
    options: ReleaseOptions = ReleaseOptions(),
    sidecar: str | os.PathLike[str] | None = None,
    on_rows: Callable[[int], None] | None = None,
    on_start: Callable[[int | None], None] | None = None,
) -> list[PrivatizeResult]:
    """:func:`write_file_release` on each input, in order: files, directories and glob patterns
    (:func:`ldpcli.release._inputs.expand_inputs`; ldp's own outputs in a directory are skipped).

    Parameters
    ----------
    inputs : path, glob or sequence of them
        The inputs; each is its own release: its own output and sidecar, its own ledger record (and
        ``max_budget`` check), and, for a seeded run, its own key (so one ``seed`` gives
        independent noise to each).
    output : path or None
        None (each output beside its input), one file (one input only) or a directory
        (:func:`output_paths`).
    mechanism, epsilon, norm_bound, options, sidecar, on_rows, on_start
        As :func:`write_file_release` takes them, the same for every input.

    Notes
    -----
    Before any row is read, every target is checked (an existing output needs
    ``options.overwrite``). If an input fails, the ones before it stay released, complete with
    their sidecars and ledger records, and the error says which they are.
    """
    sources = expand_inputs(inputs, privatized=False)
    targets, folder = output_paths(sources, output)
    for source, target in zip(sources, targets):
        refuse_output_over_input(source, target)  # first: no overwriting decides this
    if not options.overwrite:
        for target in targets:
            for path in (target, sidecar_path(target)):
                if path.exists():
                    raise UsageError(f"{path} already exists; pass `overwrite=True` to replace it")
    if folder is not None:
        folder.mkdir(exist_ok=True)
    results: list[PrivatizeResult] = []
    with sweeping_once():  # each output directory listed once for the run, not twice per input
        for source, target in zip(sources, targets):
            try:
                results.append(write_file_release(
                    source, target, mechanism=mechanism, epsilon=epsilon, norm_bound=norm_bound, options=options,
                    sidecar=sidecar, on_rows=on_rows, on_start=on_start,
                ))
            except LdpError as exc:
                if not results:
                    if folder is not None:  # created above: leave no empty directory behind
                        with contextlib.suppress(OSError):
                            folder.rmdir()
                    raise
                done = ", ".join(os.fspath(result.output) for result in results)
                were, stay = ("was", "stays") if len(results) == 1 else ("were", "stay")
                raise type(exc)(f"{exc.template} ({len(results)} of {counted(len(sources), 'input')} {were} privatized before "
                                f"this one and {stay} released: {done})") from exc
    return results


def write_file_release(
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str] | None = None,
    *,
    mechanism: MechanismSpec | str = "privunit2",
    epsilon: float | None = None,
    norm_bound: float | None = None,
    options: ReleaseOptions = ReleaseOptions(),
    sidecar: str | os.PathLike[str] | None = None,
    on_rows: Callable[[int], None] | None = None,
    on_start: Callable[[int | None], None] | None = None,
) -> PrivatizeResult:
    """Privatize every row of ``input_path`` into ``output_path`` and write its sidecar.

    Rows are moved onto the mechanism's domain of radius ``norm_bound`` (clipped), privatized and
    written batch by batch; output and sidecar appear together or not at all (on any failure no
    output or sidecar is left behind, and a previous one is in place).

    Parameters
    ----------
    input_path : path
        The input (.parquet, .csv, .npy, …), only ever read.
    output_path : path or None
        The privatized file; default ``<stem>.privatized.<ext>`` beside the input.
    mechanism : MechanismSpec or str
        The mechanism: a :class:`~ldpcli.mechanisms.MechanismSpec` (with its ε, calibration, bound
        and options), or a registered name calibrated at ``epsilon`` and ``norm_bound``.
    epsilon : float or None
        ε of the release (with a mechanism name only). Outside [0.01, 10⁴] it needs
        ``options.force`` (:func:`ldpcli.release._safety.check_epsilon`).
    norm_bound : float or None
        The public bound L on each row (with a mechanism name only; default 1).
    options : ReleaseOptions
        Everything else (:class:`ldpcli.release._options.ReleaseOptions`): the columns, seed, copies,
        dtype, clipping and invalid-row policy, the risk section, the ledger and budget, the
        resources, overwrite, force, sidecar warnings and the ledger's labels.
    sidecar : path or None
        Where the sidecar goes; default ``OUTPUT.ldp.json`` beside the output.
    on_rows : callable or None
        Called with the size of each finished batch (progress).
    on_start : callable or None
        Called once with the number of rows when known (progress bars).

    Returns
    -------
    PrivatizeResult
        The outputs, the public counts and, for the operator only, the clipped and skipped rows.

    Notes
    -----
    ``options.columns.keep`` columns are copied unprivatized (free-text ones only with
    ``keep_unsafe``, :func:`ldpcli.io.open_vectors`). ``fail_on_clip``: when more than that fraction
    of the rows lie outside the bound, a DataError and nothing is written. ``skip_invalid``: rows with
    a missing, NaN/inf or wrong-length vector are left out instead of failing (each kept row's noise
    stays the one of its position). ``dtype`` (``"float32"`` or ``"float64"``, default the input's
    own: float32 for float32 or float16 Parquet vectors, float64 otherwise and for CSV) is the type
    the vectors are written as; rounding the privatized float64 values is post-processing, so the
    guarantee is unchanged; the sidecar records it as ``data.dtype``. ``warnings`` are recorded in
    the sidecar's ``release.warnings``, with the reason a baseline mechanism is not for release
    (:func:`ldpcli.release._sidecar.baseline_warning`); its ``release.unprivatized_columns`` are ``keep``.

    The ledger (``options.budget.ledger``; ``ldp privatize`` passes the user's) fingerprints the
    input's values while they are read, refuses the release before anything is published when the
    input's spent ε plus this release's would exceed ``max_budget`` (which needs a ledger), warns
    (in ``warnings`` of the result, not in the sidecar) when the input was released before, writes
    the input's keyed tag to the sidecar, and commits the release by
    :class:`ldpcli.release._commit.Commit`: reserved in the ledger (the budget checked again
    under its lock), output and sidecar published together, then confirmed; after any failure the
    reservation is taken out. Without a ledger nothing is recorded and the sidecar has no tag.
    ``input_label`` and ``output_label`` are the ledger's names for an input or output that is no
    file of its own (``"<stdin>"``; ``"<stdout>"``, the output being a spool copied there).
    ``overwrite`` replaces only ldp's own output: an existing output must have its sidecar, and is
    never the input or the ledger. When the owner has a signing key beside the ledger
    (:func:`ldpcli.release._signing.create_key`, ``ldp keys init``), the sidecar is signed with it
    (``signed_by`` of the result). ``options.risk`` chooses the sidecar's reconstruction section
    (:func:`ldpcli.risk._section.reconstruction`; default k = d, ρ0 = 0). ``copies``: release that
    many independent privatized copies of each row, side by side
    (:meth:`ldpcli.io.VectorLayout.with_copies`), each with the spec's
    :meth:`~ldpcli.mechanisms.MechanismSpec.for_copies` so that together they spend the requested
    privacy (:attr:`PrivatizeResult.cost`); estimators that need two independent copies of a row
    (``ldp regress``) read them. ``shuffle``: the rows are written in a uniformly random order
    (:mod:`ldpcli.release._shuffle`: flat memory, the order from ChaCha20) and the sidecar, the ledger entry
    and ``shuffled`` of the result state the central (ε, δ) at ``shuffle_delta`` (default 1/n²), with its
    assumptions; it refuses kept columns, ``copies`` > 1 and mechanisms that are not pure ε-LDP.
    Raises ``UsageError`` / ``DataError`` with one-line messages
    (a ``dtype`` other than float32 or float64 is a UsageError).
    """
    plan = plan_file_release(input_path, output_path, sidecar, release_checks(mechanism, epsilon, norm_bound, options),
                             options)
    ledger, seed = options.budget.ledger, options.seed
    with open_input(plan) as reader:
        release = calibrate(plan.copy_spec, reader.layout, forced=plan.forced,
                            options=options, source=plan.source, copies=options.copies)
        if options.shuffle:
            check_pure(release.mechanism, release.cost)
            if reader.num_rows is not None:  # n can only fall below it (skip_invalid): refuse now, not after the work
                shuffle_delta(reader.num_rows, options.shuffle_delta)
        hashes = _RowHashes.start(ledger, reader.layout.d)  # the ledger's key is made now if it has none
        if on_start is not None:
            on_start(reader.num_rows)
        with AtomicVectorWriter(
            plan.target, release.layout, format=plan.out_format, keep_schema=reader.keep_schema,
            overwrite=options.overwrite, dtype=REPORT_DTYPE if release.reports is not None else options.dtype,
            like=reader, codec=options.compression,
        ) as writer:
            done = privatize_batches(plan, release, reader, writer, hashes, on_rows)
            publication = Publication(overwrite=options.overwrite, replaceable=plan.replaceable)
            publication.add_file(writer.sink)
            with contextlib.ExitStack() as sidecars, Commit(publication, ledger=ledger, charges=done.charges(
                    plan, release, reader.layout.columns), max_budget=options.budget.max_budget) as commit:
                content = signed(file_sidecar(plan, release, done, writer, next(iter(commit.reserve()), None),
                                              commit.created), plan.signer)
                publication.add_file(sidecars.enter_context(finished_text(plan.side, sidecar_text(content))))
                reservations = commit.publish()
    notices = (*release.notes, *(r.notice for r in reservations if r.notice is not None),
               *((plan.released,) if plan.released else ()))
    return PrivatizeResult(
        output=plan.target, sidecar=plan.side, n=done.n, d=release.mechanism.d, mechanism=release.mechanism,
        layout=release.layout, reproducible=seed is not None, n_clipped=done.n_clipped,
        warnings=(*release.warnings, *notices), dtype=writer.dtype, n_skipped=reader.skipped,
        skipped_rows=tuple(reader.skipped_rows), input_tag=reservations[0].tag if reservations else None,
        signed_by=plan.signer.public_key.text if plan.signer is not None else None,
        dropped_columns=reader.dropped_columns, shuffled=done.shuffled, cost=release.cost, sha256=writer.sha256,
        written=written_sidecar(plan.side, content, release.mechanism, release.layout, release.reports),
        reports=release.reports, source_layout=reader.layout,
    )


@dataclass(frozen=True)
class FilePlan:
    """Step 1 of a file release: where it reads and writes and what it was asked, checked before any
    row is read (:func:`plan_file_release`)."""

    source: Path
    target: Path
    side: Path
    out_format: str
    spec: MechanismSpec
    forced: str | None
    clip_limit: float | None
    options: ReleaseOptions
    threads: int
    #: Bytes per batch in flight.
    per_batch: int
    signer: Signer | None
    #: The warning for an input that is itself an ldp release (:func:`released_input_warning`).
    released: str | None
    root: np.random.SeedSequence
    #: Each copy's spec (:meth:`~ldpcli.mechanisms.MechanismSpec.for_copies`: together they spend ``spec``).
    copy_spec: MechanismSpec

    def replaceable(self) -> None:
        """The rule for replacing the output (:func:`ldpcli.release._sidecar.check_replaceable`), run
        again by the publication just before it replaces anything."""
        ledger = self.options.budget.ledger
        check_replaceable(self.target, self.side, ledger_path=ledger.path if ledger is not None else None)


def plan_file_release(
    input_path: str | os.PathLike[str], output_path: str | os.PathLike[str] | None,
    sidecar: str | os.PathLike[str] | None, checked: tuple[MechanismSpec, str | None, float | None],
    options: ReleaseOptions,
) -> FilePlan:
    """Step 1: the paths, the options and the outputs checked (an existing one needs ``overwrite``
    and must be ldp's own), the dead runs' litter swept, the owner's key and the seed."""
    ledger, overwrite, memory = options.budget.ledger, options.overwrite, options.resources.memory
    if options.shuffle or options.shuffle_delta is not None:  # an unshuffled release has nothing to check
        check_shuffle(shuffle=options.shuffle, delta=options.shuffle_delta, keep=options.columns.keep,
                      copies=options.copies)
    copy_spec = checked[0].for_copies(options.copies)
    threads = check_threads(options.resources.threads)
    if isinstance(memory, bool) or not isinstance(memory, int) or memory < 2**20:
        raise UsageError(f"`memory` must be at least 1 MB, got {memory!r} bytes")
    source = Path(input_path)
    target = Path(output_path) if output_path is not None else default_output_path(source)
    file_format(source)
    out_format = file_format(target)
    check_codec(out_format, options.compression, str(target))
    if options.report_bits is not None:
        check_report_options(options, out_format, target)
    refuse_output_over_input(source, target)
    side = sidecar_path(target) if sidecar is None else Path(sidecar)
    if sidecar is not None:
        check_local(side)
    if target.exists() and not overwrite:
        raise UsageError(f"{target} already exists; pass `overwrite=True` to replace it")
    if side.is_dir():
        raise UsageError(
            f"{side}: is a directory, so the sidecar of {target.name} cannot be written there; choose another -o"
        )
    if side.exists() and not overwrite:
        raise UsageError(
            f"{side} already exists (the sidecar of {target.name}); "
            "pass `overwrite=True` to replace it, or choose another -o"
        )
    # Batches in flight: one being read, up to `threads` queued for or being privatized, one being
    # written. The output does not depend on the batch size or the thread count (keyed randomness).
    # A shuffle holds half the budget (the rows, or a bucket of them), the batches in flight the other half.
    per_batch = (memory // 2 if options.shuffle else memory) // max(_MIN_BATCHES_PER_BUDGET, threads + 2)
    plan = FilePlan(source, target, side, out_format, *checked, options, threads, per_batch,
                    signer=None, released=None, root=root_seed(options.seed),  # seed None: fresh OS entropy
                    copy_spec=copy_spec)
    if overwrite:
        plan.replaceable()  # and again at the publication
    sweep_stale(target.parent)
    signer = signer_for(ledger.path) if ledger is not None else None  # the owner's key, if they made one
    return replace(plan, signer=signer, released=released_input_warning(source))


def open_input(plan: FilePlan) -> VectorReader:
    """Step 2: the input's reader, in batches of ``plan.per_batch`` bytes on the key blocks' boundaries."""
    chosen, options = plan.options.columns, plan.options
    return open_vectors(
        plan.source, column=chosen.column, columns=chosen.columns, keep=chosen.keep,
        batch_rows=options.resources.batch_rows, memory_bytes=plan.per_batch, writable=False,
        granule=key_block_rows, keep_unsafe=chosen.keep_unsafe, skip_invalid=options.skip_invalid,
        no_header=chosen.no_header,
    )


@dataclass(frozen=True)
class _RowHashes:
    """The ledger's view of the input while it is read (None for each without a ledger): its
    fingerprint and the keyed hash of each row released (the row-level budget and the sidecar's row
    sketch), each hashed on its own background thread (hashlib releases the GIL), overlapping with the
    privatizing; the reader's arrays are read-only views that nothing writes to."""

    fingerprint: InputFingerprint | None
    rows: RowDigest | None

    @classmethod
    def start(cls, ledger: Ledger | None, d: int) -> _RowHashes:
        if ledger is None:
            return cls(None, None)
        return cls(InputFingerprint(d, threaded=True), ledger.row_digest(d, threaded=True))

    def close(self) -> None:
        with interrupts.held():  # their threads are joined even if a signal comes now
            if self.fingerprint is not None:
                self.fingerprint.close()
            if self.rows is not None:
                self.rows.close()


@dataclass(frozen=True)
class _Privatized:
    """Step 4's outcome: the rows written, the rows clipped, a shuffle's claim and the ledger's view."""

    n: int
    n_clipped: int
    shuffled: ShuffleClaim | None
    fingerprint: InputFingerprint | None
    rows: ReleaseRows | None

    def charges(self, plan: FilePlan, release: Calibrated, columns: Sequence[str]) -> list[Charge]:
        """The release's charge to the ledger (none without one)."""
        if self.fingerprint is None:
            return []
        options = plan.options
        return [Charge(ledger_entry(
            release.mechanism, digest=self.fingerprint.hexdigest(), source=plan.source, rows=self.fingerprint.rows,
            columns=columns, output=plan.target, cost=release.cost, created="", tag="",
            reproducible=options.seed is not None, label=options.input_label, output_label=options.output_label,
            shuffled=self.shuffled,
        ), options.input_label or str(plan.source), self.rows)]


def privatize_batches(plan: FilePlan, release: Calibrated, reader: VectorReader, writer: AtomicVectorWriter,
                      hashes: _RowHashes, on_rows: Callable[[int], None] | None) -> _Privatized:
    """Step 4: every batch clipped, privatized and written (:func:`ldpcli.release._batches.run_batches`),
    through an external shuffle first with ``shuffle``; the clipping checked; the output finished."""
    options, mech, seed = plan.options, release.mechanism, plan.options.seed
    key = input_key(plan.source, reader.layout.columns, plan.spec) if seed is not None else ()
    privatize = Privatizer(mech, plan.root, key, reader.precision, options.copies, options.rng, release.reports)
    with contextlib.ExitStack() as held:
        shuffler = held.enter_context(ExternalShuffle(  # seed reports: their words, bit for bit
            release.layout.width, memory=options.resources.memory // 2, directory=plan.target.parent,
        )) if options.shuffle else None
        try:
            n, n_clipped = run_batches(
                reader, writer if shuffler is None else shuffler, privatize if shuffler is None else
                OrderKeys(order_root(plan.root, seed is not None), key).keyed(privatize, mech.d), plan.threads,
                on_rows, hashes.fingerprint, hashes.rows,
            )
        finally:
            hashes.close()
        if n == 0:
            raise DataError(f"{plan.source}: every row is invalid ({reader.skipped} left out); nothing was written")
        check_clipping(n_clipped, n, plan.clip_limit, os.fspath(plan.source), mech, why=plan.released)
        shuffled = None
        if shuffler is not None:  # every row is privatized: write them in the shuffled order
            shuffled = shuffled_section(release.cost.epsilon_exact, n, shuffle_delta(n, options.shuffle_delta),
                                        reproducible=seed is not None)
            for rows_out in shuffler.rows(max(1, plan.per_batch // (8 * mech.d))):
                interrupts.check()
                writer.write(rows_out if release.reports is None else rows_out.view(np.uint64), None)
    writer.finish()
    return _Privatized(n, n_clipped, shuffled, hashes.fingerprint,
                       hashes.rows.finish() if hashes.rows is not None else None)


def file_sidecar(plan: FilePlan, release: Calibrated, done: _Privatized, writer: AtomicVectorWriter,
                 tag: str | None, created: str) -> dict[str, Any]:
    """Step 5: the output's sidecar, with the input tag and the time of its reservation."""
    return build_sidecar(
        release.mechanism, n=done.n, layout=release.layout, data_path=plan.target, sha256=writer.sha256,
        reproducible=plan.options.seed is not None, dtype=writer.dtype, warnings=release.warnings, input_tag=tag,
        reconstruction=release.risk, created=created, row_sketch=done.rows.sketch if done.rows is not None else None,
        rng=plan.options.rng, shuffled=done.shuffled, cost=release.cost, reports=release.reports,
    )
