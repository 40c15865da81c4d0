"""Choosing before releasing: compare mechanisms at one (d, ε), solve ε for an error target,
sweep a grid of settings and plot it. Nothing here reads private data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.planning._compare import compare_mechanisms as compare_mechanisms
    from ldpcli.planning._compare import recommendation as recommendation
    from ldpcli.planning._plot import plot_sweep as plot_sweep
    from ldpcli.planning._plot import text_chart as text_chart
    from ldpcli.planning._solvers import epsilon_for_error as epsilon_for_error
    from ldpcli.planning._solvers import epsilons_for_error as epsilons_for_error
    from ldpcli.planning._sweep import read_sweep as read_sweep
    from ldpcli.planning._sweep import save_sweep as save_sweep
    from ldpcli.planning._sweep import sweep as sweep

__getattr__, __dir__, __all__ = attach(__name__, __file__)
