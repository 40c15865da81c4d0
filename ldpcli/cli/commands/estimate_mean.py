"""``ldp estimate-mean``: the mean of the raw rows from privatized rows alone, with error bars."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.analysis._estimate import estimate_file_mean, estimate_group_means, save_group_means, save_mean
from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import SCHEDULER_OPTION, TRUST_OPTION, command_app
from ldpcli.cli.render import fmt, fmt_bound, note, out, progress, render, signature_row, summary_table, warn
from ldpcli.errors import counted
from ldpcli.release._engines import make_engine
from ldpcli.release._shuffle_claim import ShuffleClaim

app = command_app()


@app.command("estimate-mean", cls=Command)
def estimate_mean_cmd(
    privatized: list[Path] = typer.Argument(
        ..., help="File(s) written by `ldp privatize`; several files are the shards of one job.", show_default=False,
        metavar="PRIVATIZED...",
    ),
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", help="Its sidecar. Default: FILE.ldp.json beside it (or the older <stem>.ldp.json)."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the per-coordinate intervals."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Also save the mean: .json, .parquet, .csv (with errors and intervals) or .npy."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    where: Optional[list[str]] = typer.Option(
        None, "--where", metavar="COND", help="Keep only rows whose kept column satisfies COLUMN OP VALUE (OP: == != < <= > >=) or "
        "COLUMN in (V1, V2); repeat to require several. Kept columns are public, so any subset is again unbiased."
    ),
    group_by: Optional[str] = typer.Option(
        None, "--group-by", help="One mean, error bars and n per value of this kept column (e.g. a label)."
    ),
    project: Optional[str] = typer.Option(
        None, "--project", metavar="SET", help="Also report the mean projected onto a public convex set that contains "
        "the true mean: ball[:R] (ℓ2 ball; R defaults to L), box[:L] or box:LO,HI, simplex[:S] (probability vectors "
        "summing to S, for histograms), nonneg, hull:FILE (convex hull of a public file's rows), or domain (the "
        "mechanism's own ball or box). Never further from the truth than the raw mean (Lemma 5.3 of Błasiok et al."
        " 2019); the intervals stay those of the raw mean."
    ),
    engine: str = typer.Option(
        "local", "--engine", metavar="local|dask", help="local (default) or dask: one task per file, only its sums come back (needs "
        "`pip install 'ldp[dask]'`)."
    ),
    scheduler: Optional[str] = SCHEDULER_OPTION,
    verify: bool = typer.Option(
        True, "--verify/--no-verify", help="Check each file's row count and SHA-256 against its sidecar (default). "
        "--no-verify accepts a file filtered or re-encoded after privatization; the estimate is then marked unverified."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Print nothing but the result (no progress bar, notes or 'wrote' line); with -o, "
        "print nothing."
    ),
    trust: Optional[str] = TRUST_OPTION,
) -> None:
    """Estimate the mean of the raw rows from privatized rows alone, with error bars.

    Reports n, d, the mean, its guaranteed expected squared ℓ2 error (expected_error_max / n from
    the mechanism), per-coordinate standard errors from the data, and confidence intervals.
    Several files (e.g. `part-*.parquet`) are combined; their sidecars must agree. --where and
    --group-by select rows by kept columns (privatize with --keep).
    """
    if not verify:
        note(
            "--no-verify: the files are not checked against their sidecars' row counts and SHA-256; the "
            "estimate is only as sound as the claim that they hold privatized rows of that release", quiet,
        )
    dask_engine = make_engine(engine, scheduler)
    with progress("reading", quiet) as (on_start, on_rows):
        if group_by is not None:
            groups = estimate_group_means(
                privatized, group_by, sidecar=sidecar, confidence=confidence, where=where or (), verify=verify,
                on_rows=on_rows, project=project, engine=dask_engine, trust=trust, on_start=on_start,
            )
        else:
            est = estimate_file_mean(
                privatized, sidecar=sidecar, confidence=confidence, where=where or (), verify=verify,
                on_rows=on_rows, project=project, engine=dask_engine, trust=trust, on_start=on_start,
            )
    first = groups.groups[0][1] if group_by is not None and groups.groups else (est if group_by is None else None)
    for found in () if first is None else first.dispersions:
        warn(found.message)
    if first is not None and first.projection is not None and not first.projection["contains_domain"]:
        warn(f"--project {project}: {first.projection['description']} does not contain the mechanism's domain; "
             "the projected mean is closer to the truth only if the truth lies in it (a claim about the data)")
    if output is not None:
        if group_by is not None:
            save_group_means(groups, output, overwrite=overwrite)
        else:
            save_mean(est, output, overwrite=overwrite)
    if quiet and output is not None:
        return  # -o with -q: the file is the result
    wrote = None if output is None else str(output)
    read = est if group_by is None else (groups.groups[0][1] if groups.groups else None)
    shuffled = _shuffle_claims(read.shuffled if read is not None else ())
    if shuffled is not None:
        note(_shuffle_note(shuffled), quiet)
    if group_by is not None:
        render({**groups.to_dict(), "shuffled": shuffled}, as_json, lambda: _print_groups(groups), wrote=wrote,
               default=str)
    else:
        render({**est.to_dict(), "shuffled": shuffled}, as_json, lambda: _print_mean(est), wrote=wrote)


def _shuffle_claims(claims: Sequence[ShuffleClaim | None]) -> list[dict[str, Any] | None] | None:
    """``--json``'s ``shuffled``: for each file read (``claims``: the estimate's, in the order of its files), the
    central claim of its release when it was written shuffled (``ldp privatize --shuffle``: n, δ, ε_local and
    ε_central_upper, an upper bound), else None; None when no file was shuffled."""
    if all(claim is None for claim in claims):
        return None
    return [None if claim is None else {"n": claim.n, "delta": claim.delta, "epsilon_local": claim.epsilon_local,
                                        "epsilon_central_upper": claim.epsilon_central_upper} for claim in claims]


def _shuffle_note(claims: list[dict[str, Any] | None]) -> str:
    """The one stderr line on shuffled files: their central ε (an upper bound, rounded up) at their δ, beside
    the local ε."""
    made = [claim for claim in claims if claim is not None]
    if len(claims) == 1:
        claim = made[0]
        return (f"the release was shuffled (ldp privatize --shuffle): its n = {claim['n']} reports are centrally "
                f"(ε ≤ {fmt_bound(claim['epsilon_central_upper'])}, δ = {fmt(claim['delta'])})-DP beside the local ε = "
                f"{fmt(claim['epsilon_local'])}, if the data owner was an honest shuffler (the sidecar's "
                "release.shuffled says what the claim rests on)")
    each = "was shuffled among its" if len(made) == 1 else "were each shuffled among their"
    return (f"{len(made)} of the {len(claims)} files {each} own rows (ldp privatize --shuffle): "
            f"each file is centrally (ε ≤ {fmt_bound(max(c['epsilon_central_upper'] for c in made))}, δ ≤ "
            f"{fmt(max(c['delta'] for c in made))})-DP beside the local ε, if the data owner was an honest shuffler "
            "(each sidecar's release.shuffled says what its claim rests on)")


def _print_mean(est: Any) -> None:
    """The human tables of one mean estimate, and a one-line reading of its error against its size."""
    summary = summary_table("Mean estimate" + ("" if est.verified else " (UNVERIFIED: read with --no-verify)"))
    summary.add_row("rows n", str(est.n), "privatized rows averaged")
    summary.add_row("dimension d", str(est.d), "")
    summary.add_row("mechanism", f"{est.mechanism}, ε = {fmt(est.epsilon)}", "from the sidecar")
    if est.copies > 1:
        summary.add_row("copies", str(est.copies), "privatized copies of each row, averaged (error ÷ copies)")
    signature_row(summary, est.signature)
    if est.norm_bound is not None:
        summary.add_row("norm bound L", fmt(est.norm_bound), _bound_words(est))
    summary.add_row("‖mean‖", fmt(est.mean_norm), "ℓ2 norm of the estimate, noise included")
    if est.debiased_norm is not None:
        summary.add_row("‖mean‖, noise removed", fmt(est.debiased_norm), _inflation_words(est))
    summary.add_row("expected squared error", fmt(est.expected_error), "E‖mean − true mean‖², guaranteed (max error / n)")
    summary.add_row("RMS ℓ2 error", fmt(est.rms_error), "its square root")
    summary.add_row(f"{est.confidence:.0%} joint ℓ2 ball", f"radius {fmt(est.ball_radius)}",
                    "holds the whole true mean with that probability, for any n (Markov on the guaranteed error)")
    if est.projection is not None:
        summary.add_row("projected onto", est.projection["description"], "a public convex set (--project)")
        summary.add_row("distance moved", fmt(est.projection["distance_moved"]),
                        "the guaranteed error holds for the projected mean too (Lemma 5.3)")
    out.print(summary)
    shown = min(est.d, 10)
    coords = Table(title=f"coordinates (first {shown} of {est.d})" if shown < est.d else "coordinates", title_justify="left")
    projected = est.projected
    for name in ("j", "mean", "std error", f"{est.confidence:.0%} interval (per coordinate)",
                 f"{est.confidence:.0%} joint (Bonferroni)", *(("projected",) if projected is not None else ())):
        coords.add_column(name, justify="right")
    for j in range(shown):
        extra = () if projected is None else (fmt(float(projected[j])),)
        if est.std_error is None or est.lower is None or est.upper is None or est.joint_lower is None \
                or est.joint_upper is None:
            coords.add_row(str(j), fmt(float(est.mean[j])), "—", "—", "—", *extra)
        else:
            coords.add_row(
                str(j), fmt(float(est.mean[j])), fmt(float(est.std_error[j])),
                f"[{fmt(float(est.lower[j]))}, {fmt(float(est.upper[j]))}]",
                f"[{fmt(float(est.joint_lower[j]))}, {fmt(float(est.joint_upper[j]))}]", *extra,
            )
    out.print(coords)
    if est.d > 1:
        out.print(f"Each per-coordinate interval holds its coordinate with probability about {est.confidence:.0%}, "
                  f"not all {est.d} at once; the Bonferroni intervals (each at level 1 − {1 - est.confidence:.2g}/"
                  f"{est.d}) and the ℓ2 ball hold the whole mean at once.", markup=False)
    if projected is not None:
        out.print("The intervals are for the raw mean; the projected mean has no interval of its own.", markup=False)
    if shown < est.d:
        out.print("Use --json or -o FILE for every coordinate.", markup=False)
    out.print(_reading(est), markup=False)


def _bound_words(est: Any) -> str:
    """What L means for this estimate. The sidecar holds no statistic of the raw rows, so whether any
    row was moved onto the domain is not known here: it is said as a condition, not as a fact."""
    where = est.domain or f"bound L = {fmt(est.norm_bound)}"
    return (f"any row outside the {where} was moved onto it before privatizing (the sidecar records no "
            "count): this estimates the mean of the rows after that")


def _inflation_words(est: Any) -> str:
    """How much noise inflates ‖mean‖: E‖mean‖² = ‖true mean‖² + Σ std error² (module docstring of
    :mod:`ldpcli.estimators._mean`)."""
    noise, debiased = est.noise_sq, est.debiased_norm
    text = f"√max(0, ‖mean‖² − Σ std error²): noise adds about {fmt(noise)} to ‖mean‖² on average"
    if debiased == 0.0:
        return text + ", as much as ‖mean‖² itself"
    return text + f", so ‖mean‖ is {est.mean_norm / debiased - 1.0:.1%} above this"


def _reading(est: Any) -> str:
    """'RMS error 0.06 on a mean of norm 0.52 (noise removed; …): …', with what to do when the
    error dominates. The relative error is against the norm with the noise removed
    (:attr:`~ldpcli.estimators._mean.MeanEstimate.debiased_norm`), which the raw ‖mean‖ overstates."""
    rms, size = est.rms_error, est.debiased_norm
    more = "use more rows (error ∝ 1/√n) or a larger ε."
    text = f"Reading: RMS ℓ2 error {fmt(rms)} (guaranteed)"
    if size is None:
        return text + f" on a mean of norm {fmt(est.mean_norm)}: with one row the noise cannot be told from the mean; " + more
    text += f" on a mean of norm {fmt(size)} (noise removed; ‖mean‖ = {fmt(est.mean_norm)} with it)"
    if est.norm_bound is not None:
        text += f", rows bounded by L = {fmt(est.norm_bound)}"
    if size == 0.0:
        return text + ": noise alone accounts for ‖mean‖, so the data show no mean distinguishable from zero; " + more
    if rms >= size:
        return text + ": the error is as large as the mean itself; " + more
    return text + f": the estimate is within about {rms / size:.0%} of the mean's norm."


def _print_groups(groups: Any) -> None:
    """The per-group means of ``estimate-mean --group-by``."""
    first = groups.groups[0][1]
    table = Table(title=f"Mean estimate per {groups.column} ({first.mechanism}, ε = {fmt(first.epsilon)}, d = {first.d})",
                  title_justify="left")
    shown = min(first.d, 3)
    for name in (groups.column, "rows n", "RMS ℓ2 error", *(f"mean[{j}]" for j in range(shown))):
        table.add_column(name, justify="right")
    for value, est in groups.groups:
        table.add_row(str(value), str(est.n), fmt(est.rms_error), *(fmt(float(est.mean[j])) for j in range(shown)))
    out.print(table)
    if groups.missing:
        out.print(f"{counted(groups.missing, 'row')} with a missing {groups.column} {'is' if groups.missing == 1 else 'are'} "
                  "in no group.", markup=False)
    if first.signature is not None:
        out.print(f"Signature: {first.signature['label']}.", markup=False)
    out.print("Use --json or -o FILE.json for every coordinate and the intervals.", markup=False)
