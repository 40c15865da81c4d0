"""``ldp sweep``: the error of the mean over a grid of mechanisms × d × ε × n (predicted, and simulated)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import NORM_OPTION, R_MAX_OPTION, command_app, public_bound, split
from ldpcli.cli.render import Encoded, fmt, out, progress, render, warn
from ldpcli.errors import counted
from ldpcli.planning._sweep import save_sweep, to_json
from ldpcli.planning._sweep import sweep as run_sweep

app = command_app()


@app.command("sweep", cls=Command)
def sweep(
    eps: str = typer.Option(
        ..., "--eps", "--epsilon", metavar="GRID", help="Privacy levels: a range such as 0.5:16 (--points log-spaced "
        "values, ends included), 0.5:16:20 (20 values) or a list 1,2,4. Outside [0.01, 10⁴] is a warning."
    ),
    d: Optional[str] = typer.Option(
        None, "--d", metavar="GRID", help="Dimensions, as --eps (ranges are rounded to integers), e.g. 384 or "
        "64,384,1024. Not with --data, whose d is used."
    ),
    n: Optional[str] = typer.Option(
        None, "--n", metavar="GRID", help="Rows averaged, as --d, e.g. 10000 or 1000:1000000. Not with --data, "
        "whose row count is used."
    ),
    mechanism: Optional[list[str]] = typer.Option(
        None, "--mechanism", "-m", metavar="NAME", help="A vector mechanism to include; repeat for several. Default: "
        "all of them."
    ),
    points: int = typer.Option(12, "--points", help="Values of each range A:B."),
    norm_bound: Optional[float] = NORM_OPTION,
    r_max: Optional[float] = R_MAX_OPTION,
    delta: Optional[float] = typer.Option(
        None, "--delta", help="δ of the gaussian baseline, which is (ε, δ)-DP, not ε-LDP (default 1e-6)."
    ),
    empirical: Optional[int] = typer.Option(
        None, "--empirical", metavar="TRIALS", help="Also simulate: TRIALS times privatize n rows on the boundary "
        "and measure ‖mean − true mean‖²; adds its mean and 95% interval."
    ),
    data: Optional[Path] = typer.Option(
        None, "--data", metavar="FILE", help="Simulate with the rows of this file (a format `ldp privatize` reads; clipped to L) "
        "instead of boundary inputs; d and n are the file's. Needs --empirical."
    ),
    column: Optional[str] = typer.Option(None, "--column", help="With --data: the list column holding the vectors."),
    columns: Optional[str] = typer.Option(
        None, "--columns", metavar="COLUMNS", help="With --data: the numeric columns, one per coordinate, as for "
        "`ldp privatize`."
    ),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the simulation. Default: OS entropy."),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Threads simulating grid points (default: the available cores); the table does "
        "not depend on it."
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write the table: .csv, .parquet or .json (by extension)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as a JSON list of rows."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no 'wrote' line."),
) -> None:
    """Tabulate the error of the mean over a grid of mechanisms × d × ε × n, to choose ε and a mechanism.

    One row per grid point: the predicted E‖mean − true mean‖² of n privatized rows (worst case
    expected_error_max / n and on the boundary expected_error / n), its ratio to optimal
    PrivUnit2, and with --empirical the simulated error with a 95% interval. A mechanism that
    cannot be calibrated at a point gets a row with an error. Draw the table with `ldp plot`.
    """
    with progress("simulating", quiet or empirical is None) as (on_start, on_rows):
        rows = run_sweep(
            d, eps, n, mechanisms=mechanism, norm_bound=public_bound(norm_bound, r_max), delta=delta, points=points,
            empirical=empirical, data=data, column=column, columns=split(columns) or None, seed=seed,
            threads=threads, on_start=on_start, on_rows=on_rows, on_warning=warn,
        )
    if output is not None:
        save_sweep(rows, output, overwrite=overwrite)
    failed = sum(row["error"] is not None for row in rows)
    extra = f", {failed} with an error" if failed else ""
    render(Encoded(lambda: to_json(rows)), as_json, None if output is not None else lambda: _print_sweep(rows),
           wrote=None if output is None or quiet else f"{output} ({counted(len(rows), 'row')}{extra})")


def _print_sweep(rows: list[dict[str, Any]]) -> None:
    """The human table of ``ldp sweep``: one line per mechanism × d × ε × n (every column: --json or -o)."""
    simulated = any(row["empirical_error"] is not None for row in rows)
    boundary = simulated and {row["inputs"] for row in rows} != {"data"}
    bounds = "/".join(fmt(bound) for bound in sorted({row["norm_bound"] for row in rows}))
    table = Table(title=f"Error of the mean E‖mean − true mean‖², predicted worst case (expected_error_max / n), "
                  f"L = {bounds}", title_justify="left")
    headers = ["mechanism", "d", "ε", "n", "predicted", "× privunit2"]
    headers += (["boundary"] if boundary else []) + (["simulated ± 95%"] if simulated else [])
    baselines = {row["mechanism"]: row for row in rows if row["baseline"]}
    lines: list[tuple[list[str], str]] = []
    for row in rows:
        cells = [row["mechanism"], str(row["d"]), f"{row['epsilon']:.4g}", str(row["n"])]
        if row["error"] is not None:
            lines.append((cells + ["—"] * (len(headers) - 4), f"not available: {row['error']}"))
            continue
        cells += [f"{row['expected_error_mean']:.4g}",
                  "—" if row["ratio_to_privunit2"] is None else f"{row['ratio_to_privunit2']:.4g}"]
        if boundary:
            cells.append(f"{row['expected_error_mean_boundary']:.4g}")
        if simulated:
            low, high = row["empirical_lower"], row["empirical_upper"]
            cells.append("—" if row["empirical_error"] is None else
                         f"{row['empirical_error']:.3g} ± {(high - low) / 2:.2g}")
        if row["guarantee"] != "ε-LDP":
            cells[0] += " (ε,δ)"
        lines.append((cells, ""))
    for k, name in enumerate(headers):  # the grid's own columns are never cut short
        width = max([len(name)] + [len(cells[k]) for cells, _ in lines]) if k < 4 else None
        table.add_column(name, justify="left" if k == 0 else "right", no_wrap=True, min_width=width)
    noted = any(note for _, note in lines)
    if noted:
        table.add_column("note", overflow="fold")
    for cells, note in lines:
        table.add_row(*cells, *([note] if noted else []))
    out.print(table)
    if baselines:
        said = [f"{name} ({row['guarantee']} with δ = {row['delta']:.3g})" if row["delta"] is not None else name
                for name, row in baselines.items()]
        out.print(f"Baselines for comparison, not for release: {', '.join(said)}.", markup=False)
    if simulated:
        out.print(
            "Simulated: the mean of ‖mean − true mean‖² over the --empirical trials, for "
            + ("inputs on the boundary of each domain: it estimates the boundary column (expected_error / n)."
               if boundary else "the rows of --data (clipped to L): at most the predicted worst case."),
            markup=False,
        )
