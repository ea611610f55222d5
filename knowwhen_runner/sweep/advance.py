"""Carrying a run forward from any process: plan a later stage once its inputs are complete, and say
what still waits before a finalise.

A worker (``knowwhen worker``) that runs out of jobs asks ``advance_stages``: when the finished shadow
episodes make a fit, the gated episodes it releases are planned (once fleet-wide: ``Stages``) and the
worker goes on with them. ``waiting_stages`` names the stages a finalise would leave out, and why.
"""

from __future__ import annotations

from ..config import SweepConfig
from ..jobs import Items
from ..messages import say
from ..plan import expand
from ..queue import Queue
from ..scenarios import load_scenario
from .fits import compute_fits
from .stages import Stages

__all__ = ["advance_stages", "waiting_reason", "waiting_stages"]


def _files_missing(config: SweepConfig) -> bool:
    return any(spec.path is not None and not spec.path.exists() for spec in config.scenarios)


async def advance_stages(config: SweepConfig, queue: Queue, who: str) -> Items | None:
    """The items of the open jobs when finished jobs release a later stage (planned here or by another
    process): what is left to work, however large the run's done part; None when none is released, or
    this machine lacks the scenario files to plan it."""
    if _files_missing(config):
        return None
    fits = await compute_fits(config, queue)
    if not fits:
        return None
    info = await queue.run_info()
    stages = Stages(config, queue, (info or {}).get("meta") or {}, cache=None, work=False, who=who)
    await stages.plan(fits)
    return await queue.items(of_open_jobs=True)  # the work left's items: never the whole run's


async def waiting_stages(config: SweepConfig, queue: Queue) -> list[str]:
    """Cells of the plan still waiting for a later stage (gated episodes waiting for their τ fit)."""
    if _files_missing(config):
        return []
    fits = await compute_fits(config, queue)
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    # The grid's notes alone: an open-loop cell's jobs are not made for them (``expand`` makes them lazily).
    return [note for note in expand(config, scenarios, fits).skipped if "waits for" in note]


async def waiting_reason(queue: Queue) -> str:
    """Why a τ fit waits: its shadow episodes failed, or are not all done yet."""
    shadow = [c for c in await queue.counts() if c.mode == "shadow"]
    if any(c.status == "failed" and c.n for c in shadow):
        return say("stage.fit_failed")
    return say("stage.fit_pending")
