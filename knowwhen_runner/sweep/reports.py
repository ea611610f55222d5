"""What ``plan`` reports about a config before it runs: jobs, calls to make, cache hits, cost, probes."""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..cache import cache_url, open_cache
from ..config import SweepConfig, load_config
from ..plan import Plan
from ..provider import CacheMode
from ..provider.prices import BATCH_FALLBACK_RATE, batch_token_prices
from ..queue import open_queue
from ..stored import with_db
from ..work.calls import question_call
from .forecast import Forecast, forecast
from .local_server import ensure_server
from .preflight import Probe, probe_models
from .sweep import check_keys, load_and_plan

__all__ = ["PlanReport", "plan_report", "probe_report"]


@dataclass
class PlanReport:
    """What ``run`` would do; ``est_cost_usd`` sums the priced models (``forecast`` names the rest)."""

    cells: list[dict[str, Any]]
    jobs: int
    new_jobs: int
    calls_to_make: int
    cache_hits: int
    est_cost_usd: float
    skipped: list[str]
    forecast: Forecast
    cache: str  # where the response store is
    est_batch_cost_usd: float | None = None  # models with ``batch`` at their Batch API price (None: none do)
    batch_notes: list[str] = dataclasses.field(default_factory=list)


def plan_report(config_path: str | Path, *, db: str | None = None) -> PlanReport:
    """What ``run`` would do: jobs per cell, how many are new, calls still to make, cache hits, cost."""
    config = with_db(load_config(config_path), db)
    _scenarios, the_plan = load_and_plan(config)
    return anyio.run(_plan_report, config, the_plan)


async def _plan_report(config: SweepConfig, the_plan: Plan) -> PlanReport:
    done_ids: set[str] = set()
    finished: list[dict[str, Any]] = []
    db_file = (
        Path(config.db_url.removeprefix("sqlite:///")) if config.db_url.startswith("sqlite:///") else None
    )
    exists = db_file is None or db_file.exists()
    async with contextlib.AsyncExitStack() as stack:
        queue = await stack.enter_async_context(open_queue(config.db_url, config.name)) if exists else None
        if queue is not None:
            for job, status, result, _e in await queue.results():
                if status == "done":
                    done_ids.add(job.id)
                    if result is not None and job.kind == "episode":
                        finished.append(result)
        todo = [j for j in the_plan.jobs if j.id not in done_ids]
        models = {m.id: m for m in config.models}
        keys: dict[str, tuple[str, int]] = {}
        job_keys: dict[str, str] = {}
        for job in todo:
            if job.kind == "episode":
                continue  # an episode's calls depend on its answers: forecast from finished ones
            model = models[job.model_id]
            call = question_call(model, the_plan.items[(job.scenario_id, job.item)])
            keys.setdefault(call.key, (model.id, len(str(call.body)) // 4))
            job_keys.setdefault(call.key, job.id)  # one job pays for a call several jobs share
        hits: set[str] = set()
        if CacheMode(config.cache.policy).read:
            cache = await stack.enter_async_context(open_cache(cache_url(config)))
            hits = set(await cache.get(list(keys)))
            location = cache.location
        else:
            location = "off"
    calls = {k: v for k, v in keys.items() if k not in hits}
    cells = [
        {
            "model": m,
            "mode": mode,
            "scenario": sc,
            "jobs": n,
            "done": sum(
                1
                for j in the_plan.jobs
                if (j.model_id, j.mode, j.scenario_id) == (m, mode, sc) and j.id in done_ids
            ),
        }
        for (m, mode, sc), n in sorted(the_plan.counts().items())
    ]
    episodes = sum(1 for j in todo if j.kind == "episode")
    notes = [
        f"{episodes} episodes to run: their calls depend on their answers, so they are not in the call "
        "count; their cost is forecast from finished episodes or a stated per-step assumption"
    ]
    skipped = the_plan.skipped + (notes if episodes else [])
    tokens = {job_keys[k]: tok for k, (_m, tok) in calls.items()}
    waiting = [
        f"{note}: these episodes are planned once the fit is done, and are not in the forecast"
        for note in the_plan.skipped
        if "waits for" in note
    ]
    outlook = forecast(config, todo, tokens, finished, waiting)
    batched = any(m.batches() for m in config.models)
    with_batches = forecast(config, todo, tokens, finished, waiting, batch=True).usd if batched else None
    return PlanReport(
        cells,
        len(the_plan.jobs),
        len(todo),
        len(calls),
        len(hits),
        outlook.usd,
        skipped,
        outlook,
        location,
        with_batches,
        _batch_notes(config),
    )


def _batch_notes(config: SweepConfig) -> list[str]:
    """Where a batch price comes from, per model with ``batch``: litellm's list, or the stated fallback."""
    notes = []
    for model in config.models:
        if model.batches():
            prices = batch_token_prices(model)
            if prices is not None and not prices[1]:
                share = f"{BATCH_FALLBACK_RATE:.0%}"
                notes.append(
                    f"{model.id}: no listed batch price; estimated at {share} of the synchronous price"
                )
    return notes


def probe_report(config_path: str | Path, *, db: str | None = None) -> list[Probe]:
    """``plan --probe``: each model answers its first question not yet answered (into the run's cache)."""
    config = with_db(load_config(config_path), db)
    secrets = check_keys(config)
    _scenarios, the_plan = load_and_plan(config)

    async def go() -> list[Probe]:
        async with open_queue(config.db_url, config.name) as queue, open_cache(cache_url(config)) as store:
            done = {job.id for job, status, _r, _e in await queue.results() if status == "done"}
            todo = [job for job in the_plan.jobs if job.id not in done]
            return await probe_models(config, queue, secrets, the_plan.items, todo, store=store)

    with contextlib.ExitStack() as stack:
        ensure_server(config, stack)
        return anyio.run(go)
