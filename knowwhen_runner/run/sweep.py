"""Running a sweep: load, plan, enqueue, work, finalise — and the dry-run and status reports.

``run_sweep`` is what ``knowwhen run`` does; running it again after a crash or Ctrl-C is the resume,
because planning is idempotent and the queue keeps every recorded result.
"""

from __future__ import annotations

import signal
import sys
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from .. import __version__
from ..config import SweepConfig, config_hash, load_config, parse_config
from ..exceptions import ConfigError, KnowwhenError
from ..jobs import JOB_ID_VERSION
from ..plan.grid import Plan, plan
from ..plan.stamp import plan_stamp
from ..provider import FleetLimits, Limiters, ModelClient, Secrets, Transport, preload_litellm, token_prices
from ..provider.cache_keys import CacheMode
from ..queue import SET_ASIDE, Queue, open_queue
from ..scenarios import Scenario, load_scenario
from .calls import question_call
from .progress import SweepProgress
from .worker import Worker, WorkStats

__all__ = ["PlanReport", "RunSummary", "load_and_plan", "plan_report", "run_sweep", "status_report"]


def load_and_plan(config: SweepConfig) -> tuple[dict[str, Scenario], Plan]:
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    return scenarios, plan(config, scenarios)


def _with_db(config: SweepConfig, db: str | None) -> SweepConfig:
    return config.model_copy(update={"db": db}) if db else config


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


def failure_reasons(results: list[tuple[Any, str, Any, str | None]]) -> Counter[str]:
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
    config = _with_db(load_config(path), db)
    secrets = check_keys(config)
    if not plan_only and _resuming_with_work_left(config):
        preload_litellm()  # calls are coming: overlap the slow import with loading and planning
    config_text = path.read_text(encoding="utf-8")
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
        queue = open_queue(config.db_url, config.name)
        try:
            return any(c.status == "pending" for c in await queue.counts())
        finally:
            await queue.close()

    try:
        return anyio.run(pending)
    except KnowwhenError:
        return False  # the run proper reports it


def _served_models(base: str) -> set[str] | None:
    """The model names a running local server offers, or None when nothing answers there."""
    try:
        reply = httpx.get(f"{base}/v1/models", timeout=2.0)
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        return None
    return {m.get("id") for m in reply.json().get("data", [])}


def _ensure_server(config: SweepConfig, stack: ExitStack) -> None:
    """Start the built-in server for the run, or reuse one already on the port if it serves our models."""
    if config.serve is None:
        return
    base = f"http://{config.serve.host}:{config.serve.port}"
    wanted = {m.model.split("/", 1)[-1] for m in config.models if m.api_base and m.api_base.startswith(base)}
    offered = _served_models(base)
    if offered is None:
        from ..serve import start_server_process

        server = start_server_process(config.serve.port, host=config.serve.host)
        stack.callback(server.stop)
        offered = _served_models(base) or set()
    missing = sorted(wanted - offered)
    if missing:
        raise ConfigError(
            f"serve: the server on {base} does not offer {', '.join(missing)} (another program, or an older "
            "knowwhen serve?); stop it or choose another serve.port"
        )


def _meta(
    path: Path, config: SweepConfig, scenarios_files: dict[str, dict[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "config_file": path.name,
        "base_dir": str(path.resolve().parent),
        "config_sha256": config_hash(path),
        "job_id_version": JOB_ID_VERSION,
        "knowwhen_runner": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


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

    queue = open_queue(config.db_url, config.name)
    try:
        meta = _meta(path, config)
        info = await queue.init_run(config_text, meta)
        if info["meta"] != meta:  # a rerun: describe this config (created stays the first run's)
            info["meta"] = await queue.update_meta({k: v for k, v in meta.items() if k != "created"})
        if retry_failed:
            await queue.requeue_failed()
        stages = _Stages(config, queue, info["meta"], work=not plan_only)
        fits: dict[str, Any] | None = None
        total = WorkStats()
        interrupted = False
        with ExitStack() as stack:
            if not plan_only:
                _ensure_server(config, stack)
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
                    config, queue, secrets, items, progress=progress, fleet=fleet
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
    finally:
        await queue.close()


_KEEP_STAMPS = 16  # plans remembered per run (a config edited back and forth finds its plan again)


class _Stages:
    """Plans a run's stages into its queue, or finds a stage's plan already there (``plan_stamp``)."""

    def __init__(self, config: SweepConfig, queue: Queue, meta: dict[str, Any], *, work: bool = True) -> None:
        self.config, self.queue, self.work = config, queue, work
        self.known: dict[str, Any] = dict(meta.get("plans") or {})
        # The queue holds one config's plan at a time (jobs of an earlier one are set aside): a kept
        # stamp is a fast path only while the config it came from is the one the queue holds.
        self.live, self.config_stamp = meta.get("live_plan"), plan_stamp(config, None)
        self.scenarios: dict[str, Scenario] | None = None
        self.items: dict[tuple[str, str], dict[str, Any]] | None = None
        self.planned = self.added = 0
        self.skipped: list[str] = []

    async def plan(self, fits: dict[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
        """Enqueue the plan at these thresholds (unless it is in the queue already); the items to work."""
        stamp = plan_stamp(self.config, fits)
        done_before = self.known.get(stamp)
        if done_before is not None and self.live == self.config_stamp:
            self.planned, self.skipped = done_before["jobs"], list(done_before["skipped"])
            if self.items is None:
                self.items = await self.queue.items()
            return self.items
        if self.scenarios is None:
            self.scenarios = {spec.id: load_scenario(spec) for spec in self.config.scenarios}
        the_plan = plan(self.config, self.scenarios, fits)
        if self.work:
            await _preload_if_calls_coming(self.config, self.queue, the_plan)
        whole = the_plan.job_ids()
        self.added += await self.queue.enqueue(the_plan.jobs, the_plan.items, whole_plan=whole)
        self.planned, self.skipped = len(the_plan.jobs), list(the_plan.skipped)
        self.known[stamp] = {"jobs": self.planned, "skipped": self.skipped}
        self.known = dict(list(self.known.items())[-_KEEP_STAMPS:])
        self.live = self.config_stamp
        await self.queue.update_meta({"plans": self.known, "live_plan": self.live})
        self.items = {**(self.items or {}), **the_plan.items}
        return self.items


async def _preload_if_calls_coming(
    config: SweepConfig, queue: Queue, the_plan: Plan, sample: int = 512
) -> None:
    """Start importing litellm now (it takes seconds) if some job will need a real call.

    Answered jobs have their responses in the cache, so a planned question whose key is missing from the
    cache will be called; a run answered wholly from the cache never imports litellm.
    """
    if not CacheMode(config.cache.policy).read or any(
        j.payload.get("kind") != "question" for j in the_plan.jobs
    ):
        preload_litellm()
        return
    models = {m.id: m for m in config.models}
    step = max(1, len(the_plan.jobs) // sample)
    keys = []
    for job in the_plan.jobs[::step]:
        keys.append(question_call(models[job.model_id], the_plan.items[(job.scenario_id, job.item)]).key)
    if keys and len(await queue.cache_get(keys)) < len(keys):
        preload_litellm()


async def work_queue(
    config: SweepConfig,
    queue: Queue,
    secrets: Secrets,
    items: dict[tuple[str, str], dict[str, Any]],
    *,
    progress: bool = True,
    fleet: FleetLimits | None = None,
    transport: Transport | None = None,
) -> tuple[WorkStats, bool]:
    """Work the queue in this process with a progress bar; Ctrl-C stops gracefully, twice cancels.

    ``fleet``: rate limits shared by every process of the run; ``transport``: how requests are sent
    (litellm unless given: tests pass a ``MockTransport``).
    """
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


@dataclass
class PlanReport:
    cells: list[dict[str, Any]]
    jobs: int
    new_jobs: int
    calls_to_make: int
    cache_hits: int
    est_cost_usd: float | None
    skipped: list[str]


def plan_report(config_path: str | Path, *, db: str | None = None) -> PlanReport:
    """What ``run`` would do: jobs per cell, how many are new, calls still to make, cache hits, cost."""
    config = _with_db(load_config(config_path), db)
    _scenarios, the_plan = load_and_plan(config)
    return anyio.run(_plan_report, config, the_plan)


async def _plan_report(config: SweepConfig, the_plan: Plan) -> PlanReport:
    done_ids: set[str] = set()
    db_file = (
        Path(config.db_url.removeprefix("sqlite:///")) if config.db_url.startswith("sqlite:///") else None
    )
    exists = db_file is None or db_file.exists()
    queue = open_queue(config.db_url, config.name) if exists else None
    try:
        if queue is not None:
            done_ids = {job.id for job, status, _r, _e in await queue.results() if status == "done"}
        todo = [j for j in the_plan.jobs if j.id not in done_ids]
        models = {m.id: m for m in config.models}
        keys: dict[str, tuple[str, int]] = {}
        for job in todo:
            if job.payload.get("kind") == "episode":
                continue  # an episode's calls depend on its answers: not known before it runs
            model = models[job.model_id]
            _kind, body, key = question_call(model, the_plan.items[(job.scenario_id, job.item)])
            keys.setdefault(key, (model.id, len(str(body)) // 4))
        hits: set[str] = set()
        if queue is not None and CacheMode(config.cache.policy).read:
            hits = set(await queue.cache_get(list(keys)))
    finally:
        if queue is not None:
            await queue.close()
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


def _open_existing(run_dir: Path, db: str | None, run: str | None) -> tuple[Queue, str]:
    if db is None:
        db_file = run_dir / "knowwhen.db"
        if not db_file.is_file():
            raise ConfigError(
                f"{run_dir}: no run here (no knowwhen.db); give the run folder of a config's output"
            )
        db = f"sqlite:///{db_file}"
    if run is None:
        from ..queue.sql import SqlQueue

        run = SqlQueue(db, "").single_run_name()
    return open_queue(db, run), run


async def _status(run_dir: Path, db: str | None, run: str | None) -> dict[str, Any]:
    queue, name = _open_existing(run_dir, db, run)
    try:
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
        return {"run": name, "models": by_model, "set_aside": set_aside, "workers": await queue.workers()}
    finally:
        await queue.close()


def config_from_run(run_dir: Path, *, db: str | None = None, run: str | None = None) -> SweepConfig:
    """The config stored with a run (workers and ``finalize RUN`` need no copy of the file)."""
    queue, _name = _open_existing(run_dir, db, run)

    async def info() -> dict[str, Any] | None:
        try:
            return await queue.run_info()
        finally:
            await queue.close()

    found = anyio.run(info)
    if found is None:
        raise ConfigError(f"{run_dir}: the database has no run {run!r}")
    config = parse_config(
        found["config_text"],
        base=Path(found["meta"].get("base_dir", ".")),
        source=f"{found['name']} (stored config)",
    )
    return _with_db(config, db)


def finalize_config(target: str | Path, *, db: str | None = None) -> Path:
    """Finalise a run, given its config file or its run folder (idempotent)."""
    target = Path(target)
    config = config_from_run(target, db=db) if target.is_dir() else _with_db(load_config(target), db)

    async def go() -> None:
        from ..results.finalize import finalize_run

        queue = open_queue(config.db_url, config.name)
        try:
            await finalize_run(config, queue)
        finally:
            await queue.close()

    anyio.run(go)
    return config.output


def cache_report(
    run_dir: str | Path, *, db: str | None = None, clear_model: str | None = None, clear_all: bool = False
) -> dict[str, int]:
    """Cached responses per litellm model string in a run's database; optionally delete some first."""

    async def go() -> dict[str, int]:
        queue, _name = _open_existing(Path(run_dir), db, None)
        try:
            if clear_all or clear_model:
                await queue.cache_clear(None if clear_all else clear_model)
            return await queue.cache_stats()
        finally:
            await queue.close()

    return anyio.run(go)
