"""Choosing before releasing: compare mechanisms at one (d, ε), solve ε for an error target,
sweep a grid of settings and plot it. Nothing here reads private data."""
