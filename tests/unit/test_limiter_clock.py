"""The rate limiters on a fake clock: one reading per decision, never a negative sleep, spacing kept."""

from __future__ import annotations

import anyio
import anyio.lowlevel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowwhen_runner.config import RateLimit
from knowwhen_runner.provider.limit_keys import FleetLimiter, FleetLimits, Limiter
from tests.memory_ledger import MemoryLedger


class FakeClock:
    """A clock that moves on at every reading (time passes between two reads, as on a busy machine)
    and refuses a negative sleep, as some event loops do."""

    def __init__(self, steps: list[float]) -> None:
        self.t = 100.0
        self._steps = steps or [0.0]
        self._i = 0
        self.slept: list[float] = []

    def now(self) -> float:
        self.t += self._steps[self._i % len(self._steps)]
        self._i += 1
        return self.t

    async def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("delay must be a non-negative number")
        self.slept.append(seconds)
        self.t += seconds
        await anyio.lowlevel.checkpoint()


_steps = st.lists(st.floats(min_value=0.0, max_value=0.05), min_size=1, max_size=12)
_rpm = st.integers(min_value=60, max_value=6000)


def _starts(limiter: Limiter, clock: FakeClock, n: int, pauses: list[float]) -> list[float]:
    starts: list[float] = []

    async def go() -> None:
        for i in range(n):
            if i < len(pauses) and pauses[i]:
                limiter.penalize(pauses[i])
            async with limiter.slot():
                starts.append(clock.t)

    anyio.run(go)
    return starts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_steps, rpm=_rpm, n=st.integers(2, 30), pauses=st.lists(st.floats(0.0, 2.0), max_size=5))
def test_local_limiter_never_sleeps_negative_and_keeps_its_spacing(
    steps: list[float], rpm: int, n: int, pauses: list[float]
) -> None:
    """However late each clock reading comes, the local limiter sleeps only non-negative delays and
    keeps requests 60/rpm seconds apart (up to one late wake-up)."""
    clock = FakeClock(steps)
    limiter = Limiter("m", RateLimit(requests_per_minute=rpm), clock=clock)
    starts = _starts(limiter, clock, n, pauses)
    assert len(starts) == n
    assert all(s >= 0 for s in clock.slept)
    # Slots are spaced exactly; a start woken late by a reading's delay does not push the next one, so
    # any k + 1 consecutive starts span at least k intervals, less one late wake-up.
    late = 2 * max(steps) + 1e-9
    for i in range(n):
        for j in range(i + 1, n):
            assert starts[j] - starts[i] >= (j - i) * 60.0 / rpm - late


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=_steps, rpm=_rpm, n=st.integers(2, 30), offset=st.floats(-50.0, 50.0),
    pauses=st.lists(st.floats(0.0, 2.0), max_size=5),
)  # fmt: skip
def test_fleet_limiter_never_sleeps_negative(
    steps: list[float], rpm: int, n: int, offset: float, pauses: list[float]
) -> None:
    """The fleet limiter, whose slots come from a ledger on another clock, also sleeps only
    non-negative delays however the readings fall, and every request gets its turn."""
    clock = FakeClock(steps)
    ledger = MemoryLedger(clock, offset)
    limiter = FleetLimiter(
        "m", RateLimit(requests_per_minute=rpm), key="k", fleet=FleetLimits(ledger, "h"), ttl=30.0,
        clock=clock,
    )  # fmt: skip
    starts = _starts(limiter, clock, n, pauses)
    assert len(starts) == n
    assert all(s >= 0 for s in clock.slept)


def test_the_old_double_reading_is_caught_by_the_fake_clock() -> None:
    """The fake clock is strict enough to catch the bug it guards against: sleeping ``start - now()``
    with a second, later reading asks for a negative delay."""
    clock = FakeClock([0.01])

    async def old_wait(start: float) -> None:
        if start > clock.now():
            await clock.sleep(start - clock.now())

    try:
        anyio.run(old_wait, clock.t + 0.015)
    except ValueError:
        return
    raise AssertionError("a negative sleep went unnoticed")


def test_both_limiters_time_requests_on_their_own_clock() -> None:
    """The latency the scheduler sizes work in hand from is measured on the limiter's clock: on a fake
    clock, requests that take 0.3 s and then 0.8 s of it give a moving average between the two."""

    async def go(limiter: Limiter, clock: FakeClock) -> list[float]:
        seen = []
        for took in (0.3, 0.3, 0.8):
            async with limiter.slot():
                await clock.sleep(took)
            assert limiter.latency_s is not None
            seen.append(limiter.latency_s)
        return seen

    for make in (
        lambda c: Limiter("m", RateLimit(requests_per_minute=600), clock=c),
        lambda c: FleetLimiter(
            "m",
            RateLimit(requests_per_minute=600),
            key="k",
            fleet=FleetLimits(MemoryLedger(c, 0.0), "h"),
            ttl=30.0,
            clock=c,
        ),
    ):
        clock = FakeClock([0.0])
        first, second, third = anyio.run(go, make(clock), clock)
        assert abs(first - 0.3) < 1e-9 and abs(second - 0.3) < 1e-9
        assert 0.3 < third < 0.8
