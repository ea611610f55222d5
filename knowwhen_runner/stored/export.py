"""A stored run exported as a dataset folder: its config, tasks and run info read back from the queue, then
laid out by ``results.export``."""

from __future__ import annotations

from pathlib import Path

import anyio

from ..results.export import ExportSummary, RunSource, write_export
from .reader import open_existing
from .run_meta import config_from_run

__all__ = ["export_run"]


def export_run(run_dir: str | Path, out: str | Path, *, db: str | None = None) -> ExportSummary:
    """Export the finalised run in ``run_dir`` (its database: the SQLite file there, or ``db``)."""

    async def read() -> RunSource:
        config = await config_from_run(Path(run_dir), db=db)
        queue, _name = open_existing(Path(run_dir), db, config.name)
        async with queue:
            info = await queue.run_info() or {}
            tasks = {
                spec.id: sorted(
                    (v for v in (await queue.items(spec.id)).values()), key=lambda t: int(t.get("index") or 0)
                )
                for spec in config.scenarios
                if spec.kind == "episodes"
            }
        return RunSource(config.model_copy(update={"output": Path(run_dir)}), tasks, info)

    return write_export(anyio.run(read), Path(out))
