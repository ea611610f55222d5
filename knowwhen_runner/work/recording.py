"""The worker's recorder and heartbeat: outcomes written in batches, leases kept alive, stale jobs taken back.

A mixin of ``Worker`` (``worker.py``), which it shares its attributes with: the recorder writes cache
entries, then results and failures, in one batch of whatever arrived within ``_RECORD_LINGER_S``, gives
back the jobs that wait, and quarantines models; the heartbeat renews this worker's leases and returns the
jobs of workers not heard from for ``STALE_AFTER_S``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from ..config import WorkerSettings
from ..jobs import job_spend
from ..provider import CacheMode
from ..queue import WorkerQueue
from .calls import CachedCalls
from .holds import Holds
from .outcome import Outcome, WorkStats
from .screen_pace import ScreenPace

__all__ = ["STALE_AFTER_S", "RecordLoops"]

_RECORD_LINGER_S = 0.05  # how long the recorder waits for more outcomes before writing a batch
_RECORD_MAX = 512
_BEAT_MAX_S = 5.0  # the longest pause between heartbeats
#: A worker whose heartbeat is older than this (or three of its beats, if less) is gone: others take its jobs.
STALE_AFTER_S = 15.0


class RecordLoops:
    """The record and heartbeat loops of ``Worker``."""

    id: str
    queue: WorkerQueue
    stats: WorkStats
    calls: CachedCalls
    holds: Holds
    _cache: CacheMode
    _settings: WorkerSettings
    _held: set[str]
    pace: ScreenPace | None
    _on_progress: Callable[[WorkStats], None] | None

    async def _record_loop(self, outcomes: MemoryObjectReceiveStream[Outcome], tg: TaskGroup) -> None:
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

    async def _record(self, batch: list[Outcome]) -> None:
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
        self.stats.calls, self.stats.requests, self.stats.cache_hits, self.stats.cost_usd = (
            tally.calls,
            tally.requests,
            tally.cache_hits,
            tally.spent_usd,
        )
        if self.pace is not None:  # the screen looks at what was just recorded
            answered = {o.job.id for o in batch if o.result is not None or (o.failure and o.failure.final)}
            self.pace.left(answered, [o.job.id for o in batch if o.job.id not in answered])
        for o in batch:
            self._held.discard(o.job.id)
            if o.result is not None:
                self.stats.done += 1
            elif o.failure is not None and o.failure.final:
                self.stats.failed += 1
            elif o.bug:
                self.stats.runner_errors += 1
            elif o.given_back:
                pass
            elif o.down or o.quarantine or o.held_back:
                self.stats.waited += 1
                cause = o.cause or "down"
                self.stats.waited_for[cause] = self.stats.waited_for.get(cause, 0) + 1
            else:
                self.stats.retried += 1
        if self._on_progress:
            self._on_progress(self.stats)

    def _batch_recorded(self, rows: list[dict[str, Any]], failed: int) -> None:
        """Count answers recorded from a provider batch (and its lines failed for good)."""
        self.stats.done += len(rows)
        self.stats.failed += failed
        self.calls.tally.spent_usd += sum(job_spend(r) for r in rows)  # a batch's lines are calls made now
        self.stats.cost_usd = self.calls.tally.spent_usd
        if self._on_progress:
            self._on_progress(self.stats)

    async def _quarantine(self, batch: list[Outcome]) -> None:
        """Quarantine the models of this batch that failed fatally or answered invalidly too often."""
        reasons: dict[str, str] = {}
        for o in batch:
            if o.quarantine is not None:
                reasons.setdefault(o.quarantined or o.job.model_id, o.quarantine)
            elif o.result is not None and o.job.kind == "question":
                why = self.holds.answered(o.job.model_id, bool(o.result.get("valid")), o.result.get("error"))
                if why is not None:
                    reasons.setdefault(o.job.model_id, why)
        await self.holds.report(reasons)

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
