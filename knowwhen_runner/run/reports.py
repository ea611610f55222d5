"""What ``plan``, ``status`` and ``cache`` report about a run: read-only looks at a config and a queue."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..cache import cache_url, describe_url, open_cache
from ..config import SweepConfig, load_config
from ..exceptions import KnowwhenError
from ..plan import Plan
from ..provider import CacheMode, token_prices
from ..queue import SET_ASIDE, open_queue
from .calls import question_call
from .stored import open_existing, stored_config, with_db
from .sweep import load_and_plan

__all__ = ["PlanReport", "plan_report", "status_report"]


@dataclass
class PlanReport:
    cells: list[dict[str, Any]]
    jobs: int
    new_jobs: int
    calls_to_make: int
    cache_hits: int
    est_cost_usd: float | None
    skipped: list[str]
    cache: str  # where the response store is


def plan_report(config_path: str | Path, *, db: str | None = None) -> PlanReport:
    """What ``run`` would do: jobs per cell, how many are new, calls still to make, cache hits, cost."""
    config = with_db(load_config(config_path), db)
    _scenarios, the_plan = load_and_plan(config)
    return anyio.run(_plan_report, config, the_plan)


async def _plan_report(config: SweepConfig, the_plan: Plan) -> PlanReport:
    done_ids: set[str] = set()
    db_file = (
        Path(config.db_url.removeprefix("sqlite:///")) if config.db_url.startswith("sqlite:///") else None
    )
    exists = db_file is None or db_file.exists()
    async with contextlib.AsyncExitStack() as stack:
        queue = await stack.enter_async_context(open_queue(config.db_url, config.name)) if exists else None
        if queue is not None:
            done_ids = {job.id for job, status, _r, _e in await queue.results() if status == "done"}
        todo = [j for j in the_plan.jobs if j.id not in done_ids]
        models = {m.id: m for m in config.models}
        keys: dict[str, tuple[str, int]] = {}
        for job in todo:
            if job.payload.get("kind") == "episode":
                continue  # an episode's calls depend on its answers: not known before it runs
            model = models[job.model_id]
            call = question_call(model, the_plan.items[(job.scenario_id, job.item)])
            keys.setdefault(call.key, (model.id, len(str(call.body)) // 4))
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
    episodes = sum(1 for j in todo if j.payload.get("kind") == "episode")
    notes = [f"{episodes} episodes to run: their calls are not in the call count or cost estimate"]
    return PlanReport(
        cells,
        len(the_plan.jobs),
        len(todo),
        len(calls),
        len(hits),
        _estimate_cost(config, calls),
        the_plan.skipped + (notes if episodes else []),
        location,
    )


def _estimate_cost(config: SweepConfig, calls: dict[str, tuple[str, int]]) -> float | None:
    """Input tokens estimated from request size; output tokens ~ 0 (decisions) or 20 (a tool call)."""
    total = 0.0
    by_model = {m.id: m for m in config.models}
    for model_id, tokens in calls.values():
        model = by_model[model_id]
        out_tokens = 0 if model.kind == "decision" else 20
        price = token_prices(model)
        if price is None:
            return None
        total += tokens * price[0] + out_tokens * price[1]
        if model.pricing is not None:
            total += model.pricing.per_request
    return total


def status_report(run_dir: str | Path, *, db: str | None = None, run: str | None = None) -> dict[str, Any]:
    """Done / pending / failed per model, cost and calls so far, workers."""
    return anyio.run(_status, Path(run_dir), db, run)


async def _status(run_dir: Path, db: str | None, run: str | None) -> dict[str, Any]:
    queue, name = open_existing(run_dir, db, run)
    async with queue:
        by_model: dict[str, dict[str, Any]] = {}
        for job, status, result, _error in await queue.results():
            row = by_model.setdefault(
                job.model_id,
                {
                    "done": 0,
                    "pending": 0,
                    "running": 0,
                    "failed": 0,
                    "cost_usd": 0.0,
                    "calls": 0,
                    "cache_hits": 0,
                },
            )
            row[status] += 1
            if result:
                cost = result.get("cost_usd") or 0.0  # an episode's is {"decision": x, "llm": y}
                row["cost_usd"] += sum(cost.values()) if isinstance(cost, dict) else cost
                row["calls"] += 0 if result.get("cache_hit") else 1
                row["cache_hits"] += 1 if result.get("cache_hit") else 0
        set_aside = sum(c.n for c in await queue.counts() if c.status == SET_ASIDE)
        info = await queue.run_info()
        cache = _cache_location(info, db)
        return {
            "run": name,
            "models": by_model,
            "set_aside": set_aside,
            "workers": await queue.workers(),
            "cache": cache,
        }


def _cache_location(info: dict[str, Any] | None, db: str | None) -> str | None:
    """Where the run's response store is (by its stored config), or None if that cannot be read."""
    if info is None:
        return None
    try:
        config = stored_config(info, db, require_files=False)
    except KnowwhenError:
        return None
    if config.cache.policy == "off":
        return "off"
    return describe_url(cache_url(config))
