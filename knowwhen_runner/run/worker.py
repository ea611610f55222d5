"""Workers: claim jobs in batches, answer them from the cache or the model, record results in batches.

One ``Worker`` per process runs an anyio task group: a claimer (leases batches, answers cache hits at
once), ``concurrency`` callers (rate-limited model calls), a recorder (writes cache entries, results and
failures as soon as they arrive, batching whatever has piled up), and a heartbeat that keeps leases
alive. Identical calls needed by several jobs at once are made once (single flight).
Stopping (Ctrl-C): claiming stops, calls in flight finish, unstarted jobs are released; a second
Ctrl-C cancels the calls and releases their jobs too. A hand-over (SIGTERM, ``hand_over``) gives the
unstarted jobs back at once and abandons the calls still running after ``workers.stop_grace_s``. A killed
process loses nothing: its jobs go back once its heartbeat is stale (``STALE_AFTER_S``), or its leases expire.
Models the run holds back (``Queue.controls``: quarantined after a fatal provider error or too many
invalid answers, or paused by hand) are read every few seconds; their jobs are not claimed and any
already claimed go back to pending unstarted.
"""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import anyio
from anyio.abc import TaskGroup

from ..cache import CacheEntry, CacheStore
from ..config import ModelSpec, SweepConfig
from ..crashpoints import crashpoint
from ..dataset.answer_rows import answer_row
from ..exceptions import KnowwhenError, ProviderError
from ..jobs import Job
from ..provider import CacheMode, Limiters, ModelClient
from ..queue import Failure, ModelControl, Queue
from .batches import BatchLane
from .budget import BudgetGuard, BudgetSpent
from .calls import CachedCalls, Lookup, QuestionCall, question_call
from .quarantine import InvalidAnswers, quarantine_reason
from .runner_errors import RunnerErrors

__all__ = ["STALE_AFTER_S", "WorkStats", "Worker", "new_worker_id"]

_RECORD_LINGER_S = 0.05  # how long the recorder waits for more outcomes before writing a batch
_RECORD_MAX = 512
_CONTROLS_EVERY_S = 2.0  # how often a worker reads which models the run holds back (quarantine, pause)
_BEAT_MAX_S = 5.0  # the longest pause between heartbeats
#: A worker whose heartbeat is older than this (or three of its beats, if less) is gone: others take its jobs.
STALE_AFTER_S = 15.0


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class WorkStats:
    """What one worker did; shown by the progress bar and returned at the end."""

    done: int = 0
    failed: int = 0
    retried: int = 0
    waited: int = 0  # jobs handed back because their model was down (no attempt spent)
    runner_errors: int = 0  # jobs handed back because the runner's own code failed on them (a bug)
    cache_hits: int = 0
    calls: int = 0
    requests: int = 0
    cost_usd: float = 0.0
    started: float = field(default_factory=time.monotonic)
    handed_over: bool = False  # stopped by SIGTERM: unstarted jobs given back, the process may be requeued
    given_up: dict[str, str] = field(default_factory=dict)  # models down too long: their last error
    over_budget: dict[str, str] = field(default_factory=dict)  # budget scopes found spent

    def add(self, other: WorkStats) -> None:
        """Add another stage's counts to these."""
        for name in ("done", "failed", "retried", "waited", "runner_errors", "cache_hits", "calls",
                     "requests", "cost_usd"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.handed_over = self.handed_over or other.handed_over
        self.given_up.update(other.given_up)
        self.over_budget.update(other.over_budget)


class _Question(NamedTuple):
    """An open-loop question job with what it needs: its model, its item and the call it makes."""

    job: Job
    model: ModelSpec
    item: dict[str, Any]
    call: QuestionCall


@dataclass
class _Outcome:
    """What became of one claimed job: a result, a failed attempt, or (the model was down) nothing."""

    job: Job
    result: dict[str, Any] | None = None
    failure: Failure | None = None
    cache_entry: CacheEntry | None = None
    down: bool = False  # the model was down: the job goes back to the queue with its attempt unspent
    quarantine: str | None = None  # the model failed fatally (what to fix): the job goes back, unspent
    held_back: bool = False  # the model is quarantined or paused: the job goes back unstarted
    bug: bool = False  # the runner's own code failed on it (logged): the job goes back, unspent
    given_back: bool = False  # the worker is stopping: the unstarted job goes back at once


class Worker:
    """Works one run's queue until no job is left (or it is told to stop)."""

    def __init__(
        self,
        config: SweepConfig,
        queue: Queue,
        client: ModelClient,
        items: dict[tuple[str, str], dict[str, Any]],
        *,
        cache: CacheStore,
        worker_id: str | None = None,
        on_progress: Callable[[WorkStats], None] | None = None,
        limiters: Limiters | None = None,
    ) -> None:
        self.config = config
        self.queue = queue
        self.client = client
        self.items = items
        self.id = worker_id or new_worker_id()
        self.stats = WorkStats()
        self.stopping = anyio.Event()
        self.runner_errors = RunnerErrors(config.output, self.id)
        self._grace: float | None = None  # set by a hand-over: how long calls in flight may still run
        self._callers: anyio.CancelScope | None = None
        self._claims_over = anyio.Event()
        self._on_progress = on_progress
        self._limiters = limiters
        self._models: dict[str, ModelSpec] = {m.id: m for m in config.models}
        self._cache = CacheMode(config.cache.policy)
        self._settings = config.workers
        self.budget = BudgetGuard(config, queue) if config.budget is not None else None
        self.calls = CachedCalls(cache, client, config.cache.policy, budget=self.budget)
        self._requests: dict[str, _Question] = {}  # questions looked up in the cache, waiting for a caller
        self._held: set[str] = set()  # job ids claimed and not yet recorded
        self._parked: dict[str, Job] = {}  # held episodes that wait for a down model
        self._unfinished = 0  # jobs claimed and not yet started (waiting for a caller)
        self._running = 0  # jobs a caller is working on
        self.batches: BatchLane | None = None  # provider batches, when some model has them (run/batches.py)
        if any(m.batch is not None for m in config.models):
            self.batches = BatchLane(
                queue, self.id, self._models, items, client.secrets, self._settings,
                unhold=self._held.difference_update, on_recorded=self._batch_recorded,
                store=self.calls.store,
            )  # fmt: skip
        self.held_back: dict[str, ModelControl] = {}  # models the run holds back, as last read
        self._controls_read = -math.inf
        self._quarantined: dict[str, str] = {}  # models this worker found fatally failing: what to fix
        self._reported: set[str] = set()  # of those, the ones written to the queue
        self._spent: dict[str, str] = {}  # models whose budget is spent: the scope
        self._invalid = InvalidAnswers(
            self._settings.quarantine_invalid_share, self._settings.quarantine_min_answers
        )
        self.on_quarantine: Callable[[str, str], None] | None = (
            None  # told of each model this worker quarantines
        )

    # -- the job ------------------------------------------------------------------------------------------

    def _request(self, job: Job) -> _Question:
        known = self._requests.pop(job.id, None)
        if known is not None:
            return known
        model = self._models[job.model_id]
        item = self.items[(job.scenario_id, job.item)]
        return _Question(job, model, item, question_call(model, item))

    def _row(self, job: Job, item: dict[str, Any], response: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return answer_row(
            model_id=job.model_id, qhash=job.item, item=item, response=response, attempts=job.attempts, **kw
        )

    async def _execute(self, job: Job) -> _Outcome:
        """Work one job; an exception of the runner's own code is a bug: logged, the job goes back."""
        try:
            return await self._execute_job(job)
        except KnowwhenError:
            raise  # a known error of the run (its database gone, say): it ends the process with its sentence
        except Exception as exc:
            self.runner_errors.note(job.id, exc)
            if self.runner_errors.too_many:
                self.stop()
            return _Outcome(job, bug=True)

    async def _execute_job(self, job: Job) -> _Outcome:
        if job.payload.get("kind") == "episode":
            return await self._execute_episode(job)
        q = self._request(job)
        model, item = q.model, q.item
        try:
            got = await self.calls.call(
                model, q.call.kind, q.call.body, key=q.call.key, lookup=False, defer_write=True
            )
        except ProviderError as exc:
            return self._failed(job, exc)
        row = self._row(
            job,
            item,
            got.response,
            requests=got.requests,
            wall_ms=got.wall_ms,
            cache_hit=got.cache_hit,
            errors=got.errors,
        )
        return _Outcome(job, result=row, cache_entry=got.cache_entry)

    def _failed(self, job: Job, exc: ProviderError) -> _Outcome:
        if exc.kind == "down":
            return _Outcome(job, down=True)
        if isinstance(exc, BudgetSpent) and self.budget is not None:
            self.stats.over_budget.setdefault(exc.scope, str(exc))
            for model_id in self.budget.models_under(exc.scope):
                self._spent.setdefault(model_id, exc.scope)
            return _Outcome(job, held_back=True)
        reason = quarantine_reason(self._models[job.model_id], exc)
        if reason is not None:
            self._quarantined.setdefault(job.model_id, reason)  # stop calling it now, not once recorded
            return _Outcome(job, quarantine=reason)
        final = exc.kind == "fatal" or job.attempts >= self._settings.max_attempts
        return _Outcome(job, failure=Failure(job.id, str(exc), kind=exc.kind, final=final))

    async def _execute_episode(self, job: Job) -> _Outcome:
        from .episode import EpisodeContext, run_episode

        ctx = EpisodeContext(models=self._models, items=self.items, calls=self.calls, job=job)
        try:
            result = await run_episode(ctx)
        except ProviderError as exc:
            return self._failed(job, exc)
        return _Outcome(job, result=result)

    # -- the loops ------------------------------------------------------------------------------------------

    async def run(self) -> WorkStats:
        """Work until the queue is empty or ``stop()``; returns what was done."""
        await self.queue.register_worker(self.id)
        jobs_send, jobs_recv = anyio.create_memory_object_stream[Job](math.inf)
        out_send, out_recv = anyio.create_memory_object_stream[_Outcome](math.inf)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._heartbeat_loop, tg)
                tg.start_soon(self._record_loop, out_recv, tg)
                tg.start_soon(self._abandon_after_grace)
                if self.batches is not None:
                    tg.start_soon(self.batches.run)
                async with anyio.create_task_group() as callers:
                    self._callers = callers.cancel_scope
                    for _ in range(self._settings.concurrency):
                        callers.start_soon(self._call_loop, jobs_recv.clone(), out_send.clone())
                    callers.start_soon(self._give_back_loop, jobs_recv.clone(), out_send.clone())
                    jobs_recv.close()
                    await self._claim_loop(jobs_send, out_send.clone())
                    self._claims_over.set()
                out_send.close()
        finally:
            with anyio.CancelScope(shield=True):
                if self._held:
                    await self.queue.release(self.id, sorted(self._held))
                await self.queue.stop_worker(self.id)
        self.stats.given_up = self.given_up()
        return self.stats

    def stop(self) -> None:
        """Stop claiming; calls in flight finish and are recorded."""
        self.stopping.set()

    def hand_over(self, grace_s: float) -> None:
        """SIGTERM: stop claiming, give unstarted jobs back now, abandon calls still running after
        ``grace_s`` (their jobs go back too); what finished in time is recorded."""
        self.stats.handed_over = True
        self._grace = grace_s
        self.stop()

    async def _abandon_after_grace(self) -> None:
        await self.stopping.wait()
        if self._grace is None:
            return
        await anyio.sleep(self._grace)
        if self._callers is not None:
            self._callers.cancel()  # calls still in flight are abandoned; their jobs are released at exit

    async def _give_back_loop(self, jobs: Any, outcomes: Any) -> None:
        """Once stopping, jobs claimed and not started go back at once (not when the calls in flight end)."""
        async with jobs, outcomes:
            async with anyio.create_task_group() as either:  # stopping, or claiming ended by itself

                async def until(event: anyio.Event) -> None:
                    await event.wait()
                    either.cancel_scope.cancel()

                either.start_soon(until, self.stopping)
                either.start_soon(until, self._claims_over)
            if not self.stopping.is_set():
                return  # the queue is finished: the callers work what is left
            async for job in jobs:
                self._unfinished -= 1
                await outcomes.send(_Outcome(job, given_back=True))

    def _held_back_models(self) -> dict[str, str]:
        """Models whose jobs this worker leaves pending, with why: held back by the run (quarantined or
        paused), quarantined by this worker, or over budget."""
        held = {model_id: control.reason for model_id, control in self.held_back.items()}
        return {**held, **self._quarantined, **self._spent}

    def _busy_models(self) -> frozenset[str]:
        """Models not to claim jobs for now: saturated, paused, down and being probed, or given up."""
        busy = set(self._held_back_models())
        if self._limiters is None:
            return frozenset(busy)
        for model_id in self._models:
            lim = self._limiters[model_id]
            saturated = lim.waiting >= 2 * lim.max_in_flight or lim.paused_for() > 1.0
            if saturated or (lim.down() and (not lim.may_probe() or lim.gave_up())):
                busy.add(model_id)
        return frozenset(busy)

    def _episode_models(self, job: Job) -> list[str]:
        payload = job.payload
        return [m for m in (payload.get("agent"), payload.get("decision_model"), job.model_id) if m]

    def _waits_for_a_down_model(self, job: Job) -> bool:
        """An episode that would meet a down model it may not probe now, or one given up on."""
        if self._limiters is None or job.payload.get("kind") != "episode":
            return False
        limiters = [self._limiters[m] for m in self._episode_models(job) if m in self._models]
        return any(lim.down() and (not lim.may_probe() or lim.gave_up()) for lim in limiters)

    def _abandoned(self, gone: dict[str, str]) -> int:
        """Parked episodes counted under a model still worked but waiting for one given up on."""
        return sum(
            job.model_id not in gone and any(m in gone for m in self._episode_models(job))
            for job in self._parked.values()
        )

    def _next_probe_in(self) -> float:
        """Seconds until the first down model may be probed again (bounded: 0.2 to 2 s)."""
        assert self._limiters is not None
        waits = [self._limiters[m].paused_for() for m in self._models if self._limiters[m].down()]
        return min(2.0, max(0.2, min(waits, default=0.2)))

    def given_up(self) -> dict[str, str]:
        """Models this worker stopped waiting for (down too long), with their last error."""
        return self._limiters.given_up() if self._limiters is not None else {}

    async def _claim_loop(self, jobs: Any, outcomes: Any) -> None:
        size, lease = self._settings.batch_size, self._settings.lease_seconds
        concurrency = self._settings.concurrency
        prefetch = 0  # until a claim shows questions: a batch waiting behind the callers keeps them busy
        async with jobs, outcomes:
            while not self.stopping.is_set():
                await self._read_controls()
                # Jobs claimed and not started, plus jobs running, stay within what the callers can start
                # soon; results waiting for the recorder (on a shared database its writes wait for other
                # processes) count only up to a bound. Slow jobs (episodes) get no prefetch at all, so a
                # worker never sits on leased episodes that another worker could be running.
                room = min(
                    concurrency + prefetch - self._unfinished - self._running,
                    _RECORD_MAX + concurrency + prefetch - len(self._held),
                )
                if room <= 0:
                    await anyio.sleep(0.005)
                    continue
                await self._unpark(outcomes)
                claimed = await self.queue.claim(self.id, min(size, room), lease, self._busy_models())
                if claimed:
                    slow = any(job.payload.get("kind") == "episode" for job in claimed)
                    prefetch = 0 if slow else size
                self._held.update(j.id for j in claimed)
                crashpoint("claim")
                # An episode whose agent (or decider) is down cannot start: it is parked here, leased but
                # off the callers (so it is neither replayed nor claimed again at once), until its model
                # may be probed; other work goes on meanwhile.
                for job in claimed:
                    if self._waits_for_a_down_model(job):
                        self._parked[job.id] = job
                claimed = [job for job in claimed if job.id not in self._parked]
                self._unfinished += len(claimed)
                if not claimed:
                    if len(self._held) > len(self._parked):
                        await anyio.sleep(0.02)
                        continue
                    if self._limiters is not None:
                        await self._limiters.settle()  # others may still work: let them have our permits
                    if await self._queue_finished():
                        return
                    await anyio.sleep(self._next_probe_in() if self._parked else 0.5)
                    continue
                await self._dispatch(claimed, jobs, outcomes)

    async def _unpark(self, outcomes: Any) -> None:
        """Parked episodes whose models may be probed again go back to the queue for whoever is free."""
        ready = [job for job in self._parked.values() if not self._waits_for_a_down_model(job)]
        for job in ready:
            del self._parked[job.id]
            await outcomes.send(_Outcome(job, down=True))

    async def _dispatch(self, claimed: list[Job], jobs: Any, outcomes: Any) -> None:
        """Answer cache hits at once; send the rest to the callers."""
        if not self._cache.read:
            self.client.preload()
            for job in claimed:
                await jobs.send(job)
            return
        questions = []
        for job in claimed:
            if job.payload.get("kind") == "question":
                questions.append(job)
            else:  # episodes look their calls up one by one
                self.client.preload()
                await jobs.send(job)
        requests = [self._request(job) for job in questions]
        hits = await self.calls.lookup(
            [Lookup(q.model, q.call.kind, q.call.body, q.call.key) for q in requests]
        )
        for q in requests:
            response = hits.get(q.call.key)
            if response is None and self.batches is not None and await self.batches.takes(q.job):
                self.client.preload()
                self._unfinished -= 1
                self.batches.add(q.job, q.call)  # answered when its provider batch is (run/batches.py)
                continue
            if response is None:
                self.client.preload()  # a real call is coming: start the slow import now
                self._requests[q.job.id] = q
                await jobs.send(q.job)
                continue
            self.calls.tally.cache_hits += 1
            self._unfinished -= 1
            row = self._row(q.job, q.item, response, requests=0, wall_ms=0.0, cache_hit=True)
            await outcomes.send(_Outcome(q.job, result=row))

    async def _read_controls(self, *, now: bool = False) -> None:
        """Learn which models the run holds back (every few seconds, or ``now``)."""
        if not now and time.monotonic() - self._controls_read < _CONTROLS_EVERY_S:
            return
        self._controls_read = time.monotonic()
        self.held_back = {c.model_id: c for c in await self.queue.controls()}

    async def _queue_finished(self) -> bool:
        """No job left that this worker could work (jobs of models given up on or held back stay pending)."""
        await self._read_controls(now=True)
        counts = await self.queue.counts()
        gone = {**self.given_up(), **self._held_back_models()}
        left = sum(c.n for c in counts if c.status in ("pending", "running") and c.model_id not in gone)
        return left <= self._abandoned(gone)

    async def _call_loop(self, jobs: Any, outcomes: Any) -> None:
        async with jobs, outcomes:
            async for job in jobs:
                self._unfinished -= 1
                if self.stopping.is_set():
                    await outcomes.send(_Outcome(job, given_back=True))  # not started: back at once
                    continue
                if job.model_id in self._held_back_models():
                    await outcomes.send(_Outcome(job, held_back=True))
                    continue
                self._running += 1
                try:
                    outcome = await self._execute(job)
                finally:
                    self._running -= 1
                crashpoint("call")
                await outcomes.send(outcome)

    async def _record_loop(self, outcomes: Any, tg: TaskGroup) -> None:
        ended = False
        async with outcomes:
            while not ended:
                try:
                    batch = [await outcomes.receive()]
                except anyio.EndOfStream:
                    break
                # Gather what arrives in the next few milliseconds too: one transaction per batch, and
                # on a database shared by several processes every transaction waits for the others.
                with anyio.move_on_after(_RECORD_LINGER_S):
                    while len(batch) < _RECORD_MAX:
                        try:
                            batch.append(await outcomes.receive())
                        except anyio.EndOfStream:
                            ended = True
                            break
                await self._record(batch)
        tg.cancel_scope.cancel()  # everything recorded: stop the heartbeat

    async def _record(self, batch: list[_Outcome]) -> None:
        with anyio.CancelScope(shield=True):  # a recorded call must not be lost to a cancel
            entries = [o.cache_entry for o in batch if o.cache_entry is not None]
            results = [(o.job.id, o.result) for o in batch if o.result is not None]
            failures = [o.failure for o in batch if o.failure is not None]
            # Responses first: a kill between the two finds them in the cache when the jobs run again.
            await self.calls.store.put(entries, overwrite=self._cache.overwrite)
            await self.queue.record(self.id, results, failures)
            waiting = [
                o.job.id for o in batch if o.down or o.held_back or o.quarantine or o.bug or o.given_back
            ]
            if waiting:
                await self.queue.release(self.id, waiting)
            await self._quarantine(batch)
        tally = self.calls.tally
        self.stats.calls, self.stats.requests, self.stats.cache_hits = (
            tally.calls,
            tally.requests,
            tally.cache_hits,
        )
        for o in batch:
            self._held.discard(o.job.id)
            if o.result is not None:
                self.stats.done += 1
                cost = o.result.get("cost_usd") or 0.0  # an episode's is {"decision": x, "llm": y}
                self.stats.cost_usd += sum(cost.values()) if isinstance(cost, dict) else cost
            elif o.failure is not None and o.failure.final:
                self.stats.failed += 1
            elif o.bug:
                self.stats.runner_errors += 1
            elif o.given_back:
                pass
            elif o.down or o.quarantine or o.held_back:
                self.stats.waited += 1
            else:
                self.stats.retried += 1
        if self._on_progress:
            self._on_progress(self.stats)

    def _batch_recorded(self, rows: list[dict[str, Any]], failed: int) -> None:
        """Count answers recorded from a provider batch (and its lines failed for good)."""
        self.stats.done += len(rows)
        self.stats.failed += failed
        self.stats.cost_usd += sum(r.get("cost_usd") or 0.0 for r in rows)
        if self._on_progress:
            self._on_progress(self.stats)

    async def _quarantine(self, batch: list[_Outcome]) -> None:
        """Quarantine the models of this batch that failed fatally or answered invalidly too often."""
        reasons: dict[str, str] = {}
        for o in batch:
            if o.quarantine is not None:
                reasons.setdefault(o.job.model_id, o.quarantine)
            elif o.result is not None and o.job.payload.get("kind") == "question":
                why = self._invalid.add(o.job.model_id, bool(o.result.get("valid")), o.result.get("error"))
                if why is not None:
                    self._quarantined.setdefault(o.job.model_id, why)
                    reasons.setdefault(o.job.model_id, why)
        for model_id, reason in reasons.items():
            if model_id in self._reported:
                continue
            self._reported.add(model_id)
            if await self.queue.set_control(model_id, "quarantined", reason) and self.on_quarantine:
                self.on_quarantine(model_id, reason)
        if reasons:
            await self._read_controls(now=True)

    async def _heartbeat_loop(self, tg: TaskGroup) -> None:
        """Keep this worker's leases alive, and take back the jobs of workers whose heartbeat is stale."""
        interval = min(_BEAT_MAX_S, max(0.5, self._settings.lease_seconds / 3))
        stale = min(STALE_AFTER_S, 3 * interval)
        beat = judge_from = time.monotonic()
        while True:
            await anyio.sleep(interval)
            await self.queue.heartbeat(self.id, self._settings.lease_seconds)  # waits out a database outage
            last, beat = beat, time.monotonic()
            if beat - last > stale:  # our own beats were late (the database was away): others' are too
                judge_from = beat + stale
            if beat >= judge_from:
                await self.queue.requeue_expired(stale_after_s=stale)
