"""Running a sweep: load, plan, enqueue, work, finalise (``knowwhen run``; rerun to resume).

``run_sweep`` is what ``knowwhen run`` does; running it again after a crash or Ctrl-C is the resume,
because planning is idempotent and the queue keeps every recorded result.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..cache import CacheStore, cache_url, open_cache
from ..cache.legacy import move_run_entries
from ..config import SweepConfig, load_config
from ..exceptions import ConfigError, KnowwhenError
from ..jobs import Items
from ..plan.grid import Plan, plan
from ..provider import FleetLimits, LearnedLimits, Limiters, ModelClient, Secrets, Transport, preload_litellm
from ..queue import (
    JobResult,
    ModelControl,
    Queue,
    describe_workers,
    open_ledger,
    open_queue,
    set_max_db_outage,
)
from ..scenarios import Scenario, load_scenario
from .batch_lane import batch_outcomes
from .budget import BudgetGuard, budget_sentence
from .event_loop import loop_options
from .local_server import ensure_server
from .notify import flush_notices, notify
from .preflight import PreflightError, Probe, no_go_message, probe_models
from .progress import SweepProgress, progress_totals
from .stages import Stages
from .stop_signals import watch_stop_signals
from .stored import config_from_run, run_meta, with_db
from .worker import Worker, WorkStats

__all__ = [
    "Preflight",
    "RunSummary",
    "check_keys",
    "failure_reasons",
    "finalize_config",
    "load_and_plan",
    "run_sweep",
    "work_queue",
]


def load_and_plan(config: SweepConfig) -> tuple[dict[str, Scenario], Plan]:
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    return scenarios, plan(config, scenarios)


def check_keys(config: SweepConfig, where: str = "") -> Secrets:
    """The run's secrets; a model whose key variable is unset stops the run before any call."""
    secrets = Secrets(config.models)
    secrets.require(where)
    return secrets


@dataclass
class RunSummary:
    run: str
    output: Path
    planned: int
    added: int
    stats: WorkStats
    counts: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    finalized: bool = False
    waiting: list[str] = field(default_factory=list)
    failure_reasons: Counter[str] = field(default_factory=Counter)  # failed jobs by their last error
    batches: dict[str, int] = field(default_factory=dict)  # provider batch outcomes (``batch_outcomes``)
    held_back: list[ModelControl] = field(default_factory=list)  # quarantined or paused models
    budget_spent: list[str] = field(default_factory=list)  # one sentence per budget found spent
    left_out: list[str] = field(default_factory=list)  # L1 sources not planned: their files are absent


def failure_reasons(results: list[JobResult]) -> Counter[str]:
    """Failed jobs counted by their last error (``Queue.results()`` rows)."""
    return Counter(
        (error or "no error recorded") for _job, status, _r, error in results if status == "failed"
    )


def run_sweep(
    config_path: str | Path,
    *,
    db: str | None = None,
    retry_failed: bool = False,
    finalize: bool = True,
    progress: bool = True,
    plan_only: bool = False,
    plan_token: str | None = None,
    fleet: FleetLimits | None = None,
    preflight: Preflight | None = None,
    config: SweepConfig | None = None,
) -> RunSummary:
    """Plan the config into its queue and work until every job is recorded; then finalise.

    ``plan_only``: enqueue the first stage's plan and return (for workers that join later).
    ``plan_token``: noted with the run once the first stage is in the queue (workers spawned by
    ``run --processes`` wait for it). ``fleet``: the rate limits are the fleet's, kept in its ledger.
    ``preflight``: check the models before working (``knowwhen run`` probes them; None: no check).
    ``config``: the file at ``config_path`` already loaded (by ``run_fleet``), so it is not read twice.
    """
    path = Path(config_path)
    config = with_db(config if config is not None else load_config(path), db)
    set_max_db_outage(config.workers.max_db_outage_s)
    secrets = check_keys(config)
    if not plan_only and _resuming_with_work_left(config):
        preload_litellm()  # calls are coming: overlap the slow import with loading and planning
    config_text = path.read_bytes().decode("utf-8")  # exactly the file (its hash is the file's)
    return anyio.run(
        _run,
        path,
        config_text,
        config,
        secrets,
        retry_failed,
        finalize and not plan_only,
        progress,
        plan_only,
        plan_token,
        fleet,
        preflight,
        backend_options=loop_options(),
    )


def _resuming_with_work_left(config: SweepConfig) -> bool:
    """Whether this run's database already holds pending jobs of it (a resume); cheap, never creates one."""
    if (
        config.db_url.startswith("sqlite:///")
        and not Path(config.db_url.removeprefix("sqlite:///")).is_file()
    ):
        return False

    async def pending() -> bool:
        async with open_queue(config.db_url, config.name) as queue:
            return any(c.status == "pending" for c in await queue.counts(open_only=True))

    try:
        return anyio.run(pending)
    except KnowwhenError:
        return False  # the run proper reports it


async def _run(
    path: Path,
    config_text: str,
    config: SweepConfig,
    secrets: Secrets,
    retry_failed: bool,
    finalize: bool,
    progress: bool,
    plan_only: bool = False,
    plan_token: str | None = None,
    fleet: FleetLimits | None = None,
    preflight: Preflight | None = None,
) -> RunSummary:
    from .fits import compute_fits

    store_url = cache_url(config)
    async with open_queue(config.db_url, config.name) as queue, open_cache(store_url) as store:
        if not plan_only and config.cache.policy != "off":
            await move_run_entries(config.db_url, store, store_url)
        meta = run_meta(path, config_text)
        info = await queue.init_run(config_text, meta)
        if info["meta"] != meta:  # a rerun: describe this config (created stays the first run's)
            info["meta"] = await queue.update_meta({k: v for k, v in meta.items() if k != "created"})
        if retry_failed:
            await queue.requeue_failed()
        if not plan_only:  # a quarantine lasts one run: the user may have fixed the cause
            await queue.clear_controls("quarantined")
            if not await _others_working(queue):  # else their calls in flight still hold theirs
                await queue.budget_forget_reservations()  # calls of an earlier (killed) run are over
        stages = Stages(config, queue, info["meta"], work=not plan_only, cache=store)
        fits: dict[str, Any] | None = None
        total = WorkStats()
        interrupted = False
        with ExitStack() as stack:
            if not plan_only:
                ensure_server(config, stack)
            # Stages: work what can be planned; a fit from finished jobs may release more (gated episodes).
            while True:
                items = await stages.plan(fits)
                if preflight is not None and not plan_only:
                    await _preflight(config, queue, store, secrets, items, preflight)
                    preflight = None  # once per run, before anything is spent
                if plan_token is not None:
                    await queue.update_meta({"plan_token": plan_token})
                    plan_token = None
                if plan_only:
                    break
                if retry_failed:
                    await queue.requeue_failed()
                stats, interrupted = await work_queue(
                    config, queue, secrets, items, progress=progress, fleet=fleet, cache=store
                )
                total.add(stats)
                if interrupted:
                    break
                new_fits = await compute_fits(config, queue)
                if fits is not None and new_fits == fits:
                    break
                if fits is None and not new_fits:
                    break
                fits = new_fits
        counts = Counter[str](await queue.status_totals())
        summary = RunSummary(config.name, config.output, stages.planned, stages.added, total, dict(counts))
        summary.interrupted, summary.left_out = interrupted, [n for n in stages.skipped if "missing (" in n]
        waiting = [note for note in stages.skipped if "waits for" in note]
        if waiting:
            from .advance import waiting_reason

            reason = await waiting_reason(queue)
            summary.waiting = [f"{note} ({reason})" for note in waiting]
        summary.batches = batch_outcomes(await queue.batches())
        summary.held_back = await queue.controls()
        if total.over_budget:
            summary.budget_spent = await _budget_sentences(config, queue, sorted(total.over_budget))
        if counts.get("failed"):
            summary.failure_reasons = failure_reasons(await queue.results(status="failed"))
        if finalize and not interrupted and not counts.get("pending") and not counts.get("running"):
            from .outputs import finalize_with_drilldown

            await finalize_with_drilldown(config, queue)
            summary.finalized = True
        if not plan_only and not interrupted:
            await anyio.to_thread.run_sync(lambda: notify(config, *_outcome(summary)))
        await anyio.to_thread.run_sync(flush_notices)  # a quarantine's notice, say, still on its way
        return summary


async def _others_working(queue: Queue) -> bool:
    """Whether another process works this run now (a worker ``status`` shows as working)."""
    return any(w["state"] == "working" for w in describe_workers(await queue.workers()))


def _outcome(summary: RunSummary) -> tuple[str, str]:
    """The event a finished (or stopped) run sends its hooks, and its one-line message."""
    c = summary.counts
    said = (
        f"{summary.run}: {c.get('done', 0)} done, {c.get('failed', 0)} failed, "
        f"{c.get('pending', 0) + c.get('running', 0)} pending; cost ${summary.stats.cost_usd:.4f}"
    )
    if summary.budget_spent:
        return "budget", f"{said}; {summary.budget_spent[0]}"
    if c.get("failed") or c.get("pending") or c.get("running"):
        held = "; ".join(f"{h.state} {h.model_id}: {h.reason}" for h in summary.held_back)
        return "failure", f"{said}{'; ' + held if held else ''}"
    return "finish", said


async def work_queue(
    config: SweepConfig,
    queue: Queue,
    secrets: Secrets,
    items: Items,
    *,
    progress: bool = True,
    fleet: FleetLimits | None = None,
    transport: Transport | None = None,
    cache: CacheStore | None = None,
) -> tuple[WorkStats, bool]:
    """Work the queue in this process with a progress bar; Ctrl-C stops gracefully, twice cancels.

    ``fleet``: rate limits shared by every process of the run; ``transport``: how requests are sent
    (litellm unless given: tests pass a ``MockTransport``); ``cache``: the response store (default: the
    one the config names, opened for this call).
    """
    if cache is None:
        async with open_cache(cache_url(config)) as store:
            return await work_queue(
                config,
                queue,
                secrets,
                items,
                progress=progress,
                fleet=fleet,
                transport=transport,
                cache=store,
            )
    if fleet is None and any(m.adapts() for m in config.models) and not config.db_url.startswith("memory"):
        # learned limits are kept in the run database for the next run, even without a fleet
        async with open_ledger(config.db_url) as ledger:
            return await _work(config, queue, secrets, items, progress, None, transport, cache, ledger)
    return await _work(config, queue, secrets, items, progress, fleet, transport, cache, None)


async def _work(
    config: SweepConfig,
    queue: Queue,
    secrets: Secrets,
    items: Items,
    progress: bool,
    fleet: FleetLimits | None,
    transport: Transport | None,
    cache: CacheStore,
    learned: LearnedLimits | None,
) -> tuple[WorkStats, bool]:
    limiters = Limiters(config.models, fleet=fleet, max_outage_s=config.workers.max_outage_s, learned=learned)
    tries, failing = max(2, config.workers.max_attempts + 1), config.workers.quarantine_failures
    client = ModelClient(limiters, secrets, transport=transport, max_tries=tries, failing_after=failing)
    total, already = await progress_totals(queue)  # the open jobs alone, when the plan's size is kept
    display = SweepProgress(total, already, backing_off=limiters.backing_off, enabled=progress)
    worker = Worker(
        config,
        queue,
        client,
        items,
        cache=cache,
        limiters=limiters,
        on_progress=lambda s: display.update(s.done, s.cost_usd, s.failed, s.runner_errors),
        on_quarantine=lambda model_id, reason: _quarantined(config, model_id, reason),
    )
    display.batches = worker.batches.describe if worker.batches is not None else None
    interrupted = False
    with display:
        async with anyio.create_task_group() as tg:

            def stopped() -> None:
                nonlocal interrupted
                interrupted = True

            async def watch_signals() -> None:
                grace = config.workers.stop_grace_s
                await watch_stop_signals(worker, grace, stopped, tg.cancel_scope.cancel)

            async def work() -> None:
                await worker.run()
                tg.cancel_scope.cancel()

            async def tick() -> None:
                while True:  # nothing is recorded while the database is away: the line still says so
                    await anyio.sleep(1.0)
                    display.tick()

            tg.start_soon(watch_signals)
            tg.start_soon(tick)
            tg.start_soon(work)
    return worker.stats, interrupted


@dataclass(frozen=True)
class Preflight:
    """How ``run`` checks its models before working: probe them (unless ``probe`` is off), leave out
    ``skip`` (their jobs stay pending this run), and show the go/no-go table with ``report``."""

    probe: bool = True
    skip: frozenset[str] = frozenset()
    report: Callable[[list[Probe]], None] | None = None


async def _preflight(
    config: SweepConfig,
    queue: Queue,
    store: CacheStore,
    secrets: Secrets,
    items: Items,
    preflight: Preflight,
) -> None:
    """Leave out the skipped models; probe the rest; stop on a no-go (``PreflightError``)."""
    known = {m.id for m in config.models}
    for model_id in sorted(preflight.skip):
        if model_id not in known:
            raise ConfigError(f"--skip-model {model_id}: no model with that id in the config")
        await queue.set_control(model_id, "quarantined", "left out of this run with --skip-model")
    if not preflight.probe:
        return
    open_jobs = [job for job, _s, _r, _e in await queue.results(status="pending")]
    probes = await probe_models(config, queue, secrets, items, open_jobs, store=store, skip=preflight.skip)
    if preflight.report is not None:
        preflight.report(probes)
    if not all(p.go for p in probes):
        raise PreflightError(no_go_message(probes))


async def _budget_sentences(config: SweepConfig, queue: Queue, scopes: list[str]) -> list[str]:
    """What each spent budget bought and how many of its models' jobs wait."""
    tallies = await queue.budget_tallies()
    guard = BudgetGuard(config, queue)
    open_jobs = Counter[str]()
    for c in await queue.counts(open_only=True):
        open_jobs[c.model_id] += c.n
    return [
        budget_sentence(config, scope, tallies, sum(open_jobs[m] for m in guard.models_under(scope)))
        for scope in scopes
    ]


def _quarantined(config: SweepConfig, model_id: str, reason: str) -> None:
    _say_quarantined(model_id, reason)
    notify(config, "quarantine", f"{model_id} is quarantined: {reason}", wait=False)


def _say_quarantined(model_id: str, reason: str) -> None:
    print(
        f"\nknowwhen: quarantined {model_id} for this run: {reason}; its jobs stay pending, "
        "the other models go on",
        file=sys.stderr,
        flush=True,
    )


# --- dry run and status -------------------------------------------------------------------------------


def finalize_config(target: str | Path, *, db: str | None = None) -> Path:
    """Finalise a run, given its config file or its run folder (idempotent)."""
    target = Path(target)

    async def go() -> Path:
        from .outputs import finalize_with_drilldown

        if target.is_dir():
            config = await config_from_run(target, db=db)
        else:
            config = with_db(load_config(target), db)
        async with open_queue(config.db_url, config.name) as queue:
            await finalize_with_drilldown(config, queue)
        return config.output

    return anyio.run(go)
