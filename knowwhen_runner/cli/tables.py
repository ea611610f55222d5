"""How the CLI shows its tables (rich; no logic): the cost forecast, the pre-flight, and ``print_table``,
which every table of ``run``, ``plan`` and ``status`` goes through so it fits the terminal.

A table wider than the terminal is not squeezed (rich would cut each cell to ``lexic…``): it keeps the
columns that fit, the first (the model, never cut) and then the most wanted, and says each row's other
values on a line under it, each named. The files a run writes keep every column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..messages import say

if TYPE_CHECKING:
    from ..sweep import PlanReport, Probe

__all__ = ["Cell", "Column", "print_forecast", "print_probes", "print_table"]


@dataclass(frozen=True)
class Column:
    """A column of a terminal table: its header, whether its values are right-aligned (figures), how much it
    is wanted when the terminal is narrow (the least wanted leave first, the rightmost of equals first), and
    the words naming its values on the line under the table once it has left (its header unless told; none
    for a column of descriptions)."""

    header: str
    right: bool = False
    wanted: int = 1
    label: str | None = None


Cell = str | Text
"""A cell: rich markup (``[red]no-go[/red]``), or a ``Text`` printed as it is."""


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text.from_markup(cell, emoji=False)


def _table(
    title: str, columns: Sequence[Column], rows: Sequence[Sequence[Cell]], kept: Sequence[int]
) -> Table:
    table = Table(title=title)
    for i in kept:  # fold, never "…": a cell too long for the terminal goes on over lines, whole
        header = Text(columns[i].header)  # as written: "Δ [low, high]" is not a style
        table.add_column(header, justify="right" if columns[i].right else "left", overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in kept))
    return table


def _label(column: Column) -> str:
    """The words naming a column's value on the line under the table ("" for a column of descriptions)."""
    label = column.header if column.label is None else column.label
    return f"{label} " if label else ""


def _natural_width(out: Console, table: Table) -> int:
    """How wide the table is with no cell wrapped (rich would otherwise clamp it to the terminal)."""
    return Measurement.get(out, out.options.update_width(1 << 16), table).maximum


def print_table(out: Console, title: str, columns: Sequence[Column], rows: Sequence[Sequence[Cell]]) -> None:
    """The table, whole when it fits the terminal's width; else the narrow layout: the first column (each
    row's name) and the most wanted others that fit, then, under it, one line per row naming its other
    values."""
    leaving = sorted(range(1, len(columns)), key=lambda i: (columns[i].wanted, -i))
    kept = list(range(len(columns)))
    while leaving and _natural_width(out, _table(title, columns, rows, kept)) > out.width:
        kept.remove(leaving.pop(0))
    out.print(_table(title, columns, rows, kept))
    left = [i for i in range(len(columns)) if i not in kept]
    for row in rows if left else ():
        named = [
            Text.assemble(_label(columns[i]), _text(row[i])) for i in left if _text(row[i]).plain.strip()
        ]
        if named:
            said = Text.assemble(_text(row[0]), ": ", Text(" · ").join(named))
            for n, line in enumerate(said.wrap(out, max(out.width - 4, 20))):
                line.rstrip()
                out.print(Text.assemble("    " if n else "  ", line), soft_wrap=True)


def print_forecast(out: Console, report: PlanReport) -> None:
    """The cost forecast per model, scenario and level, its caveats, and the models without a price."""
    fc = report.forecast
    rows: list[list[Cell]] = []
    for line in fc.lines:
        usd = "no price" if line.usd is None else f"${line.usd:,.4f}"
        span = "" if line.low is None else f"${line.low:,.4f}–${line.high or 0:,.4f}"
        rows.append(
            [
                Text(line.model),
                Text(line.scenario),
                line.level,
                line.mode,
                str(line.jobs),
                usd,
                span,
                line.basis,
            ]
        )
    columns = [Column(c, right=c in ("jobs", "USD", "range"), wanted=w) for c, w in _FORECAST.items()]
    print_table(out, "cost forecast (jobs still to do)", columns, rows)
    priced = " for the priced models" if fc.unpriced else ""
    out.print(
        f"{report.jobs} jobs, {report.new_jobs} still to do; {report.calls_to_make} model calls to make, "
        f"{report.cache_hits} answered from the cache; estimated cost ${fc.usd:,.4f} "
        f"(range ${fc.low:,.4f}–${fc.high:,.4f}){priced}"
    )
    for missing in fc.unpriced:
        out.print(Text(say("plan.no_price", model=missing.model, line=missing.config_line)), soft_wrap=True)
    for note in [*(n for n in report.skipped if "waits for" not in n), *fc.caveats]:
        out.print(f"note: {note}", soft_wrap=True)


def print_probes(out: Console, probes: list[Probe]) -> None:
    """The pre-flight go/no-go table: one row per model."""
    rows: list[list[Cell]] = [
        [
            Text(p.model_id),
            "go" if p.go else "[red]no-go[/red]",
            p.how,
            p.auth,
            p.name,
            p.answer,
            p.price,
            "" if p.latency_ms is None else f"{p.latency_ms:.0f} ms",
            "" if p.cost_usd is None else f"${p.cost_usd:.6f}",
            Text(p.problem or p.note or ""),
        ]
        for p in probes
    ]
    columns = [Column(c, right=c in ("latency", "cost"), wanted=w) for c, w in _PREFLIGHT.items()]
    print_table(out, "pre-flight", columns, rows)


# each table's columns and how much each is wanted on a narrow terminal (Column.wanted)
_FORECAST = {"model": 3, "scenario": 2, "level": 1, "mode": 2, "jobs": 2, "USD": 2, "range": 1, "from": 0}
_PREFLIGHT = {
    "model": 3,
    "go": 3,
    "checked": 2,
    "auth": 2,
    "name": 2,
    "answer": 2,
    "price": 2,
    "latency": 1,
    "cost": 1,
    "to fix / note": 0,
}
