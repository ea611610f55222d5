"""What a plot draws on: marks in data coordinates, the same for the SVG chart of the report and for the
matplotlib figure of a paper, so both show the same data and the same highlighting.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

from ..ranking import Focus

__all__ = ["GREY", "PALETTE", "Canvas", "CanvasFactory", "PlotSpec", "color_of", "slug"]

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#393b79",
)
"""Colours of the models a plot names (ten distinct hues, in ranking order)."""

GREY = "#b3b8c0"
"""The colour of the models a plot folds into "N others"."""


class Canvas(Protocol):
    """One chart's marks in data coordinates, and its legend (see ``svg.Chart``)."""

    def line(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        color: str,
        *,
        width: float = 1.5,
        style: str = "-",
        marker: str | None = None,
        label: str | None = None,
    ) -> None: ...

    def hline(
        self, v: float, color: str, *, style: str = "--", width: float = 1.2, label: str | None = None
    ) -> None: ...

    def band(
        self,
        xs: Sequence[float],
        lows: Sequence[float],
        highs: Sequence[float],
        color: str,
        *,
        opacity: float = 0.15,
        label: str | None = None,
    ) -> None: ...

    def marker(
        self, x: float, y: float, shape: str, color: str, *, size: float = 4.0, hollow: bool = False
    ) -> None: ...

    def key(self, label: str, color: str, *, marker: str | None = None, style: str | None = None) -> None: ...

    def errorbar(
        self,
        x: float,
        y: float,
        color: str,
        *,
        xerr: tuple[float, float] | None = None,
        yerr: tuple[float, float] | None = None,
        width: float = 1.0,
    ) -> None: ...

    def annotate(
        self, text: str, x: float, y: float, color: str, *, dx: float = 6, dy: float = -4
    ) -> None: ...

    def note(self, text: str) -> None: ...


CanvasFactory = Callable[[str, tuple[float, float], tuple[float, float], str, str], Canvas]
"""Makes an empty canvas: (title, x limits, y limits, x label, y label)."""


PlotSpec = tuple[str, Callable[[CanvasFactory], Canvas]]
"""A plot's file stem and how to draw it on a canvas."""


def color_of(focus: Focus, model_id: str) -> str:
    """A named model's own colour (by its place among the named), grey for a folded one."""
    if model_id not in focus.named:
        return GREY
    return PALETTE[focus.named.index(model_id) % len(PALETTE)]


def slug(name: str) -> str:
    """A name as a file stem."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)
