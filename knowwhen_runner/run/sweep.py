"""Running a sweep: load, plan, enqueue, work, finalise — and the dry-run and status reports.

``run_sweep`` is what ``knowwhen run`` does; running it again after a crash or Ctrl-C is the resume,
because planning is idempotent and the queue keeps every recorded result.
"""

from __future__ import annotations

import signal
import sys
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..cache import CacheStore, cache_url, open_cache
from ..cache.legacy import move_run_entries
from ..config import SweepConfig, load_config
from ..exceptions import ConfigError, KnowwhenError
from ..plan.grid import Plan, plan
from ..provider import FleetLimits, Limiters, ModelClient, Secrets, Transport, preload_litellm
from ..queue import SET_ASIDE, JobResult, Queue, open_queue
from ..scenarios import Scenario, load_scenario
from .local_server import ensure_server
from .progress import SweepProgress
from .stages import Stages
from .stored import config_from_run, run_meta, with_db
from .worker import Worker, WorkStats

__all__ = [
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
    missing = secrets.missing()
    if missing:
        model_id, env = missing[0]
        raise ConfigError(
            f"model {model_id!r} needs its API key in the environment variable {env}, which is not set{where}"
        )
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
) -> RunSummary:
    """Plan the config into its queue and work until every job is recorded; then finalise.

    ``plan_only``: enqueue the first stage's plan and return (for workers that join later).
    ``plan_token``: noted with the run once the first stage is in the queue (workers spawned by
    ``run --processes`` wait for it). ``fleet``: the rate limits are the fleet's, kept in its ledger.
    """
    path = Path(config_path)
    config = with_db(load_config(path), db)
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
            return any(c.status == "pending" for c in await queue.counts())

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
        counts = Counter[str]()
        for c in await queue.counts():
            counts[c.status] += c.n
        summary = RunSummary(
            config.name, config.output, stages.planned, stages.added, total, dict(counts), interrupted
        )
        summary.waiting = [note for note in stages.skipped if "waits for" in note]
        if counts.get("failed"):
            summary.failure_reasons = failure_reasons(await queue.results())
        if finalize and not interrupted and not counts.get("pending") and not counts.get("running"):
            from ..results.finalize import finalize_run

            await finalize_run(config, queue)
            summary.finalized = True
        return summary


async def work_queue(
    config: SweepConfig,
    queue: Queue,
    secrets: Secrets,
    items: dict[tuple[str, str], dict[str, Any]],
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
    limiters = Limiters(config.models, fleet=fleet, max_outage_s=config.workers.max_outage_s)
    client = ModelClient(
        limiters, secrets, transport=transport, max_tries=max(2, config.workers.max_attempts + 1)
    )
    counts = [c for c in await queue.counts() if c.status != SET_ASIDE]
    total = sum(c.n for c in counts)
    already = sum(c.n for c in counts if c.status in ("done", "failed"))
    display = SweepProgress(total, already, backing_off=limiters.backing_off, enabled=progress)
    worker = Worker(
        config,
        queue,
        client,
        items,
        cache=cache,
        limiters=limiters,
        on_progress=lambda s: display.update(s.done, s.cost_usd, s.failed),
    )
    interrupted = False
    with display:
        async with anyio.create_task_group() as tg:

            async def watch_signals() -> None:
                nonlocal interrupted
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        if not interrupted:
                            interrupted = True
                            print(
                                "\nknowwhen: stopping — finishing the calls in flight "
                                "(Ctrl-C again to cancel them); rerun to resume",
                                file=sys.stderr,
                                flush=True,
                            )
                            worker.stop()
                        else:
                            tg.cancel_scope.cancel()

            async def work() -> None:
                await worker.run()
                tg.cancel_scope.cancel()

            tg.start_soon(watch_signals)
            tg.start_soon(work)
    return worker.stats, interrupted


# --- dry run and status -------------------------------------------------------------------------------


def finalize_config(target: str | Path, *, db: str | None = None) -> Path:
    """Finalise a run, given its config file or its run folder (idempotent)."""
    target = Path(target)

    async def go() -> Path:
        from ..results import finalize_run

        if target.is_dir():
            config = await config_from_run(target, db=db)
        else:
            config = with_db(load_config(target), db)
        async with open_queue(config.db_url, config.name) as queue:
            await finalize_run(config, queue)
        return config.output

    return anyio.run(go)
