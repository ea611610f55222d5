"""Per-model rate limits: requests per minute, tokens per minute, requests in flight, and back-off.

Requests are spaced evenly (GCRA with no burst): at N requests/min a request may start every 60/N s, so
no sliding minute ever sees more than N. Tokens work the same way with the estimated size of each request.
A 429/529 pauses the model for everyone in this process (``penalize``). A model whose requests keep failing
unreachable (no HTTP response, 502/503/504: see ``retry.Verdict``) is *down* (the circuit breaker opens): it is paused for longer each time, up to ``_BREAKER_MAX_S``, and when
a pause ends one request at a time probes it (half-open) until one succeeds. While a model is down its
jobs wait rather than spend their attempts (see ``client.ModelClient.call``); ``max_outage_s`` bounds how
long a run waits for it.

A limit the config does not give is learned (``adaptive``): the limiter of such a model starts low and
follows an ``AdaptiveRate`` fed by what responses say (rate-limit headers, 429s) and by requests queueing
for it; its state is a row of the run database's ledger (``LearnedLimits``), so a fleet sends at one
learned rate, and a later run starts where this one ended.

One process keeps its limits in memory (``Limiter``). When several processes work one run (a shared
database), ``Limiters`` given ``fleet=FleetLimits(ledger, holder)`` hand out ``FleetLimiter``s: the
same interface, with request slots and in-flight permits reserved in the database, so a model's limits
hold for the whole fleet (see ``queue.limits``).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

import anyio

from ..config import ModelSpec, RateLimit
from .adaptive import AdaptiveRate, LearnedLimit, LimitNews

__all__ = ["REQUEST_STARTED", "FleetLimiter", "FleetLimits", "LearnedLimits", "Ledger", "Limiter", "Limiters"]

#: Called (in the task that waited) when a limiter lets a request start: a worker learns which of its
#: jobs have sent something, and so which it may still hand back unstarted.
REQUEST_STARTED: ContextVar[Callable[[], None] | None] = ContextVar("request_started", default=None)

_BREAKER_AFTER = 8  # consecutive failed requests before the model is down (paused, then probed)
_BREAKER_MAX_S = 30.0  # the longest pause between probes: a model back up is noticed within this
_DEFAULT_MAX_OUTAGE_S = 1800.0
_MARGIN = 1.002
_RESET_WAIT_MAX_S = 60.0  # the longest wait for a stated reset (a per-minute limit resets within it)
_LEARNED_READ_S = 2.0  # how often an adaptive limiter reads the fleet's learned row
_LATENCY_WEIGHT = 0.1  # of the latest request in the moving average of request durations


class LearnedLimits(Protocol):
    """Where learned limits are kept (``queue.limits.LimitLedger``)."""

    async def learned(self) -> dict[str, LearnedLimit]: ...

    async def learn(
        self, key: str, state: LearnedLimit, how: str, *, seen: float, hold_s: float
    ) -> LearnedLimit: ...


class Limiter:
    """The limits of one model (or one group of models that share a provider key)."""

    def __init__(
        self,
        name: str,
        rate: RateLimit,
        *,
        max_outage_s: float = _DEFAULT_MAX_OUTAGE_S,
        adaptive: AdaptiveRate | None = None,
        key: str = "",
        learned: LearnedLimits | None = None,
    ) -> None:
        self.name = name
        self.max_outage_s = max_outage_s
        self._rate = rate
        # Evenly spaced starts at exactly 60/N s put N + 1 requests into a closed 60 s window; a provider
        # counting that way answers the last with a 429. A hair wider spacing keeps every window at N.
        self._interval = _MARGIN * 60.0 / rate.requests_per_minute if rate.requests_per_minute else 0.0
        self._token_interval = _MARGIN * 60.0 / rate.tokens_per_minute if rate.tokens_per_minute else 0.0
        self.adaptive = adaptive
        self.limit_key = key
        self._learned = learned
        self._learned_lock = anyio.Lock()
        self._unsaved: tuple[str, float] | None = None  # (how, the state's changed_at before) to record
        self._read_at = -math.inf
        if adaptive is not None:
            self._follow(adaptive.state)
        self._next_request = 0.0
        self._next_token = 0.0
        self._in_flight = anyio.CapacityLimiter(rate.max_in_flight)
        self.paused_until = 0.0
        self.failures_in_row = 0
        self.backoffs = 0
        self.waiting = 0
        self.down_since: float | None = None  # when the breaker opened (monotonic), while it is open
        self.probing = False  # a probe request of a down model is under way
        self.latency_s: float | None = None  # requests' recent duration (moving average)

    @property
    def max_in_flight(self) -> int:
        return int(self._in_flight.total_tokens)

    @property
    def counts_tokens(self) -> bool:
        """Whether the model has a tokens-per-minute limit (else a request's size is not needed)."""
        return self._token_interval > 0

    def paused_for(self) -> float:
        return max(0.0, self.paused_until - time.monotonic())

    def rate_per_s(self) -> float | None:
        """Requests it may start per second now (configured or learned); None: no rate limit."""
        return _MARGIN / self._interval if self._interval else None

    def _took(self, seconds: float) -> None:
        last = self.latency_s
        self.latency_s = seconds if last is None else last + _LATENCY_WEIGHT * (seconds - last)

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Wait for a request slot; the body is one request."""
        self.waiting += 1
        started = False
        try:
            async with self._in_flight:
                await self._wait_turn(tokens)
                self.waiting -= 1
                started = True
                began = time.monotonic()
                yield
                self._took(time.monotonic() - began)
        finally:
            if not started:
                self.waiting -= 1

    async def _wait_turn(self, tokens: int) -> None:
        await self._share_learned()
        while True:
            now = time.monotonic()
            if self.paused_until > now:
                await anyio.sleep(self.paused_until - now)
                continue
            start = max(now, self._next_request, self._next_token)
            self._next_request = start + self._interval
            self._next_token = start + tokens * self._token_interval
            if start > now:
                self._queued_for_rate()
                await anyio.sleep(start - now)
            if self.paused_until <= time.monotonic():
                self._sent()
                return

    # -- learned limits (adaptive) ------------------------------------------------------------------------

    def _follow(self, state: LearnedLimit) -> None:
        """Send at the learned rate (the configured token limit, when there is one, still holds)."""
        self._interval = _MARGIN * 60.0 / state.rpm
        if not self._rate.tokens_per_minute:
            self._token_interval = _MARGIN * 60.0 / state.tpm if state.tpm else 0.0

    def _learned_changed(self, how: str, before: LearnedLimit) -> None:
        assert self.adaptive is not None
        self._follow(self.adaptive.state)
        if self._unsaved is None or how == "cut":
            self._unsaved = (how, before.changed_at)

    def _queued_for_rate(self) -> None:
        """A request waits for the rate (not for a permit): an adaptive limit may grow."""
        if self.adaptive is not None:
            before = self.adaptive.state
            if self.adaptive.on_saturated(time.time()):
                self._learned_changed("raise", before)

    def _sent(self) -> None:
        hook = REQUEST_STARTED.get()
        if hook is not None:
            hook()
        if self.adaptive is not None:
            self.adaptive.on_sent(time.time())

    def heard(self, news: LimitNews, *, ok: bool) -> None:
        """What a response said: its rate-limit headers, and whether it went through (else a 429)."""
        if self.adaptive is None:
            return
        now, before = time.time(), self.adaptive.state
        stated = self.adaptive.on_headers(news, now)
        if stated:
            self._learned_changed("set", before)
            before = self.adaptive.state
        if ok:
            self.adaptive.on_success(now)
        elif not stated and self.adaptive.on_rate_limited(now):  # a newly stated limit is the correction
            self._learned_changed("cut", before)
        # None left until the provider's reset: wait for it rather than collect 429s.
        for remaining, reset in (
            (news.requests_remaining, news.requests_reset_s),
            (news.tokens_remaining, news.tokens_reset_s),
        ):
            if remaining == 0 and reset:
                self.paused_until = max(self.paused_until, time.monotonic() + min(reset, _RESET_WAIT_MAX_S))

    async def _share_learned(self) -> None:
        """Record a learned change in the ledger, and read the fleet's row now and then."""
        if self.adaptive is None or self._learned is None:
            return
        if self._unsaved is None and time.monotonic() - self._read_at < _LEARNED_READ_S:
            return
        async with self._learned_lock:
            adaptive, unsaved = self.adaptive, self._unsaved
            self._unsaved, self._read_at = None, time.monotonic()
            if unsaved is not None:
                how, seen = unsaved
                state = await self._learned.learn(
                    self.limit_key, adaptive.state, how, seen=seen, hold_s=adaptive.hold_s
                )
            else:
                state = (await self._learned.learned()).get(self.limit_key, adaptive.state)
            if self._unsaved is None and state != adaptive.state:
                adaptive.adopt(state)
                self._follow(state)

    async def settle(self) -> None:
        """The worker has no job left to start (a fleet's limiter gives its spare permits back)."""

    def penalize(self, seconds: float) -> None:
        """Pause the model for everyone (a 429/529 with or without Retry-After)."""
        self.backoffs += 1
        self.paused_until = max(self.paused_until, time.monotonic() + max(0.0, seconds))

    last_error: str | None = None

    def down(self) -> bool:
        """Whether the breaker is open: the model's last ``_BREAKER_AFTER`` requests or more all failed."""
        return self.failures_in_row >= _BREAKER_AFTER

    def outage_s(self) -> float:
        """How long the model has been down (0 when it is up)."""
        return 0.0 if self.down_since is None else time.monotonic() - self.down_since

    def gave_up(self) -> bool:
        """Down for longer than ``max_outage_s``: the run stops waiting for the model (its jobs stay pending)."""
        return self.down() and self.outage_s() > self.max_outage_s

    def may_probe(self) -> bool:
        """A down model takes one request at a time, and only once its pause is over."""
        return not self.probing and self.paused_for() <= 0

    def record(self, ok: bool, retry_after: float | None = None) -> None:
        """Count consecutive failures; past a threshold the model is down, paused longer at each failure."""
        if ok:
            self.failures_in_row = 0
            self.down_since = None
            return
        self.failures_in_row += 1
        if self.failures_in_row >= _BREAKER_AFTER:
            if self.down_since is None:
                self.down_since = time.monotonic()
            extra = self.failures_in_row - _BREAKER_AFTER
            self.penalize(max(retry_after or 0.0, min(_BREAKER_MAX_S, 1.0 * (2 ** min(extra, 6)))))


class Limiters:
    """One ``Limiter`` per limit key; models with the same key share it.

    With ``fleet``, the limiters are ``FleetLimiter``s on its ledger: the limits hold for every process.
    """

    def __init__(
        self,
        models: list[ModelSpec],
        *,
        fleet: FleetLimits | None = None,
        max_outage_s: float = _DEFAULT_MAX_OUTAGE_S,
        learned: LearnedLimits | None = None,
    ) -> None:
        self._by_key: dict[str, Limiter] = {}
        self._by_model: dict[str, Limiter] = {}
        learned = learned if learned is not None else (fleet.ledger if fleet is not None else None)
        for spec in models:
            key = spec.limit_key()
            if key not in self._by_key:
                adaptive = AdaptiveRate(shared=fleet is not None) if spec.adapts() else None
                self._by_key[key] = (
                    FleetLimiter(
                        spec.id,
                        spec.rate_limit,
                        key=key,
                        fleet=fleet,
                        ttl=max(30.0, 2 * spec.timeout_s),
                        max_outage_s=max_outage_s,
                        adaptive=adaptive,
                        learned=learned,
                    )
                    if fleet is not None
                    else Limiter(
                        spec.id,
                        spec.rate_limit,
                        max_outage_s=max_outage_s,
                        adaptive=adaptive,
                        key=key,
                        learned=learned,
                    )
                )
            self._by_model[spec.id] = self._by_key[key]

    def __getitem__(self, model_id: str) -> Limiter:
        return self._by_model[model_id]

    async def settle(self) -> None:
        """The worker has no job left to start: fleet limiters give back the permits they do not use."""
        for limiter in self._by_key.values():
            await limiter.settle()

    def learned(self) -> dict[str, LearnedLimit]:
        """Each adaptive model's learned limits as this process follows them."""
        return {
            model_id: lim.adaptive.state
            for model_id, lim in self._by_model.items()
            if lim.adaptive is not None
        }

    def backing_off(self) -> list[tuple[str, float]]:
        return [(lim.name, lim.paused_for()) for lim in self._by_key.values() if lim.paused_for() > 0]

    def given_up(self) -> dict[str, str]:
        """Models down for longer than the run waits, with their last error."""
        return {
            model_id: lim.last_error or "no answer"
            for model_id, lim in self._by_model.items()
            if lim.gave_up()
        }


# --- the fleet's limits -----------------------------------------------------------------------------------


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
    ) -> None:
        super().__init__(name, rate, max_outage_s=max_outage_s, adaptive=adaptive, key=key, learned=learned)
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
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Wait for a fleet permit and a fleet slot; the body is one request."""
        self.waiting += 1
        started = False
        try:
            await self._acquire()
            try:
                await self._wait_turn(tokens)
                self.waiting -= 1
                started = True
                began = time.monotonic()
                yield
                self._took(time.monotonic() - began)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._release()
        finally:
            if not started:
                self.waiting -= 1

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
        demand, now = self._in_use + self._queued, time.monotonic()
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
            age = time.monotonic() - self._synced_at
            if for_permit and (in_use < self._share or (want <= self._asked and age < self._POLL_S)):
                return
            if not for_permit and age < min_age:
                return
            self._share = await self._ledger.hold(
                self._key, self._holder, want=want, in_use=in_use, cap=self._cap, ttl=self._ttl
            )
            self._asked, self._synced_at = want, time.monotonic()
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # -- requests per minute ----------------------------------------------------------------------------

    async def _wait_turn(self, tokens: int) -> None:
        await self._share_learned()
        misses = 0
        while True:
            now = time.monotonic()
            if self.paused_until > now:
                if self._interval and self.paused_until > self._pause_sent:
                    await self._share_pause()
                await anyio.sleep(self.paused_until - time.monotonic())
                continue
            if self._interval or self._token_interval:
                start, due = await self._next_start(tokens)
                if start > time.monotonic():
                    if not misses:
                        self._queued_for_rate()
                    await anyio.sleep(start - time.monotonic())
                # Woken too late (a busy machine): starting now would bunch this request with the next
                # processes' slots, so take a fresh slot instead; but never starve for it.
                if time.monotonic() - due > max(self._interval / 2, 0.02) and misses < 3:
                    misses += 1
                    continue
            if self.paused_until <= time.monotonic():
                self._sent()
                return

    def _follow(self, state: LearnedLimit) -> None:
        super()._follow(state)
        if hasattr(self, "_slots"):
            self._slots.clear()  # reserved at the old rate

    async def _next_start(self, tokens: int) -> tuple[float, float]:
        """A reserved start, and when it became ours to use (its start, or later if it came late)."""
        async with self._slot_lock:
            now = time.monotonic()
            while self._slots and self._slots[0][1] < now:
                self._slots.popleft()  # nobody was ready for it: spending it late would bunch requests
            if self._slots and not self._token_interval:
                return self._slots.popleft()
            count = 1
            if not self._token_interval and self._interval:
                count = max(1, min(self._MAX_BLOCK, int(self._BLOCK_S / self._interval), self.waiting))
            before = time.monotonic()
            got = await self._ledger.reserve(
                self._key,
                count,
                self._interval,
                tokens=tokens if self._token_interval else 0,
                token_interval=self._token_interval,
            )
            after = time.monotonic()
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
