"""What ``plan`` reports about a config before it runs: jobs, calls to make, cache hits, cost, probes."""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..cache import cache_url, open_cache
from ..config import SweepConfig, load_config
from ..jobs import Job
from ..messages import say
from ..plan import Grid, expand
from ..provider import CacheMode, Secrets
from ..provider.prices import BATCH_FALLBACK_RATE, batch_token_prices
from ..queue import Queue, open_queue
from ..scenarios import Scenario, load_scenario
from ..stored import with_db
from ..work.calls import question_call
from .fits import compute_fits
from .forecast import Forecast, forecast
from .local_server import ensure_server
from .preflight import Probe, probe_models

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
    samples: list[str] = dataclasses.field(default_factory=list)  # scenarios asked in part (a limit)


def plan_report(config_path: str | Path, *, db: str | None = None) -> PlanReport:
    """What ``run`` would do: jobs per cell, how many are new, calls still to make, cache hits, cost.

    The grid is read as it is made, one job at a time: only the jobs not done are kept (what is left, not
    the whole plan), and the run's done jobs are known by their ids alone, never by their results.
    """
    config = with_db(load_config(config_path), db)
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    report = anyio.run(_plan_report, config, scenarios)
    report.samples = [f"{sc.id}: {sc.subset.sentence()}" for sc in scenarios.values() if sc.subset]
    return report


@dataclass
class _Left:
    """The grid read against the run: jobs per cell and those done, the jobs left, finished episodes."""

    counts: Counter[tuple[str, str, str]] = dataclasses.field(default_factory=Counter)
    done: Counter[tuple[str, str, str]] = dataclasses.field(default_factory=Counter)
    todo: list[Job] = dataclasses.field(default_factory=list)
    finished: list[dict[str, Any]] = dataclasses.field(default_factory=list)


async def _done_ids(queue: Queue) -> set[str]:
    """The ids of the run's done jobs: every job's id less those pending, running or failed (a set-aside
    job is in neither), so no result of a done job is read."""
    every = {i for ids in (await queue.job_ids()).values() for i in ids}
    for status in ("pending", "running", "failed"):
        every.difference_update(r.job.id for r in await queue.results(status=status))
    return every


async def _left(queue: Queue | None, grid: Grid) -> _Left:
    done_ids = await _done_ids(queue) if queue is not None else set()
    left = _Left()
    closed: set[str] = set()
    for job in grid.jobs():
        cell = (job.model_id, job.mode, job.scenario_id)
        left.counts[cell] += 1
        if job.id in done_ids:
            left.done[cell] += 1
            if job.kind == "episode":
                closed.add(job.scenario_id)
        else:
            left.todo.append(job)
    if queue is not None and closed:  # finished episodes forecast the cost of those left
        done = await queue.results(closed, status="done")
        left.finished = [r.result for r in done if r.job.kind == "episode" and r.result is not None]
    return left


async def _fits(config: SweepConfig, queue: Queue | None) -> dict[str, Any] | None:
    """The τ fits the run's finished shadow episodes make: the gated episodes they release are planned."""
    return await compute_fits(config, queue) if queue is not None else None


async def _plan_report(config: SweepConfig, scenarios: dict[str, Scenario]) -> PlanReport:
    db_file = (
        Path(config.db_url.removeprefix("sqlite:///")) if config.db_url.startswith("sqlite:///") else None
    )
    exists = db_file is None or db_file.exists()
    async with contextlib.AsyncExitStack() as stack:
        queue = await stack.enter_async_context(open_queue(config.db_url, config.name)) if exists else None
        grid = expand(config, scenarios, await _fits(config, queue))
        todo = (left := await _left(queue, grid)).todo
        models = {m.id: m for m in config.models}
        keys: dict[str, tuple[str, int]] = {}
        job_keys: dict[str, str] = {}
        for job in todo:
            if job.kind == "episode":
                continue  # an episode's calls depend on its answers: forecast from finished ones
            model = models[job.model_id]
            call = question_call(model, grid.items[(job.scenario_id, job.item)])
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
        {"model": m, "mode": mode, "scenario": sc, "jobs": n, "done": left.done[(m, mode, sc)]}
        for (m, mode, sc), n in sorted(left.counts.items())
    ]
    episodes = sum(1 for j in todo if j.kind == "episode")
    notes = [
        f"{episodes} episodes to run: their calls depend on their answers, so they are not in the call "
        "count; their cost is forecast from finished episodes or a stated per-step assumption"
    ]
    skipped = grid.skipped + (notes if episodes else [])
    tokens = {job_keys[k]: tok for k, (_m, tok) in calls.items()}
    waiting = [say("plan.waits_for_fit", note=note) for note in grid.skipped if "waits for" in note]
    outlook = forecast(config, todo, tokens, left.finished, waiting)
    batched = any(m.batches() for m in config.models)
    with_batches = forecast(config, todo, tokens, left.finished, waiting, batch=True).usd if batched else None
    return PlanReport(
        cells,
        sum(left.counts.values()),
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
    secrets = Secrets(config.models)  # a model whose key is unset is a row of the table, not a stop
    grid = expand(config, {spec.id: load_scenario(spec) for spec in config.scenarios})

    async def go() -> list[Probe]:
        async with open_queue(config.db_url, config.name) as queue, open_cache(cache_url(config)) as store:
            done = await _done_ids(queue)
            todo = [job for job in grid.jobs() if job.id not in done]
            return await probe_models(config, queue, secrets, grid.items, todo, store=store)

    with contextlib.ExitStack() as stack:
        ensure_server(config, stack)
        return anyio.run(go)
