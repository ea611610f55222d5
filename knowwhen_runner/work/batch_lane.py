"""Open-loop LLM questions through provider Batch APIs: collect, submit once, poll, record.

A ``BatchLane`` runs beside a worker's callers when some model has ``batch`` enabled. The worker hands
it the claimed questions of such models that the cache did not answer; the lane gathers them per model
and submits a batch when it is full or has waited ``collect_s``. The batch is a row in the queue *before*
the provider is asked to create it (``batch_open`` parks its jobs under it), so any process polling later,
after a Ctrl-C, a kill -9 or on another machine, resumes the same batch: a row still ``submitting`` is
looked up at the provider by its key (``BatchClient.find``) and adopted, or its jobs return to the queue.
Finished batches are recorded like synchronous answers (same normalised responses, cache entries and
answer rows, marked with the batch); lines without an answer go back to the queue as a failed attempt
with their reason, to the next batch or, once ``fallback_after_s`` has passed since their first batch,
to the synchronous callers. A batch still running after ``fallback_after_s`` is cancelled.

No provider request is tried without bound: after ``batch.max_errors`` failed requests in a row for one
batch (a lookup whose list endpoint fails or is missing, a status or a file that cannot be read), the batch
is given up (``given_up``, with the last error as its reason; cancelled at the provider when its id is
known) and its questions go to the synchronous callers, never into another batch.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..cache import CacheEntry, CacheStore
from ..config import ModelSpec, WorkerSettings
from ..crashpoints import crashpoint
from ..dataset.answer_rows import answer_row
from ..exceptions import QueueError
from ..jobs import Items, Job
from ..provider import Secrets, classify
from ..provider.batch_client import BatchClient, BatchLine, BatchState, LineResult
from ..queue import BatchRecord, Failure, WorkerQueue
from .calls import QuestionCall, question_call

__all__ = ["BatchLane", "BatchStats"]

_TICK_S = 0.1


@dataclass
class BatchStats:
    """What this process's lane did with provider batches."""

    submitted: int = 0
    adopted: int = 0  # found at the provider after a process died before noting its id
    answered: int = 0
    returned: int = 0  # lines without an answer, sent back to the queue
    poll_errors: int = 0
    finished: dict[str, int] = field(default_factory=dict)  # provider status -> batches


@dataclass
class _Waiting:
    job: Job
    call: QuestionCall
    since: float


class BatchLane:
    """Provider batches for one worker process."""

    def __init__(
        self,
        queue: WorkerQueue,
        worker_id: str,
        models: dict[str, ModelSpec],
        items: Items,
        secrets: Secrets,
        settings: WorkerSettings,
        *,
        unhold: Callable[[list[str]], None],
        on_recorded: Callable[[list[dict[str, Any]], int], None],
        store: CacheStore,
        client: BatchClient | None = None,
        new_batches: bool = True,
    ) -> None:
        self._queue = queue  # outcomes are recorded by the queue
        self._batches = queue.batching  # the batches' rows, a store beside it
        self._store = store
        self._worker = worker_id
        # Every model with a ``batch`` section is polled (``enabled: false`` finishes its batches in flight);
        # only enabled ones get new questions.
        self._models = {mid: m for mid, m in models.items() if m.batch is not None}
        self._items = items
        self._secrets = secrets
        self._settings = settings
        self._unhold = unhold
        self._on_recorded = on_recorded
        self._client = client or BatchClient()
        # Only with cache policy read-write: a batch answer is written to the cache before it is recorded
        # and read back from it by a rerun after a kill between the two, so no other policy batches.
        self._new_batches = new_batches
        self._waiting: dict[str, list[_Waiting]] = {mid: [] for mid in self._models}
        self._waiting_ids: set[str] = set()
        self._sync_only: set[str] = set()  # questions whose batch the provider refused
        self._submitting: set[str] = set()
        self._created: set[str] = set()  # keys of batches this process created and noted (no lookup needed)
        self._first_batched: dict[str, float] = {}
        self._known_at = 0.0
        self._in_flight: list[BatchRecord] = []  # open batches seen by the last poll round
        self._errors: dict[str, int] = {}  # batch key -> provider requests failed in a row
        self.stats = BatchStats()

    # -- routing ----------------------------------------------------------------------------------

    async def takes(self, job: Job) -> bool:
        """Whether a claimed question goes to a batch (its model batches; it is not yet past its wait)."""
        model = self._models.get(job.model_id)
        if model is None or model.batch is None or not model.batches() or job.kind != "question":
            return False
        if not self._new_batches:
            return False
        if job.id in self._sync_only:
            return False
        if job.attempts <= 1:
            return True
        if time.time() - self._known_at > 2.0:  # a job back from a batch: how long since its first one?
            for rec in await self._batches.batches():
                for jid in rec.job_ids:
                    self._first_batched.setdefault(jid, rec.created_at)
            self._known_at = time.time()
        first = self._first_batched.get(job.id)
        return first is None or time.time() - first < model.batch.fallback_after_s

    def add(self, job: Job, call: QuestionCall) -> None:
        """Queue a question for its model's next batch (once: a claim may hand back a job already waiting)."""
        if job.id not in self._waiting_ids:
            self._waiting_ids.add(job.id)
            self._waiting[job.model_id].append(_Waiting(job, call, time.monotonic()))

    # -- the loops ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Submit and poll until cancelled (the worker cancels it once everything is recorded)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._submit_loop)
            tg.start_soon(self._poll_loop)

    async def _submit_loop(self) -> None:
        while True:
            now = time.monotonic()
            for mid, waiting in self._waiting.items():
                spec = self._models[mid].batch
                assert spec is not None
                while waiting and (
                    len(waiting) >= spec.max_requests or now - waiting[0].since >= spec.collect_s
                ):
                    chunk, waiting[:] = waiting[: spec.max_requests], waiting[spec.max_requests :]
                    await self._submit(self._models[mid], chunk)
            await anyio.sleep(_TICK_S)

    async def _submit(self, model: ModelSpec, chunk: list[_Waiting]) -> None:
        key = uuid.uuid4().hex
        ids = [w.job.id for w in chunk]
        self._waiting_ids.difference_update(ids)
        self._submitting.add(key)
        try:
            with anyio.CancelScope(shield=True):
                await self._batches.batch_open(self._worker, key, model.id, ids, self._settings.lease_seconds)
            self._unhold(ids)  # parked under the batch: no longer this worker's to heartbeat or release
            crashpoint("batch_open")
            lines = [BatchLine(w.job.id, self._client.request_body(model, w.call.body)) for w in chunk]
            try:
                provider_id = await self._client.submit(model, key, lines, self._secrets.key_for(model))
            except Exception as exc:
                error = self._secrets.redact(f"submit: {str(exc).strip()}")[:308]  # cut after: no half secret
                if classify(exc).kind == "fatal":  # refused (4xx): never created, and no use trying again
                    self._sync_only.update(ids)
                    await self._give_back(key, f"batch refused: {error}", "failed", time.time())
                    return
                # Unknown whether the provider made it (a timeout, a 5xx): the poll loop finds out.
                await self._batches.batch_note(key, error=error)
                return
            crashpoint("batch_submit")
            with anyio.CancelScope(shield=True):
                await self._batches.batch_note(key, status="submitted", provider_id=provider_id)
            self._created.add(key)
            self.stats.submitted += 1
        finally:
            self._submitting.discard(key)

    async def _poll_loop(self) -> None:
        every = min(m.batch.poll_s for m in self._models.values() if m.batch is not None)
        ids = frozenset(self._models)
        while True:
            leased = await self._batches.batch_lease(self._worker, self._settings.lease_seconds, ids)
            self._in_flight = leased
            for rec in leased:
                if rec.key in self._submitting or (rec.status == "submitting" and rec.key in self._created):
                    continue  # being submitted, or leased before its id was noted: the next round has it
                try:
                    await self._poll(self._models[rec.model_id], rec)
                    self._errors.pop(rec.key, None)
                except QueueError:  # the run's database, not the provider: no count toward giving up
                    self.stats.poll_errors += 1
                except Exception as exc:  # a 5xx, a timeout: try again next round, up to the bound
                    self.stats.poll_errors += 1
                    await self._poll_failed(self._models[rec.model_id], rec, exc)
            if leased:
                self._on_recorded([], 0)  # refresh the progress display (batches in flight, their age)
            await anyio.sleep(every)

    def describe(self) -> str:
        """Batches this process is polling, for the progress display: how many, items, the oldest's age."""
        if not self._in_flight:
            return ""
        items = sum(len(r.job_ids) for r in self._in_flight)
        oldest = time.time() - min(r.created_at for r in self._in_flight)
        return f"{len(self._in_flight)} provider batches in flight ({items} questions, oldest {oldest:.0f}s)"

    async def _poll(self, model: ModelSpec, rec: BatchRecord) -> None:
        key = self._secrets.key_for(model)
        if rec.status == "submitting":
            found = await self._client.find(model, rec.key, key, since=rec.created_at)
            if (
                found is None
            ):  # never created: its jobs go back to the queue (an attempt spent: no endless loop)
                why = f"batch never created ({rec.error})" if rec.error else "batch never created"
                await self._give_back(rec.key, why, "failed", rec.created_at)
                return
            await self._batches.batch_note(rec.key, status="submitted", provider_id=found)
            self.stats.adopted += 1
            return
        assert rec.provider_id is not None and model.batch is not None
        state = await self._client.retrieve(model, rec.provider_id, key)
        if not state.finished:
            if time.time() - rec.created_at > model.batch.fallback_after_s and state.status != "cancelling":
                await self._client.cancel(model, rec.provider_id, key)
            return
        lines = await self._client.results(model, state, key)
        await self._record(model, rec, state, lines)

    async def _poll_failed(self, model: ModelSpec, rec: BatchRecord, exc: Exception) -> None:
        """Note a failed provider request for ``rec``; at ``max_errors`` in a row, give the batch up."""
        assert model.batch is not None
        limit = model.batch.max_errors
        n = self._errors[rec.key] = self._errors.get(rec.key, 0) + 1
        what = "lookup" if rec.provider_id is None else "poll"
        if what == "lookup" and classify(exc).kind == "fatal":  # no list endpoint (a 4xx): it will not come
            n = limit
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        reason = self._secrets.redact(f"{what} failed {n}/{limit}: {detail}")[:500]
        if n < limit:
            await self._batches.batch_note(rec.key, error=reason)
            return
        self._errors.pop(rec.key, None)
        if rec.provider_id is not None:  # ask once that it stop: its answers will never be read
            with contextlib.suppress(Exception):  # the provider is failing anyway: given up all the same
                await self._client.cancel(model, rec.provider_id, self._secrets.key_for(model))
        self._sync_only.update(rec.job_ids)
        await self._give_back(rec.key, f"batch given up: {reason}", "given_up", rec.created_at)

    async def _give_back(self, key: str, reason: str, status: str, since: float) -> None:
        """Return a batch's parked jobs to the queue as a failed attempt with ``reason``; close the batch."""
        jobs = await self._batches.batch_take(self._worker, key, self._settings.lease_seconds)
        limit = self._settings.max_attempts
        failures = [Failure(j.id, reason, kind="batch", final=j.attempts >= limit) for j in jobs]
        for job in jobs:
            self._first_batched.setdefault(job.id, since)
        with anyio.CancelScope(shield=True):
            await self._queue.record(self._worker, [], failures)
            await self._batches.batch_note(key, status=status, counts={"returned": len(jobs)}, error=reason)
        self.stats.returned += len(jobs)
        self._on_recorded([], sum(f.final for f in failures))

    async def _record(
        self, model: ModelSpec, rec: BatchRecord, state: BatchState, lines: list[LineResult]
    ) -> None:
        by_id = {ln.custom_id: ln for ln in lines}
        jobs = await self._batches.batch_take(self._worker, rec.key, self._settings.lease_seconds)
        if not jobs:  # another poller recorded it first (a lease that ran out mid-poll): just close it
            await self._batches.batch_note(rec.key, status=state.status)
            return
        wall_ms = (time.time() - rec.created_at) * 1000
        results: list[tuple[str, dict[str, Any]]] = []
        failures: list[Failure] = []
        entries: list[CacheEntry] = []
        for job in jobs:
            line = by_id.get(job.id)
            if line is not None and line.response is not None:
                item = self._items[(job.scenario_id, job.item)]
                row = answer_row(
                    model_id=job.model_id,
                    qhash=job.item,
                    item=item,
                    response=line.response,
                    attempts=job.attempts,
                    requests=1,
                    wall_ms=wall_ms,
                    cache_hit=False,
                )
                row["batch"] = state.provider_id
                results.append((job.id, row))
                entries.append(CacheEntry(question_call(model, item).key, model.model, line.response))
                continue
            self._first_batched.setdefault(job.id, rec.created_at)  # its wait counts from its first batch
            reason = line.error if line is not None and line.error else f"batch {state.status}: no answer"
            final = job.attempts >= self._settings.max_attempts
            failures.append(Failure(job.id, reason, kind="batch", final=final))
        with anyio.CancelScope(shield=True):
            # Responses first: a kill between the two finds them in the cache when the jobs run again.
            await self._store.put(entries)
            await self._queue.record(self._worker, results, failures)
            counts = {"answered": len(results), "returned": len(failures), "lines": len(lines)}
            await self._batches.batch_note(rec.key, status=state.status, counts=counts)
        self.stats.answered += len(results)
        self.stats.returned += len(failures)
        self.stats.finished[state.status] = self.stats.finished.get(state.status, 0) + 1
        self._on_recorded([r for _, r in results], sum(f.final for f in failures))
