"""Finalising from the sweep: ``results/`` writes every output, and the report's drill-down is the viewer's.

The viewer reads a run's results, so ``results/`` never imports it; the sweep sits above both and hands
the viewer's offline page to the finaliser. Every way a run is finalised (``run``, a worker that finds the
run finished, ``knowwhen finalize``) comes through here, so their reports are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import SweepConfig
    from ..queue import Queue
    from ..results import CxsManifest

__all__ = ["finalize_with_drilldown"]


async def finalize_with_drilldown(config: SweepConfig, queue: Queue) -> dict[str, Any]:
    """Write every output of the run, the report with its drill-down; returns ``finalize_run``'s scores."""
    from ..results import finalize_run
    from ..view.data import RunData
    from ..view.offline import drilldown_html

    async def drilldown(manifests: Sequence[CxsManifest]) -> str:
        return await drilldown_html(RunData(queue, given_config=config), manifests)

    return await finalize_run(config, queue, drilldown)
