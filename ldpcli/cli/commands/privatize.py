"""``ldp privatize``: privatize every row of each input and write it with its sidecar and ledger record."""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import typer

from ldpcli.cli._typer_compat import Command
from ldpcli.cli.flags import text_in_flags
from ldpcli.cli.options import (
    CALIBRATION_OPTION,
    EPS_OPTION,
    FORCE_OPTION,
    LEDGER_OPTION,
    MECHANISM_OPTION,
    NORM_OPTION,
    R_MAX_OPTION,
    REPORT_BITS_OPTION,
    RISK_A_OPTION,
    RISK_K_OPTION,
    RISK_RHO0_OPTION,
    RISK_THRESHOLD_OPTION,
    SCHEDULER_OPTION,
    SECURE_DELTA_OPTION,
    SECURE_OPTION,
    WithMechanismOptions,
    byte_size,
    command_app,
    floats,
    public_bound,
    report_bits,
    split,
)
from ldpcli.cli.pipes import closed_stdout
from ldpcli.cli.render import err, fmt, fmt_bound, note, progress, render, warn
from ldpcli.errors import UsageError, counted
from ldpcli.io._formats import suffix_words
from ldpcli.io._streams import STDIN_LABEL, STDOUT_LABEL, copy_to_stdout, spool_stdin, stdio_directory, stdout_suffix
from ldpcli.io._vectors import dropped_note
from ldpcli.mechanisms import MechanismSpec
from ldpcli.mechanisms._composition import ReleaseCost
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._engines import make_engine
from ldpcli.release._file import write_file_releases
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._ledger import Ledger
from ldpcli.release._options import Budget, Columns, ReleaseOptions, Resources, RiskSection
from ldpcli.release._randomness import DEFAULT_RNG, RNG_NAMES
from ldpcli.release._safety import CLIP_REFUSE_FRACTION, clip_warning
from ldpcli.release._shuffle_claim import ShuffleClaim

#: ``--shuffle``'s help: what the central claim says and rests on, and what a shuffle refuses.
_SHUFFLE_HELP = (
    "Write the rows in a uniformly random order (the sort order of 128-bit keys from ldp's own ChaCha20 stream, "
    "cryptographically secure and keyed from the OS: within n²/2¹²⁹ of uniform), and state the central (ε, δ)-DP "
    "of the n shuffled reports (amplification by shuffling, Feldman, McMillan and Talwar 2021) in the sidecar "
    "(release.shuffled), the ledger, the summary line and --json: an upper bound on ε that holds only if this "
    "process acted as an honest shuffler, so publish only the shuffled file, never the input or its order. "
    "Each person must have one row. One file per input: refuses --keep, --copies above 1, a dataset directory "
    "(-o DIR/ without --layout files) and reports that are not pure ε-LDP (gaussian; --secure with a δ)."
)

app = command_app()


@app.command("privatize", cls=Command)
@WithMechanismOptions
def privatize(
    inputs: list[str] = typer.Argument(
        ..., help=f"One or more input files ({suffix_words()}), each row one vector; a directory means its files "
        "of those types (sorted; ldp's own outputs, the files with a sidecar, are skipped) and a quoted glob "
        "('part-*.parquet') the files it matches. Each input is its own release, with its own output, sidecar and "
        "ledger record.", show_default=False, metavar="INPUTS...",
    ),
    eps: float = EPS_OPTION,
    mechanism: str = MECHANISM_OPTION,
    output: Optional[str] = typer.Option(
        None, "--output", "-o", help="Output file (of any of the input types, by its suffix) for one input, or a "
        "directory for any number (DIR/ with the slash, or an existing one): a dataset directory of Parquet part "
        "files, written in parallel, with a manifest (see --layout). Default: `<input stem>.privatized.<ext>` "
        "beside each input."
    ),
    layout: Optional[str] = typer.Option(
        None, "--layout", metavar="dataset|files", help="How -o DIR/ is written. dataset (the default for a "
        "directory): each input cut into parts (its row groups) that --threads threads privatize and write at "
        "once, with their sidecars and a manifest, as --engine dask writes them; the fast path on many cores. "
        "files: one output file per input inside DIR, of the input's type, with its sidecar (the layout of "
        "ldp before the dataset layout; --copies needs it)."
    ),
    column: Optional[str] = typer.Option(None, "--column", help="The list column holding the vectors."),
    columns: Optional[str] = typer.Option(
        None, "--columns", metavar="COLUMNS", help="The numeric columns, one per coordinate, in order: names, globs "
        "(`p*`) and inclusive ranges in file order (`f0:f63`), comma-separated. Default: the only list column, else "
        "every numeric column not in --keep, refused when one looks like an id or a label (`id`, `*_id`, `index`, "
        "`label`, `target`, `class`, `y`, or an integer column among floats)."
    ),
    calibration: Optional[str] = CALIBRATION_OPTION,
    norm_bound: Optional[float] = NORM_OPTION,
    r_max: Optional[float] = R_MAX_OPTION,
    keep: Optional[str] = typer.Option(
        None, "--keep", metavar="COLUMNS", help="Comma-separated columns (e.g. an id, a label) copied to the output "
        "**unprivatized**: listed on stderr and in the sidecar. Free-text columns (a text, an email) are refused "
        "without --keep-unsafe. Nothing else is copied."
    ),
    keep_unsafe: bool = typer.Option(
        False, "--keep-unsafe", help="Allow --keep of free-text columns (names, emails, sentences): released as they are."
    ),
    no_header: bool = typer.Option(
        False, "--no-header", help="The CSV inputs have no header row: every line is data, and the columns are "
        "named f0, f1, ... in file order (0-based; pyarrow's names for unnamed CSV columns). Those names are what "
        "--columns and --keep take (e.g. --keep f0 --columns f1:f64; not bare indexes), and what the output's "
        "header and its sidecar hold, so `ldp estimate-mean` and the other readers of the output need no flag. "
        "Refused when the first line looks like a header (a cell that is not a number in a vector column), and "
        "for inputs that are not CSV (stdin - is read as CSV text)."
    ),
    seed: Optional[int] = typer.Option(
        None, "--seed", help="Seed for a reproducible run (marked in the sidecar as not for release). Default: OS entropy."
    ),
    rng: str = typer.Option(
        DEFAULT_RNG, "--rng", metavar="|".join(RNG_NAMES), help="The generator of the noise. chacha20 (default): ldp's "
        "own counter-based ChaCha20 stream (RFC 8439, 20 rounds, keyed from 256 bits of OS entropy), cryptographically "
        "secure. pcg64: numpy's PCG64, the opt-out for simulations: not cryptographic, so whoever sees enough of its "
        "output can in principle predict the rest of the run's noise. secure: ChaCha20 through randomgen "
        "(`pip install 'ldp[secure]'`), slower (README, Randomness; benchmarks/rng.py). Recorded in "
        "the sidecar's release.randomness. With --seed each gives the same output whatever --threads, --memory "
        "or --engine."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output and sidecar."),
    fail_on_clip: float = typer.Option(
        CLIP_REFUSE_FRACTION, "--fail-on-clip", metavar="FRACTION", help="Fail (exit 1, nothing written) when more "
        "than this fraction of the rows lies outside the bound L and would be clipped, e.g. 0 or 0.01; 1 accepts any "
        "clipping. Below it, clipping more than 1% of the rows is a warning: the release is then of the clipped rows."
    ),
    skip_invalid: bool = typer.Option(
        False, "--skip-invalid", help="Leave out rows with a missing, NaN/inf or wrong-length vector (their count and "
        "first row numbers go to stderr) instead of failing on the first one."
    ),
    dtype: Optional[str] = typer.Option(
        None, "--dtype", metavar="float32|float64", help="Type of the written vectors. Default: the input's (float64 for "
        "CSV). Rounding the privatized output is post-processing: the privacy guarantee is unchanged."
    ),
    compression: Optional[str] = typer.Option(
        None, "--compression", metavar="CODEC", help="Codec for the privatized values inside a Parquet file (none, "
        "snappy, lz4, zstd, gzip, brotli) or an Arrow stream (none, lz4, zstd). Default none: privatized floats are "
        "random, so a codec saves little (zstd 12% with float64, 16% with float32, with byte-stream-split encoding, "
        "which ldp adds whenever a codec is used) and costs write time (measured by benchmarks/writer_settings.py; README, Benchmarks). A CSV output is "
        "compressed by its suffix (.csv.gz) instead."
    ),
    compress_reports: bool = typer.Option(
        False, "--compress-reports", help="Write each row as one seed of --report-bits instead of d numbers: the "
        "seed-compressed report of privunit2 or privunitg (Feldman & Talwar 2021, Alg. 1: the accepted seed among "
        "fresh random ones, whose ChaCha20 expansion is the privatized vector), in a uint64 Parquet column named "
        "report; the sidecar's reports block states the bits, the generator, the assumption and the exact ε. "
        "`ldp estimate-mean` decodes them. Refused above 1e5 expected tries per row (`ldp params --compress-reports` "
        "shows them). Not --compression, the Parquet codec."
    ),
    bits: Optional[int] = REPORT_BITS_OPTION,
    force: bool = FORCE_OPTION,
    secure: bool = SECURE_OPTION,
    secure_delta: Optional[float] = SECURE_DELTA_OPTION,
    ledger: Optional[Path] = LEDGER_OPTION,
    max_budget: Optional[float] = typer.Option(
        None, "--max-budget", metavar="EPS", help="Refuse (exit 1, nothing written) when the ε this input has spent "
        "in the ledger plus this release's would exceed EPS (basic composition: releases of the same rows add up)."
    ),
    risk_k: Optional[int] = RISK_K_OPTION,
    risk_rho0: float = RISK_RHO0_OPTION,
    risk_a: Optional[str] = RISK_A_OPTION,
    risk_threshold: float = RISK_THRESHOLD_OPTION,
    copies: int = typer.Option(
        1, "--copies", min=1, max=16, help="Release this many independent privatized copies of each row, side by side "
        "(copy j ≥ 2 in columns named NAME_copyJ), each at the share of the privacy that makes the whole release "
        "satisfy --eps (ε/copies; bcdp: its budget vector divided by copies). `ldp regress` needs two; "
        "`ldp estimate-mean` averages them."
    ),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Threads privatizing batches, or parts of a dataset directory (default: the "
        "available cores). The output for a --seed does not depend on it."
    ),
    memory: str = typer.Option(
        "256MB", "--memory", help="Memory budget for the batches in flight (e.g. 256MB, 2GB); sets the batch size."
    ),
    engine: str = typer.Option(
        "local", "--engine", metavar="local|dask", help="local: this process, --threads threads (default). dask: one task per part of "
        "each input (key-block-aligned row groups) on --scheduler, written as a dataset directory (-o DIR/) of "
        "part files with their sidecars and a manifest; same values for a --seed as the local engine. Needs "
        "`pip install 'ldp[dask]'`."
    ),
    sidecar: Optional[str] = typer.Option(
        None, "--sidecar", metavar="PATH", help="With -o - (the rows on stdout): where the sidecar is written."
    ),
    scheduler: Optional[str] = SCHEDULER_OPTION,
    part_rows: Optional[int] = typer.Option(
        None, "--part-rows", min=1, help="With --engine dask or a dataset directory: parts of about this many rows "
        "(rounded to key blocks) instead of one per Parquet row group."
    ),
    shuffle: bool = typer.Option(False, "--shuffle", help=_SHUFFLE_HELP),
    shuffle_delta: Optional[float] = typer.Option(
        None, "--shuffle-delta", metavar="DELTA", help="With --shuffle: the δ of the central claim, below 1/n for "
        "the n rows written (default 1/n²)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary of the run instead of a line."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no notes and no summary line (with -o -, "
                               "none on stderr either); warnings and errors are still shown."),
    options: dict[str, Any] = {},  # noqa: B006 - filled by WithMechanismOptions, never mutated
) -> None:
    """Privatize every row of each INPUT (files, directories, quoted globs, or - for stdin) and write
    each privatized file plus its sidecar (OUTPUT.ldp.json).

    The vectors are a list column (the only one, or --column) or one numeric column per
    coordinate (--columns, or all numeric columns). Rows with ‖x‖ > L are moved onto the bound, so
    the release and every estimate from it are of the **clipped** rows: choose a public L that the
    rows respect (a warning says when more than 1% were clipped; more than half is refused unless
    --fail-on-clip 1 accepts it, and --fail-on-clip 0 refuses any). Inside
    the ball each row is rounded without bias to the sphere, then randomized. The output is
    unbiased for every row: averaging privatized rows estimates the mean of the (clipped) raw ones.

    Each release is recorded in the data owner's privacy-budget ledger (--ledger; see `ldp budget`):
    releasing the same rows again warns and adds to their ε, --max-budget refuses past a cap. The
    sidecar carries a keyed tag of the input and bounds on reconstructing a row's direction from its
    output (Bhowmick et al. 2018 Sec. 2.3; --risk-k, --risk-rho0, --risk-a, --risk-threshold; see `ldp risk`).
    """
    bound = public_bound(norm_bound, r_max)
    # The layout is checked before the engine is made, so a wrong combination is named even where Dask is missing.
    dataset = _dataset_layout(layout, output, engine == "dask")
    dask_engine = make_engine(engine, scheduler)
    if not dataset and part_rows is not None:
        raise UsageError("--part-rows sets the parts of --engine dask and of a dataset directory (-o DIR/); "
                         "without one, the local engine writes one file per input")
    owner_ledger = Ledger.open(ledger)
    streams = _check_streams(inputs, output, sidecar, as_json, dataset)
    spec = MechanismSpec(mechanism, eps, calibration, bound, options)
    release = ReleaseOptions(
        columns=Columns(column, split(columns) or None, split(keep), keep_unsafe, no_header), seed=seed, rng=rng, copies=copies,
        dtype=dtype, compression=compression, fail_on_clip=fail_on_clip, skip_invalid=skip_invalid, force=force, overwrite=overwrite,
        risk=RiskSection(risk_k, risk_rho0, floats(risk_a, "--risk-a"), risk_threshold), budget=Budget(owner_ledger, max_budget),
        resources=Resources(threads, byte_size(memory, "--memory")), shuffle=shuffle, shuffle_delta=shuffle_delta,
        secure=secure, secure_delta=secure_delta, report_bits=report_bits(compress_reports, bits),
    )
    if dataset and shuffle:
        raise UsageError("--shuffle writes one file in one random order, but a dataset directory's parts are written "
                         "apart and are not shuffled across parts: give -o FILE, or add --layout files for one "
                         "shuffled file per input")
    if dataset:
        if output is None:
            raise UsageError("--engine dask writes a dataset directory of parts: give it with -o DIR/")
        if dask_engine is not None:
            for flag, given in (("--copies", copies != 1), ("--threads", threads is not None)):
                if given:
                    raise UsageError(f"{flag} is not available with --engine dask (its workers set their own threads)")
        elif copies != 1:
            raise UsageError("--copies is not available with the dataset layout of -o DIR/; add --layout files for "
                             "one output file per input")
        with progress("privatizing", quiet or dask_engine is not None) as (on_start, on_rows):
            written = write_dataset_release(inputs, output, engine=dask_engine, mechanism=spec, options=release,
                                        part_rows=part_rows, on_start=on_start, on_rows=on_rows)
        _report_dataset(written, quiet, as_json)
        return
    with progress("privatizing", quiet) as (on_start, on_rows), stdio_directory() as spool, ExitStack() as held:
        sources: list[str] = [str(held.enter_context(spool_stdin(Path(spool))))] if streams[0] else inputs
        target = str(Path(spool) / ("stdout" + stdout_suffix(Path(sources[0])))) if streams[1] else output
        results = write_file_releases(
            sources, target, mechanism=spec, sidecar=sidecar, on_start=on_start, on_rows=on_rows,
            options=replace(
                release, input_label=STDIN_LABEL if streams[0] else None,
                output_label=f"{STDOUT_LABEL} (sidecar {Path(sidecar).resolve()})" if streams[1] and sidecar else None,
            ),
        )
        if streams[1]:
            try:
                copy_to_stdout(results[0].output)
            except OSError as exc:
                if closed_stdout(exc):  # committed before the copy: the ledger counts what went out
                    warn("stdout was closed before the whole release was written: its reader got only part of the "
                         "rows; the ledger still records the release, since the rows that went out are released")
                raise
    if streams[1]:  # stdout carries the rows: the summary goes to stderr, unless -q
        if not quiet:
            err.print(f"ldp: wrote {counted(results[0].n, 'row')} (d = {results[0].d}{_shuffled_text(results[0].shuffled)}) "
                      f"to stdout and the sidecar {sidecar}", markup=False)
        quiet = True
    several = len(results) > 1
    for index, result in enumerate(results):
        _report_privatized(result, quiet, as_json, detected=column is None and not columns and index == 0,
                           label=f"{result.output}: " if several else "")
    if results[0].reproducible:
        warn("seeded run: reproducible by anyone who knows the seed; do not release it")
    render([result.summary() for result in results] if several else results[0].summary(), as_json)


def _dataset_layout(layout: str | None, output: str | None, dask: bool) -> bool:
    """Whether the run writes a dataset directory: always with Dask; with the local engine for
    ``--layout dataset`` and, by default, for an -o that is a directory (DIR/ or an existing one)."""
    if layout not in (None, "dataset", "files"):
        raise UsageError(f"--layout {layout!r}: use dataset or files")
    if dask:
        if layout == "files":
            raise UsageError("--engine dask writes the dataset layout; --layout files is for the local engine")
        return True
    folder = None if output is None or output == "-" else Path(output)
    directory = folder is not None and (str(output).endswith((os.sep, "/")) or folder.is_dir())
    if layout == "dataset" and not directory:
        raise UsageError("--layout dataset writes a dataset directory: give it with -o DIR/")
    if layout is None and folder is not None and folder.is_dir() and not (folder / MANIFEST_NAME).is_file():
        raise UsageError(f"-o {output}: is an existing directory that holds no ldp dataset; -o DIR/ writes a dataset "
                         "directory of parts (a new one, or an ldp dataset with --overwrite): give a new name, or "
                         "--layout files to write one file per input into it")
    return directory and layout != "files"


def _check_streams(
    inputs: list[str], output: str | None, sidecar: str | None, as_json: bool, dataset: bool
) -> tuple[bool, bool]:
    """(read stdin, write stdout) for ``-`` among the inputs and as -o, after checking the combination."""
    stdin, stdout = "-" in inputs, output == "-"
    if stdin and len(inputs) > 1:
        raise UsageError("- (standard input) must be the only INPUT")
    if stdin and output is None:
        raise UsageError("- reads standard input: give the output with -o FILE, or -o - for standard output")
    if stdout and sidecar is None:
        raise UsageError("-o - writes the rows to standard output: give --sidecar PATH for their sidecar")
    if sidecar is not None and not stdout:
        raise UsageError("--sidecar is for -o -; otherwise the sidecar is written beside the output")
    if stdout and as_json:
        raise UsageError("-o - writes the rows to standard output, so --json cannot print there; leave --json out")
    if dataset and (stdin or stdout):
        raise UsageError("a dataset directory (-o DIR/, --engine dask) is read and written by path; - is for one "
                         "file on the local engine (--layout files)")
    return stdin, stdout


def _epsilon_text(mechanism: Any, cost: ReleaseCost, copies: int) -> tuple[str, str]:
    """The 'wrote' line's ε and its copies clause: the ε spent beside the ε asked when the release spends
    less (bcdp whose levels bind), else the ε asked and, with copies, the total."""
    if cost.spends_less:
        return (f"ε = {fmt(cost.epsilon_exact)} spent of the {fmt(cost.epsilon)} asked",
                "" if copies == 1 else f", {copies} copies of each row")
    return (f"ε = {fmt(mechanism.epsilon)}",
            "" if copies == 1 else f", {copies} copies of each row, ε = {fmt(cost.epsilon_exact)} in all")


def _report_dataset(dataset: Any, quiet: bool, as_json: bool) -> None:
    """The warnings and the 'wrote' line (or JSON) of a dataset directory (-o DIR/, --engine dask)."""
    for text in dataset.warnings:
        warn(text)
    _note_dropped(dataset.dropped_columns, quiet, "")
    if dataset.n_skipped:
        warn(f"--skip-invalid: left out {counted(dataset.n_skipped, 'invalid row')}; this count is shown here only, "
             "never stored")
    clipped = clip_warning(dataset.n_clipped, dataset.n, dataset.mechanism)
    if clipped is not None:
        (warn if clipped[1] else lambda text: note(text, quiet))(clipped[0])
    if dataset.reproducible:
        warn("seeded run: reproducible by anyone who knows the seed; do not release it")
    spent, _ = _epsilon_text(dataset.mechanism, dataset.cost, 1)
    wrote = (f"{dataset.output}/ ({counted(dataset.n, 'row')} of {counted(len(dataset.inputs), 'input')} in "
             f"{counted(len(dataset.parts), 'part')}, "
             f"d = {dataset.d}, {dataset.mechanism.name}, {spent}) with its manifest "
             f"{dataset.manifest.name}")
    render(dataset.summary(), as_json, wrote=None if quiet else wrote)


def _report_privatized(result: Any, quiet: bool, as_json: bool, *, detected: bool, label: str) -> None:
    """The notes, warnings and 'wrote' line of one privatized input (``label`` names it among several)."""
    if detected:  # the layout was detected: say which columns became the vector
        source = result.source_layout or result.layout
        names = source.copy_columns(0)
        shown = ", ".join(repr(name) for name in names[:6]) + (", …" if len(names) > 6 else "")
        what = f"list column {shown}" if source.kind == "list" else f"{counted(len(names), 'numeric column')} {shown}"
        note(f"vectors from {what} (d = {result.d}); pass --column/--columns to choose", quiet)
    _note_dropped(result.dropped_columns, quiet, label)
    for text in result.warnings:
        warn(label + text)
    if result.n_skipped:
        first = ", ".join(str(row) for row in result.skipped_rows)
        more = ", …" if result.n_skipped > len(result.skipped_rows) else ""
        which = "row" if result.n_skipped == 1 else "rows"
        warn(f"{label}--skip-invalid: left out {counted(result.n_skipped, 'invalid row')} ({which} {first}{more}, "
             "counting from 1); this count is shown here only, never stored")
    clipped = clip_warning(result.n_clipped, result.n, result.mechanism)
    if clipped is not None:
        text, loud = clipped
        if loud:
            warn(label + text)
        else:
            note(label + text, quiet)
    if result.shuffled is not None:
        note(f"{label}the central ε assumes that ldp was an honest shuffler: publish only the shuffled output, never "
             "the input or its order (the sidecar lists every assumption)", quiet)
    if not quiet:  # the 'wrote' line of this input; with --json, the summaries follow all inputs
        spent, copied = _epsilon_text(result.mechanism, result.cost, result.layout.copies)
        if getattr(result.mechanism, "rendering", None) is not None:  # --secure: its δ, an upper bound (0 when finite)
            delta = result.cost.delta
            copied += ", secure rendering (δ = 0)" if delta == 0 else f", secure rendering with δ ≤ {fmt(delta)}"
        if result.reports is not None:
            copied += f", {result.reports.bits}-bit seed reports"
        render(None, as_json, wrote=f"{result.output} ({counted(result.n, 'row')}, d = {result.d}, "
               f"{result.mechanism.name}, {spent}{copied}{_shuffled_text(result.shuffled)}) and {result.sidecar}")


def _shuffled_text(shuffled: ShuffleClaim | None) -> str:
    """The 'wrote' line's clause for a shuffled release: its central ε at its δ, an upper bound rounded up to
    four digits (so still an upper bound)."""
    if shuffled is None:
        return ""
    upper = fmt_bound(shuffled.epsilon_central_upper, digits=4)
    return f", shuffled: central ε ≤ {upper} at δ = {fmt(shuffled.delta)} over n = {shuffled.n}"


def _note_dropped(names: Any, quiet: bool, label: str) -> None:
    """The note naming the input's columns that are in no output (neither vectors nor --keep)."""
    text = dropped_note(names)
    if text is not None:
        note(label + text_in_flags(text), quiet)
