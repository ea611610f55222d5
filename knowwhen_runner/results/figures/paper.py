"""The run's plots as figures for a paper (PDF, PGF or PNG) through matplotlib, an optional extra
(``pip install 'knowwhen-runner[figures]'``): the same plot functions as the SVG files draw on a
matplotlib canvas here, so each figure shows the same data and the same highlighting, beside its SVG.

matplotlib is imported only when figures are asked for; without it, ``require_matplotlib`` says what to
install in one sentence.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ...config import ReportSettings
from ...exceptions import KnowwhenError
from ...jsonio import atomic_write_bytes
from ..manifest import CxsManifest
from ..ranking import plot_focus, rank_models
from ..screen_record import unscreened
from .canvas import Canvas
from .many_plots import PanelSet, panel_sets
from .plots import plot_specs

__all__ = ["FIGURE_FORMATS", "FigureFormat", "figure_format", "require_matplotlib", "write_figures"]

FigureFormat = Literal["pdf", "pgf", "png"]
FIGURE_FORMATS: tuple[FigureFormat, ...] = ("pdf", "pgf", "png")
_INSTALL = "pip install 'knowwhen-runner[figures]'"
_DASH = {"-": "-", "--": "--", ":": ":"}
_MARKER = {"o": "o", "s": "s", "^": "^", "v": "v", "<": "<", ">": ">", "D": "D", "P": "P", "X": "X"}


def figure_format(value: str) -> FigureFormat:
    """``--figures``' value as a format, or one sentence naming the choices."""
    for fmt in FIGURE_FORMATS:
        if value == fmt:
            return fmt
    raise KnowwhenError(f"--figures: expected pdf, pgf or png, got {value!r}")


def require_matplotlib(fmt: FigureFormat | None = None) -> Any:
    """The ``matplotlib.pyplot`` module on a file-only backend, or a one-sentence error naming what to
    install (the extra; for PGF, also the TeX system matplotlib lays its text out with)."""
    try:
        # optional: matplotlib is the [figures] extra
        import matplotlib
    except ImportError:
        raise KnowwhenError(f"figures need matplotlib, which is not installed: {_INSTALL}") from None
    matplotlib.use("Agg", force=True)
    # optional: matplotlib is the [figures] extra
    import matplotlib.pyplot as plt

    tex = str(matplotlib.rcParams["pgf.texsystem"])
    if fmt == "pgf" and shutil.which(tex) is None:
        raise KnowwhenError(
            f"PGF figures need {tex} on PATH (matplotlib measures their text with it): install a TeX "
            "system (Debian: apt-get install texlive-xetex), or ask for --figures pdf"
        )
    return plt


class MplChart:
    """A ``Canvas`` on one matplotlib axes (the legend outside the axes, on the right)."""

    def __init__(
        self, title: str, xlim: tuple[float, float], ylim: tuple[float, float], xlabel: str, ylabel: str
    ) -> None:
        self._plt = require_matplotlib()
        self.fig, self.ax = self._plt.subplots(figsize=(7.2, 4.0))
        self.ax.set(title=title, xlim=xlim, ylim=ylim, xlabel=xlabel, ylabel=ylabel)
        self.ax.grid(True, color="#b0b0b0", alpha=0.5, linewidth=0.6)
        self._handles: list[Any] = []

    def _keep(self, handle: Any, label: str | None) -> None:
        if label:
            handle.set_label(label)
            self._handles.append(handle)

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
    ) -> None:
        shown = marker or ("o" if len(xs) == 1 else None)
        (handle,) = self.ax.plot(
            xs, ys, color=color, linewidth=width, linestyle=_DASH.get(style, "-"), marker=shown, markersize=4
        )
        self._keep(handle, label)

    def hline(
        self, v: float, color: str, *, style: str = "--", width: float = 1.2, label: str | None = None
    ) -> None:
        self._keep(self.ax.axhline(v, color=color, linestyle=_DASH.get(style, "--"), linewidth=width), label)

    def band(
        self,
        xs: Sequence[float],
        lows: Sequence[float],
        highs: Sequence[float],
        color: str,
        *,
        opacity: float = 0.15,
        label: str | None = None,
    ) -> None:
        self._keep(self.ax.fill_between(xs, lows, highs, color=color, alpha=opacity, linewidth=0), label)

    def marker(
        self, x: float, y: float, shape: str, color: str, *, size: float = 4.0, hollow: bool = False
    ) -> None:
        face = "none" if hollow else color
        self.ax.plot([x], [y], linestyle="none", marker=_MARKER.get(shape, "s"), markersize=1.4 * size,
                     markerfacecolor=face, markeredgecolor=color)  # fmt: skip

    def key(self, label: str, color: str, *, marker: str | None = None, style: str | None = None) -> None:
        # optional: matplotlib is the [figures] extra
        from matplotlib.lines import Line2D

        line: Any = _DASH.get(style, "none") if style else "none"
        shape = _MARKER.get(marker, "s") if marker else None
        handle = Line2D(
            [], [], color=color, linestyle=line, marker=shape, markerfacecolor="none", label=label
        )
        self._handles.append(handle)

    def errorbar(
        self,
        x: float,
        y: float,
        color: str,
        *,
        xerr: tuple[float, float] | None = None,
        yerr: tuple[float, float] | None = None,
        width: float = 1.0,
    ) -> None:
        xe = None if xerr is None else [[x - xerr[0]], [xerr[1] - x]]
        ye = None if yerr is None else [[y - yerr[0]], [yerr[1] - y]]
        self.ax.errorbar([x], [y], xerr=xe, yerr=ye, color=color, linewidth=width, capsize=2.5, fmt="none")

    def annotate(self, text: str, x: float, y: float, color: str, *, dx: float = 6, dy: float = -4) -> None:
        self.ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", color=color, fontsize=7)

    def note(self, text: str) -> None:
        self.ax.text(0.5, 0.5, text, transform=self.ax.transAxes, ha="center", va="center", fontsize=9)

    def save(self, fmt: FigureFormat) -> bytes:
        """The figure in ``fmt``, with every legend entry (none dropped), then closed."""
        if self._handles:
            self.ax.legend(handles=self._handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7,
                           frameon=False)  # fmt: skip
        return _saved(self._plt, self.fig, fmt)


def _saved(plt: Any, fig: Any, fmt: FigureFormat) -> bytes:
    buf = io.BytesIO()
    # A fixed creation date and no producer version, so drawing the same run twice writes the same bytes.
    metadata = {"CreationDate": None} if fmt == "pdf" else {}
    fig.savefig(buf, format=fmt, bbox_inches="tight", dpi=200, metadata=metadata or None)
    plt.close(fig)
    return buf.getvalue()


def _panels(ps: PanelSet, fmt: FigureFormat) -> bytes:
    plt = require_matplotlib()
    cols = 5
    rows = (len(ps.panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(10, 1.9 * rows), sharex=True, sharey=True, squeeze=False)
    for ax in axes.flat[len(ps.panels) :]:
        ax.set_visible(False)
    for ax, p in zip(axes.flat, ps.panels, strict=False):
        if p.band is not None:
            ax.fill_between(*p.band, color=p.color, alpha=0.15, linewidth=0)
        if p.llm is not None:
            ax.axhline(p.llm, color="#777777", linestyle="--", linewidth=0.8)
        if p.gated is not None:
            ax.plot(*p.gated, color=p.color, linestyle=":", linewidth=0.9)
        ax.plot(*p.curve, color=p.color, linewidth=1.3)
        if p.tau is not None:
            ax.plot([p.tau[0]], [p.tau[1]], "o", color=p.color, markersize=3)
        ax.set_title(p.title, fontsize=8, loc="left")
        ax.set(xlim=ps.xlim, ylim=ps.ylim)
        ax.tick_params(labelsize=6)
    fig.suptitle(ps.title, fontsize=10)
    fig.supxlabel(ps.xlabel, fontsize=8)
    fig.supylabel(ps.ylabel, fontsize=8)
    return _saved(plt, fig, fmt)


def write_figures(
    folder: Path, manifests: Sequence[CxsManifest], report: ReportSettings, fmt: FigureFormat
) -> dict[str, Path]:
    """Draw every plot of the run into ``folder`` as ``<name>.<fmt>`` beside its SVG; returns them by name."""
    require_matplotlib(fmt)
    manifests = unscreened(manifests)  # as the SVG plots: no screened-out model's curve
    ranking = rank_models(manifests, report.rank_by)
    focus = plot_focus(manifests, ranking, report.highlight, report.named)
    out: dict[str, Path] = {}
    for name, draw in plot_specs(manifests, ranking, focus):
        chart: Canvas = draw(MplChart)
        assert isinstance(chart, MplChart)
        out[name] = folder / f"{name}.{fmt}"
        atomic_write_bytes(out[name], chart.save(fmt))
    for name, panels in panel_sets(manifests, ranking, focus):
        out[name] = folder / f"{name}.{fmt}"
        atomic_write_bytes(out[name], _panels(panels, fmt))
    return out
