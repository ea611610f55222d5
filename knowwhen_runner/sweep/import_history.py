"""Recording imported jobs as they happened: claimed as many times as their rows say, then done or failed.

An exported row says how many attempts its job took and, for a job that failed for good, its error and
the error's kind. ``record_history`` gives the queue that same record through its own operations: each
job is claimed once per attempt, every attempt but the last fails (not for good), and the last completes
with the row's result or fails for good with its error and kind. The queue then counts the attempts,
failures and kinds a finalise reads, as the exporting run's did. An attempt before the last left no
error in the row: it is recorded with a sentence that says so.

Claims take a model's pending jobs in id order; a run that already has other pending jobs of the same
model gets those back at once (``release``, which takes back the attempt the claim counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..queue import AttemptKind, ClaimQuota, Failure, Queue

__all__ = ["EARLIER_ATTEMPT", "Recorded", "attempts_of", "record_history"]

EARLIER_ATTEMPT = "an attempt before the last; its error is not in the exported row"
"""The error recorded for an imported job's attempts before its last (the row keeps only the last)."""
_WORKER = "import"
_LEASE_S = 3600.0
_KINDS: frozenset[str] = frozenset(
    {"retry", "retry_after", "rate_limited", "fatal", "down", "budget", "batch", "error"}
)


@dataclass(frozen=True)
class Recorded:
    """One imported job and what its row says happened to it: its result (done) or its last error."""

    job_id: str
    model_id: str
    attempts: int
    result: dict[str, Any] | None = None
    error: str | None = None
    kind: str | None = None

    def last(self) -> tuple[str, dict[str, Any]] | Failure:
        """What the job's last attempt recorded."""
        if self.result is not None:
            return (self.job_id, self.result)
        kind: AttemptKind = self.kind if self.kind in _KINDS else "error"  # type: ignore[assignment]
        return Failure(self.job_id, self.error or "failed", kind=kind, final=True)


def attempts_of(row: dict[str, Any]) -> int:
    """The attempts an exported row records (one for a row that says nothing of them)."""
    value = row.get("attempts")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


async def _pending(queue: Queue, models: set[str]) -> dict[str, int]:
    """Pending jobs per model (of ``models``), counted from the open-jobs index."""
    out = dict.fromkeys(models, 0)
    for count in await queue.counts(open_only=True):
        if count.status == "pending" and count.model_id in out:
            out[count.model_id] += count.n
    return out


async def _claim_round(queue: Queue, left: dict[str, Recorded]) -> list[str]:
    """Claim every pending job of the models of ``left``; give back the others; the ids claimed of ours."""
    pending = await _pending(queue, {r.model_id for r in left.values()})
    quotas = [ClaimQuota(frozenset({model}), n) for model, n in sorted(pending.items()) if n]
    claimed = await queue.claim_each(_WORKER, quotas, _LEASE_S) if quotas else []
    await queue.release(_WORKER, [job.id for job in claimed if job.id not in left])
    return [job.id for job in claimed if job.id in left]


async def record_history(queue: Queue, jobs: Sequence[Recorded]) -> int:
    """Record the (already enqueued) jobs as their rows say; how many ended done or failed for good.

    A job the queue will not hand out (its model held back in the run, or it is recorded already) is
    completed with its result where it has one, without the claims; an unclaimable failure is left out.
    """
    left = {r.job_id: r for r in jobs}
    recorded, attempt = 0, 0
    while left:
        attempt += 1
        ours = await _claim_round(queue, left)
        if not ours:
            break
        results: list[tuple[str, dict[str, Any]]] = []
        failures: list[Failure] = []
        for job_id in ours:
            row = left[job_id]
            if attempt < row.attempts:
                failures.append(Failure(job_id, EARLIER_ATTEMPT, kind="error", final=False))
                continue
            del left[job_id]
            last = row.last()
            if isinstance(last, Failure):
                failures.append(last)
            else:
                results.append(last)
        earlier = sum(1 for f in failures if not f.final)
        recorded += max(0, await queue.record(_WORKER, results, failures) - earlier)
    unclaimed = [row.last() for row in left.values() if row.result is not None]
    recorded += await queue.complete(_WORKER, [r for r in unclaimed if isinstance(r, tuple)])
    return recorded
