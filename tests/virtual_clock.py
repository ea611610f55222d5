"""A fake clock of virtual seconds for the limiter tests: sleeps overlap on one asyncio loop, and time
jumps to the earliest wake-up whenever no task can run."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel

__all__ = ["FakeClock"]


class FakeClock:
    """Virtual seconds on one asyncio loop: sleeps overlap, and a sleeping task wakes when no task can
    run (the loop's ready queue is empty) and its time is the earliest due. Every reading moves time on by the next of ``steps`` (a
    busy machine), and every wake-up comes ``lag`` s late (a busy event loop)."""

    def __init__(self, steps: list[float], lag: float = 0.0) -> None:
        self.t = 1000.0
        self._steps, self._i, self.lag = steps or [0.0], 0, lag
        self._due: list[tuple[float, int, anyio.Event]] = []
        self._n = 0

    def now(self) -> float:
        self.t += self._steps[self._i % len(self._steps)]
        self._i += 1
        return self.t

    async def sleep(self, seconds: float) -> None:
        assert seconds >= 0, "a negative sleep"
        if seconds == 0:
            await anyio.lowlevel.checkpoint()
            return
        woken = anyio.Event()
        self._n += 1
        heapq.heappush(self._due, (self.t + seconds + self.lag, self._n, woken))
        await woken.wait()

    def run(self, script: Callable[[], Awaitable[None]], real_limit_s: float = 5.0) -> None:
        """Run ``script`` to its end on virtual time (never more than ``real_limit_s`` of real time)."""
        finished = False

        async def wake() -> None:
            loop = asyncio.get_running_loop()
            while not finished:
                await anyio.lowlevel.checkpoint()
                if loop._ready or not self._due:  # type: ignore[attr-defined]  # others can still run
                    continue
                at, _, woken = heapq.heappop(self._due)
                self.t = max(self.t, at)
                woken.set()

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(wake)
                await script()
                nonlocal finished
                finished = True

        async def guarded() -> None:
            with anyio.fail_after(real_limit_s):
                await main()

        anyio.run(guarded)
