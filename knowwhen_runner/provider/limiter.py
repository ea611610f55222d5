"""One process's limits of one model: requests and tokens per minute, in flight, back-off, the breaker.

Requests are spaced evenly (GCRA with no burst): at N requests/min a request may start every 60/N s, so
no sliding minute ever sees more than N. Tokens work the same way with the estimated size of each request.
A 429/529 pauses the model for everyone in this process (``penalize``). A model that keeps failing
unreachable (no HTTP response, 502/503/504: ``retry.Verdict``) is *down*: its ``breaker`` opens, it is
paused for longer each time, and when a pause ends one request at a time probes it; its jobs wait
meanwhile, up to ``max_outage_s``. A learned limit follows an ``AdaptiveRate`` shared through
``LearnedLimits``; without one, a limit the provider states is kept to when the config gives none or a
higher one, wherever the server runs. ``limit_keys.Limiters`` hands out one per limit key;
``fleet_limiter`` builds on ``Limiter`` for a fleet.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Protocol

import anyio

from ..config import RateLimit
from .adaptive import AdaptiveRate, LearnedLimit, LimitNews
from .breaker import Breaker
from .clock import MONOTONIC, Clock

__all__ = ["REQUEST_STARTED", "LearnedLimits", "Limiter"]

#: Called (in the task that waited) when a limiter lets a request start: a worker learns which of its
#: jobs have sent something, and so which it may still hand back unstarted.
REQUEST_STARTED: ContextVar[Callable[[], None] | None] = ContextVar("request_started", default=None)

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
        clock: Clock = MONOTONIC,
    ) -> None:
        self.name = name
        self._clock = clock
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
        self.backoffs = 0
        self.waiting = 0
        self.breaker = Breaker(clock, max_outage_s)  # failures in a row, down since, the probe
        self.latency_s: float | None = None  # requests' recent duration (moving average)
        self.stated: dict[str, tuple[float, float | None]] = {}  # kept to: (stated, configured) per kind
        # told once per kind when a configured limit is above the one the provider states
        self.on_stated: Callable[[str, str, float, float], None] | None = None

    @property
    def max_in_flight(self) -> int:
        return int(self._in_flight.total_tokens)

    @property
    def counts_tokens(self) -> bool:
        """Whether the model has a tokens-per-minute limit (else a request's size is not needed)."""
        return self._token_interval > 0

    def paused_for(self) -> float:
        return max(0.0, self.paused_until - self._clock.now())

    def rate_per_s(self) -> float | None:
        """Requests it may start per second now (configured or learned); None: no rate limit."""
        return _MARGIN / self._interval if self._interval else None

    @contextmanager
    def _timed(self) -> Iterator[None]:
        """The body is one request: its duration, on the limiter's clock, joins ``latency_s``."""
        began = self._clock.now()
        yield
        seconds, last = self._clock.now() - began, self.latency_s
        self.latency_s = seconds if last is None else last + _LATENCY_WEIGHT * (seconds - last)

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Wait for an in-flight permit and a request slot; the body is one request."""
        self.waiting += 1
        started = False
        try:
            async with self._permit():
                await self._wait_turn(tokens)
                self.waiting -= 1
                started = True
                with self._timed():
                    yield
        finally:
            if not started:
                self.waiting -= 1

    def _permit(self) -> AbstractAsyncContextManager[object]:
        """One of the model's in-flight places, held for a request (this process's own cap)."""
        return self._in_flight

    async def _wait_turn(self, tokens: int) -> None:
        await self._share_learned()
        while True:
            now = self._clock.now()
            if self.paused_until > now:
                await self._clock.sleep(self.paused_until - now)
                continue
            start = max(now, self._next_request, self._next_token)
            self._next_request = start + self._interval
            self._next_token = start + tokens * self._token_interval
            if start > now:
                self._queued_for_rate()
                await self._clock.sleep(start - now)
                now = self._clock.now()
            if self.paused_until <= now:
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
            self._keep_stated(news)
            self._wait_for_reset(news)
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
        self._wait_for_reset(news)

    def _keep_stated(self, news: LimitNews) -> None:
        """A limit the provider states, where none is learned: sent at when the config gives none or a
        higher one (the provider refuses what passes it anyway); noted in ``stated`` for the run to say."""
        for kind, limit, configured in (
            ("requests", news.requests_limit, self._rate.requests_per_minute),
            ("tokens", news.tokens_limit, self._rate.tokens_per_minute),
        ):
            if not limit:
                continue
            own = _MARGIN * 60.0 / configured if configured else 0.0
            interval = max(own, _MARGIN * 60.0 / limit)
            if kind == "requests" and interval != self._interval:
                self._interval = interval
            elif kind == "tokens" and interval != self._token_interval:
                self._token_interval = interval
            else:
                continue
            if configured is not None and configured <= limit:
                self.stated.pop(kind, None)
                continue
            first = kind not in self.stated
            self.stated[kind] = (limit, configured)
            if first and configured is not None and self.on_stated is not None:
                self.on_stated(self.name, kind, limit, configured)

    def _wait_for_reset(self, news: LimitNews) -> None:
        """None left until the provider's reset: wait for it rather than collect 429s."""
        for remaining, reset in (
            (news.requests_remaining, news.requests_reset_s),
            (news.tokens_remaining, news.tokens_reset_s),
        ):
            if remaining == 0 and reset:
                self.paused_until = max(self.paused_until, self._clock.now() + min(reset, _RESET_WAIT_MAX_S))

    async def _share_learned(self) -> None:
        """Record a learned change in the ledger, and read the fleet's row now and then."""
        if self.adaptive is None or self._learned is None:
            return
        if self._unsaved is None and self._clock.now() - self._read_at < _LEARNED_READ_S:
            return
        async with self._learned_lock:
            adaptive, unsaved = self.adaptive, self._unsaved
            self._unsaved, self._read_at = None, self._clock.now()
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
        self.paused_until = max(self.paused_until, self._clock.now() + max(0.0, seconds))

    def down(self) -> bool:
        """Whether the model is down (its breaker is open)."""
        return self.breaker.down()

    def gave_up(self) -> bool:
        """Down for longer than the run waits for it (its jobs stay pending)."""
        return self.breaker.gave_up()

    def may_probe(self) -> bool:
        """A down model takes one request at a time, and only once its pause is over."""
        return not self.breaker.probing and self.paused_for() <= 0

    def record(self, ok: bool, retry_after: float | None = None) -> None:
        """Count the request on the breaker; a down model is paused longer at each failure."""
        pause = self.breaker.record(ok, retry_after)
        if pause is not None:
            self.penalize(pause)
