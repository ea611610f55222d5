"""``run --processes N``: the N processes start claiming together, so they share a rate-limited model.

The process that plans the run starts working as soon as its plan is in; the workers it spawned are
fresh interpreters that still import litellm (seconds of CPU each, all of them at once on a small
machine). Under a model's fleet-wide rate limit, whoever works first takes the model's pace: on a busy
2-core machine the workers registered 3 to 11 s after the planner, and a run of a few seconds' work at
900 requests per minute was done by the planner alone. So each of them, once registered, waits until
all N have registered (at most ``WAIT_S``; one that never comes, a crashed worker, costs that once),
then claims. A worker joining by ``knowwhen worker`` waits for nobody.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import anyio

from ..queue import WorkerRegistry

__all__ = ["WAIT_S", "joined", "start_together"]

WAIT_S = 20.0  # the longest a process waits for the others of its ``run --processes N``
_POLL_S = 0.1


def joined(rows: list[dict[str, Any]], me: str) -> int:
    """Processes of this start among the run's worker rows: registered at most ``WAIT_S`` before this
    one and not stopped before it (an earlier run's workers, stopped or dead, are not peers)."""
    mine = next((r for r in rows if r["id"] == me), None)
    since = float(mine["started_at"]) if mine is not None else -math.inf
    return sum(
        1
        for r in rows
        if float(r["started_at"]) >= since - WAIT_S
        and (r["stopped_at"] is None or float(r["stopped_at"]) >= since)
    )


async def start_together(queue: WorkerRegistry, me: str, together: int, stopped: Callable[[], bool]) -> float:
    """Wait until ``together`` processes of this start have registered (this one included), or
    ``WAIT_S`` has passed, or ``stopped()``; returns the seconds waited."""
    began = anyio.current_time()
    if together <= 1:
        return 0.0
    with anyio.move_on_after(WAIT_S):
        while not stopped():  # the database is asked: there is nothing here to wait on
            if joined(await queue.workers(), me) >= together:
                break
            await anyio.sleep(_POLL_S)
    return anyio.current_time() - began
