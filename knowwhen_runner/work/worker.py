"""Workers: claim jobs in batches, answer them from the cache or the model, record results in batches.

One ``Worker`` per process runs an anyio task group: a claimer (asks the ``Scheduler`` how many jobs of
each limit group to keep in hand, leases them in one claim, answers cache hits at once), a task per
started job (it waits for its own model's limiter, never for a slot another model holds), a recorder
(writes cache entries, results and failures as soon as they arrive, batching whatever has piled up),
and a heartbeat that keeps leases alive (the recorder and the heartbeat are in ``recording.py``).
Identical calls needed by several jobs at once are made once.
Stopping (Ctrl-C): claiming stops, calls in flight finish, jobs that sent nothing yet go back at once; a
second Ctrl-C cancels the calls and releases their jobs too. A hand-over (SIGTERM, ``hand_over``) also
abandons the calls still running after ``workers.stop_grace_s``. A killed process loses nothing: its jobs
go back once its heartbeat is stale (``STALE_AFTER_S``), or its leases expire. What is held back
(quarantined, paused, over budget, parked) is asked of one ``Holds``. An exception of the runner's own
code on a job is a bug: logged (``RunnerErrors``), the job goes back unspent; only a provider's answer
fails a job. Jobs leased to this worker that it does not know it holds (a claim that committed but whose
reply was lost) go back when it is idle and when it exits, not when their lease runs out.
"""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..cache import CacheStore
from ..config import ModelSpec, SweepConfig
from ..crashpoints import crashpoint
from ..dataset.answer_rows import answer_row
from ..exceptions import KnowwhenError, OtherModel, ProviderError
from ..jobs import Items, Job
from ..provider import (
    FOR_JOB,
    REQUEST_STARTED,
    BatchTransport,
    CacheMode,
    Limiters,
    ModelClient,
    ModelFailing,
)
from ..provider.batch_client import BatchClient
from ..queue import Failure, WorkerQueue
from .batch_lane import BatchLane
from .budget import BudgetGuard, BudgetSpent
from .calls import CachedCalls, Lookup, question_call
from .handover import Stopping
from .holds import Holds
from .lanes import Lanes
from .outcome import Outcome, Outcomes, QuestionJob, WorkStats
from .quarantine import quarantine_reason
from .recording import STALE_AFTER_S, RecordLoops
from .runner_errors import RunnerErrors
from .screen_pace import ScreenPace
from .start_together import start_together

__all__ = ["STALE_AFTER_S", "WorkStats", "Worker", "new_worker_id"]

_LOST_EVERY_S = 2.0  # how often an idle worker looks for jobs leased to it that it does not hold


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker(RecordLoops):
    """Works one run's queue until no job is left (or it is told to stop)."""

    def __init__(
        self,
        config: SweepConfig,
        queue: WorkerQueue,
        client: ModelClient,
        items: Items,
        *,
        cache: CacheStore,
        worker_id: str | None = None,
        on_progress: Callable[[WorkStats], None] | None = None,
        on_quarantine: Callable[[str, str], None] | None = None,
        on_set_aside: Callable[[str, str | None], None] | None = None,
        limiters: Limiters | None = None,
        batch_transport: BatchTransport | None = None,
        start_together: int = 0,
        pace: ScreenPace | None = None,
    ) -> None:
        self.config = config
        self.pace = pace  # a screened run: claims kept one window ahead of the screen's looks
        self.queue = queue
        self.client = client
        self.items = items
        self.id = worker_id or new_worker_id()
        self.stats = WorkStats()
        self.stopping = Stopping()
        self.runner_errors = RunnerErrors(config.output, self.id)
        self._on_progress = on_progress
        self._together = start_together  # processes of a ``run --processes N`` that start claiming together
        self._limiters = limiters
        self._models: dict[str, ModelSpec] = {m.id: m for m in config.models}
        self._cache = CacheMode(config.cache.policy)
        self._settings = config.workers
        self.budget = BudgetGuard(config, queue.holding) if config.budget is not None else None
        self.calls = CachedCalls(cache, client, config.cache.policy, budget=self.budget)
        self.holds = Holds(
            queue.holding, self._models, self._settings, limiters, on_quarantine, client.failing, on_set_aside
        )
        self.lanes = Lanes(config.models, limiters, self._settings)
        self._requests: dict[str, QuestionJob] = {}  # questions looked up in the cache, waiting for a caller
        self._held: set[str] = set()  # job ids claimed and not yet recorded
        self._lost_at = -math.inf  # when this worker last looked for jobs leased to it but not held
        self._slots = anyio.CapacityLimiter(self._settings.concurrency or math.inf)
        self.batches: BatchLane | None = (
            None  # provider batches, when some model has them (work/batch_lane.py)
        )
        if any(m.batch is not None for m in config.models):
            self.batches = BatchLane(
                queue, self.id, self._models, items, client.secrets, self._settings,
                unhold=self._held.difference_update, on_recorded=self._batch_recorded,
                store=self.calls.store, client=BatchClient(batch_transport),
                new_batches=config.cache.policy == "read-write",  # docs/batches.md: cache policies
            )  # fmt: skip

    # -- the job ------------------------------------------------------------------------------------------

    def _request(self, job: Job) -> QuestionJob:
        known = self._requests.pop(job.id, None)
        if known is not None:
            return known
        model = self._models[job.model_id]
        item = self.items[(job.scenario_id, job.item)]
        return QuestionJob(job, model, item, question_call(model, item))

    def _row(self, job: Job, item: dict[str, Any], response: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return answer_row(
            model_id=job.model_id, qhash=job.item, item=item, response=response, attempts=job.attempts, **kw
        )

    async def _execute(self, job: Job) -> Outcome:
        """Work one job; an exception of the runner's own code is a bug: logged, the job goes back."""
        try:
            return await self._execute_job(job)
        except KnowwhenError:
            raise  # a known error of the run (its database gone, say): it ends the process with its sentence
        except Exception as exc:
            self.runner_errors.note(job.id, exc)
            if self.runner_errors.too_many:
                self.stop()
            return Outcome(job, bug=True)

    async def _execute_job(self, job: Job) -> Outcome:
        if job.kind == "episode":
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
        return Outcome(job, result=row, cache_entry=got.cache_entry)

    def _failed(self, job: Job, exc: ProviderError) -> Outcome:
        if exc.kind == "down":
            return Outcome(job, down=True, cause="set aside" if isinstance(exc, ModelFailing) else "down")
        if isinstance(exc, BudgetSpent) and self.budget is not None:
            self.stats.over_budget.setdefault(exc.scope, str(exc))
            self.holds.spend(exc.scope, self.budget.models_under(exc.scope))
            return Outcome(job, held_back=True, cause="over budget")
        if isinstance(exc, ModelFailing):  # quarantined by the run: the job's model, or an episode's agent
            self.holds.quarantine(exc.model_id, exc.reason)
            return Outcome(job, quarantine=exc.reason, quarantined=exc.model_id)
        if isinstance(exc, OtherModel):  # the job's model, or an episode's agent, answers as another
            why = quarantine_reason(self._models[exc.model_id], exc) or str(exc)
            self.holds.quarantine(exc.model_id, why)
            return Outcome(job, quarantine=why, quarantined=exc.model_id)
        reason = quarantine_reason(self._models[job.model_id], exc)
        if reason is not None:
            self.holds.quarantine(job.model_id, reason)  # stop calling it now, not once recorded
            return Outcome(job, quarantine=reason)
        final = exc.kind == "fatal" or job.attempts >= self._settings.max_attempts
        return Outcome(job, failure=Failure(job.id, str(exc), kind=exc.kind, final=final))

    async def _execute_episode(self, job: Job) -> Outcome:
        from .episode import EpisodeContext, run_episode  # start-up: the gym loads for a closed-loop job

        ctx = EpisodeContext(models=self._models, items=self.items, calls=self.calls, job=job)
        try:
            result = await run_episode(ctx)
        except ProviderError as exc:
            return self._failed(job, exc)
        return Outcome(job, result=result)

    # -- the loops ------------------------------------------------------------------------------------------

    async def run(self) -> WorkStats:
        """Work until the queue is empty or ``stop()``; returns what was done."""
        await self.queue.register_worker(self.id)
        out_send, out_recv = anyio.create_memory_object_stream[Outcome](math.inf)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._heartbeat_loop, tg)
                tg.start_soon(self._record_loop, out_recv, tg)
                tg.start_soon(self.stopping.abandon_after_grace)
                if self.batches is not None:
                    tg.start_soon(self.batches.run)
                async with out_send, anyio.create_task_group() as calls:
                    self.stopping.callers = calls.cancel_scope
                    await start_together(self.queue, self.id, self._together, self.stopping.is_set)
                    await self._claim_loop(calls, out_send)
        finally:
            with anyio.CancelScope(shield=True):
                if self._held:
                    await self.queue.release(self.id, sorted(self._held))
                await self.queue.release_unheld(self.id, frozenset())  # a claim's reply lost, say
                await self.holds.tell_set_aside()  # set aside at the last moment: status still names it
                await self.queue.stop_worker(self.id)
        self.stats.given_up = self.holds.given_up()
        self.stats.other_model = dict(self.client.other_models)
        self.stats.other_model_last = dict(self.client.other_names)
        return self.stats

    def stop(self) -> None:
        """Stop claiming; calls in flight finish and are recorded, jobs that sent nothing are released."""
        self.stopping.stop()

    def hand_over(self, grace_s: float) -> None:
        """SIGTERM: stop claiming, give unstarted jobs back now, abandon calls still running after
        ``grace_s`` (their jobs go back too); what finished in time is recorded."""
        self.stats.handed_over = True
        self.stopping.hand_over(grace_s)

    def given_up(self) -> dict[str, str]:
        """Models this worker stopped waiting for (down too long), with their last error."""
        return self.holds.given_up()

    async def _claim_loop(self, calls: TaskGroup, outcomes: Outcomes) -> None:
        lease = self._settings.lease_seconds
        while not self.stopping.is_set():
            await self.holds.refresh()
            await self.holds.tell_set_aside()
            for control in self.holds.controls.values():  # quarantined by any process: its calls stop here
                if control.state == "quarantined":
                    self.client.failing.quarantine(control.model_id, control.reason)
            await self._unpark(outcomes)
            in_hand = len(self._held) - len(self.holds.parked)  # parked episodes wait off the callers
            held = {**self.holds.gone(), **self.holds.resting()}  # set aside: claimed again for its probe
            room = self.pace.room() if self.pace is not None else {}
            if self.pace is not None:  # screened: a dropped model is held now, a full window until a look
                held.update(
                    {
                        **dict.fromkeys(self.pace.dropped, "screened"),
                        **{m: "" for m, n in room.items() if not n},
                    }
                )
            quotas = (
                self.lanes.quotas(held, self.holds.set_aside(), room) if in_hand < self.lanes.held_cap else []
            )
            claimed = await self.queue.claim_each(self.id, quotas, lease) if quotas else []
            self.lanes.claimed(quotas, claimed)
            if self.pace is not None:
                self.pace.claimed(claimed)
            self._held.update(j.id for j in claimed)
            crashpoint("claim")
            # An episode whose agent (or decider) is down cannot start: it is parked here, leased but
            # off the callers (so it is neither replayed nor claimed again at once), until its model
            # may be probed; other work goes on meanwhile.
            kept = self.holds.park(claimed)
            for job in claimed:
                if job.id in self.holds.parked:
                    self.lanes.left(job.model_id)  # parked: off its group's hand, which claims on
            claimed = kept
            if claimed:
                await self._dispatch(claimed, calls, outcomes)
            elif len(self._held) > len(self.holds.parked):
                await self.lanes.changed(0.05)  # work in hand: claim again when a job leaves it
            elif await self._idle():
                return

    async def _idle(self) -> bool:
        """Nothing in hand and nothing claimed: whether the queue is finished (else wait a little)."""
        if self._limiters is not None:
            await self._limiters.settle()  # others may still work: let them have our permits
        await self._release_lost()
        if await self._queue_finished():
            return True
        pause = self.holds.next_probe_in() if self.holds.parked else 0.5
        if self.pace is not None:
            await self.pace.next_look(pause)  # a screen's window frees up at its next look
        else:
            await anyio.sleep(pause)
        self.lanes.wake()
        return False

    async def _release_lost(self) -> None:
        """Jobs leased to this worker that it does not hold (a claim that committed but whose reply was
        lost) go back to the queue now (every few seconds at most), not when their lease runs out, which
        the heartbeat would put off for as long as the worker lives."""
        if self.batches is not None and self.batches.describe():
            return  # a batch being polled may have taken its jobs back under this worker's lease
        if time.monotonic() - self._lost_at < _LOST_EVERY_S:
            return
        self._lost_at = time.monotonic()
        await self.queue.release_unheld(self.id, frozenset(self._held))

    async def _unpark(self, outcomes: Outcomes) -> None:
        """Parked episodes whose models may be probed again go back to the queue for whoever is free."""
        for job in self.holds.unpark():
            await outcomes.send(Outcome(job, down=True, cause=self.holds.cause(job) or "down"))

    async def _dispatch(self, claimed: list[Job], calls: TaskGroup, outcomes: Outcomes) -> None:
        """Answer cache hits at once; start a task for each of the rest."""
        if not self._cache.read:
            self.client.preload()
            for job in claimed:
                calls.start_soon(self._call, job, outcomes)
            return
        questions = []
        for job in claimed:
            if job.kind == "question":
                questions.append(job)
            else:  # episodes look their calls up one by one
                self.client.preload()
                calls.start_soon(self._call, job, outcomes)
        requests = [self._request(job) for job in questions]
        hits = await self.calls.lookup(
            [Lookup(q.model, q.call.kind, q.call.body, q.call.key) for q in requests]
        )
        for q in requests:
            response = hits.get(q.call.key)
            if response is None and self.batches is not None and await self.batches.takes(q.job):
                self.client.preload()
                self.lanes.left(q.job.model_id)
                self.batches.add(q.job, q.call)  # answered when its provider batch is (work/batch_lane.py)
                if self.pace is not None:
                    self.pace.left((), [q.job.id])  # a batch answers when it answers: not paced
                continue
            if response is None:
                self.client.preload()  # a real call is coming: start the slow import now
                self._requests[q.job.id] = q
                calls.start_soon(self._call, q.job, outcomes)
                continue
            self.calls.tally.cache_hits += 1
            self.lanes.left(q.job.model_id, cache_hit=True)
            row = self._row(q.job, q.item, response, requests=0, wall_ms=0.0, cache_hit=True)
            await outcomes.send(Outcome(q.job, result=row))

    async def _queue_finished(self) -> bool:
        """No job left that this worker could work: jobs of models given up on or held back stay pending,
        and so do the episodes whose agent is (whichever process has them parked)."""
        await self.holds.refresh(now=True)
        counts = await self.queue.counts(open_only=True)
        gone = self.holds.gone()
        stuck = {
            s.id for s in self.config.scenarios if s.kind == "episodes" and self.config.agent_of(s).id in gone
        }
        return not any(
            c.n for c in counts
            if c.status in ("pending", "running") and c.model_id not in gone and c.scenario_id not in stuck
        )  # fmt: skip

    async def _call(self, job: Job, outcomes: Outcomes) -> None:
        """One started job: it waits for its own model's limiter; handed back untouched if the worker stops
        before it sent anything (``REQUEST_STARTED`` tells when it has)."""
        scope = self.stopping.unstarted(job.id)
        token = REQUEST_STARTED.set(lambda: self.stopping.sent(job.id))  # it sent: a stop leaves it be
        FOR_JOB.set(job.id)  # this task's own context: the model's failures are counted per job
        outcome: Outcome | None = None
        try:
            with scope:
                async with self._slots:  # workers.concurrency, when a user bounds it
                    if self.stopping.is_set():
                        return  # not started: given back below
                    if self.holds.holds_back(job):
                        outcome = Outcome(job, held_back=True, cause=self.holds.cause(job))
                    elif self.pace is not None and job.model_id in self.pace.dropped:
                        outcome = Outcome(job, held_back=True, cause="screened out")
                    else:
                        outcome = await self._execute(job)
        finally:
            self.stopping.sent(job.id)
            REQUEST_STARTED.reset(token)
            self.lanes.left(job.model_id)
        if outcome is None:  # stopped before it sent anything: back to the queue at once
            if self.stopping.is_set():
                await outcomes.send(Outcome(job, given_back=True))
            return
        crashpoint("call")
        await outcomes.send(outcome)
