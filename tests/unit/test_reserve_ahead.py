"""Reserve-ahead in the fleet limiter, on a fake clock: several holders of one key, in any order of
calls, chains, give-backs and crashes, never start more requests in a window than the limit allows;
what a holder gives back is taken by the next; a crashed holder's starts pass within a bounded span."""

from __future__ import annotations

import anyio
import anyio.lowlevel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowwhen_runner.config import RateLimit
from knowwhen_runner.provider.fleet_limiter import FleetLimiter, FleetLimits
from knowwhen_runner.provider.held_slots import AHEAD_SPAN_S, LATE_S
from knowwhen_runner.queue.limits import LimitLedger
from tests.memory_ledger import MemoryLedger
from tests.pg import db_url, pg_url  # noqa: F401
from tests.virtual_clock import FakeClock

_MARGIN = 1.002


def _holder(ledger: MemoryLedger, clock: FakeClock, rpm: float, name: str) -> FleetLimiter:
    return FleetLimiter(
        name, RateLimit(requests_per_minute=rpm), key="k", fleet=FleetLimits(ledger, name), ttl=30.0,
        clock=clock,
    )  # fmt: skip


def _most_in(starts: list[float], window: float) -> int:
    """The most starts any closed window of ``window`` seconds holds."""
    starts = sorted(starts)
    most, j = 0, 0
    for i, s in enumerate(starts):
        while starts[j] < s - window:
            j += 1
        most = max(most, i - j + 1)
    return most


async def _call(lim: FleetLimiter, clock: FakeClock, starts: list[float]) -> None:
    async with lim.slot():
        starts.append(clock.t)


# One step of a script: (holder, what, seconds). "chain": a call, then ``seconds`` of the other side's
# work; "burst": four calls at once; "settle": the holder's worker runs out of jobs; "crash": it stops
# for good, holding what it holds.
_op = st.tuples(
    st.integers(0, 2),
    st.sampled_from(["chain", "chain", "chain", "burst", "settle", "crash"]),
    st.floats(0.0, 0.6),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(_op, min_size=1, max_size=60),
    rpm=st.sampled_from([6, 30, 90, 600, 1400, 6000]),
    steps=st.lists(st.floats(0.0, 0.006), min_size=1, max_size=6),
    offset=st.floats(-50.0, 50.0),
    lag=st.floats(0.0, 0.4),
)
def test_no_window_sees_more_than_the_limit(
    ops: list[tuple[int, str, float]], rpm: int, steps: list[float], offset: float, lag: float
) -> None:
    """Whatever the holders do in whatever order (chains that reserve ahead, bursts, give-backs,
    crashes, wake-ups up to ``lag`` s late), no 60 s window sees more than ``rpm`` starts, no k + 1
    starts fall closer than k intervals less the lateness a start may have, and no reservation reaches
    further ahead than a chain's span."""
    clock = FakeClock(steps, lag)
    ledger = MemoryLedger(clock, offset)
    holders = [_holder(ledger, clock, rpm, f"h{i}") for i in range(3)]
    crashed: set[int] = set()
    starts: list[float] = []
    interval = _MARGIN * 60.0 / rpm

    async def go() -> None:
        for who, what, seconds in ops:
            if who in crashed:
                continue
            lim = holders[who]
            if what == "chain":
                await _call(lim, clock, starts)
                clock.t += seconds
            elif what == "burst":
                async with anyio.create_task_group() as tg:
                    for _ in range(4):
                        tg.start_soon(_call, lim, clock, starts)
            elif what == "settle":
                await lim.settle()
            else:
                crashed.add(who)

    clock.run(go)
    assert _most_in(starts, 60.0) <= rpm
    slack = LATE_S + 2 * max(steps) + 1e-9  # a start's lateness, and the clock offset learned
    ordered = sorted(starts)
    for i in range(len(ordered)):
        for j in range(i + 1, min(len(ordered), i + 40)):
            assert ordered[j] - ordered[i] >= (j - i) * interval - slack
    for _asked, first, end in ledger.blocks:
        assert end - first <= max(interval, AHEAD_SPAN_S + interval) + 1e-9


def _chain(lim: FleetLimiter, clock: FakeClock, calls: int, gap: float) -> list[float]:
    """``calls`` calls one after another, ``gap`` s apart (a closed loop's other side)."""
    starts: list[float] = []

    async def go() -> None:
        for i in range(calls):
            if i:
                clock.t += gap
            await _call(lim, clock, starts)

    clock.run(go)
    return starts


def test_a_chain_pays_one_round_trip_per_block_not_per_call() -> None:
    """A model whose calls come one after another, 60 ms apart at 1,400/min, reserves ahead: twenty
    calls take a handful of ledger round trips, where one per call was paid before."""
    clock = FakeClock([0.0])
    ledger = MemoryLedger(clock)
    starts = _chain(_holder(ledger, clock, 1400, "a"), clock, 20, 0.06)
    assert len(starts) == 20
    assert len(ledger.blocks) <= 8


def test_what_a_chain_gives_back_the_next_holder_gets_at_once() -> None:
    """A chain holds starts ahead; when its worker runs out of jobs it gives them back, and another
    holder's request starts at once instead of after the chain's block."""
    clock = FakeClock([0.0])
    ledger = MemoryLedger(clock)
    chain = _holder(ledger, clock, 1400, "a")
    _chain(chain, clock, 3, 0.06)
    assert ledger.next > clock.t + 0.05  # the chain's block still reaches ahead
    clock.run(chain.settle)
    asked = clock.t
    starts = _chain(_holder(ledger, clock, 1400, "b"), clock, 1, 0.0)
    assert starts[0] - asked < 0.05


def test_a_crashed_holders_starts_pass_within_its_span() -> None:
    """A chain that stops for good holding starts ahead never gives them back, but they pass: another
    holder's request waits at most the chain's span, and the one after that none of it."""
    clock = FakeClock([0.0])
    ledger = MemoryLedger(clock)
    _chain(_holder(ledger, clock, 1400, "a"), clock, 3, 0.06)
    crashed_at = clock.t
    assert ledger.next > crashed_at + 0.05
    other = _holder(ledger, clock, 1400, "b")
    first = _chain(other, clock, 1, 0.0)[0]
    assert first - crashed_at <= AHEAD_SPAN_S + _MARGIN * 60 / 1400
    clock.t += 1.0
    asked = clock.t
    assert _chain(other, clock, 1, 0.0)[0] - asked < 0.05


def test_a_start_woken_too_late_is_used_only_when_the_schedule_moves_on() -> None:
    """At 6/min with every wake-up 0.2 s late, a late start is kept only by moving the key's next start
    an interval past it (so eleven requests never fit into one minute), and so no interval is lost."""
    clock = FakeClock([0.0], lag=0.2)
    lim = _holder(MemoryLedger(clock), clock, 6, "a")
    starts = _chain(lim, clock, 14, 0.0)
    assert _most_in(starts, 60.0) <= 6
    assert starts[-1] - starts[0] <= 13 * (_MARGIN * 10.0 + LATE_S + 0.25)


def test_the_ledger_takes_back_only_the_last_reservation(db_url: str) -> None:  # noqa: F811
    """On SQLite and PostgreSQL: starts given back are reserved again from the first unused one; once
    another holder reserved after them, a give-back changes nothing."""

    async def go() -> None:
        ledger = LimitLedger(db_url)
        try:
            iv = 1.0
            got = await ledger.reserve("ahead", 10, iv)
            assert await ledger.give_back("ahead", got.start + 2 * iv, got.end)
            again = await ledger.reserve("ahead", 1, iv)
            assert abs(again.start - (got.start + 2 * iv)) < 1e-6
            after = await ledger.reserve("ahead", 1, iv)
            assert not await ledger.give_back("ahead", again.start, again.end)
            assert (await ledger.reserve("ahead", 1, iv)).start >= after.start + iv - 1e-6
        finally:
            await ledger.close()

    anyio.run(go)
