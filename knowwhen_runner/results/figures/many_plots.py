"""Plots for runs of many models: small multiples (one small coverage–accuracy panel per decision model,
shared axes, in ranking order) and Pareto plots (the headline figure against cost and against latency,
with the frontier of models no other beats on both marked).

The panels are data first (``PanelSet``), drawn as SVG here and as a matplotlib figure by ``figures``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from xml.sax.saxutils import escape

from ..manifest import CxsManifest
from ..ranking import Focus, Ranking, headline_figure
from .canvas import GREY, Canvas, CanvasFactory, PlotSpec, color_of, slug

__all__ = ["Panel", "PanelSet", "panel_sets", "panels_svg", "pareto_frontier", "pareto_specs"]

_COLUMNS = 5
_W, _H = 200, 150  # one panel, in pixels
_L, _R, _T, _B = 30, 8, 20, 22  # the panel's margins around its axes
_HEAD = 34


@dataclass(frozen=True)
class Panel:
    """One model's small panel: its covered curve, gated curve, fitted τ and the LLM's level (percent)."""

    title: str
    color: str
    curve: tuple[list[float], list[float]]
    gated: tuple[list[float], list[float]] | None = None
    tau: tuple[float, float] | None = None
    llm: float | None = None
    band: tuple[list[float], list[float], list[float]] | None = None
    """The covered accuracy's 95% band: coverage, low, high (percent)."""


@dataclass(frozen=True)
class PanelSet:
    """Small multiples with shared axes."""

    title: str
    xlabel: str
    ylabel: str
    panels: list[Panel] = field(default_factory=list)
    xlim: tuple[float, float] = (0.0, 100.0)
    ylim: tuple[float, float] = (0.0, 101.0)


def _panel(m: CxsManifest, scenario: str, rank: int | str | None, color: str) -> Panel | None:
    cell = m.cell(scenario)
    if cell is None or cell.curve is None or cell.accuracy_pct is None or cell.failed_rows():
        return None
    curve = ([100 * p.coverage for p in cell.curve.points], [100 * p.accuracy for p in cell.curve.points])
    gated = llm = tau = None
    if cell.gate is not None:
        gated = ([100 * p.coverage for p in cell.gate.curve], [100 * p.accuracy for p in cell.gate.curve])
        llm = 100 * cell.gate.llm_accuracy
    if cell.fit is not None and cell.fit.reachable and cell.fit.accuracy is not None:
        tau = (100 * cell.fit.coverage, 100 * cell.fit.accuracy)
    title = f"{rank}. {m.model.id}" if rank is not None else m.model.id
    points = cell.intervals.coverage_band if cell.intervals else []
    band = None
    if points:
        band = (
            [100 * b.coverage for b in points],
            [100 * b.low for b in points],
            [100 * b.high for b in points],
        )
    return Panel(title, color, curve, gated, tau, llm, band)


def panel_sets(
    manifests: Sequence[CxsManifest], ranking: Ranking, focus: Focus
) -> list[tuple[str, PanelSet]]:
    """Small multiples per states scenario, when the run has models its plots fold (else none)."""
    if not focus.others:
        return []
    by_id = {m.model.id: m for m in manifests}
    states = [s.id for s in manifests[0].scenarios if s.kind == "states"] if manifests else []
    out = []
    for sc in states:
        panels = []
        for model_id in ranking.order:
            m = by_id[model_id]
            color = color_of(focus, model_id) if focus.is_named(model_id) else "#4a5260"
            p = _panel(m, sc, ranking.rank(model_id), color) if m.model.kind == "decision" else None
            if p is not None:
                panels.append(p)
        if panels:
            title = (
                f"{sc}: coverage vs accuracy per model (ranked; band: 95%; dashed: the LLM; dotted: gated)"
            )
            out.append((f"panels-{slug(sc)}", PanelSet(title, "coverage (%)", "accuracy (%)", panels)))
    return out


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _panel_svg(p: Panel, ox: float, oy: float, ps: PanelSet) -> list[str]:
    (x0, x1), (y0, y1) = ps.xlim, ps.ylim

    def px(v: float) -> str:
        return _f(ox + _L + (v - x0) / (x1 - x0) * (_W - _L - _R))

    def py(v: float) -> str:
        return _f(oy + _H - _B - (v - y0) / (y1 - y0) * (_H - _T - _B))

    def poly(xs: list[float], ys: list[float], extra: str) -> str:
        pts = " ".join(f"{px(a)},{py(b)}" for a, b in zip(xs, ys, strict=True))
        return f'<polyline points="{pts}" fill="none" {extra}/>'

    out = [
        f'<rect x="{_f(ox + _L)}" y="{_f(oy + _T)}" width="{_W - _L - _R}" height="{_H - _T - _B}" '
        f'fill="white" stroke="#888" stroke-width="0.6"/>',
        f'<text x="{_f(ox + _L)}" y="{_f(oy + _T - 5)}" font-size="10">{escape(p.title)}</text>',
    ]
    for v in (x0, (x0 + x1) / 2, x1):
        out.append(
            f'<text x="{px(v)}" y="{_f(oy + _H - _B + 10)}" font-size="8" text-anchor="middle">{_f(v)}</text>'
        )
    for v in (0.0, 50.0, 100.0):
        out.append(
            f'<text x="{_f(ox + _L - 3)}" y="{py(v)}" dy="3" font-size="8" text-anchor="end">{_f(v)}</text>'
        )
    if p.band is not None:
        xs, lows, highs = p.band
        edge = [f"{px(a)},{py(b)}" for a, b in zip(xs, highs, strict=True)]
        edge += [f"{px(a)},{py(b)}" for a, b in zip(xs[::-1], lows[::-1], strict=True)]
        out.append(f'<polygon points="{" ".join(edge)}" fill="{p.color}" fill-opacity="0.15" stroke="none"/>')
    if p.llm is not None:
        out.append(poly([x0, x1], [p.llm, p.llm], 'stroke="#777" stroke-width="0.8" stroke-dasharray="4,3"'))
    if p.gated is not None:
        out.append(poly(*p.gated, f'stroke="{p.color}" stroke-width="1" stroke-dasharray="1.5,2.5"'))
    out.append(poly(*p.curve, f'stroke="{p.color}" stroke-width="1.4"'))
    if p.tau is not None:
        out.append(f'<circle cx="{px(p.tau[0])}" cy="{py(p.tau[1])}" r="2.6" fill="{p.color}"/>')
    return out


def panels_svg(ps: PanelSet) -> bytes:
    """The small multiples as one SVG document (deterministic bytes)."""
    rows = (len(ps.panels) + _COLUMNS - 1) // _COLUMNS
    width, height = _COLUMNS * _W + 10, _HEAD + rows * _H + 24
    body = []
    for i, p in enumerate(ps.panels):
        body += _panel_svg(p, 5 + (i % _COLUMNS) * _W, _HEAD + (i // _COLUMNS) * _H, ps)
    doc = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2:.0f}" y="20" font-size="13" text-anchor="middle">{escape(ps.title)}</text>',
        *body,
        f'<text x="{width / 2:.0f}" y="{height - 6}" font-size="11" text-anchor="middle">'
        f"x: {escape(ps.xlabel)}; y: {escape(ps.ylabel)} (shared axes)</text>",
        "</svg>\n",
    ]
    return "\n".join(doc).encode()


# --- Pareto -------------------------------------------------------------------------------------------


def pareto_frontier(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """The models no other beats on both: lower (or equal) x and higher y. ``points``: (model, x, y)."""
    frontier, best = [], float("-inf")
    for model, _x, y in sorted(points, key=lambda p: (p[1], -p[2])):
        if y > best:
            frontier.append(model)
            best = y
    return frontier


def _pareto_points(
    manifests: Sequence[CxsManifest], scenario: str, what: str
) -> list[tuple[str, float, float]]:
    out = []
    for m in manifests:
        figure = headline_figure(m, scenario)
        if figure is None or figure.value is None or figure.failed:
            continue
        own = next((e for e in m.closed_loop if e.scenario == scenario), None)
        if own is not None and m.cell(scenario) is None:
            x = own.cost_per_episode_usd if what == "cost" else own.latency.p50_ms
        else:
            x = m.totals.cost.per_1k_decisions_usd if what == "cost" else m.totals.latency.p50_ms
        if x is not None:
            out.append((m.model.id, x, figure.value))
    return out


def _pareto_plot(
    manifests: Sequence[CxsManifest], scenario: str, what: str, focus: Focus, make: CanvasFactory
) -> Canvas:
    points = _pareto_points(manifests, scenario, what)
    top = max((p[1] for p in points), default=0.0) or 1.0
    xlabel = "USD per 1,000 decisions (or per episode)" if what == "cost" else "latency p50 (ms)"
    chart = make(
        f"{scenario}: accuracy vs {what} (Pareto)",
        (-0.02 * top, 1.1 * top),
        (0, 101),
        xlabel,
        f"{scenario} (%)",
    )
    frontier = pareto_frontier(points)
    where = {p[0]: p for p in points}
    if frontier:
        xs = [where[m][1] for m in frontier]
        ys = [where[m][2] for m in frontier]
        chart.line(
            xs, ys, "#222222", width=1.1, style="--", label=f"Pareto frontier ({len(frontier)} models)"
        )
    for model, x, y in sorted(points, key=lambda p: p[0] in focus.named):
        named = focus.is_named(model)
        chart.marker(x, y, "o", color_of(focus, model), size=4.5 if named else 3.0, hollow=not named)
        if named:
            chart.annotate(model, x, y, color_of(focus, model))
    shown = {p[0] for p in points}
    for model in (n for n in focus.named if n in shown):
        chart.key(model, color_of(focus, model), marker="o")
    folded = len(shown - set(focus.named))
    if folded:
        chart.key(f"{folded} other{'s' if folded != 1 else ''} (grey)", GREY, marker="o")
    if not points:
        chart.note(f"no model has both a {scenario} figure and a known {what}")
    return chart


def pareto_specs(manifests: Sequence[CxsManifest], ranking: Ranking, focus: Focus) -> list[PlotSpec]:
    """The Pareto plots of the ranking's figure against cost and against latency."""
    if ranking.scenario is None:
        return []
    sc = ranking.scenario
    return [
        (f"pareto-{what}-{slug(sc)}", partial(_pareto_plot, manifests, sc, what, focus))
        for what in ("cost", "latency")
    ]
