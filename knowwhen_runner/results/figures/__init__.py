"""A run's figures, drawn from its CXS manifests: SVG plots for the report, matplotlib figures for a paper.

Read in this order: ``canvas`` (what a plot draws on: marks in data coordinates), ``svg`` (the report's
deterministic SVG chart), ``plots`` (each plot of a run), ``many_plots`` (small multiples and Pareto
plots, with many models), ``paper`` (the same plots through matplotlib, an optional extra).
"""

from __future__ import annotations

from .paper import FigureFormat, figure_format, require_matplotlib, write_figures
from .plots import write_plots

__all__ = ["FigureFormat", "figure_format", "require_matplotlib", "write_figures", "write_plots"]
