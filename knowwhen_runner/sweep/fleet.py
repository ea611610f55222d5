"""Many workers on one run: join it from any machine, add worker processes, share limits, finalise once.

A run planned into a database keeps its config and item data there (``kw_runs``, ``kw_items``), so a
worker needs only the database URL and the run name: ``knowwhen worker`` loads both, takes API keys
from its own environment, works until the run has no open jobs, and exits. When a database is shared
(PostgreSQL, or a SQLite file worked by ``--processes N``) every process reserves its model calls in
the database (``provider.FleetLimits``), so a model's limits hold for the whole fleet, and the run
is finalised once, by the first process to find it finished (``Queue.take_finalize``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ..config import SweepConfig, load_config
from ..exceptions import EXIT_REQUEUE, ConfigError, DatabaseUnavailable, QueueError, SchemaVersionError
from ..jobs import Items
from ..messages import say

# litellm is imported before a fleet process claims anything: the import takes seconds of CPU, which a
# process should not spend holding leased jobs, and local workers then start calling together.
from ..provider import FleetLimits, litellm_needed, load_litellm
from ..queue import (
    ModelControl,
    Queue,
    find_run_name,
    is_shared_url,
    open_ledger,
    open_queue,
    set_max_db_outage,
)
from ..redaction import redact
from ..stored import stored_config
from ..work.event_loop import loop_options
from ..work.worker import WorkStats, new_worker_id
from .advance import advance_stages, waiting_reason, waiting_stages
from .guards import check_before_run, refuse_foreign_folder
from .outputs import finalize_with_drilldown
from .progress import planned_jobs
from .request import RunRequest
from .screen import screen_pace, screened_work
from .sweep import RunSummary, check_keys, open_by_model, run_sweep
from .working import work_queue

__all__ = [
    "JoinSummary",
    "finalize_once",
    "join_run",
    "run_fleet",
]

_CHILD_WAIT_S = 120.0  # how long a spawned worker waits for the main process to plan the run
_PLAN_TOKEN = "KNOWWHEN_PLAN_TOKEN"  # set for spawned workers: the plan they wait for
_TOGETHER = "KNOWWHEN_START_TOGETHER"  # set for spawned workers: how many processes start claiming together


# --- the config stored with a run --------------------------------------------------------------------


# --- finalise once -----------------------------------------------------------------------------------


async def finalize_once(config: SweepConfig, queue: Queue, who: str) -> str | None:
    """Finalise the run if it is finished and nobody has; returns why not, or None when it did.

    Finalising reads the scenario files (the answer key), so a machine without them leaves it to one
    that has them (``knowwhen finalize``).
    """

    missing = [spec.path for spec in config.scenarios if spec.path is not None and not spec.path.exists()]
    if missing:
        return say("worker.not_finalised_here", path=missing[0])
    await advance_stages(config, queue, who)  # a stage its finished jobs release is planned first
    waiting = await waiting_stages(config, queue)
    if waiting and not any(c.status == "failed" and c.mode == "shadow" for c in await queue.counts()):
        return f"not finalised: {waiting[0]} ({await waiting_reason(queue)})"
    if not await queue.take_finalize(who):
        info = await queue.run_info() or {}
        if info.get("finalized_by"):
            return f"finalised by {info['finalized_by']}"
        return "not finalised: the run still has open jobs"
    try:
        await finalize_with_drilldown(config, queue)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await queue.release_finalize(who)  # let another process (or a rerun) do it
        raise
    if waiting:
        await queue.update_meta({"incomplete": waiting})
        return f"finalised, incomplete: {'; '.join(waiting)} ({await waiting_reason(queue)})"
    return None


# --- join a run (knowwhen worker) --------------------------------------------------------------------


@dataclass
class JoinSummary:
    """What one joining worker did, and where the run stands."""

    run: str
    worker: str  # host:pid
    stats: WorkStats
    counts: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    output: Path = Path(".")  # the run folder (where runner-errors.log is)
    finalized: bool = False
    note: str | None = None
    held_back: list[ModelControl] = field(default_factory=list)  # quarantined, paused, screened, set aside
    open_by_model: dict[str, int] = field(default_factory=dict)  # pending and running jobs per model
    db_shown: str | None = None  # the run's database as a command names it


def join_run(
    db: str, run: str | None = None, *, wait_s: float = 0.0, finalize: bool = True, progress: bool = True
) -> JoinSummary:
    """Work a run planned into ``db`` until it has no open jobs; finalise it if this process is last."""
    if not db.startswith(("postgresql", "sqlite")):
        raise ConfigError(
            f"a worker joins a run in a database (postgresql://... or sqlite:///FILE), not {db}"
        )
    return anyio.run(_join, db, run, wait_s, finalize, progress, backend_options=loop_options())


async def _join(db: str, run: str | None, wait_s: float, finalize: bool, progress: bool) -> JoinSummary:
    name = await _run_name(db, run, wait_s)
    holder = new_worker_id()
    async with open_queue(db, name) as queue, open_ledger(db) as ledger:
        try:
            info = await _planned_run(queue, wait_s)
            config = stored_config(info, db, require_files=False)
            refuse_foreign_folder(config.output, config.output)  # it may write its log and outputs there
            set_max_db_outage(config.workers.max_db_outage_s)
            secrets = check_keys(config, " on this machine")
            items = await queue.items(of_open_jobs=True)
            if litellm_needed(config.models, config.workers.transport):
                # before claiming: a claimed job must not wait seconds for the import (none goes direct)
                await anyio.to_thread.run_sync(load_litellm)
            fleet = FleetLimits(ledger, holder)
            together = int(os.environ.get(_TOGETHER, "0"))
            stats, interrupted = await _work_stages(
                config, queue, secrets, items, progress, fleet, holder, together
            )
            process = f"{socket.gethostname()}:{os.getpid()}"  # how status names its workers, too
            summary = JoinSummary(name, process, stats, await _counts(queue), interrupted, config.output)
            summary.held_back = await queue.holding.controls()
            summary.open_by_model = await open_by_model(queue)
            summary.db_shown = redact(db)
            if finalize and not interrupted:
                summary.note = await finalize_once(config, queue, holder)
                summary.finalized = summary.note is None or summary.note.startswith("finalised")
            return summary
        finally:
            # the share lapses anyway: keep the first error
            with anyio.CancelScope(shield=True), contextlib.suppress(QueueError):
                await ledger.drop(holder)


async def _work_stages(
    config: SweepConfig,
    queue: Queue,
    secrets: Any,
    items: Items,
    progress: bool,
    fleet: FleetLimits,
    holder: str,
    together: int,
) -> tuple[WorkStats, bool]:
    """Work the queue; when finished jobs release a later stage, plan it (once fleet-wide) and go on.
    ``together``: the processes of a ``run --processes N`` start this one belongs to (0: none)."""
    total = WorkStats()
    while True:
        pace = screen_pace(config)
        work = work_queue(
            config, queue, secrets, items, progress=progress, fleet=fleet, start_together=together, pace=pace
        )
        # a worker looks and decides too (a run of workers alone is screened); ``run`` releases a screen
        stats, interrupted = await screened_work(config, queue, None, work, release=False, pace=pace)
        together = 0  # the processes start together once, not per stage
        total.add(stats)
        if interrupted:
            return total, True
        released = await advance_stages(config, queue, holder)
        if released is None or not (await queue.status_totals()).get("pending"):
            return total, False
        items = released


async def _run_name(db: str, run: str | None, wait_s: float) -> str:
    if run is not None:
        return run
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return find_run_name(db)
        except (SchemaVersionError, DatabaseUnavailable):
            raise  # a database away was waited for already, up to workers.max_db_outage_s
        except QueueError:  # no run yet
            if time.monotonic() >= deadline:
                raise
        await anyio.sleep(1.0)


async def _planned_run(queue: Queue, wait_s: float) -> dict[str, Any]:
    """The run's stored info once it exists and has jobs (a worker may start before the planner)."""
    deadline = time.monotonic() + wait_s
    # Spawned by ``run --processes``: wait for this run's plan, not an earlier one's (a rerun may add jobs).
    token = os.environ.get(_PLAN_TOKEN)
    while True:
        info = await queue.run_info()
        if (
            info is not None
            and token in (None, info["meta"].get("plan_token"))
            and (planned_jobs(info["meta"]) is not None or await queue.status_totals())
        ):
            return info
        if time.monotonic() >= deadline:
            if info is None:
                raise ConfigError(say("worker.no_run", run=queue.run))
            return info
        await anyio.sleep(1.0)


async def _counts(queue: Queue) -> dict[str, int]:
    return await queue.status_totals()


# --- knowwhen run, with or without more processes ----------------------------------------------------


def run_fleet(request: RunRequest) -> RunSummary:
    """``knowwhen run``: one process on a private database; with a shared one (PostgreSQL, or ``processes
    > 1``) a member of a fleet: it plans and works under the fleet's limits, ``processes - 1`` workers join
    it here, the run is finalised once (by whichever process finds it finished first) and keeps its config."""
    config = load_config(request.config_path)
    url = request.db or config.db_url
    check_before_run(request.config_path, config, url, replace_config=request.replace_config)
    if request.plan_only or (request.processes <= 1 and not is_shared_url(url)):
        return run_sweep(request, config=config)
    ledger, holder = open_ledger(url), new_worker_id()
    token = uuid.uuid4().hex
    before = anyio.run(_work_done, url, config.name) if request.processes > 1 else None
    children = _spawn_workers(url, config.name, request.processes - 1, token)
    interrupted = True
    try:
        if children and litellm_needed(config.models, config.workers.transport):
            load_litellm()  # while they import theirs: all start calling together
        alone = dataclasses.replace(request, finalize=False)  # finalised once, below, by the fleet's rule
        fleet = FleetLimits(ledger, holder)
        summary = run_sweep(alone, config=config, fleet=fleet, plan_token=token, together=len(children) + 1)
        interrupted = summary.interrupted
    finally:
        _finish_workers(children, interrupted)
    anyio.run(ledger.close)
    anyio.run(_drop_share, url, holder)
    if before is not None:  # every process's work, as the database counts it, not this one's alone
        after = anyio.run(_work_done, url, config.name)
        summary.stats = _work_between(summary.stats, before, after)
        summary.processes = request.processes
    if request.finalize and not interrupted:
        summary.finalized = anyio.run(_finalize_after_run, config.model_copy(update={"db": url}), holder)
    return summary


@dataclass(frozen=True)
class _WorkDone:
    """What the database counts of a run's work so far: jobs done and failed, and what the done ones
    called, found in the cache and spent (``tally_values``)."""

    done: int = 0
    failed: int = 0
    calls: int = 0
    cache_hits: int = 0
    spent_usd: float = 0.0


async def _work_done(url: str, run: str) -> _WorkDone:
    async with open_queue(url, run) as queue:
        tallies = (await queue.model_tallies()).values()
    return _WorkDone(
        sum(t.statuses.get("done", 0) for t in tallies),
        sum(t.statuses.get("failed", 0) for t in tallies),
        sum(t.calls for t in tallies),
        sum(t.cache_hits for t in tallies),
        sum(t.cost_usd for t in tallies),
    )


def _work_between(mine: WorkStats, before: _WorkDone, after: _WorkDone) -> WorkStats:
    """The work of every process between two counts (this process's probes added to what was spent);
    requests are not counted by the database, so this process's stand for none of the others'."""
    return dataclasses.replace(
        mine,
        done=max(0, after.done - before.done),
        failed=max(0, after.failed - before.failed),
        calls=max(0, after.calls - before.calls),
        cache_hits=max(0, after.cache_hits - before.cache_hits),
        cost_usd=max(0.0, after.spent_usd - before.spent_usd) + mine.probe_usd,
    )


async def _drop_share(url: str, holder: str) -> None:
    """Give back this process's in-flight shares, on a fresh ledger (the run's belongs to its event loop)."""
    async with open_ledger(url) as ledger:
        with contextlib.suppress(QueueError):  # the shares lapse by themselves anyway
            await ledger.drop(holder)


async def _finalize_after_run(config: SweepConfig, who: str) -> bool:
    async with open_queue(config.db_url, config.name) as queue:
        note = await finalize_once(config, queue, who)
    if note is not None:
        print(f"knowwhen: {note}", file=sys.stderr)
    return note is None


def _spawn_workers(url: str, run: str, n: int, token: str) -> list[subprocess.Popen[bytes]]:
    """Start ``n`` ``knowwhen worker`` processes on the run (the URL travels in the environment, not argv)."""
    if n <= 0:
        return []
    env = {**os.environ, "KNOWWHEN_DB": url, "KNOWWHEN_RUN": run, _PLAN_TOKEN: token, _TOGETHER: str(n + 1)}
    cmd = [sys.executable, "-m", "knowwhen_runner", "worker", "--quiet", "--no-finalize"]
    cmd += ["--wait", str(_CHILD_WAIT_S)]
    # Own sessions: Ctrl-C reaches this process only, which stops them once, gracefully.
    return [
        subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
        )
        for _ in range(n)
    ]


def _finish_workers(
    children: list[subprocess.Popen[bytes]], interrupted: bool, timeout: float = 60.0
) -> None:
    """Wait for the worker processes (they exit when the run has no open jobs); stop them if interrupted."""
    if interrupted:
        _signal_all(children, signal.SIGINT)
    deadline = time.monotonic() + timeout
    try:
        for child in children:
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.terminate()
                child.wait(10)
    except KeyboardInterrupt:
        _signal_all(children, signal.SIGINT)  # a second stop: cancel the calls in flight
        for child in children:
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
        raise
    stopped = (0, 130, EXIT_REQUEUE, -signal.SIGINT, -signal.SIGTERM)
    failed = [c.returncode for c in children if c.returncode not in stopped]
    if failed:
        print(f"knowwhen: {len(failed)} worker process(es) exited with an error", file=sys.stderr)


def _signal_all(children: list[subprocess.Popen[bytes]], sig: int) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(sig)
