"""A run's stages: plan each into the queue, or find its plan already there (``plan.stamp``).

Gated episodes wait for a fitted τ, so a run plans in stages: what can be planned now, then what the
fits from finished jobs release. Any process of the fleet (``run`` or ``worker``) may find a later stage's
inputs complete; the stage is planned once fleet-wide: ``Queue.take_stage`` names the one process that
plans it, and the others wait for its plan (``_STAGE_WAIT_S`` at most, then plan it themselves: planning
is idempotent, so a planner that died half-way costs nothing but the wait).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

import anyio

from ..cache import CacheStore
from ..config import SweepConfig
from ..jobs import Items
from ..plan import Plan, plan, plan_stamp
from ..provider import CacheMode, preload_litellm
from ..queue import Queue
from ..scenarios import Scenario, load_scenario
from ..work.calls import question_call

__all__ = ["Stages"]


_KEEP_STAMPS = 16  # plans remembered per run (a config edited back and forth finds its plan again)
_STAGE_WAIT_S = 60.0  # how long a process waits for the one planning a later stage


class Stages:
    """Plans a run's stages into its queue, or finds a stage's plan already there (``plan_stamp``)."""

    def __init__(
        self,
        config: SweepConfig,
        queue: Queue,
        meta: dict[str, Any],
        *,
        cache: CacheStore | None,
        work: bool = True,
        who: str | None = None,
    ) -> None:
        self.config, self.queue, self.cache, self.work = config, queue, cache, work
        self.who = who or uuid.uuid4().hex
        self.known: dict[str, Any] = dict(meta.get("plans") or {})
        # The queue holds one config's plan at a time (jobs of an earlier one are set aside): a kept
        # stamp is a fast path only while the config it came from is the one the queue holds.
        self.live, self.config_stamp = meta.get("live_plan"), plan_stamp(config, None)
        self.scenarios: dict[str, Scenario] | None = None
        self.items: Items | None = None
        self.planned = self.added = 0
        self.skipped: list[str] = []

    async def plan(self, fits: dict[str, Any] | None) -> Items:
        """Enqueue the plan at these thresholds (unless it is in the queue already); the items to work."""
        stamp = plan_stamp(self.config, fits)
        done_before = self.known.get(stamp)
        if done_before is not None and self.live == self.config_stamp:
            self.planned, self.skipped = done_before["jobs"], list(done_before["skipped"])
            if self.items is None:
                self.items = await self.queue.items(of_open_jobs=True)  # the done jobs' are not needed
            return self.items
        stage = _stage_key(fits) if fits else None
        if stage is not None:
            await self._wait_for_planner(stage)
        if self.scenarios is None:
            self.scenarios = {spec.id: load_scenario(spec) for spec in self.config.scenarios}
        the_plan = plan(self.config, self.scenarios, fits)
        if self.work and self.cache is not None:
            await _preload_if_calls_coming(self.config, self.cache, the_plan)
        # A run's first plan has nothing to set aside: no set of every id is built for it.
        fresh = not self.known and self.live is None and not await self.queue.status_totals()
        whole = None if fresh else the_plan.job_ids()
        self.added += await self.queue.enqueue(the_plan.jobs, the_plan.items, whole_plan=whole)
        self.planned, self.skipped = len(the_plan.jobs), list(the_plan.skipped)
        self.known[stamp] = {"jobs": self.planned, "skipped": self.skipped}
        self.known = dict(list(self.known.items())[-_KEEP_STAMPS:])
        self.live = self.config_stamp
        await self.queue.update_meta(
            {"plans": self.known, "live_plan": self.live, **({stage: self.who} if stage else {})}
        )
        self.items = {**(self.items or {}), **the_plan.items}
        return self.items

    async def _wait_for_planner(self, stage: str) -> None:
        """Unless this process plans ``stage``, wait (bounded) until the one that does has planned it."""
        planner = await self.queue.take_stage(stage, self.who)
        deadline = time.monotonic() + _STAGE_WAIT_S
        while planner != self.who and time.monotonic() < deadline:
            info = await self.queue.run_info()
            if info is not None and stage in info["meta"]:
                return  # planned: planning it here again adds nothing and finds its items
            await anyio.sleep(0.5)


def _stage_key(fits: dict[str, Any]) -> str:
    """A later stage's name, from the fits it is planned from (the same in every process of the fleet)."""
    return "stage:" + hashlib.sha256(json.dumps(fits, sort_keys=True, default=str).encode()).hexdigest()[:32]


async def _preload_if_calls_coming(
    config: SweepConfig, cache: CacheStore, the_plan: Plan, sample: int = 512
) -> None:
    """Start importing litellm now (it takes seconds) if some job will need a real call.

    Answered jobs have their responses in the cache, so a planned question whose key is missing from the
    cache will be called; a run answered wholly from the cache never imports litellm.
    """
    if not CacheMode(config.cache.policy).read or any(j.kind != "question" for j in the_plan.jobs):
        preload_litellm()
        return
    models = {m.id: m for m in config.models}
    step = max(1, len(the_plan.jobs) // sample)
    keys = []
    for job in the_plan.jobs[::step]:
        keys.append(question_call(models[job.model_id], the_plan.items[(job.scenario_id, job.item)]).key)
    if keys and len(await cache.get(keys)) < len(keys):
        preload_litellm()
