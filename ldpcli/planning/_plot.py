"""`ldp plot`: draw a sweep table (:mod:`ldpcli.planning._sweep`) as a figure, or as a text chart.

:func:`plot_sweep` draws the predicted error of the mean, E‖mean − true mean‖² in units of L²,
on log axes against ε (or d, or n): one line per mechanism, and the simulated points with their
95% intervals over the lines when the table has them. It needs matplotlib (the optional extra
``plot``: ``pip install 'ldp[plot]'``); the figure is drawn on its own Agg canvas
(:class:`matplotlib.figure.Figure`, never pyplot), so no display is opened and the caller's
matplotlib backend is left alone. :func:`text_chart` draws the same lines as one row of text per
mechanism (a log-scale sparkline) with no dependency at all.

A table holds one row per mechanism × d × ε × n; a chart shows one variable along x, so the
others are fixed by :func:`select_rows` at one value each (given, or the middle of the table's
values), and the title says which.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ldpcli.errors import DataError, MissingDependency, UsageError, counted, install_hint

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The variables a chart can put along x, and their table columns.
X_COLUMNS = {"eps": "epsilon", "d": "d", "n": "n"}
#: Axis labels.
X_LABELS = {"eps": "ε (privacy level)", "d": "d (dimension)", "n": "n (rows averaged)"}
Y_LABEL = "E‖mean − true mean‖² (units of L²)"
#: Figure formats by suffix.
FIGURE_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
#: How to install matplotlib (the project is ``ldp`` in pyproject.toml, its extra ``plot``).
INSTALL_HINT = install_hint("plot")
_SYMBOLS = {"epsilon": "ε", "d": "d", "n": "n"}
_SPARKS = "▁▂▃▄▅▆▇█"
#: One hollow marker per mechanism on its predicted line, in draw order: mechanisms whose predictions
#: nearly coincide (privunit2 and privunitg) stay told apart where one line covers the other. The
#: filled circle is left to the simulated points.
_MARKERS = ("s", "^", "v", "D", "<", ">", "p", "h", "X", "P")
#: The width of a predicted line (pt), and how near (in log) two lines must come for one to hide the other.
_LINE_WIDTH = 1.6
_NEAR = math.log(1.05)
_REQUIRED = ("mechanism", "d", "epsilon", "n", "expected_error_mean")


def require_matplotlib() -> None:
    """:class:`MissingDependency` with the one line to run when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingDependency(
            f"ldp plot needs matplotlib, which is not installed: {INSTALL_HINT} (or pip install matplotlib); "
            "`terminal` draws a text chart without it"
        ) from None


@dataclass(frozen=True)
class Selection:
    """The rows of one chart: x, the values the other variables were fixed at, and what else was there."""

    x: str
    rows: list[dict[str, Any]]
    fixed: dict[str, Any]  # column -> value
    choices: dict[str, list[Any]]  # column -> every value in the table (for the notes)

    @property
    def mechanisms(self) -> list[str]:
        """The mechanisms with at least one plottable row, in table order."""
        return list(dict.fromkeys(row["mechanism"] for row in self.rows if _predicted(row) is not None))

    def title(self) -> str:
        """E.g. ``Error of the mean vs ε at d = 384, n = 10,000``."""
        words = {"eps": "ε", "d": "d", "n": "n"}[self.x]
        fixed = ", ".join(f"{_SYMBOLS[col]} = {_value(col, value)}" for col, value in self.fixed.items())
        bounds = {row["norm_bound"] for row in self.rows if row.get("norm_bound") is not None}
        if bounds and bounds != {1.0}:
            fixed += ", L = " + "/".join(f"{bound:g}" for bound in sorted(bounds))
        return f"Error of the mean vs {words} at {fixed}"


def _value(column: str, value: Any) -> str:
    return f"{value:,}" if column in ("d", "n") else f"{value:g}"


def _predicted(row: Mapping[str, Any]) -> float | None:
    """The predicted worst-case error of the mean in units of L², or None (an error row)."""
    value = row.get("expected_error_mean")
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return float(value) / _scale(row)


def _boundary(row: Mapping[str, Any]) -> float:
    """The predicted error of the mean for rows on the boundary, in units of L²."""
    return float(row["expected_error_mean_boundary"]) / _scale(row)


def _scale(row: Mapping[str, Any]) -> float:
    bound = row.get("norm_bound")
    return 1.0 if bound is None else float(bound) ** 2


def select_rows(
    rows: Sequence[Mapping[str, Any]],
    x: str = "eps",
    *,
    at: Mapping[str, Any] | None = None,
    mechanisms: Sequence[str] | None = None,
) -> Selection:
    """The rows to draw with ``x`` (``eps``, ``d`` or ``n``) along the axis.

    Each other variable is fixed at ``at[column]`` (``at={"d": 384}``; columns ``epsilon``, ``d``,
    ``n``) if given, which the table must hold, else at the middle of the table's values (the lower
    middle of an even count). ``mechanisms`` keeps only those. :class:`UsageError` for a bad choice
    (also an ``x`` along which the rows to draw have a single value: a chart of one point per line),
    :class:`DataError` for a table without the sweep's columns or without a row to draw.
    """
    if x not in X_COLUMNS:
        raise UsageError(f"`x` must be one of {', '.join(X_COLUMNS)}, got {x!r}")
    if not rows:
        raise DataError("the sweep table has no rows")
    missing = [name for name in _REQUIRED if name not in rows[0] or all(row[name] is None for row in rows)]
    if missing:
        raise DataError(f"the table has no column {', '.join(missing)}; give a table written by `ldp sweep -o`")
    at = dict(at or {})
    unknown = sorted(set(at) - set(X_COLUMNS.values()))
    if unknown:
        raise UsageError(f"cannot fix {', '.join(unknown)}; choose among epsilon, d and n")
    xcol = X_COLUMNS[x]
    if xcol in at and at[xcol] is not None:
        raise UsageError(f"--{x} is along the x axis; it cannot also be fixed")
    if mechanisms:
        present = list(dict.fromkeys(row["mechanism"] for row in rows))
        absent = [name for name in mechanisms if name not in present]
        if absent:
            raise UsageError(f"the table has no mechanism {', '.join(absent)}; it has {', '.join(present)}")
        rows = [row for row in rows if row["mechanism"] in mechanisms]
    fixed: dict[str, Any] = {}
    choices: dict[str, list[Any]] = {}
    kept = [dict(row) for row in rows]
    for column in ("d", "epsilon", "n"):  # the order of the title
        if column == xcol:
            continue
        values = sorted({row[column] for row in kept if row[column] is not None})
        choices[column] = values
        wanted = at.get(column)
        if wanted is None:
            value = values[(len(values) - 1) // 2] if values else None
        else:
            matches = [v for v in values if math.isclose(v, wanted, rel_tol=1e-9)]
            if not matches:
                shown = ", ".join(_value(column, v) for v in values)
                raise UsageError(f"`{column}` {wanted:g}: the table has {_SYMBOLS[column]} = {shown}")
            value = matches[0]
        fixed[column] = value
        kept = [row for row in kept if row[column] == value]
    along = sorted({row[xcol] for row in kept if _predicted(row) is not None})
    if len(along) == 1:
        raise UsageError(
            f"`x` {x}: the rows to draw have a single {_SYMBOLS[xcol]} = {_value(xcol, along[0])}, so there is no "
            f"line to draw along it; draw along another variable, or sweep several values of {_SYMBOLS[xcol]}"
        )
    selection = Selection(x, sorted(kept, key=lambda row: row[xcol]), fixed, choices)
    if not selection.mechanisms:
        raise DataError(f"no row to draw at {', '.join(f'{k} = {v}' for k, v in fixed.items())}: "
                        "every mechanism there has an error instead of a prediction")
    return selection


def plot_sweep(
    rows: Sequence[Mapping[str, Any]] | Selection,
    path: str | os.PathLike[str] | None = None,
    x: str = "eps",
    *,
    at: Mapping[str, Any] | None = None,
    mechanisms: Sequence[str] | None = None,
    overwrite: bool = False,
) -> Figure:
    """Draw the sweep and return the matplotlib Figure; with ``path`` (.png, .svg, .pdf) also write it
    there, atomically (an existing file only with ``overwrite``).

    One line per mechanism (``gid`` ``predicted-NAME``; dashed for the baselines; a hollow marker of its
    own at each point, and wider under a line drawn later that comes near it, so that lines that
    coincide stay visible: :func:`_line_widths`) of the predicted
    worst-case error of the mean, ``expected_error_mean`` / L²; where the table has simulated
    errors, points with 95% error bars over it (``gid`` ``empirical-NAME``). Log axes. ``rows`` is
    the table, or a :class:`Selection` of it; ``x``, ``at`` and ``mechanisms`` as :func:`select_rows`.
    """
    require_matplotlib()
    fmt = None
    if path is not None:
        fmt = FIGURE_FORMATS.get(Path(path).suffix.lower())
        if fmt is None:
            raise UsageError(f"{os.fspath(path)}: cannot draw a figure as {Path(path).suffix or 'a file without extension'}; "
                             "use .png, .svg or .pdf")
    selection = rows if isinstance(rows, Selection) else select_rows(rows, x, at=at, mechanisms=mechanisms)
    figure = _draw(selection)
    if path is not None and fmt is not None:
        from matplotlib import rc_context

        from ldpcli.io import atomic_write_bytes

        buffer = io.BytesIO()
        metadata = {"Date": None} if fmt in ("svg", "pdf") else {}
        with rc_context({"svg.hashsalt": "ldp", "svg.fonttype": "path"}):
            figure.savefig(buffer, format=fmt, dpi=150, bbox_inches="tight", metadata=metadata)
        atomic_write_bytes(path, buffer.getvalue(), overwrite=overwrite)
    return figure


def _draw(selection: Selection) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator

    xcol = X_COLUMNS[selection.x]
    figure = Figure(figsize=(8.0, 5.0), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    colors = [f"C{k}" for k in range(10)]
    simulated = boundary_lines = False
    trials: set[int] = set()
    inputs: set[str] = set()
    predicted = {name: [(row[xcol], value) for row in selection.rows if row["mechanism"] == name
                        and (value := _predicted(row)) is not None] for name in selection.mechanisms}
    widths = _line_widths(list(predicted.values()))
    for k, name in enumerate(selection.mechanisms):
        mine = [row for row in selection.rows if row["mechanism"] == name]
        line = predicted[name]
        first = mine[0]
        label = name + (" (ε,δ)" if first.get("guarantee") == "(ε,δ)-DP" else "") + (
            " [baseline]" if first.get("baseline") else "")
        color = colors[k % len(colors)]
        ax.plot([p[0] for p in line], [p[1] for p in line], color=color, label=label, gid=f"predicted-{name}",
                linestyle="--" if first.get("baseline") else "-", linewidth=widths[k], marker=_MARKERS[k % len(_MARKERS)],
                markersize=6.0, markerfacecolor="none", markeredgewidth=1.3)
        points = [row for row in mine if row.get("empirical_error") is not None]
        on_boundary = [row for row in points if row.get("inputs") == "boundary"
                       and row.get("expected_error_mean_boundary") is not None]
        if any(_boundary(row) < 0.98 * (_predicted(row) or 0.0) for row in on_boundary):
            # What the points estimate, where it is visibly below the worst case (sphere mechanisms at
            # large ε: the worst case is at x = 0, L² above the boundary).
            boundary_lines = True
            ax.plot([row[xcol] for row in on_boundary], [_boundary(row) for row in on_boundary], color=color,
                    linestyle=":", linewidth=1.2, gid=f"boundary-{name}")
        if points:
            simulated = True
            trials.update(int(row["trials"]) for row in points if row.get("trials") is not None)
            inputs.update(str(row["inputs"]) for row in points if row.get("inputs"))
            ys = [row["empirical_error"] / _scale(row) for row in points]
            low = [max(y - row["empirical_lower"] / _scale(row), 0.0) for y, row in zip(ys, points)]
            high = [max(row["empirical_upper"] / _scale(row) - y, 0.0) for y, row in zip(ys, points)]
            bars = ax.errorbar([row[xcol] for row in points], ys, yerr=[low, high], fmt="o", markersize=3.5,
                               color=color, ecolor=color, elinewidth=1.0, capsize=2.0)
            marks, caps, lines = bars.lines  # ids unique within an SVG: the points, their caps, their bars
            marks.set_gid(f"empirical-{name}")
            for which, cap in zip(("lower", "upper"), caps):
                cap.set_gid(f"empirical-{name}-{which}-caps")
            for collection in lines:
                collection.set_gid(f"empirical-{name}-bars")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel(X_LABELS[selection.x])
    ax.set_ylabel(Y_LABEL)
    ax.set_title(selection.title())
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.3", label="predicted, worst case\n(expected_error_max / n)"))
    if boundary_lines:
        handles.append(Line2D([], [], color="0.3", linestyle=":", label="predicted for rows on the boundary\n"
                              "(expected_error / n)"))
    if simulated:
        count = "/".join(str(t) for t in sorted(trials)) or "?"
        where = "your rows" if inputs == {"data"} else "rows on the boundary"
        handles.append(Line2D([], [], color="0.3", marker="o", linestyle="none", markersize=4,
                              label=f"simulated, {where},\nmean and 95% CI of {count} trials"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    return figure


def _line_widths(lines: Sequence[Sequence[tuple[float, float]]]) -> list[float]:
    """The width of each predicted line, in the order they are drawn: 1.6 pt, and 1.6 pt more for each line
    drawn after it that runs within 5% of it at most of the x they share (privunit2 and privunitg at large
    d), so that a line another covers still shows as a band around it."""
    width = [_LINE_WIDTH] * len(lines)
    for k, line in enumerate(lines):
        points = dict(line)
        for later in lines[k + 1:]:
            shared = [(y, points[x]) for x, y in later if x in points and y > 0 and points[x] > 0]
            if 2 * sum(abs(math.log(y / mine)) < _NEAR for y, mine in shared) > len(shared):
                width[k] += _LINE_WIDTH
    return width


def text_chart(
    rows: Sequence[Mapping[str, Any]] | Selection,
    x: str = "eps",
    *,
    at: Mapping[str, Any] | None = None,
    mechanisms: Sequence[str] | None = None,
) -> str:
    """The sweep as text: one line per mechanism with a sparkline of the predicted error on a log
    scale shared by all lines (so lines compare), its first and last values, and the simulated/
    predicted ratio where the table has simulated errors. No dependency beyond the standard library."""
    selection = rows if isinstance(rows, Selection) else select_rows(rows, x, at=at, mechanisms=mechanisms)
    xcol = X_COLUMNS[selection.x]
    xs = sorted({row[xcol] for row in selection.rows})
    values = [v for v in (_predicted(row) for row in selection.rows) if v is not None and v > 0]
    low, high = math.log10(min(values)), math.log10(max(values))
    names = selection.mechanisms
    width = max(len(name) for name in names) + 2

    def spark(value: float | None) -> str:
        if value is None or value <= 0:
            return "·"
        if high == low:
            return _SPARKS[len(_SPARKS) // 2]
        level = (math.log10(value) - low) / (high - low)
        return _SPARKS[min(len(_SPARKS) - 1, int(level * len(_SPARKS)))]

    symbol = _SYMBOLS[xcol]
    lines = [
        f"{selection.title()}: predicted {Y_LABEL}, log scale",
        f"{'':{width}}{symbol} = {_value(xcol, xs[0])} … {_value(xcol, xs[-1])} ({counted(len(xs), 'value')}); "
        f"▁ = {10 ** low:.3g}, █ = {10 ** high:.3g}",
    ]
    for name in names:
        by_x = {row[xcol]: row for row in selection.rows if row["mechanism"] == name}
        line = "".join(spark(_predicted(by_x[v]) if v in by_x else None) for v in xs)
        predicted = [(v, _predicted(by_x[v])) for v in xs if v in by_x and _predicted(by_x[v]) is not None]
        text = f"{name:<{width}}{line}  {predicted[0][1]:.3g} → {predicted[-1][1]:.3g}"
        simulated = [by_x[v] for v, _ in predicted if by_x[v].get("empirical_error") is not None]
        if simulated:
            # Boundary inputs estimate the boundary prediction; the rows of a file, at most the worst case.
            boundary = all(row.get("inputs") == "boundary" and row.get("expected_error_mean_boundary") is not None
                           for row in simulated)
            key = "expected_error_mean_boundary" if boundary else "expected_error_mean"
            ratios = [row["empirical_error"] / row[key] for row in simulated]
            text += (f"  simulated ÷ {'boundary prediction' if boundary else 'worst case'} "
                     f"{min(ratios):.3g}–{max(ratios):.3g}")
        if by_x[predicted[0][0]].get("guarantee") == "(ε,δ)-DP":
            text += "  (ε,δ)"
        lines.append(text)
    return "\n".join(lines)
