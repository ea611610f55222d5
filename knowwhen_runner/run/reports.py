"""What ``plan``, ``status`` and ``cache`` report about a run: read-only looks at a config and a queue."""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..cache import cache_url, describe_url, open_cache
from ..config import SweepConfig, load_config
from ..exceptions import KnowwhenError
from ..plan import Plan
from ..provider import CacheMode, LearnedLimit
from ..provider.prices import BATCH_FALLBACK_RATE, batch_token_prices
from ..queue import SET_ASIDE, BudgetTally, open_ledger, open_queue
from ..queue.pace import PACE_WINDOW_S, model_pace, spent_models
from ..redaction import redact_all
from ..screening.live import screen_status
from .batch_lane import batch_outcomes, batch_rows
from .calls import question_call
from .forecast import Forecast, forecast
from .local_server import ensure_server
from .preflight import Probe, probe_models
from .stored import open_existing, stored_config, with_db
from .sweep import check_keys, load_and_plan

__all__ = ["PlanReport", "plan_report", "probe_report", "status_report"]

_ETA_WINDOW_S = 300.0  # a model's ETA is at the pace of its jobs done over the last five minutes


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


def status_report(run_dir: str | Path, *, db: str | None = None, run: str | None = None) -> dict[str, Any]:
    """Done / pending / failed per model, cost and calls so far, workers (every text redacted)."""
    report: dict[str, Any] = redact_all(anyio.run(_status, Path(run_dir), db, run))
    return report


async def _status(run_dir: Path, db: str | None, run: str | None) -> dict[str, Any]:
    queue, name = open_existing(run_dir, db, run)
    async with queue:
        by_model: dict[str, dict[str, Any]] = {}
        models = await queue.model_tallies()  # summed by the database, set-aside jobs apart
        set_aside = sum(t.statuses.get(SET_ASIDE, 0) for t in models.values())
        for model_id, tally in models.items():
            if not set(tally.statuses) - {SET_ASIDE}:
                continue  # a model of an earlier plan only
            by_model[model_id] = {
                **{
                    status: tally.statuses.get(status, 0)
                    for status in ("done", "pending", "running", "failed")
                },
                "cost_usd": tally.cost_usd,
                "calls": tally.calls,
                "cache_hits": tally.cache_hits,
            }
        records = await queue.batches()
        controls = await queue.controls()
        held = [
            {"model": c.model_id, "state": c.state, "reason": c.reason, "since": c.since} for c in controls
        ]
        workers = await queue.workers()
        _add_eta(by_model, await queue.done_lately(_ETA_WINDOW_S), {c.model_id for c in controls})
        tallies = await queue.budget_tallies()
        budget = [_budget_row(t) for t in tallies]
        info = await queue.run_info()
        config, unreadable = _readable_config(info, db)
        cache = _cache_location(config) if config is not None else unreadable
        limits, learned = await _limits(config, db or f"sqlite:///{run_dir / 'knowwhen.db'}")
        if config is not None:
            held_why = {**spent_models(config, tallies), **{c.model_id: c.state for c in controls}}
            _add_pace(by_model, config, await queue.done_lately(PACE_WINDOW_S), held_why, learned)
        return {
            "run": name,
            "models": by_model,
            "set_aside": set_aside,
            "held_back": held,
            "budget": budget,
            "workers": workers,
            "batches": batch_rows(records),
            "batch_outcomes": batch_outcomes(records),
            "cache": cache,
            "limits": limits,
            "screen": screen_status((info or {}).get("meta"), {m: r["pending"] for m, r in by_model.items()}),
        }


async def _limits(
    config: SweepConfig | None, url: str
) -> tuple[list[dict[str, Any]], dict[str, LearnedLimit]]:
    """Each model's configured limits, and for an adaptive one what the fleet has learned so far (with
    the learned limits by limit key)."""
    if config is None:
        return [], {}
    async with open_ledger(url) as ledger:
        learned = await ledger.learned() if any(m.adapts() for m in config.models) else {}
    rows = []
    for spec in config.models:
        rate, found = spec.rate_limit, learned.get(spec.limit_key())
        rows.append(
            {
                "model": spec.id,
                "group": spec.limit_group,
                "requests_per_minute": rate.requests_per_minute,
                "tokens_per_minute": rate.tokens_per_minute,
                "max_in_flight": rate.max_in_flight,
                "adaptive": spec.adapts(),
                "learned": None
                if found is None
                else {**dataclasses.asdict(found), "described": found.describe()},
            }
        )
    return rows, learned


def _budget_row(t: BudgetTally) -> dict[str, Any]:
    return {
        "scope": t.scope,
        "spent_usd": t.spent_usd,
        "reserved_usd": t.reserved_usd,
        "spent_tokens": t.spent_tokens,
        "calls": t.calls,
    }


def _add_pace(
    by_model: dict[str, dict[str, Any]],
    config: SweepConfig,
    lately: dict[str, tuple[int, float]],
    held: dict[str, str],
    learned: dict[str, LearnedLimit],
) -> None:
    """Each model's pace (``pace.model_pace``): its rate against its limit and what it waits for."""
    for model_id, row in by_model.items():
        pace = model_pace(
            config,
            model_id,
            lately=lately.get(model_id),
            running=row["running"],
            open_jobs=row["pending"] + row["running"],
            held=held.get(model_id),
            learned=learned,
        )
        row["pace"] = None if pace is None else {**dataclasses.asdict(pace), "described": pace.describe()}


def _add_eta(
    by_model: dict[str, dict[str, Any]], lately: dict[str, tuple[int, float]], held: set[str]
) -> None:
    """Each model's ETA in seconds at the pace its jobs were done over the last ``_ETA_WINDOW_S``,
    by every process of the fleet (None: held back, or nothing done lately)."""
    for model_id, row in by_model.items():
        left = row["pending"] + row["running"]
        n, span = lately.get(model_id, (0, 0.0))
        if not left:
            row["eta_s"] = 0.0
        elif model_id in held or n < 2 or span <= 0:
            row["eta_s"] = None
        else:
            row["eta_s"] = left * span / n


def _readable_config(info: dict[str, Any] | None, db: str | None) -> tuple[SweepConfig | None, str | None]:
    """The run's stored config, or why it cannot be read on this machine (a ``${VAR}`` it names that is
    not set here, say), as the sentence ``status`` shows in place of the cache's location."""
    if info is None:
        return None, None
    try:
        return stored_config(info, db, require_files=False), None
    except KnowwhenError as exc:
        return None, f"unknown (the stored config cannot be read here: {exc})"


def _cache_location(config: SweepConfig) -> str:
    """Where the run's response store is, by its stored config."""
    if config.cache.policy == "off":
        return "off"
    return describe_url(cache_url(config))
