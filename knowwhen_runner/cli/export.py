"""`knowwhen export RUN_DIR --out DIR [--push REPO_ID] [--dry-run]`: a run as a dataset folder, and its upload.

A thin typer layer over ``stored.export`` (the stored run read back, laid out by ``results.export``) and ``dataset.publish`` (the upload).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["export"]

out = Console(emoji=False)


def export(
    run_dir: Annotated[Path, typer.Argument(help="The finalised run folder.")],
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for the dataset (an earlier export is replaced).")
    ],
    push: Annotated[
        str | None,
        typer.Option("--push", help="Upload to this Hugging Face dataset repository (OWNER/NAME)."),
    ] = None,
    public: Annotated[
        bool, typer.Option("--public", help="Create the repository public (default: private).")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be uploaded; send nothing.")
    ] = False,
    db: Annotated[str | None, typer.Option(help="Database URL of the run, for runs on PostgreSQL.")] = None,
) -> None:
    """Lay a finalised run out as an AgentDecisionBench dataset folder with its own card; optionally push it."""
    # start-up: a command loads only the stages it runs
    from ..dataset.publish import push_dataset
    from ..stored.export import export_run

    summary = export_run(run_dir, out_dir, db=db)
    sets = ", ".join(f"{sc} -> {folder}/" for sc, folder in summary.sets.items()) or "none"
    out.print(f"exported {len(summary.files)} files to {summary.out} (question sets: {sets})")
    if push is None and not dry_run:
        return
    plan = push_dataset(
        summary.out, push or "OWNER/NAME", private=not public, dry_run=dry_run or push is None
    )
    verb = "would upload" if dry_run or push is None else "uploaded"
    out.print(
        f"{verb} {len(plan.files)} files ({plan.total_bytes:,} bytes) to {'private' if plan.private else 'public'} dataset {plan.repo_id}"
    )
    if dry_run or push is None:
        for name, size in plan.files:
            out.print(f"  {name}  {size:,}")
