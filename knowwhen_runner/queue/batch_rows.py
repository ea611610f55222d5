"""Provider batches as the queue keeps them: a row per batch, its jobs parked under the batch.

A batch is written (``batch_open``, status ``submitting``) before the provider is asked to create it, then
given the provider's id (``submitted``); whoever holds its lease polls it. Its jobs stay ``running`` with
``lease_owner = batch_owner(key)`` and ``lease_expires = PARKED_UNTIL``, so no claim hands them to another
worker while the provider has them; ``batch_take`` moves them back under a worker's lease to be recorded
(done, or returned to the queue) like any claimed job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["OPEN_BATCH", "PARKED_UNTIL", "BatchRecord", "batch_owner"]

PARKED_UNTIL = 1e18
"""Lease expiry of a job parked in a provider batch: no claim ever finds it expired."""
OPEN_BATCH = ("submitting", "submitted")
"""Statuses of a batch that still has to be polled (or, ``submitting``, found or submitted)."""


def batch_owner(key: str) -> str:
    """The ``lease_owner`` of the jobs parked in batch ``key``."""
    return f"batch:{key}"


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One provider batch of a run: its jobs, where it stands, and what became of its items."""

    key: str
    model_id: str
    job_ids: tuple[str, ...]
    status: str  # submitting | submitted | completed | expired | cancelled | failed | given_up
    provider_id: str | None = None
    owner: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)  # answered, failed, returned
    error: str | None = None
