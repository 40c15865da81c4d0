"""``ldp plot``: draw a sweep table, the error of the mean against ε (or d, or n), one line per mechanism."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ldpcli.cli._typer_compat import Command
from ldpcli.cli.options import command_app
from ldpcli.cli.render import note, out, render
from ldpcli.errors import UsageError, counted
from ldpcli.planning._plot import X_COLUMNS, plot_sweep, require_matplotlib, select_rows, text_chart
from ldpcli.planning._sweep import read_sweep

app = command_app()


@app.command("plot", cls=Command)
def plot(
    table: Path = typer.Argument(
        ..., help="A table written by `ldp sweep -o` (.csv, .parquet or .json).", show_default=False, metavar="SWEEP"
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="The figure: .png, .svg or .pdf (needs matplotlib: pip install 'ldp[plot]')."
    ),
    x: str = typer.Option("eps", "--x", metavar="eps|d|n", help="The variable along the x axis."),
    d: Optional[int] = typer.Option(
        None, "--d", help="Draw the rows at this d when the table has several (default: the middle value)."
    ),
    eps: Optional[float] = typer.Option(
        None, "--eps", "--epsilon", help="Draw the rows at this ε (with --x d or n; default: the middle value)."
    ),
    n: Optional[int] = typer.Option(
        None, "--n", help="Draw the rows at this n when the table has several (default: the middle value)."
    ),
    mechanism: Optional[list[str]] = typer.Option(
        None, "--mechanism", "-m", metavar="NAME", help="Draw only this mechanism; repeat for several. Default: every "
        "one."
    ),
    terminal: bool = typer.Option(
        False, "--terminal", help="Print a text chart (a log-scale sparkline per mechanism); needs no matplotlib."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o file."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No notes and no 'wrote' line."),
) -> None:
    """Draw a sweep table: the error of the mean against ε (or d, or n), one line per mechanism, on log axes.

    Simulated points (`ldp sweep --empirical`) are drawn with their 95% intervals over the
    predicted lines. The other variables are fixed at one value each (--d, --eps, --n; default
    the middle of the table's values), named in the title.
    """
    if output is None and not terminal:
        raise UsageError("give -o FIGURE (.png, .svg or .pdf), or --terminal for a text chart")
    if output is not None:
        require_matplotlib()
    selection = select_rows(read_sweep(table), x, at={"epsilon": eps, "d": d, "n": n}, mechanisms=mechanism)
    for column, values in selection.choices.items():
        if len(values) > 1 and column != X_COLUMNS.get(x):
            flag = "--eps" if column == "epsilon" else f"--{column}"
            note(f"the table has {len(values)} values of {column}; drawing {column} = {selection.fixed[column]:g} "
                 f"(choose with {flag})", quiet)
    if output is not None:
        plot_sweep(selection, output, overwrite=overwrite)
    render(None, False, (lambda: out.print(text_chart(selection), markup=False)) if terminal else None,
           wrote=None if output is None or quiet
           else f"{output} ({counted(len(selection.mechanisms), 'mechanism')}; {selection.title()})")
