"""``ldp regress``: least squares from two private copies of each row (Aliakbarpour et al. 2024, Alg. 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.analysis._regress import regress, save_coefficients
from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import TRUST_OPTION, command_app
from ldpcli.cli.render import fmt, out, progress, render, signature_row, summary_table
from ldpcli.errors import counted

app = command_app()


@app.command("regress", cls=Command)
def regress_cmd(
    privatized: list[Path] = typer.Argument(
        ..., help="File(s) written by `ldp privatize --copies 2`; several files are the shards of one job.",
        show_default=False, metavar="PRIVATIZED...",
    ),
    label: str = typer.Option(
        ..., "--label", help="The privatized coordinate that is the label: a column name, or a 0-based coordinate of a "
        "list column (-1: the last). The features are the other coordinates."
    ),
    radius: Optional[float] = typer.Option(
        None, "--radius", help="Fit over the ball ‖θ‖₂ ≤ R (Thm 3's Θ). Default: √p for p features (every θ with "
        "|θ_j| ≤ 1)."
    ),
    sidecar: Optional[Path] = typer.Option(None, "--sidecar", help="Its sidecar. Default: FILE.ldp.json beside it."),
    where: Optional[list[str]] = typer.Option(
        None, "--where", metavar="COND", help="Keep only rows whose kept column satisfies COLUMN OP VALUE; repeatable."
    ),
    verify: bool = typer.Option(
        True, "--verify/--no-verify", help="Check each file's row count and SHA-256 against its sidecar (default)."
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Also save the coefficients: .json (everything) or .csv / .parquet (one row per "
        "feature)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar; with -o, print nothing."),
    trust: Optional[str] = TRUST_OPTION,
) -> None:
    """Least-squares regression from two private copies of each row (Aliakbarpour et al. 2024, Alg. 3).

    Each row [features, label] was privatized twice, independently (`ldp privatize --copies 2`, any
    vector mechanism; bcdp gives each copy half its budget vector). Products of the two copies give an
    unbiased estimate f̂(θ) = ½θᵀAθ − bᵀθ of the least-squares loss; A may be indefinite, so θ̂ is the
    exact minimiser over the ball ‖θ‖ ≤ R (trust-region secular equation, Moré–Sorensen 1983), not
    an unconstrained solve. Prints θ̂ per feature, f̂(θ̂) and Thm 3's rate for E[f(θ̂) − f*].
    """
    with progress("reading", quiet) as (_, on_rows):
        result = regress(privatized, label=label, radius=radius, sidecar=sidecar, where=where or (),
                         verify=verify, on_rows=on_rows, trust=trust)
    if output is not None:
        save_coefficients(result, output, overwrite=overwrite)
    if quiet and output is not None:
        return
    render(result.to_dict(), as_json, lambda: _print_regression(result), wrote=None if output is None else str(output))


def _print_regression(result: Any) -> None:
    """The human tables of a private least-squares fit."""
    fit = result.fit
    summary = summary_table("Least squares from two private copies" + ("" if result.verified else " (UNVERIFIED)"))
    summary.add_row("rows n", str(fit.n), "people, each privatized twice")
    summary.add_row("label", result.label, counted(len(result.features), "feature"))
    summary.add_row("mechanism", f"{result.mechanism}, ε = {fmt(result.epsilon_total)} in all", "both copies together")
    signature_row(summary, result.signature)
    summary.add_row("radius R", fmt(fit.radius), "θ̂ minimises f̂ over ‖θ‖ ≤ R" + (" (on the boundary)" if fit.on_boundary else ""))
    summary.add_row("f̂(θ̂)", fmt(fit.objective), "unbiased estimate of (1/2n)Σ(θ̂ᵀz − l)²")
    summary.add_row("A indefinite", "yes" if fit.indefinite else "no", "the noisy quadratic; handled exactly")
    summary.add_row("Thm 3 rate", fmt(result.rate.rate), result.rate.statement)
    out.print(summary)
    shown = min(len(result.features), 20)
    coefficients = Table(title="coefficients" + (f" (first {shown})" if shown < len(result.features) else ""),
                         title_justify="left")
    coefficients.add_column("feature")
    coefficients.add_column("θ̂", justify="right")
    for name, value in list(zip(result.features, fit.theta))[:shown]:
        coefficients.add_row(name, fmt(float(value)))
    out.print(coefficients)
    out.print(f"Note: {result.intercept_note}.", markup=False)
