"""Every table of a run written to its ``tables/`` folder as Markdown, CSV and LaTeX, models ranked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..jsonio import atomic_write_bytes
from .gated_tables import deferral_table, gated_summary_table, gated_table, transfer_table
from .manifest import CxsManifest
from .ranking import Ranking, rank_models
from .screen_record import screened_table
from .tables import CI, Table, closed_loop_table, comparison_table, details_table, with_subset_note

__all__ = ["write_tables"]


def write_tables(
    folder: Path, manifests: Sequence[CxsManifest], ranking: Ranking | None = None
) -> dict[str, Table]:
    """Write each table as ``<name>.md``, ``.csv`` and ``.tex``, models ranked; the closed-loop
    deferral and transfer ones only when they have rows. ``gated`` is every model's curve; ``gated-summary`` one row
    per model at its τ; ``deferral`` its deferral scorecard."""
    ranking = ranking or rank_models(manifests)
    tables = [
        comparison_table(manifests, ranking),
        gated_summary_table(manifests, ranking),
        gated_table(manifests, ranking),
        details_table(manifests, ranking),
    ]
    optionals = (deferral_table(manifests, ranking), transfer_table(manifests, ranking))
    for optional in (*optionals, closed_loop_table(manifests, ranking)):
        if optional.rows:
            tables.append(optional)
    tables = [with_subset_note(screened_table(table, manifests, CI), manifests) for table in tables]
    for table in tables:
        atomic_write_bytes(folder / f"{table.name}.md", table.to_markdown().encode())
        atomic_write_bytes(folder / f"{table.name}.csv", table.to_csv().encode())
        atomic_write_bytes(folder / f"{table.name}.tex", table.to_latex().encode())
    return {t.name: t for t in tables}
