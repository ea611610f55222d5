"""How the CLI shows the cost forecast and the pre-flight table (rich tables; no logic)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from ..sweep import PlanReport, Probe

__all__ = ["print_forecast", "print_probes"]


def print_forecast(out: Console, report: PlanReport) -> None:
    """The cost forecast per model, scenario and level, its caveats, and the models without a price."""
    fc = report.forecast
    table = Table(title="cost forecast (jobs still to do)")
    for col in ("model", "scenario", "level", "mode", "jobs", "USD", "range", "from"):
        table.add_column(col, justify="right" if col in ("jobs", "USD", "range") else "left")
    for line in fc.lines:
        usd = "no price" if line.usd is None else f"${line.usd:,.4f}"
        span = "" if line.low is None else f"${line.low:,.4f}–${line.high or 0:,.4f}"
        table.add_row(line.model, line.scenario, line.level, line.mode, str(line.jobs), usd, span, line.basis)
    out.print(table)
    priced = " for the priced models" if fc.unpriced else ""
    out.print(
        f"{report.jobs} jobs, {report.new_jobs} still to do; {report.calls_to_make} model calls to make, "
        f"{report.cache_hits} answered from the cache; estimated cost ${fc.usd:,.4f} "
        f"(range ${fc.low:,.4f}–${fc.high:,.4f}){priced}"
    )
    for missing in fc.unpriced:
        out.print(f"no price for {missing.model}: add to it in the config  {missing.config_line}")
    for note in [*(n for n in report.skipped if "waits for" not in n), *fc.caveats]:
        out.print(f"note: {note}", soft_wrap=True)


def print_probes(out: Console, probes: list[Probe]) -> None:
    """The pre-flight go/no-go table: one row per model."""
    table = Table(title="pre-flight")
    for col in (
        "model",
        "go",
        "checked",
        "auth",
        "name",
        "answer",
        "price",
        "latency",
        "cost",
        "to fix / note",
    ):
        table.add_column(col, justify="right" if col in ("latency", "cost") else "left")
    for p in probes:
        table.add_row(
            p.model_id,
            "go" if p.go else "[red]no-go[/red]",
            p.how,
            p.auth,
            p.name,
            p.answer,
            p.price,
            "" if p.latency_ms is None else f"{p.latency_ms:.0f} ms",
            "" if p.cost_usd is None else f"${p.cost_usd:.6f}",
            p.problem or p.note or "",
        )
    out.print(table)
