"""The fleet's limits: a ``Limiter`` whose request slots and in-flight permits are reserved in a ledger.

When several processes work one run (a shared database), ``ratelimit.Limiters`` given
``fleet=FleetLimits(ledger, holder)`` hand out ``FleetLimiter``s, so a model's limits hold for the whole
fleet (the ledger is ``queue.limits.LimitLedger``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import anyio

from ..config import RateLimit
from .adaptive import AdaptiveRate, LearnedLimit
from .clock import MONOTONIC, Clock
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
    ) -> _Reservation: ...

    async def hold(self, key: str, holder: str, *, want: int, in_use: int, cap: int, ttl: float) -> int: ...


class _Reservation(Protocol):
    @property
    def start(self) -> float: ...
    @property
    def now(self) -> float: ...


@dataclass(frozen=True, slots=True)
class FleetLimits:
    """Where a fleet keeps its limits, and who this process is in it."""

    ledger: Ledger
    holder: str


class FleetLimiter(Limiter):
    """A ``Limiter`` whose request slots and in-flight permits are reserved in the fleet's ledger.

    Slots: reserved in blocks sized to cover about ``_BLOCK_S`` at the model's rate (one at a time at
    low rates), so a busy process pays one database round trip per block, not per request. A slot that
    passes unused is dropped, and one woken too late is swapped for a fresh one, so requests of the fleet
    do not bunch up: a window of the limit's length sees at most one request more than the limit.
    In flight: the process holds a share of the model's ``max_in_flight``. It asks for what its requests
    needed at their peak over the last ``_WANT_WINDOW_S`` (a busy process's demand flickers from
    request to request, and asking for the flicker would hand permits back and forth between processes
    at every sync), asks for more when its requests queue past its share, gives a permit back at once
    when it holds more than its share, renews the share every ``_RESYNC_S`` (which is also when it
    learns others' fair shares), and gives back all it does not use when its worker runs out of jobs.
    """

    _BLOCK_S = 0.1
    _MAX_BLOCK = 64
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
        self._slots: deque[tuple[float, float]] = deque()  # (start, usable from), on our monotonic clock
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
                with anyio.move_on_after(self._POLL_S):
                    await changed.wait()  # a permit released here, or time to ask the ledger again
        finally:
            self._queued -= 1
        self._in_use += 1

    async def _release(self) -> None:
        self._in_use -= 1
        self._notify()
        if self._in_use >= self._share:
            await self._sync()  # over our share (it shrank for others): give this permit back now
        else:
            await self._sync(min_age=self._RESYNC_S)  # renew, and learn the others' fair shares

    async def settle(self) -> None:
        """The worker has no job left to start: give back every permit not in use, and stop asking."""
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
        misses = 0
        while True:
            now = self._clock.now()
            if self.paused_until > now:
                if self._interval and self.paused_until > self._pause_sent:
                    await self._share_pause()
                await self._clock.sleep(max(0.0, self.paused_until - self._clock.now()))
                continue
            if self._interval or self._token_interval:
                start, due = await self._next_start(tokens)
                now = self._clock.now()  # one reading decides whether and how long to sleep
                if start > now:
                    if not misses:
                        self._queued_for_rate()
                    await self._clock.sleep(start - now)
                    now = self._clock.now()
                # Woken too late (a busy machine): starting now would bunch this request with the next
                # processes' slots, so take a fresh slot instead; but never starve for it.
                if now - due > max(self._interval / 2, 0.02) and misses < 3:
                    misses += 1
                    continue
            if self.paused_until <= now:
                self._sent()
                return

    def _follow(self, state: LearnedLimit) -> None:
        super()._follow(state)
        if hasattr(self, "_slots"):
            self._slots.clear()  # reserved at the old rate

    async def _next_start(self, tokens: int) -> tuple[float, float]:
        """A reserved start, and when it became ours to use (its start, or later if it came late)."""
        async with self._slot_lock:
            now = self._clock.now()
            while self._slots and self._slots[0][1] < now:
                self._slots.popleft()  # nobody was ready for it: spending it late would bunch requests
            if self._slots and not self._token_interval:
                return self._slots.popleft()
            count = 1
            if not self._token_interval and self._interval:
                count = max(1, min(self._MAX_BLOCK, int(self._BLOCK_S / self._interval), self.waiting))
            before = self._clock.now()
            got = await self._ledger.reserve(
                self._key,
                count,
                self._interval,
                tokens=tokens if self._token_interval else 0,
                token_interval=self._token_interval,
            )
            after = self._clock.now()
            self._learn_offset(got.now, before, after)
            first = got.start - self._offset
            starts = (first + i * self._interval for i in range(count))
            self._slots.extend((start, max(start, after)) for start in starts)
            return self._slots.popleft()

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
            self._slots.clear()  # reserved before the pause
            pause_until, self._pause_sent = self.paused_until, self.paused_until
            await self._ledger.reserve(self._key, 0, self._interval, pause_until=pause_until + self._offset)
