"""The provider batch operations of ``MemoryQueue`` (the same contract as ``batch_table``)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ..jobs import Job
from .batch_rows import OPEN_BATCH, PARKED_UNTIL, BatchRecord, batch_owner

__all__ = ["MemoryBatches"]


class MemoryBatches:
    """Batch rows in a dict; jobs parked in the queue's own rows."""

    _rows: dict[str, Any]
    _batch_rows: dict[str, BatchRecord]
    _batch_leases: dict[str, float]

    def _init_batches(self) -> None:
        self._batch_rows = {}
        self._batch_leases = {}

    async def batch_open(
        self, worker: str, key: str, model_id: str, job_ids: list[str], lease_s: float
    ) -> int:
        n = 0
        for job_id in job_ids:
            row = self._rows.get(job_id)
            if row is not None and row.status == "running" and row.lease_owner == worker:
                row.lease_owner, row.lease_expires, n = batch_owner(key), PARKED_UNTIL, n + 1
        now = time.time()
        self._batch_rows[key] = BatchRecord(
            key, model_id, tuple(sorted(job_ids)), "submitting", owner=worker, created_at=now, updated_at=now
        )
        self._batch_leases[key] = now + lease_s
        return n

    async def batch_note(
        self,
        key: str,
        *,
        status: str | None = None,
        provider_id: str | None = None,
        counts: dict[str, int] | None = None,
        error: str | None = None,
    ) -> None:
        old = self._batch_rows.get(key)
        if old is None:
            return
        self._batch_rows[key] = replace(
            old,
            status=status or old.status,
            provider_id=provider_id or old.provider_id,
            counts=dict(counts) if counts is not None else old.counts,
            error=error or old.error,
            updated_at=time.time(),
        )

    async def batch_lease(self, worker: str, lease_s: float, model_ids: frozenset[str]) -> list[BatchRecord]:
        now, out = time.time(), []
        for key, rec in sorted(self._batch_rows.items(), key=lambda kv: kv[1].created_at):
            free = rec.owner in (None, worker) or self._batch_leases.get(key, 0.0) < now
            if rec.status in OPEN_BATCH and rec.model_id in model_ids and free:
                self._batch_rows[key] = rec = replace(rec, owner=worker)
                self._batch_leases[key] = now + lease_s
                out.append(rec)
        return out

    async def batch_take(self, worker: str, key: str, lease_s: float) -> list[Job]:
        until, out = time.time() + lease_s, []
        for row in sorted(self._rows.values(), key=lambda r: r.job.id):
            if row.status == "running" and row.lease_owner == batch_owner(key):
                row.lease_owner, row.lease_expires = worker, until
                out.append(replace(row.job, attempts=row.attempts))
        return out

    async def batches(self) -> list[BatchRecord]:
        return sorted(self._batch_rows.values(), key=lambda r: r.created_at)
