"""Running a sweep: load, plan, enqueue, work, finalise (``knowwhen run``; rerun to resume).

``run_sweep`` is what ``knowwhen run`` does; running it again after a crash or Ctrl-C is the resume,
because planning is idempotent and the queue keeps every recorded result.
"""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..cache import CacheStore, cache_url, open_cache
from ..cache.legacy import move_run_entries
from ..config import SweepConfig, load_config
from ..exceptions import KnowwhenError
from ..messages import say
from ..plan.grid import Plan, plan
from ..provider import (
    FleetLimits,
    Secrets,
    preload_litellm_for,
)
from ..queue import (
    JobResult,
    ModelControl,
    Queue,
    describe_workers,
    open_queue,
    set_max_db_outage,
    state_words,
)
from ..redaction import redact
from ..scenarios import Scenario, load_scenario
from ..stored import config_from_run, run_meta, with_db
from ..stored.status import batch_outcomes
from ..work.budget import BudgetGuard, budget_sentence
from ..work.event_loop import loop_options
from ..work.worker import WorkStats
from .advance import waiting_reason
from .fits import compute_fits
from .local_server import ensure_server
from .notify import flush_notices, notify
from .outputs import finalize_with_drilldown
from .preflight import preflight_models
from .request import RunRequest
from .screen import open_beyond_screen, screen_pace, screened_work
from .stages import Stages
from .working import work_queue

__all__ = [
    "RunSummary",
    "check_keys",
    "failure_reasons",
    "finalize_config",
    "load_and_plan",
    "open_by_model",
    "run_sweep",
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
    held_back: list[ModelControl] = field(default_factory=list)  # quarantined, paused or set-aside models
    open_by_model: dict[str, int] = field(default_factory=dict)  # pending and running jobs per model
    db_shown: str | None = None  # the run's database as a command names it (None: the run folder's file)
    budget_spent: list[str] = field(default_factory=list)  # one sentence per budget found spent
    left_out: list[str] = field(default_factory=list)  # L1 sources not planned: their files are absent
    processes: int = (
        1  # of ``run --processes N``: then ``stats`` counts every process's work (the database's)
    )


def failure_reasons(results: list[JobResult]) -> Counter[str]:
    """Failed jobs counted by their last error (``Queue.results()`` rows)."""
    return Counter(
        (error or "no error recorded") for _job, status, _r, error in results if status == "failed"
    )


def run_sweep(
    request: RunRequest,
    *,
    config: SweepConfig | None = None,
    fleet: FleetLimits | None = None,
    plan_token: str | None = None,
    together: int = 0,
) -> RunSummary:
    """Plan the config into its queue and work until every job is recorded; then finalise.

    ``config``: the file at ``request.config_path`` already loaded (by ``run_fleet``), so it is not read
    twice. As a member of a fleet (``run_fleet``): ``fleet``, the rate limits are the fleet's, kept in its
    ledger; ``plan_token``, noted with the run once the first stage is in the queue (workers spawned by
    ``run --processes`` wait for it); ``together``, how many processes of that start (this one included)
    wait for each other before their first claim.
    """
    path = request.config_path
    config = with_db(config if config is not None else load_config(path), request.db)
    set_max_db_outage(config.workers.max_db_outage_s)
    probes = request.preflight is not None and request.preflight.probe and not request.plan_only
    # the pre-flight names every model whose key is unset in its table, beside every other no-go
    secrets = Secrets(config.models) if probes else check_keys(config)
    if not request.plan_only and _resuming_with_work_left(config):
        # calls are coming: overlap the slow import (where a model needs litellm) with loading and planning
        preload_litellm_for(config.models, config.workers.transport)
    text = path.read_bytes().decode("utf-8")  # exactly the file (its hash is the file's)
    sweep = _Sweep(request, config, text, secrets, fleet, plan_token, together)
    return anyio.run(_run, sweep, backend_options=loop_options())


@dataclass(frozen=True)
class _Sweep:
    """One sweep as this process runs it: the request, its config loaded, and its place in a fleet."""

    request: RunRequest
    config: SweepConfig
    config_text: str  # the file as it is (its hash is the file's)
    secrets: Secrets
    fleet: FleetLimits | None = None
    plan_token: str | None = None
    together: int = 0  # the processes of this ``run --processes N`` start (this one included), else 0

    @property
    def works(self) -> bool:
        """Whether this process works the queue (else it only plans the first stage into it)."""
        return not self.request.plan_only


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


async def _run(sweep: _Sweep) -> RunSummary:
    config, request = sweep.config, sweep.request
    store_url = cache_url(config)
    async with open_queue(config.db_url, config.name) as queue, open_cache(store_url) as store:
        if sweep.works and config.cache.policy != "off":
            await move_run_entries(config.db_url, store, store_url)
        stages = Stages(config, queue, await _start(sweep, queue), work=sweep.works, cache=store)
        with ExitStack() as stack:
            if sweep.works:
                ensure_server(config, stack)
            total, interrupted = await _work_stages(sweep, queue, store, stages)
        summary = await _summary(config, queue, stages, total, interrupted)
        # Open jobs are counted only when a finalise hangs on them (a plan alone does not: 1.5M pending
        # jobs take about 2 s to count).
        wants_finalize = request.finalize and sweep.works and not interrupted
        if wants_finalize and not await open_beyond_screen(queue, summary.counts):
            await finalize_with_drilldown(config, queue)
            summary.finalized = True
        if sweep.works and not interrupted:
            await anyio.to_thread.run_sync(lambda: notify(config, *_outcome(summary)))
        await anyio.to_thread.run_sync(flush_notices)  # a quarantine's notice, say, still on its way
        return summary


async def _start(sweep: _Sweep, queue: Queue) -> dict[str, Any]:
    """Record the run (a rerun describes this config; created stays the first run's) and clear what
    lasts one run; the run's metadata as stored."""
    meta = run_meta(sweep.request.config_path, sweep.config_text)
    info = await queue.init_run(sweep.config_text, meta)
    if info["meta"] != meta:
        info["meta"] = await queue.update_meta({k: v for k, v in meta.items() if k != "created"})
    if sweep.request.retry_failed:
        await queue.requeue_failed()
    if sweep.works:  # a quarantine lasts one run: the user may have fixed the cause
        await queue.holding.clear_controls("quarantined")
        await queue.holding.clear_controls("set_aside")  # each process's test starts from nothing
        if not await _others_working(queue):  # else their calls in flight still hold theirs
            await queue.holding.budget_forget_reservations()  # calls of an earlier (killed) run are over
    meta_now: dict[str, Any] = info["meta"]
    return meta_now


async def _work_stages(
    sweep: _Sweep, queue: Queue, store: CacheStore, stages: Stages
) -> tuple[WorkStats, bool]:
    """Work what can be planned, stage by stage: a fit from finished jobs may release more (gated
    episodes). What this process did, and whether it was interrupted."""

    config, request = sweep.config, sweep.request
    preflight, plan_token = request.preflight if sweep.works else None, sweep.plan_token
    fleet, together = sweep.fleet, sweep.together
    fits: dict[str, Any] | None = None
    total = WorkStats()
    while True:
        items = await stages.plan(fits)
        if preflight is not None:
            probes = await preflight_models(config, queue, store, sweep.secrets, items, preflight)
            total.probe_usd, total.probe_calls = probes.spent_usd, probes.calls
            total.cost_usd += probes.spent_usd
            total.calls += probes.calls  # the calls this run made: the pre-flight's are some of them
            total.requests += probes.requests
            preflight = None  # once per run, before anything is spent
        if plan_token is not None:
            await queue.update_meta({"plan_token": plan_token})
            plan_token = None
        if not sweep.works:
            return total, False
        if request.retry_failed:
            await queue.requeue_failed()
        pace = screen_pace(config)
        work = work_queue(
            config,
            queue,
            sweep.secrets,
            items,
            progress=request.progress,
            fleet=fleet,
            cache=store,
            start_together=together,
            pace=pace,
        )
        together = 0  # its processes start together once, not per stage
        stats, interrupted = await screened_work(config, queue, stages.scenarios, work, pace=pace)
        total.add(stats)
        new_fits = None if interrupted else await compute_fits(config, queue)
        if interrupted or new_fits == fits or (fits is None and not new_fits):
            return total, interrupted
        fits = new_fits


async def _summary(
    config: SweepConfig, queue: Queue, stages: Stages, total: WorkStats, interrupted: bool
) -> RunSummary:
    """What the run did and where it stands: counts, what waits and why, batches, held-back models."""
    counts = Counter[str](await queue.status_totals())
    summary = RunSummary(config.name, config.output, stages.planned, stages.added, total, dict(counts))
    summary.interrupted, summary.left_out = interrupted, [n for n in stages.skipped if "missing (" in n]
    waiting = [note for note in stages.skipped if "waits for" in note]
    if waiting:
        reason = await waiting_reason(queue)
        summary.waiting = [say("run.waiting_stage", note=note, reason=reason) for note in waiting]
    summary.batches = batch_outcomes(await queue.batching.batches())
    summary.held_back = await queue.holding.controls()
    summary.open_by_model = await open_by_model(queue)
    summary.db_shown = None if config.db is None else redact(config.db)
    if total.over_budget:
        over = sorted(total.over_budget)
        summary.budget_spent = await _budget_sentences(config, queue, summary.open_by_model, over)
    if counts.get("failed"):
        summary.failure_reasons = failure_reasons(await queue.results(status="failed"))
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
        held = "; ".join(f"{state_words(h.state)} {h.model_id}: {h.reason}" for h in summary.held_back)
        return "failure", f"{said}{'; ' + held if held else ''}"
    return "finish", said


async def open_by_model(queue: Queue) -> dict[str, int]:
    """Each model's pending and running jobs (models with none are left out)."""
    open_jobs = Counter[str]()
    for c in await queue.counts(open_only=True):
        open_jobs[c.model_id] += c.n
    return {m: n for m, n in open_jobs.items() if n}


async def _budget_sentences(
    config: SweepConfig, queue: Queue, open_jobs: dict[str, int], scopes: list[str]
) -> list[str]:
    """What each spent budget bought and how many of its models' jobs wait."""
    tallies = await queue.holding.budget_tallies()
    guard = BudgetGuard(config, queue.holding)
    return [
        budget_sentence(config, scope, tallies, sum(open_jobs.get(m, 0) for m in guard.models_under(scope)))
        for scope in scopes
    ]


# --- dry run and status -------------------------------------------------------------------------------


def finalize_config(target: str | Path, *, db: str | None = None) -> Path:
    """Finalise a run, given its config file or its run folder (idempotent)."""
    target = Path(target)

    async def go() -> Path:

        if target.is_dir():
            config = await config_from_run(target, db=db)
        else:
            config = with_db(load_config(target), db)
        async with open_queue(config.db_url, config.name) as queue:
            await finalize_with_drilldown(config, queue)
        return config.output

    return anyio.run(go)
