"""Per-model rate limits: requests per minute, tokens per minute, requests in flight, and back-off.

Requests are spaced evenly (GCRA with no burst): at N requests/min a request may start every 60/N s, so
no sliding minute ever sees more than N. Tokens work the same way with the estimated size of each request.
A 429/529 pauses the model for everyone in this process (``penalize``), and a model that keeps failing is
paused for longer each time (a circuit breaker) instead of being hammered.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from .config import ModelSpec, RateLimit

__all__ = ["Limiter", "Limiters"]

_BREAKER_AFTER = 8  # consecutive failed requests before the model is paused
_BREAKER_MAX_S = 120.0


class Limiter:
    """The limits of one model (or one group of models that share a provider key)."""

    def __init__(self, name: str, rate: RateLimit) -> None:
        self.name = name
        self._interval = 60.0 / rate.requests_per_minute if rate.requests_per_minute else 0.0
        self._token_interval = 60.0 / rate.tokens_per_minute if rate.tokens_per_minute else 0.0
        self._next_request = 0.0
        self._next_token = 0.0
        self._in_flight = anyio.CapacityLimiter(rate.max_in_flight)
        self.paused_until = 0.0
        self.failures_in_row = 0
        self.backoffs = 0
        self.waiting = 0

    @property
    def max_in_flight(self) -> int:
        return int(self._in_flight.total_tokens)

    def paused_for(self) -> float:
        return max(0.0, self.paused_until - time.monotonic())

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
                yield
        finally:
            if not started:
                self.waiting -= 1

    async def _wait_turn(self, tokens: int) -> None:
        while True:
            now = time.monotonic()
            if self.paused_until > now:
                await anyio.sleep(self.paused_until - now)
                continue
            start = max(now, self._next_request, self._next_token)
            self._next_request = start + self._interval
            self._next_token = start + tokens * self._token_interval
            if start > now:
                await anyio.sleep(start - now)
            if self.paused_until <= time.monotonic():
                return

    def penalize(self, seconds: float) -> None:
        """Pause the model for everyone (a 429/529 with or without Retry-After)."""
        self.backoffs += 1
        self.paused_until = max(self.paused_until, time.monotonic() + max(0.0, seconds))

    def record(self, ok: bool) -> None:
        """Count consecutive failures; past a threshold pause the model, longer each time."""
        if ok:
            self.failures_in_row = 0
            return
        self.failures_in_row += 1
        if self.failures_in_row >= _BREAKER_AFTER:
            extra = self.failures_in_row - _BREAKER_AFTER
            self.penalize(min(_BREAKER_MAX_S, 2.0 * (2 ** min(extra, 6))))


class Limiters:
    """One ``Limiter`` per limit key; models with the same key share it."""

    def __init__(self, models: list[ModelSpec]) -> None:
        self._by_key: dict[str, Limiter] = {}
        self._by_model: dict[str, Limiter] = {}
        for spec in models:
            key = spec.limit_key()
            if key not in self._by_key:
                self._by_key[key] = Limiter(spec.id, spec.rate_limit)
            self._by_model[spec.id] = self._by_key[key]

    def __getitem__(self, model_id: str) -> Limiter:
        return self._by_model[model_id]

    def backing_off(self) -> list[tuple[str, float]]:
        return [(lim.name, lim.paused_for()) for lim in self._by_key.values() if lim.paused_for() > 0]
