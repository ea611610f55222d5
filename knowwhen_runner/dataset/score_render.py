"""What ``knowwhen score`` prints: its JSON-able reports (``score_folder``) rendered as rich tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["render_all", "render_leaderboard", "render_model"]


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def render_model(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"{report['model']} on {report['dataset']} ({report['variant']})")
    for column in ("subset", "accuracy %", "tasks", "occurrences"):
        table.add_column(column, justify="left" if column == "subset" else "right", overflow="fold")
    table.add_row(
        "all states", _pct(report["accuracy"]), str(report["n_tasks"]), str(report["n_occurrences"])
    )
    table.add_row("must-ask", _pct(report["must_ask"]), "", str(report["n_must_ask"]))
    for name, s in report["strata"].items():
        table.add_row(name, _pct(s["accuracy"]), str(s["n_tasks"]), str(s["n_occurrences"]))
    console.print(table)
    _render_subset(report, console)
    if report["n_unanswered"]:
        console.print(f"{report['n_unanswered']} occurrences have no answer (scored wrong)")
    if "gate" in report:
        _render_gate(report["gate"], console)


def _render_subset(report: dict[str, Any], console: Console) -> None:
    subset = report.get("subset")
    if subset:
        console.print(
            f"a subset: {subset['sentence']}; scored over what was asked, not comparable with a full-set figure"
        )


def _render_gate(gate: dict[str, Any], console: Console) -> None:
    console.print(
        f"gated over {gate['llm']}: LLM alone {100 * gate['llm_accuracy']:.1f}%, "
        f"model alone {100 * gate['model_accuracy']:.1f}%, ECE {gate['ece']:.3f}, AURC {gate['aurc']:.3f}"
    )
    fit, at = gate["fit"], gate["at_fit"]
    if fit and fit["reachable"] and at:
        console.print(
            f"target {fit['target']}: τ = {fit['threshold']:.4f}, coverage {100 * at['coverage']:.1f}%, "
            f"gated accuracy {100 * at['accuracy']:.1f}%"
        )
    elif fit:
        console.print(f"target {fit['target']}: unreachable (no threshold reaches it)")


def render_all(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"{report['dataset']} ({report['variant']})")
    strata = sorted({s for r in report["models"].values() for s in r["strata"]})
    for column in ("model", "accuracy %", "must-ask %", *strata, "unanswered"):
        table.add_column(column, justify="left" if column == "model" else "right", overflow="fold")
    for name, r in report["models"].items():
        cells = [_pct(r["strata"][s]["accuracy"]) if s in r["strata"] else "–" for s in strata]
        table.add_row(name, _pct(r["accuracy"]), _pct(r["must_ask"]), *cells, str(r["n_unanswered"]))
    console.print(table)
    _render_subset(report, console)


def render_leaderboard(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"leaderboard check: {report['dataset']}")
    ci = report.get("tolerance") == "ci"
    columns = ["line", "model", "level", "task set", "metric", "published", "recomputed"]
    for column in [*columns, *(["95% interval", "miss"] if ci else []), "status"]:
        table.add_column(column, overflow="fold")
    for r in report["rows"]:
        cells = [str(c) for c in (r["line"], r["model"], r["level"], r["task_set"], r["metric"])]
        cells += [_pct(r["published"]), _pct(r["recomputed"])]
        if ci:
            known = r["low"] is not None
            cells += [f"[{r['low']:.1f}, {r['high']:.1f}]" if known else "–"]
            cells += [f"{r['miss']:+.2f}" if known and r["miss"] else "–"]
        table.add_row(*cells, r["status"])
    console.print(table)
    console.print(", ".join(f"{n} {status}" for status, n in sorted(report["counts"].items())))
