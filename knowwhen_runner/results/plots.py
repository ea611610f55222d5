"""Plots of a run, drawn from its CXS manifests alone: coverage–accuracy per scenario (with the 95% band
of the covered accuracy and the fitted τ's intervals), reliability diagrams per scenario, and cost against
success (with 95% error bars).

Deterministic PNGs: matplotlib's Agg canvas without pyplot, matplotlib's default style (a user's
matplotlibrc cannot change the bytes), fixed size and dpi, and no software or date metadata, so
finalising twice writes the same files. matplotlib is imported only when plots are drawn.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..jsonio import atomic_write_bytes
from .manifest import CxsManifest

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["DPI", "FIGSIZE", "write_plots"]

FIGSIZE = (7.0, 4.4)
DPI = 110
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
_STYLE = {
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 8.0,
    "legend.frameon": False,
    "svg.hashsalt": "knowwhen",
}


@contextmanager
def _figure(title: str) -> Iterator[tuple[Figure, Axes]]:
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    style: Any = {k: v for k, v in matplotlib.rcParamsDefault.items() if k != "backend"}
    style.update(_STYLE)
    with matplotlib.rc_context(style):
        fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        ax.set_title(title)
        yield fig, ax


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)


def _color(manifests: Sequence[CxsManifest], model_id: str) -> str:
    ids = [m.model.id for m in manifests]
    return _COLORS[ids.index(model_id) % len(_COLORS)]


def _coverage_plot(manifests: Sequence[CxsManifest], scenario: str) -> bytes:
    with _figure(f"{scenario}: coverage vs accuracy") as (fig, ax):
        for m in manifests:
            cell = m.cell(scenario)
            if cell is None or cell.accuracy_pct is None or cell.failed_rows():
                continue
            color = _color(manifests, m.model.id)
            if cell.curve is not None:
                xs = [100 * p.coverage for p in cell.curve.points]
                ys = [100 * p.accuracy for p in cell.curve.points]
                ax.plot(xs, ys, color=color, lw=1.6, label=f"{m.model.id} (covered)")
            band = cell.intervals.coverage_band if cell.intervals else []
            if band:
                ax.fill_between(
                    [100 * b.coverage for b in band],
                    [100 * b.low for b in band],
                    [100 * b.high for b in band],
                    color=color,
                    alpha=0.15,
                    lw=0,
                    label=f"{m.model.id} 95% band",
                )
            if cell.gate is not None:
                xs = [100 * p.coverage for p in cell.gate.curve]
                ys = [100 * p.accuracy for p in cell.gate.curve]
                ax.plot(xs, ys, color=color, lw=1.2, ls=":", label=f"{m.model.id} gated over {cell.gate.llm}")
            if cell.fit is not None and cell.fit.reachable and cell.fit.accuracy is not None:
                ax.plot([100 * cell.fit.coverage], [100 * cell.fit.accuracy], "o", color=color, ms=6)
                tau_text = f"τ={cell.fit.threshold:.3f}"
                ci = cell.intervals
                if ci is not None and ci.coverage_at_tau is not None:
                    cov = ci.coverage_at_tau
                    x = 100 * cell.fit.coverage
                    ax.errorbar(
                        [x], [100 * cell.fit.accuracy], xerr=[[max(0.0, x - 100 * cov.low)], [max(0.0, 100 * cov.high - x)]],
                        color=color, capsize=3, lw=1.0,
                    )  # fmt: skip
                if ci is not None and ci.tau is not None:
                    tau_text += f" [{ci.tau.low:.3f}, {ci.tau.high:.3f}]"
                ax.annotate(
                    tau_text,
                    (100 * cell.fit.coverage, 100 * cell.fit.accuracy),
                    textcoords="offset points",
                    xytext=(6, -12 if cell.fit.accuracy > 0.95 else 4),  # keep it inside the axes
                    fontsize=8,
                    color=color,
                )
            if m.model.kind == "llm":
                ax.axhline(cell.accuracy_pct, color=color, ls="--", lw=1.2, label=f"LLM {m.model.id}")
        ax.set_xlabel("coverage: decisions handed to the decision model (%)")
        ax.set_ylabel("accuracy (%)")
        ax.set_xlim(0, 100)
        ax.set_ylim(0, 101)
        _legend(ax)
        return _png(fig)


def _reliability_plot(manifests: Sequence[CxsManifest], scenario: str) -> bytes:
    with _figure(f"{scenario}: reliability") as (fig, ax):
        ax.plot([0, 1], [0, 1], color="#888888", ls="--", lw=1.0, label="perfect calibration")
        for m in manifests:
            cell = m.cell(scenario)
            if cell is None or cell.calibration is None or not cell.calibration.bins:
                continue
            bins = cell.calibration.bins
            ece = cell.calibration.ece
            ax.plot(
                [b.mean_confidence for b in bins],
                [b.accuracy for b in bins],
                "o-",
                color=_color(manifests, m.model.id),
                lw=1.4,
                ms=4,
                label=f"{m.model.id} (ECE {ece:.3f})" if ece is not None else m.model.id,
            )
        ax.set_xlabel("confidence of the chosen option")
        ax.set_ylabel("accuracy")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        _legend(ax)
        return _png(fig)


_Point = tuple[str, str, float, float, str, tuple[float, float] | None]


def _cost_points(manifests: Sequence[CxsManifest]) -> list[_Point]:
    """(model, label, cost, success %, colour, 95% interval in %) for every cell with a price and a score."""
    out: list[_Point] = []
    for m in manifests:
        color = _color(manifests, m.model.id)
        for c in m.open_loop:
            if c.cost.per_1k_decisions_usd is not None and c.accuracy_pct is not None and not c.failed_rows():
                ci = c.intervals.accuracy_pct if c.intervals else None
                bounds = None if ci is None else (ci.low, ci.high)
                cost = c.cost.per_1k_decisions_usd
                out.append((m.model.id, f"L2 {c.scenario}", cost, c.accuracy_pct, color, bounds))
        for e in m.closed_loop:
            if e.cost_per_episode_usd is not None and e.success_rate is not None and not e.failed:
                label = f"L3 {e.scenario} {e.mode}" + ("" if e.tau is None else f" τ={e.tau:g}")
                ci = e.intervals.success_rate if e.intervals else None
                bounds = None if ci is None else (100 * ci.low, 100 * ci.high)
                cost = 1000 * e.cost_per_episode_usd
                out.append((m.model.id, label, cost, 100 * e.success_rate, color, bounds))
    return out


def _cost_plot(manifests: Sequence[CxsManifest]) -> bytes:
    with _figure("cost vs success") as (fig, ax):
        points = _cost_points(manifests)
        labels = list(dict.fromkeys(label for _m, label, *_ in points))
        for model, label, cost, success, color, bounds in points:
            marker = _MARKERS[labels.index(label) % len(_MARKERS)]
            if bounds is not None:
                low, high = bounds
                yerr = [
                    [max(0.0, success - low)],
                    [max(0.0, high - success)],
                ]  # a percentile CI may sit off it
                ax.errorbar([cost], [success], yerr=yerr, color=color, capsize=3, lw=0.9, fmt="none")
            # Hollow markers of different shapes, so cells at the same spot stay visible.
            ax.scatter([cost], [success], marker=marker, s=48, facecolors="none", edgecolors=color, lw=1.4)
            ax.scatter([], [], marker=marker, facecolors="none", edgecolors=color, label=f"{model} · {label}")
        top = max((p[2] for p in points), default=0.0)
        ax.set_xlim(-0.02 * (top or 1.0), 1.1 * (top or 1.0))
        if not points:
            ax.text(0.5, 0.5, "no priced calls in this run", ha="center", va="center", transform=ax.transAxes)
        elif top == 0.0:
            ax.text(0.5, 0.5, "every priced call cost $0 (self-hosted)", ha="center", transform=ax.transAxes)
        ax.set_xlabel("USD per 1,000 decisions (L2) or per 1,000 episodes (L3)")
        ax.set_ylabel("accuracy or success (%)")
        ax.set_ylim(0, 101)
        _legend(ax)
        return _png(fig)


def _legend(ax: Axes) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best")


def write_plots(folder: Path, manifests: Sequence[CxsManifest]) -> dict[str, Path]:
    """Draw every plot into ``folder``; returns ``{name: path}`` in the order the report shows them."""
    out: dict[str, Path] = {}
    states = [s.id for s in manifests[0].scenarios if s.kind == "states"] if manifests else []

    def save(name: str, data: bytes) -> None:
        path = folder / f"{name}.png"
        atomic_write_bytes(path, data)
        out[name] = path

    for sc in states:
        if any(m.cell(sc) is not None for m in manifests):
            save(f"coverage-{_slug(sc)}", _coverage_plot(manifests, sc))
    for sc in states:
        if any(c.calibration for m in manifests for c in m.open_loop if c.scenario == sc):
            save(f"reliability-{_slug(sc)}", _reliability_plot(manifests, sc))
    if manifests:
        save("cost-success", _cost_plot(manifests))
    return out
