"""How a worker stops: it claims nothing more, gives back the jobs that sent nothing yet, and (on a
hand-over, SIGTERM) abandons the calls still in flight after a grace period; their jobs go back too."""

from __future__ import annotations

import anyio

__all__ = ["Stopping"]


class Stopping:
    """A worker's stop: whether it was asked, the started jobs it may still hand back, and the grace its
    calls in flight get on a hand-over."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.grace_s: float | None = None  # set by a hand-over: how long calls in flight may still run
        self.callers: anyio.CancelScope | None = None  # the calls in flight, abandoned after the grace
        self._unstarted: dict[str, anyio.CancelScope] = {}  # started jobs that have sent nothing yet

    def is_set(self) -> bool:
        return self.asked.is_set()

    def stop(self) -> None:
        """Stop claiming; jobs that sent nothing are cancelled (and so handed back)."""
        self.asked.set()
        for scope in list(self._unstarted.values()):
            scope.cancel()

    def hand_over(self, grace_s: float) -> None:
        """Stop, and abandon the calls still running after ``grace_s``."""
        self.grace_s = grace_s
        self.stop()

    def unstarted(self, job_id: str) -> anyio.CancelScope:
        """The scope a started job runs in until it sends something (a stop cancels it)."""
        scope = self._unstarted[job_id] = anyio.CancelScope()
        return scope

    def sent(self, job_id: str) -> None:
        """The job sent a request (or ended): a stop no longer hands it back."""
        self._unstarted.pop(job_id, None)

    async def abandon_after_grace(self) -> None:
        """After a hand-over's grace, cancel the calls still in flight (their jobs are released at exit)."""
        await self.asked.wait()
        if self.grace_s is None:
            return
        await anyio.sleep(self.grace_s)
        if self.callers is not None:
            self.callers.cancel()
