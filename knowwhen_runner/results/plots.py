"""Plots of a run, drawn from its CXS manifests alone: coverage–accuracy per scenario (with the 95% band
of the covered accuracy and the fitted τ's intervals), reliability diagrams per scenario, and cost against
success (with 95% error bars).

Deterministic SVG files drawn by ``svg.Chart`` (no plotting library: drawing all of a run's plots takes
milliseconds, where importing one took most of a second of finalising), so finalising twice writes the
same files.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..jsonio import atomic_write_bytes
from .manifest import CxsManifest
from .svg import HEIGHT, WIDTH, Chart

__all__ = ["HEIGHT", "WIDTH", "write_plots"]

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)


def _color(manifests: Sequence[CxsManifest], model_id: str) -> str:
    ids = [m.model.id for m in manifests]
    return _COLORS[ids.index(model_id) % len(_COLORS)]


def _coverage_plot(manifests: Sequence[CxsManifest], scenario: str) -> bytes:
    chart = Chart(
        f"{scenario}: coverage vs accuracy",
        (0, 100),
        (0, 101),
        "coverage: decisions handed to the decision model (%)",
        "accuracy (%)",
    )
    for m in manifests:
        cell = m.cell(scenario)
        if cell is None or cell.accuracy_pct is None or cell.failed_rows():
            continue
        color = _color(manifests, m.model.id)
        band = cell.intervals.coverage_band if cell.intervals else []
        if band:
            chart.band(
                [100 * b.coverage for b in band],
                [100 * b.low for b in band],
                [100 * b.high for b in band],
                color,
                label=f"{m.model.id} 95% band",
            )
        if cell.curve is not None:
            xs = [100 * p.coverage for p in cell.curve.points]
            ys = [100 * p.accuracy for p in cell.curve.points]
            chart.line(xs, ys, color, width=1.6, label=f"{m.model.id} (covered)")
        if cell.gate is not None:
            xs = [100 * p.coverage for p in cell.gate.curve]
            ys = [100 * p.accuracy for p in cell.gate.curve]
            chart.line(xs, ys, color, width=1.2, style=":", label=f"{m.model.id} gated over {cell.gate.llm}")
        if cell.fit is not None and cell.fit.reachable and cell.fit.accuracy is not None:
            x, y = 100 * cell.fit.coverage, 100 * cell.fit.accuracy
            tau_text = f"τ={cell.fit.threshold:.3f}"
            ci = cell.intervals
            if ci is not None and ci.coverage_at_tau is not None:
                cov = ci.coverage_at_tau
                chart.errorbar(x, y, color, xerr=(min(x, 100 * cov.low), max(x, 100 * cov.high)))
            chart.marker(x, y, "o", color, size=4.5)
            if ci is not None and ci.tau is not None:
                tau_text += f" [{ci.tau.low:.3f}, {ci.tau.high:.3f}]"
            chart.annotate(tau_text, x, y, color, dy=-14 if cell.fit.accuracy > 0.95 else 6)
        if m.model.kind == "llm":
            chart.hline(cell.accuracy_pct, color, label=f"LLM {m.model.id}")
    return chart.svg()


def _reliability_plot(manifests: Sequence[CxsManifest], scenario: str) -> bytes:
    chart = Chart(f"{scenario}: reliability", (0, 1), (0, 1), "confidence of the chosen option", "accuracy")
    chart.line([0, 1], [0, 1], "#888888", width=1.0, style="--", label="perfect calibration")
    for m in manifests:
        cell = m.cell(scenario)
        if cell is None or cell.calibration is None or not cell.calibration.bins:
            continue
        bins = cell.calibration.bins
        ece = cell.calibration.ece
        chart.line(
            [b.mean_confidence for b in bins],
            [b.accuracy for b in bins],
            _color(manifests, m.model.id),
            width=1.4,
            marker="o",
            label=f"{m.model.id} (ECE {ece:.3f})" if ece is not None else m.model.id,
        )
    return chart.svg()


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
    points = _cost_points(manifests)
    top = max((p[2] for p in points), default=0.0)
    chart = Chart(
        "cost vs success",
        (-0.02 * (top or 1.0), 1.1 * (top or 1.0)),
        (0, 101),
        "USD per 1,000 decisions (L2) or per 1,000 episodes (L3)",
        "accuracy or success (%)",
    )
    labels = list(dict.fromkeys(label for _m, label, *_ in points))
    for model, label, cost, success, color, bounds in points:
        marker = _MARKERS[labels.index(label) % len(_MARKERS)]
        if bounds is not None:  # a percentile CI may sit off the point
            chart.errorbar(
                cost, success, color, yerr=(min(success, bounds[0]), max(success, bounds[1])), width=0.9
            )
        # Hollow markers of different shapes, so cells at the same spot stay visible.
        chart.marker(cost, success, marker, color, size=4.5, hollow=True)
        chart.key(f"{model} · {label}", color, marker=marker)
    if not points:
        chart.note("no priced calls in this run")
    elif top == 0.0:
        chart.note("every priced call cost $0 (self-hosted)")
    return chart.svg()


def write_plots(folder: Path, manifests: Sequence[CxsManifest]) -> dict[str, Path]:
    """Draw every plot into ``folder`` (SVG); returns ``{name: path}`` in the order the report shows them."""
    out: dict[str, Path] = {}
    states = [s.id for s in manifests[0].scenarios if s.kind == "states"] if manifests else []

    def save(name: str, data: bytes) -> None:
        path = folder / f"{name}.svg"
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
