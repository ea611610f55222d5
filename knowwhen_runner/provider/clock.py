"""The clock the rate limiters read and sleep on: the monotonic clock, or a fake one in tests.

A limiter reads the clock once per decision and never asks to sleep a negative delay; the real clock's
``sleep`` still clamps at zero so a late reading can never turn into an error (a limiter's bug must not
fail a job).
"""

from __future__ import annotations

import time
from typing import Protocol

import anyio

__all__ = ["MONOTONIC", "Clock", "MonotonicClock"]


class Clock(Protocol):
    """Seconds on a monotonic scale, and a way to wait for some of them."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """``time.monotonic`` and ``anyio.sleep`` (a negative delay sleeps nothing)."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(max(0.0, seconds))


MONOTONIC = MonotonicClock()
