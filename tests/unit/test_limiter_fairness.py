"""Four processes of a fleet on one rate-limited model, on a fake clock: while each has requests
waiting the whole time, each starts about a quarter of them, whether the rate binds (one request a
block, or blocks of several at a high rate), the in-flight cap binds, the calls come one after another
(reserve-ahead), or one process started seconds before the others. A limiter that let one process
reserve the model's starts ahead of the others, or keep the in-flight permits, fails here."""

from __future__ import annotations

import anyio
import pytest

from knowwhen_runner.config import RateLimit
from knowwhen_runner.provider.fleet_limiter import FleetLimiter, FleetLimits
from tests.memory_ledger import MemoryLedger
from tests.virtual_clock import FakeClock

_HOLDERS = 4


def _shares(
    rate: RateLimit, *, callers: int, latency: float, gap: float = 0.0, late: float = 0.0, until: float = 20.0
) -> list[int]:
    """Each holder runs ``callers`` loops of a request of ``latency`` s and ``gap`` s of other work,
    until ``until`` s; holder 0 from the start, the others from ``late`` s. Returns each holder's
    starts after every holder is working (the first second after ``late`` left out)."""
    clock = FakeClock([0.0])
    ledger = MemoryLedger(clock, shares=True)
    began = clock.t
    counted_from, end = began + late + 1.0, began + until
    starts = [0] * _HOLDERS

    async def caller(who: int, lim: FleetLimiter) -> None:
        if who:
            await clock.sleep(late)
        while clock.t < end:
            async with lim.slot():
                if clock.t >= counted_from:
                    starts[who] += 1
                await clock.sleep(latency)
            if gap:
                await clock.sleep(gap)
        await lim.settle()

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            for who in range(_HOLDERS):
                lim = FleetLimiter(
                    f"h{who}", rate, key="k", fleet=FleetLimits(ledger, f"h{who}"), ttl=30.0, clock=clock
                )
                for _ in range(callers):
                    tg.start_soon(caller, who, lim)

    clock.run(go, real_limit_s=60.0)  # a busy machine; it takes a few seconds
    return starts


def _roughly_even(starts: list[int]) -> None:
    even = sum(starts) / len(starts)
    assert sum(starts) > 0
    assert min(starts) >= 0.75 * even and max(starts) <= 1.25 * even, starts


@pytest.mark.parametrize("rpm", [120, 900, 6000])
def test_the_rate_is_shared_evenly(rpm: int) -> None:
    """Eight requests waiting in each process, quick answers: the rate binds; at 6,000/min a process
    reserves blocks of several starts, at 120 and 900 one at a time."""
    until = {120: 30.0, 900: 15.0, 6000: 5.0}[rpm]  # 60 to 500 starts
    _roughly_even(_shares(RateLimit(requests_per_minute=rpm), callers=8, latency=0.01, until=until))


def test_the_in_flight_cap_is_shared_evenly() -> None:
    """Sixteen permits, slow answers and no binding rate: each process gets about four at a time."""
    rate = RateLimit(requests_per_minute=60_000, max_in_flight=16)
    _roughly_even(_shares(rate, callers=8, latency=0.5))


def test_chains_share_the_rate_evenly() -> None:
    """One call at a time per process, 50 ms of the other side's work between them, at a rate that
    binds: reserving ahead (while nobody else is ahead in the ledger) must not keep the others out."""
    _roughly_even(_shares(RateLimit(requests_per_minute=1400), callers=1, latency=0.01, gap=0.05))


@pytest.mark.parametrize(("rpm", "late"), [(900, 5.0), (6000, 2.0)])
def test_a_process_that_started_first_keeps_no_more_than_its_share(rpm: int, late: float) -> None:
    """Holder 0 works the model alone for a few seconds (as a planner did while its workers imported
    litellm); once the others have work, the four share the rate evenly."""
    rate = RateLimit(requests_per_minute=rpm)
    _roughly_even(_shares(rate, callers=8, latency=0.01, late=late, until=late + 4.0))
