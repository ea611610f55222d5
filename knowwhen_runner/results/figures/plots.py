"""Plots of a run, drawn from its CXS manifests alone: coverage–accuracy per scenario (with the 95% band
of the covered accuracy and the fitted τ's intervals), when to delegate per scenario (gated accuracy
against LLM calls with the oracle and random deferral), reliability diagrams per scenario, cost against
success (with 95% error bars), and, with many models, small multiples and Pareto plots (``many_plots``).

Each plot names at most a handful of models (``ranking.plot_focus``: the pinned ones, the LLMs, the top
of the ranking) in colour and draws every other one as a thin grey mark under one "N others" legend entry,
so forty models stay readable and none is dropped unsaid. A model a screen stopped is not drawn (its figures
cover a prefix of the drawn order; the report says so under the plots and gives its screening bounds). The plots draw on a ``Canvas``: deterministic
SVG files by ``svg.Chart`` (no plotting library: drawing all of a run's plots takes milliseconds), or
matplotlib figures for a paper (``paper``) from the very same marks.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from ...config import ReportSettings
from ...jsonio import atomic_write_bytes
from ..manifest import CxsManifest, EpisodeDeferral
from ..ranking import Focus, Ranking, plot_focus, rank_models
from ..screen_record import unscreened
from .canvas import GREY, Canvas, CanvasFactory, PlotSpec, color_of, slug
from .many_plots import panel_sets, panels_svg, pareto_specs
from .svg import HEIGHT, WIDTH, Chart

__all__ = ["HEIGHT", "WIDTH", "PlotSpec", "plot_specs", "write_plots"]

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
_THIN = 0.7
_FEW = 4  # named models up to which a coverage plot draws each one's band and writes out its τ


def _others_key(chart: Canvas, focus: Focus, drawn: int) -> None:
    """One legend entry for every folded model drawn here (the plot says how many it folded)."""
    if drawn:
        chart.key(f"{drawn} other{'s' if drawn != 1 else ''} (grey)", GREY, style="-")


def _drawing_order(manifests: Sequence[CxsManifest], focus: Focus) -> list[CxsManifest]:
    """Folded models first (underneath), then the named ones in ranking order (the legend's order)."""
    return sorted(
        manifests, key=lambda m: focus.named.index(m.model.id) if focus.is_named(m.model.id) else -1
    )


def _coverage_plot(
    manifests: Sequence[CxsManifest], scenario: str, focus: Focus, make: CanvasFactory
) -> Canvas:
    chart = make(
        f"{scenario}: coverage vs accuracy",
        (0, 100),
        (0, 101),
        "coverage: decisions handed to the decision model (%)",
        "accuracy (%)",
    )
    folded = failed = 0
    for m in _drawing_order(manifests, focus):
        cell = m.cell(scenario)
        if cell is None or cell.accuracy_pct is None or cell.failed_rows():
            failed += cell is not None and cell.failed_rows() > 0
            continue
        named, color = focus.is_named(m.model.id), color_of(focus, m.model.id)
        if m.model.kind == "llm":
            chart.hline(
                cell.accuracy_pct,
                color,
                width=1.2 if named else _THIN,
                label=f"LLM {m.model.id}" if named else None,
            )
            folded += not named
            continue
        if cell.curve is not None:
            xs = [100 * p.coverage for p in cell.curve.points]
            ys = [100 * p.accuracy for p in cell.curve.points]
            chart.line(xs, ys, color, width=1.6 if named else _THIN, label=m.model.id if named else None)
        if not named:
            folded += 1
            continue
        _coverage_details(chart, m, scenario, color, few=len(focus.named) <= _FEW)
    if folded < len(manifests):
        what = (
            "dotted: gated; band: 95%; dot: τ" if len(focus.named) <= _FEW else "dotted: gated; dot: fitted τ"
        )
        chart.key(what, "#555555", style=":")
    _others_key(chart, focus, folded)
    if failed:  # no figure to draw (a job failed for good), as in the tables: said, not dropped
        chart.key(f"{failed} not drawn: a job failed for good", "#888888")
    return chart


def _coverage_details(chart: Canvas, m: CxsManifest, scenario: str, color: str, *, few: bool) -> None:
    """A named model's gated curve and fitted τ with its intervals; with few named, its 95% band and τ
    written out too (with more, the bands would hide each other: each model's is in the small multiples)."""
    cell = m.cell(scenario)
    assert cell is not None
    band = cell.intervals.coverage_band if cell.intervals else []
    if band and few:
        xs = [100 * b.coverage for b in band]
        chart.band(xs, [100 * b.low for b in band], [100 * b.high for b in band], color)
    if cell.gate is not None:
        xs = [100 * p.coverage for p in cell.gate.curve]
        ys = [100 * p.accuracy for p in cell.gate.curve]
        chart.line(xs, ys, color, width=1.2, style=":")
    if cell.fit is not None and cell.fit.reachable and cell.fit.accuracy is not None:
        x, y = 100 * cell.fit.coverage, 100 * cell.fit.accuracy
        text = f"τ={cell.fit.threshold:.3f}"
        ci = cell.intervals
        if ci is not None and ci.coverage_at_tau is not None:
            cov = ci.coverage_at_tau
            chart.errorbar(x, y, color, xerr=(min(x, 100 * cov.low), max(x, 100 * cov.high)))
        chart.marker(x, y, "o", color, size=4.5)
        if ci is not None and ci.tau is not None:
            text += f" [{ci.tau.low:.3f}, {ci.tau.high:.3f}]"
        if few:
            chart.annotate(text, x, y, color, dy=-14 if cell.fit.accuracy > 0.95 else 6)


def _reliability_plot(
    manifests: Sequence[CxsManifest], scenario: str, focus: Focus, make: CanvasFactory
) -> Canvas:
    chart = make(f"{scenario}: reliability", (0, 1), (0, 1), "confidence of the chosen option", "accuracy")
    chart.line([0, 1], [0, 1], "#888888", width=1.0, style="--", label="perfect calibration")
    folded = 0
    for m in _drawing_order(manifests, focus):
        cell = m.cell(scenario)
        if cell is None or cell.calibration is None or not cell.calibration.bins:
            continue
        bins, ece = cell.calibration.bins, cell.calibration.ece
        named = focus.is_named(m.model.id)
        folded += not named
        label = (f"{m.model.id} (ECE {ece:.3f})" if ece is not None else m.model.id) if named else None
        chart.line(
            [b.mean_confidence for b in bins],
            [b.accuracy for b in bins],
            color_of(focus, m.model.id),
            width=1.4 if named else _THIN,
            marker="o" if named else None,
            label=label,
        )
    _others_key(chart, focus, folded)
    return chart


def _deferral_plot(
    manifests: Sequence[CxsManifest], scenario: str, focus: Focus, make: CanvasFactory
) -> Canvas:
    """Each named decision model's gated accuracy against the share of LLM calls, with its oracle (dashed:
    only what the LLM alone gets right is deferred) and random deferral (dotted: the straight line)."""
    chart = make(f"{scenario}: when to delegate", (0, 100), (0, 101), "LLM calls (%)", "accuracy, pooled (%)")
    for m in _drawing_order(manifests, focus):
        cell = m.cell(scenario)
        d = cell.deferral if cell is not None else None
        if d is None or not focus.is_named(m.model.id):
            continue
        color = color_of(focus, m.model.id)
        apgr = "–" if d.apgr is None else f"{d.apgr:.2f}"
        chart.line(
            [100 * p.llm_share for p in d.curve],
            [100 * p.accuracy for p in d.curve],
            color,
            width=1.4,
            label=f"{m.model.id} over {d.llm} (APGR {apgr})",
        )
        knee = 100 * d.oracle_gain
        top = 100 * (d.model_accuracy + d.oracle_gain)
        chart.line([0, knee, 100], [100 * d.model_accuracy, top, top], color, width=0.9, style="--")
        chart.line([0, 100], [100 * d.model_accuracy, 100 * d.llm_accuracy], color, width=0.9, style=":")
    chart.key("oracle", "#333333", style="--")
    chart.key("random deferral", "#333333", style=":")
    return chart


def _episode_deferral(m: CxsManifest, scenario: str) -> EpisodeDeferral | None:
    return next(
        (
            c.deferral.episodes
            for c in m.closed_loop
            if c.scenario == scenario and c.mode == "shadow" and c.deferral and c.deferral.episodes
        ),
        None,
    )


def _episode_deferral_plot(
    manifests: Sequence[CxsManifest], scenario: str, focus: Focus, make: CanvasFactory
) -> Canvas:
    """Each named decision model's task success alone, at each gated τ and as the LLM alone (its shadow
    episodes) against the share of decisions the LLM took, with the whole-episode oracle (dashed) and
    random deferral (dotted)."""
    chart = make(
        f"{scenario}: when to delegate (episodes)",
        (0, 100),
        (0, 101),
        "LLM decisions (%)",
        "task success (%)",
    )
    for m in _drawing_order(manifests, focus):
        e = _episode_deferral(m, scenario)
        if e is None or not focus.is_named(m.model.id):
            continue
        color = color_of(focus, m.model.id)
        apgr = "–" if e.apgr is None else f"{e.apgr:.2f}"
        chart.line(
            [100 * p.llm_share for p in e.points],
            [100 * p.success for p in e.points],
            color,
            width=1.4,
            marker="o",
            label=f"{m.model.id} over {e.llm} (APGR {apgr})",
        )
        top = 100 * (e.model_success + e.oracle_gain)
        chart.line(
            [0, 100 * e.oracle_gain, 100], [100 * e.model_success, top, top], color, width=0.9, style="--"
        )
        chart.line([0, 100], [100 * e.model_success, 100 * e.llm_success], color, width=0.9, style=":")
    chart.key("oracle (whole episodes)", "#333333", style="--")
    chart.key("random deferral", "#333333", style=":")
    return chart


_Point = tuple[str, str, float, float, tuple[float, float] | None]


def _cost_points(manifests: Sequence[CxsManifest]) -> list[_Point]:
    """(model, label, cost, success %, 95% interval in %) for every cell with a price and a score."""
    out: list[_Point] = []
    for m in manifests:
        for c in m.open_loop:
            if c.cost.per_1k_decisions_usd is not None and c.accuracy_pct is not None and not c.failed_rows():
                ci = c.intervals.accuracy_pct if c.intervals else None
                bounds = None if ci is None else (ci.low, ci.high)
                out.append(
                    (m.model.id, f"L2 {c.scenario}", c.cost.per_1k_decisions_usd, c.accuracy_pct, bounds)
                )
        for e in m.closed_loop:
            if e.cost_per_episode_usd is not None and e.success_rate is not None and not e.failed:
                label = f"L3 {e.scenario} {e.mode}" + ("" if e.tau is None else f" τ={e.tau:g}")
                ci = e.intervals.success_rate if e.intervals else None
                bounds = None if ci is None else (100 * ci.low, 100 * ci.high)
                out.append((m.model.id, label, 1000 * e.cost_per_episode_usd, 100 * e.success_rate, bounds))
    return out


def _cost_plot(manifests: Sequence[CxsManifest], focus: Focus, make: CanvasFactory) -> Canvas:
    points = _cost_points(manifests)
    top = max((p[2] for p in points), default=0.0)
    chart = make(
        "cost vs success",
        (-0.02 * (top or 1.0), 1.1 * (top or 1.0)),
        (0, 101),
        "USD per 1,000 decisions (L2) or per 1,000 episodes (L3)",
        "accuracy or success (%)",
    )
    labels = list(dict.fromkeys(label for _m, label, *_ in points))
    points.sort(key=lambda p: p[0] in focus.named)  # folded first, underneath
    for model, label, cost, success, bounds in points:
        marker, color = _MARKERS[labels.index(label) % len(_MARKERS)], color_of(focus, model)
        if bounds is not None and focus.is_named(model):  # a percentile CI may sit off the point
            chart.errorbar(
                cost, success, color, yerr=(min(success, bounds[0]), max(success, bounds[1])), width=0.9
            )
        # Hollow markers of different shapes, so cells at the same spot stay visible.
        chart.marker(cost, success, marker, color, size=4.5 if focus.is_named(model) else 3.0, hollow=True)
    shown = {p[0] for p in points}
    for model in (n for n in focus.named if n in shown):
        chart.key(model, color_of(focus, model), style="-")
    for label in labels:
        chart.key(label, "#333333", marker=_MARKERS[labels.index(label) % len(_MARKERS)])
    _others_key(chart, focus, len(shown - set(focus.named)))
    if not points:
        chart.note("no priced calls in this run")
    elif top == 0.0:
        chart.note("every priced call cost $0 (self-hosted)")
    return chart


def plot_specs(manifests: Sequence[CxsManifest], ranking: Ranking, focus: Focus) -> list[PlotSpec]:
    """Every single-chart plot of the run, in the order the report shows them (with models folded, the
    Pareto plots too)."""
    states = [s.id for s in manifests[0].scenarios if s.kind == "states"] if manifests else []
    specs: list[PlotSpec] = []
    for sc in states:
        if any(m.cell(sc) is not None for m in manifests):
            specs.append((f"coverage-{slug(sc)}", partial(_coverage_plot, manifests, sc, focus)))
    for sc in states:
        if any(c.deferral for m in manifests for c in m.open_loop if c.scenario == sc):
            specs.append((f"deferral-{slug(sc)}", partial(_deferral_plot, manifests, sc, focus)))
    episodes = [s.id for s in manifests[0].scenarios if s.kind == "episodes"] if manifests else []
    for sc in episodes:
        if any(_episode_deferral(m, sc) for m in manifests):
            specs.append((f"deferral-{slug(sc)}", partial(_episode_deferral_plot, manifests, sc, focus)))
    for sc in states:
        if any(c.calibration for m in manifests for c in m.open_loop if c.scenario == sc):
            specs.append((f"reliability-{slug(sc)}", partial(_reliability_plot, manifests, sc, focus)))
    if manifests:
        specs.append(("cost-success", partial(_cost_plot, manifests, focus)))
    return specs + (pareto_specs(manifests, ranking, focus) if focus.others else [])


def write_plots(
    folder: Path,
    manifests: Sequence[CxsManifest],
    ranking: Ranking | None = None,
    report: ReportSettings | None = None,
) -> dict[str, Path]:
    """Draw every plot into ``folder`` (SVG); returns ``{name: path}`` in the order the report shows them."""
    report = report or ReportSettings()
    shown = unscreened(manifests)  # a screened-out model's curve would read as a finished model's
    ranking = (
        rank_models(shown, report.rank_by) if ranking is None or len(shown) < len(manifests) else ranking
    )
    manifests = shown
    focus = plot_focus(manifests, ranking, report.highlight, report.named)
    out: dict[str, Path] = {}
    for name, draw in plot_specs(manifests, ranking, focus):
        chart = draw(Chart)
        assert isinstance(chart, Chart)
        out[name] = folder / f"{name}.svg"
        atomic_write_bytes(out[name], chart.svg())
    for name, panels in panel_sets(manifests, ranking, focus):
        out[name] = folder / f"{name}.svg"
        atomic_write_bytes(out[name], panels_svg(panels))
    return out
