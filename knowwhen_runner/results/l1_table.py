"""The L1 table (``tables/l1.md``, ``.csv``, ``.tex``): per model and isolated scenario, pooled accuracy,
tool choice (all and BFCL only) and argument accuracy, scored from the answers files the run wrote.

Pooled is the card's L1 figure (every row, both question kinds); tool choice is the ``tool_select`` rows,
BFCL tool choice those of BFCL (Figure 4b's L1), arguments the ``tool_params`` rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import SweepConfig
from ..jsonio import atomic_write_bytes
from .isolated import isolated_answers_path, score_isolated
from .tables import Column, Table

if TYPE_CHECKING:
    from .ranking import Ranking

__all__ = ["l1_table", "write_l1_table"]


def l1_table(config: SweepConfig, ranking: Ranking | None = None) -> Table:
    """One row per model and isolated scenario that has answers, in the run's ranking (config order
    without one), with the model's rank."""
    columns = [
        Column("rank", "rank", "int"),
        Column("model", "model"),
        Column("scenario", "scenario"),
        Column("items", "questions", "int"),
        Column("pooled", "L1 pooled (%)", "pct"),
        Column("tool_choice", "tool choice (%)", "pct"),
        Column("bfcl_tool_choice", "BFCL tool choice (%)", "pct"),
        Column("arguments", "arguments (%)", "pct"),
        Column("n_arguments", "argument questions", "int"),
    ]
    rows = []
    for spec in config.scenarios:
        path = isolated_answers_path(config, spec)
        if spec.kind != "isolated" or not path.is_file():
            continue
        scores = score_isolated(path)
        for model in config.models:
            score = scores.get(model.id)
            if score is not None:
                rank = ranking.rank(model.id) if ranking else None
                rows.append({"rank": rank, "model": model.id, "scenario": spec.id, **score.to_dict()})
                rows[-1]["items"] = score.n_items
    note = (
        "L1 pooled: every question (tool choice and arguments); tool choice: dp tool_select; "
        "BFCL tool choice: those of BFCL; arguments: dp tool_params."
    )
    rows = ranking.sorted_rows(rows) if ranking else rows
    return Table("l1", f"{config.name}: L1 isolated accuracy (%)", columns, rows, note)


def write_l1_table(config: SweepConfig, ranking: Ranking | None = None) -> Table:
    """Write the L1 table beside the other tables (``<output>/tables/l1.*``)."""
    table = l1_table(config, ranking)
    folder = config.output / "tables"
    atomic_write_bytes(folder / "l1.md", table.to_markdown().encode())
    atomic_write_bytes(folder / "l1.csv", table.to_csv().encode())
    atomic_write_bytes(folder / "l1.tex", table.to_latex().encode())
    return table
