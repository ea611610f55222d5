"""The fleet's limits: a ``Limiter`` whose request slots and in-flight permits are reserved in a ledger.

When several processes work one run (a shared database), ``limit_keys.Limiters`` given
``fleet=FleetLimits(ledger, holder)`` hand out ``FleetLimiter``s, so a model's limits hold for the whole
fleet (the ledger is ``queue.limits.LimitLedger``).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import anyio

from ..config import RateLimit
from .adaptive import AdaptiveRate, LearnedLimit
from .clock import MONOTONIC, Clock
from .held_slots import AHEAD_SPAN_S, LATE_S, HeldSlots, Reserved
from .limiter import _DEFAULT_MAX_OUTAGE_S, LearnedLimits, Limiter

__all__ = ["FleetLimiter", "FleetLimits", "Ledger"]


class Ledger(LearnedLimits, Protocol):
    """Where the fleet keeps its limits (``queue.limits.LimitLedger``)."""

    async def reserve(
        self,
        key: str,
        count: int,
        interval: float,
        *,
        tokens: int = 0,
        token_interval: float = 0.0,
        pause_until: float = 0.0,
    ) -> Reserved: ...

    async def give_back(self, key: str, first: float, end: float) -> bool: ...

    async def hold(self, key: str, holder: str, *, want: int, in_use: int, cap: int, ttl: float) -> int: ...


@dataclass(frozen=True, slots=True)
class FleetLimits:
    """Where a fleet keeps its limits, and who this process is in it."""

    ledger: Ledger
    holder: str


class FleetLimiter(Limiter):
    """A ``Limiter`` whose request slots and in-flight permits are reserved in the fleet's ledger.

    Slots: reserved in blocks (``held_slots``): a busy model's covers about 0.1 s at its rate, and a
    model whose calls come one after another reserves ahead for its next calls while nobody else waits
    on the key, so neither pays a database round trip per request. A start is never used early nor more
    than ``LATE_S`` late, so no window of the limit's length sees more requests than the limit; held
    starts are given back when the worker runs out of jobs.
    In flight: the process holds a share of the model's ``max_in_flight``. It asks for what its requests
    needed at their peak over the last ``_WANT_WINDOW_S`` (a busy process's demand flickers from
    request to request, and asking for the flicker would hand permits back and forth between processes
    at every sync), asks for more when its requests queue past its share, gives a permit back at once
    when it holds more than its share, renews the share every ``_RESYNC_S`` (which is also when it
    learns others' fair shares), and gives back all it does not use when its worker runs out of jobs.
    """

    _RESYNC_S = 0.25
    _POLL_S = 0.2
    _WANT_WINDOW_S = 1.0

    def __init__(
        self,
        name: str,
        rate: RateLimit,
        *,
        key: str,
        fleet: FleetLimits,
        ttl: float,
        max_outage_s: float = _DEFAULT_MAX_OUTAGE_S,
        adaptive: AdaptiveRate | None = None,
        learned: LearnedLimits | None = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        super().__init__(
            name, rate, max_outage_s=max_outage_s, adaptive=adaptive, key=key, learned=learned, clock=clock
        )
        self._key, self._ledger, self._holder, self._ttl = key, fleet.ledger, fleet.holder, ttl
        self._cap = rate.max_in_flight
        self._held = HeldSlots()
        self._oversleep = 0.0  # how late sleeps have lately woken (a busy event loop)
        self._slot_lock = anyio.Lock()
        self._offset = 0.0  # ledger clock minus our monotonic clock
        self._best_rtt, self._best_at = math.inf, 0.0
        self._pause_sent = 0.0
        self._share = 0  # permits this process may use now
        self._in_use = 0
        self._queued = 0  # requests waiting for a permit
        self._asked = 0  # the want sent with the last sync
        self._peak, self._peak_at = 0, -math.inf  # the most requests wanted at once, lately
        self._changed = anyio.Event()
        self._sync_lock = anyio.Lock()
        self._synced_at = -math.inf

    @asynccontextmanager
    async def _permit(self) -> AsyncIterator[None]:
        """One of the fleet's in-flight permits for this model (``Limiter.slot`` waits for it first)."""
        await self._acquire()
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self._release()

    # -- in flight --------------------------------------------------------------------------------------

    async def _acquire(self) -> None:
        self._queued += 1
        try:
            self._want()  # note the demand, so the next sync asks for it
            while self._in_use >= self._share:
                changed = self._changed
                await self._sync(for_permit=True)
                if self._in_use < self._share:
                    break
                await self._wait(changed, self._POLL_S)  # a permit released here, or time to ask again
        finally:
            self._queued -= 1
        self._in_use += 1

    async def _wait(self, event: anyio.Event, seconds: float) -> None:
        """Wait for ``event``, or ``seconds`` on the limiter's clock (its own: a fake one in tests, where
        a timeout on the event loop's clock would never come while virtual time runs on)."""
        async with anyio.create_task_group() as tg:

            async def timeout() -> None:
                await self._clock.sleep(seconds)
                tg.cancel_scope.cancel()

            tg.start_soon(timeout)
            await event.wait()
            tg.cancel_scope.cancel()

    async def _release(self) -> None:
        self._in_use -= 1
        self._notify()
        if self._in_use >= self._share:
            await self._sync()  # over our share (it shrank for others): give this permit back now
        else:
            await self._sync(min_age=self._RESYNC_S)  # renew, and learn the others' fair shares

    async def settle(self) -> None:
        """The worker has no job left to start: give back the starts held ahead, every permit not in
        use, and stop asking."""
        await self._give_back()
        if self._share > self._in_use or self._asked > self._in_use:
            self._peak, self._peak_at = 0, -math.inf
            await self._sync()

    def _want(self) -> int:
        """Permits to ask for: the peak demand over about the last ``_WANT_WINDOW_S``, within the cap."""
        demand, now = self._in_use + self._queued, self._clock.now()
        if demand >= self._peak or now - self._peak_at > self._WANT_WINDOW_S:
            self._peak, self._peak_at = demand, now
        return min(self._cap, self._peak)

    async def _sync(self, *, min_age: float = 0.0, for_permit: bool = False) -> None:
        """Tell the ledger what we use and want, and learn our share; one sync at a time.

        For a permit, a sync is skipped when another one just got us a permit, or just asked for as
        much as we want now (then a permit comes back here, or we ask again after ``_POLL_S``).
        """
        async with self._sync_lock:
            want, in_use = self._want(), self._in_use
            age = self._clock.now() - self._synced_at
            if for_permit and (in_use < self._share or (want <= self._asked and age < self._POLL_S)):
                return
            if not for_permit and age < min_age:
                return
            self._share = await self._ledger.hold(
                self._key, self._holder, want=want, in_use=in_use, cap=self._cap, ttl=self._ttl
            )
            self._asked, self._synced_at = want, self._clock.now()
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # -- requests per minute ----------------------------------------------------------------------------

    async def _wait_turn(self, tokens: int) -> None:
        await self._share_learned()
        lead = 0.0  # a fresh block's first start is asked for this much later than now
        while True:
            now = self._clock.now()
            if self.paused_until > now:
                if self._interval and self.paused_until > self._pause_sent:
                    await self._share_pause()
                await self._clock.sleep(max(0.0, self.paused_until - self._clock.now()))
                continue
            if self._interval or self._token_interval:
                start = await self._next_start(tokens, lead)
                now = self._clock.now()
                if start > now:
                    if not lead:
                        self._queued_for_rate()
                    now = await self._sleep_until(start, now)
                # Too late (a slow round trip, a busy event loop): starting now could put one request
                # more than the limit into some minute, so take a later start; a fresh block then
                # starts far enough ahead for the round trip and the wake-up to be in time.
                if now - start > LATE_S and not await self._slide(now):
                    lead = min(2 * (now - start), AHEAD_SPAN_S)
                    continue
            if self.paused_until <= now:
                self._held.started(now, one_at_a_time=self.waiting <= 1)
                self._sent()
                return

    async def _sleep_until(self, start: float, now: float) -> float:
        """Sleep until ``start``, waking as much earlier as sleeps have lately overrun, then sleep the
        rest; returns the time then (late, if this sleep overran too)."""
        early = self._oversleep if start - now > self._oversleep else 0.0
        await self._clock.sleep(start - now - early)
        woke = self._clock.now()
        overrun = woke - (start - early)
        self._oversleep = max(overrun, 0.8 * self._oversleep) if overrun > 0.002 else 0.8 * self._oversleep
        if woke < start:
            await self._clock.sleep(start - woke)
            woke = self._clock.now()
        return woke

    def _follow(self, state: LearnedLimit) -> None:
        super()._follow(state)
        if hasattr(self, "_held"):
            self._held.forget()  # reserved at the old rate

    async def _next_start(self, tokens: int, lead: float) -> float:
        """A start this request may use, on our clock: a held one, or the first of a fresh block."""
        async with self._slot_lock:
            if not self._token_interval:
                held = self._held.take(self._clock.now() + self._offset)
                if held is not None:
                    return held - self._offset
            count = 1
            if not self._token_interval and self._interval:
                count = self._held.size(self._interval, self.waiting)
            before = self._clock.now()
            not_before = before + self._offset + lead if lead else 0.0
            got = await self._ledger.reserve(
                self._key,
                count,
                self._interval,
                tokens=tokens if self._token_interval else 0,
                token_interval=self._token_interval,
                pause_until=not_before,
            )
            self._learn_offset(got.now, before, self._clock.now())
            self._held.add(got, count, self._interval, not_before)
            first = self._held.take(-math.inf)
            assert first is not None
            return first - self._offset

    async def _slide(self, now: float) -> bool:
        """Keep a start woken late when it is the last one reserved for the key and nobody else in this
        process waits: the key's next start moves to an interval after now, as if it had been reserved
        now (a missed start at a low rate would cost a whole interval). False if others reserved after."""
        if self.waiting > 1 or self._token_interval or not self._interval:
            return False
        async with self._slot_lock:
            end = self._held.end_if_all_taken()
            if end is None:
                return False
            first = now + self._offset + LATE_S + self._interval
            if not await self._ledger.give_back(self._key, first, end):
                return False
            self._held.forget()
            return self._clock.now() - now <= LATE_S  # the round trip itself was quick enough

    async def _give_back(self) -> None:
        """Give the ledger back the held starts this process will not use (if nobody reserved after)."""
        async with self._slot_lock:
            unused = self._held.unused()
            if unused is not None:
                await self._ledger.give_back(self._key, *unused)

    def _learn_offset(self, ledger_now: float, before: float, after: float) -> None:
        """Ledger clock minus ours, from the quickest round trip lately (its midpoint is the best guess).

        A slow round trip would shift this process's slots later than the others', bunching requests;
        an old sample is trusted a little less each second, as the two clocks may drift apart.
        """
        rtt = after - before
        if rtt <= self._best_rtt + (after - self._best_at) * 1e-3:
            self._offset = ledger_now - (before + after) / 2
            self._best_rtt, self._best_at = rtt, after

    async def _share_pause(self) -> None:
        """Push a 429's pause into the ledger: no process of the fleet starts a request before it ends."""
        async with self._slot_lock:
            self._held.forget()  # reserved before the pause
            pause_until, self._pause_sent = self.paused_until, self.paused_until
            await self._ledger.reserve(self._key, 0, self._interval, pause_until=pause_until + self._offset)
