"""``ldp queries``: a public workload of queries over a finite universe, answered locally (``encode``,
``answer``) or centrally (``release``); Błasiok, Bun, Nikolov, Steinke 2019."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.analysis._answer import (
    answer_queries,
    encode_queries,
    read_workload,
    release_queries,
    save_central_release,
)
from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import LEDGER_OPTION, TRUST_OPTION, WORKLOAD_OPTION, command_app
from ldpcli.cli.render import fmt, note, out, progress, render, signature_row, summary_table, warn
from ldpcli.errors import UsageError, counted
from ldpcli.io import atomic_write_text
from ldpcli.io._formats import suffix_words
from ldpcli.release._ledger import InputFingerprint, Ledger

app = command_app(
    help="Answer a public workload of queries over a finite universe: locally (encode, privatize, answer) or "
    "centrally (release). Błasiok, Bun, Nikolov, Steinke 2019.",
)


@app.command("encode", cls=Command)
def queries_encode(
    data: Path = typer.Argument(..., help="The private data: one row per person, with a key column.", show_default=False),
    workload: Path = WORKLOAD_OPTION,
    key: str = typer.Option(..., "--key", help="The column naming each row's item, in the data and in the workload.",
                            show_default=False),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help=f"Where to write the vectors ({suffix_words()}). Default: DATA.queries.parquet."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or notes."),
) -> None:
    """Map each row to its query-answer vector minus the workload's public centroid, for `ldp privatize`.

    The output has one column per query and is as private as DATA: privatize it with the printed
    --norm-bound (any vector mechanism) and answer with `ldp queries answer`, which adds the
    centroid back. Centring shrinks the norm bound to the workload's radius about its centroid.
    """
    target = output or data.with_name(data.name.split(".")[0] + ".queries.parquet")
    loaded = read_workload(workload, key=key)
    with progress("encoding", quiet) as (_, on_rows):
        encoded = encode_queries(data, loaded, key, target, overwrite=overwrite, on_rows=on_rows)
    render(encoded.to_dict(), as_json, lambda: _print_next(target, encoded, workload))
    note(f"{target} is the private data re-expressed: keep it as private as {data} and publish only the privatized "
         "file", quiet)


def _print_next(target: Path, encoded: Any, workload: Path) -> None:
    """What was written, and the commands that privatize and answer it."""
    out.print(f"wrote {target}: {counted(encoded.rows, 'row')} × {counted(encoded.queries, 'query', 'queries')} "
              "(answers minus the workload's centroid)",
              markup=False)
    out.print(f"next: ldp privatize {target} --norm-bound {encoded.norm_bound:.7g} --eps EPS "
              f"(ℓ∞-box mechanisms: --norm-bound {encoded.box_bound:.7g}); then "
              f"ldp queries answer PRIVATIZED --workload {workload}", markup=False)


@app.command("answer", cls=Command)
def queries_answer(
    privatized: list[Path] = typer.Argument(
        ..., help="The privatized encoded file(s) (`ldp privatize` of `ldp queries encode`'s output).",
        show_default=False, metavar="PRIVATIZED...",
    ),
    workload: Path = WORKLOAD_OPTION,
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", help="Its sidecar. Default: FILE.ldp.json beside it."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the raw answers' intervals."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also save the answers as .json."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or notes."),
    trust: Optional[str] = TRUST_OPTION,
) -> None:
    """Every query's answer from a local release: the raw average and its projection onto the workload's hull.

    The local projection mechanism (Błasiok et al. 2019, Sec. 5.1, Thm 5.1) when the rows were
    privatized with gaussian-sign; any vector mechanism works, and PrivUnit2 is the most accurate.
    The guaranteed error (expected_error_max / n) bounds both; the intervals are the raw answers'.
    """
    if output is not None and output.suffix.lower() != ".json":
        raise UsageError(f"{output}: save the answers as .json")
    with progress("reading", quiet) as (on_start, on_rows):
        answers = answer_queries(privatized, workload, sidecar=sidecar, confidence=confidence, on_rows=on_rows,
                                 trust=trust, on_start=on_start)
    if output is not None:
        atomic_write_text(output, json.dumps(answers.to_dict(), allow_nan=False) + "\n", overwrite=overwrite)
    for text in answers.warnings:
        warn(text)
    info = answers.to_dict()
    render(info, as_json, lambda: _print_answers(answers, info, workload), wrote=None if output is None else str(output))


def _print_answers(answers: Any, info: dict[str, Any], workload: Path) -> None:
    """The summary and the first answers of a local release (``ldp queries answer``)."""
    est = answers.estimate
    summary = summary_table("Query answers (local release)")
    summary.add_row("rows n", str(est.n), "privatized rows averaged")
    summary.add_row("queries m", str(answers.m), f"workload {workload}")
    summary.add_row("mechanism", f"{est.mechanism}, ε = {fmt(est.epsilon)}", "from the sidecar")
    signature_row(summary, est.signature)
    summary.add_row("RMS error per query", fmt(answers.rms_error), "guaranteed, raw and projected (expected_error_max / n)")
    summary.add_row("moved by projection", fmt(info["projection"]["distance_moved"]), "ℓ2 distance from raw to projected")
    summary.add_row("Thm 5.1 form", fmt(answers.theorem_bound), "(Δ·g(𝒳)/(ε√(nm)))^½, up to an unspecified constant")
    out.print(summary)
    table = Table(title="answers" + (f" (first 20 of {answers.m})" if answers.m > 20 else ""), title_justify="left")
    for name in ("query", "projected", "raw", f"{est.confidence:.0%} interval (raw)"):
        table.add_column(name, justify="right")
    for row in info["queries"][:20]:
        interval = f"[{fmt(row['lower'])}, {fmt(row['upper'])}]" if "lower" in row else "—"
        table.add_row(row["query"], fmt(row["projected"]), fmt(row["raw"]), interval)
    out.print(table)


@app.command("release", cls=Command)
def queries_release(
    data: Path = typer.Argument(..., help="The private data: one row per person, with a key column.", show_default=False),
    workload: Path = WORKLOAD_OPTION,
    key: str = typer.Option(..., "--key", help="The column naming each row's item, in the data and in the workload.",
                            show_default=False),
    rho: float = typer.Option(..., "--rho", help="The zCDP level ρ of the release (central model).", show_default=False),
    delta: float = typer.Option(1e-6, "--delta", help="δ at which the equivalent (ε, δ) is printed."),
    cover: Optional[float] = typer.Option(
        None, "--cover", metavar="ALPHA", help="The coarse projection mechanism: round items to a public α/2-separated "
        "cover of the universe (RMS per-query distance α/2) and project onto its hull. Default: the plain projection "
        "mechanism."
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="The answers (.json, .csv or .parquet), with a sidecar OUTPUT.ldp.json. "
        "Default: DATA.answers.json."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing outputs."),
    seed: Optional[int] = typer.Option(
        None, "--seed", help="Seed the noise (reproducible, NOT for release; the sidecar says so). Default: OS entropy."
    ),
    ledger: Optional[Path] = LEDGER_OPTION,
    max_budget: Optional[float] = typer.Option(
        None, "--max-budget", metavar="EPS", help="Refuse the release if the ε the data has spent in the ledger plus "
        "this release's ε at --delta would exceed EPS (basic composition)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or notes."),
) -> None:
    """Release every query's answer centrally (a curator holds DATA): the projection mechanism, ρ-zCDP.

    Gaussian noise on the true answers with σ = diam/(n√(2ρ)) (the universe's ℓ2 diameter), then
    the projection onto the convex hull of the universe (or of a public cover with --cover). Prints
    the answers, the error bounds with their constants, and ρ as (ε, δ). The release is recorded in
    the data owner's privacy-budget ledger (--ledger; see `ldp budget`) at its exact (ε, δ).
    """
    target = output or data.with_name(data.name.split(".")[0] + ".answers.json")
    loaded = read_workload(workload, key=key)
    owner_ledger = Ledger.open(ledger)
    fingerprint = InputFingerprint(loaded.distinct.shape[1])
    with progress("counting", quiet) as (_, on_rows):
        release = release_queries(data, loaded, key, rho=rho, delta=delta, alpha=cover, seed=seed, on_rows=on_rows,
                                  fingerprint=fingerprint)
    side = save_central_release(release, loaded, target, overwrite=overwrite, ledger=owner_ledger, source=data,
                                fingerprint=fingerprint, max_budget=max_budget)
    info = release.to_dict()
    render({**info, "output": str(target), "sidecar": str(side)}, as_json, lambda: _print_release(release, info),
           wrote=f"{target} and {side}")


def _bound_words(release: Any, bounds: dict[str, Any]) -> str:
    """Which bound the 'bound' row prints: the smaller of √(σ²) and Lemma 5.3's √(σ·g(K)/m)."""
    rounding = " + α/2" if release.alpha is not None else ""
    if bounds["projected_by"] == "width":
        return f"√(σ·g(K)/m){rounding}, g bounded by R√(2 log N) (Lemma 5.3): below √(σ²)"
    return (f"√(σ²){rounding}: the projection never moves the answers further from the truth; Lemma 5.3's "
            f"√(σ·g(K)/m) = {fmt(bounds['projected_form_rms_per_query'])} is larger here")


def _print_release(release: Any, info: dict[str, Any]) -> None:
    """The summary and the first answers of a central release (``ldp queries release``)."""
    privacy, bounds = info["privacy"], info["bounds"]
    summary = summary_table(f"Central release ({info['mechanism']} mechanism)")
    summary.add_row("rows n", str(release.n), "the dataset's size (public)")
    summary.add_row("privacy", f"ρ = {fmt(release.rho)}-zCDP", "central model: one person's item may change")
    summary.add_row("as (ε, δ)", f"({fmt(privacy['epsilon_exact_gaussian'])}, {release.delta:g})",
                    f"exact for this Gaussian release; Bun–Steinke Prop. 1.3 gives ε = {fmt(privacy['epsilon_bun_steinke'])}")
    summary.add_row("noise σ", fmt(release.sigma), f"diameter {fmt(release.diameter)} / (n√(2ρ))")
    if release.alpha is not None:
        summary.add_row("cover", f"{release.items} of {counted(release.distinct_items, 'item')}", f"α = {release.alpha:g}")
    summary.add_row("RMS error per query (noisy)", fmt(bounds["noisy_rms_per_query"]), "√(σ²): before the projection")
    summary.add_row("RMS error per query (bound)", fmt(bounds["projected_rms_per_query"]), _bound_words(release, bounds))
    out.print(summary)
    table = Table(title="answers" + (f" (first 20 of {release.m})" if release.m > 20 else ""), title_justify="left")
    for name in ("query", "answer", "noisy"):
        table.add_column(name, justify="right")
    for row in info["queries"][:20]:
        table.add_row(row["query"], fmt(row["answer"]), fmt(row["noisy"]))
    out.print(table)
