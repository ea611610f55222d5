"""Finalising from the sweep: ``results/`` writes every output, and the report's drill-down is the viewer's.

The viewer reads a run's results, so ``results/`` never imports it; the sweep sits above both and hands
the viewer's offline page to the finaliser. Every way a run is finalised (``run``, a worker that finds the
run finished, ``knowwhen finalize``) comes through here, so their reports are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..config import load_config
from ..exceptions import ConfigError
from ..messages import say
from ..stored import config_from_run, with_db
from .guards import claim_output_folder

if TYPE_CHECKING:
    from ..config import SweepConfig
    from ..queue import Queue
    from ..results import CxsManifest
    from ..results.figures import FigureFormat

__all__ = ["finalize_with_drilldown", "write_run_figures"]


async def finalize_with_drilldown(config: SweepConfig, queue: Queue) -> dict[str, Any]:
    """Write every output of the run, the report with its drill-down; returns ``finalize_run``'s scores."""
    from ..results import finalize_run  # start-up: the finaliser loads only when a run is finalised
    from ..view.data import RunData  # start-up: the viewer loads only for the report's drill-down
    from ..view.offline import drilldown_html  # start-up: as above

    async def drilldown(manifests: Sequence[CxsManifest]) -> str:
        return await drilldown_html(RunData(queue, given_config=config), manifests)

    if await queue.run_info() is None:  # nothing recorded (a new or empty database): write nothing over
        raise ConfigError(say("finalize.no_run", output=config.output, name=config.name))
    claim_output_folder(config.output, config.output)  # a folder of the user's that is no run: refused
    return await finalize_run(config, queue, drilldown)


def write_run_figures(target: str | Path, fmt: FigureFormat, *, db: str | None = None) -> dict[str, Path]:
    """Draw a finalised run's plots as ``fmt`` figures beside their SVG files, ranked and highlighted as
    its config's ``report`` says; ``target`` is the run folder or its config file."""

    from ..results import load_manifest, manifest_path  # start-up: loaded only when figures are drawn
    from ..results.figures import write_figures  # start-up: as above

    target = Path(target)

    async def config_of() -> SweepConfig:
        return await config_from_run(target, db=db) if target.is_dir() else with_db(load_config(target), db)

    config = anyio.run(config_of)
    paths = [manifest_path(config.output, m.id) for m in config.models]
    manifests = [load_manifest(p) for p in paths if p.is_file()]
    return write_figures(config.output / "plots", manifests, config.report, fmt)
