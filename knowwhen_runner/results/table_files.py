"""Every table of a run written to its ``tables/`` folder as Markdown, CSV and LaTeX, models ranked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..jsonio import atomic_write_bytes
from .gated_tables import gated_summary_table, gated_table
from .manifest import CxsManifest
from .ranking import Ranking, rank_models
from .screen_record import screened_table
from .tables import CI, Table, closed_loop_table, comparison_table, details_table, with_subset_note

__all__ = ["write_tables"]


def write_tables(
    folder: Path, manifests: Sequence[CxsManifest], ranking: Ranking | None = None
) -> dict[str, Table]:
    """Write each table as ``<name>.md``, ``.csv`` and ``.tex``, models ranked; the closed-loop one only
    when it has rows. ``gated`` is every model's curve; ``gated-summary`` one row per model at its τ."""
    ranking = ranking or rank_models(manifests)
    tables = [
        comparison_table(manifests, ranking),
        gated_summary_table(manifests, ranking),
        gated_table(manifests, ranking),
        details_table(manifests, ranking),
    ]
    closed = closed_loop_table(manifests, ranking)
    if closed.rows:
        tables.append(closed)
    tables = [with_subset_note(screened_table(table, manifests, CI), manifests) for table in tables]
    for table in tables:
        atomic_write_bytes(folder / f"{table.name}.md", table.to_markdown().encode())
        atomic_write_bytes(folder / f"{table.name}.csv", table.to_csv().encode())
        atomic_write_bytes(folder / f"{table.name}.tex", table.to_latex().encode())
    return {t.name: t for t in tables}
