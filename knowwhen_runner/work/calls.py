"""Model calls through the cache: what a job (a question, or every step of an episode) calls.

A call is looked up in the cache first (by its content-addressed key), made once when several jobs need
it at the same time (single flight), and remembered for a while so a job right behind reuses it.
With a budget, each call reserves its expected cost first and settles the real one after (``budget``).
Episodes write each response to the cache as soon as it arrives, so a killed episode replays its finished
calls on resume and continues where it stopped; question jobs hand their entries to the batched recorder.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import anyio

from ..cache import CacheEntry, CacheStore
from ..config import ModelSpec
from ..exceptions import ProviderError
from ..provider import CacheMode, CallKind, ModelClient, cache_key, decision_body, legacy_cache_key, llm_body
from .budget import BudgetGuard

__all__ = ["CachedCalls", "CallResult", "CallTally", "Lookup", "QuestionCall", "question_call"]

_FRESH_MAX = 4096


class QuestionCall(NamedTuple):
    """The call one open-loop question makes of a model."""

    kind: CallKind
    body: dict[str, Any]
    key: str


def question_call(model: ModelSpec, item: dict[str, Any]) -> QuestionCall:
    """The call one open-loop question makes of a model: its kind, request body and cache key."""
    kind: CallKind = "decision" if model.kind == "decision" else "llm"
    body = decision_body(item) if kind == "decision" else llm_body(item, model.tool_choice)
    return QuestionCall(kind, body, cache_key(model, kind, body))


class Lookup(NamedTuple):
    """A call to look up in the cache: whose, what, and its key."""

    model: ModelSpec
    kind: CallKind
    body: dict[str, Any]
    key: str


@dataclass
class CallResult:
    """A normalised response and how it was obtained."""

    response: dict[str, Any]
    key: str
    cache_hit: bool
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    wall_ms: float = 0.0
    cache_entry: CacheEntry | None = None  # to write, when deferred


@dataclass
class CallTally:
    """This process's model calls: made, requests sent, answered from the cache, and what the calls made
    cost (``spent_usd``, at their price; a cache hit spends nothing): the one place spend is counted."""

    calls: int = 0
    requests: int = 0
    cache_hits: int = 0
    spent_usd: float = 0.0

    def add(self, other: CallTally) -> None:
        """Count another tally's calls here too."""
        self.calls += other.calls
        self.requests += other.requests
        self.cache_hits += other.cache_hits
        self.spent_usd += other.spent_usd

    def spent(self, response: dict[str, Any] | None) -> None:
        """Count what a call made now cost (its response's ``cost_usd``)."""
        self.spent_usd += float((response or {}).get("cost_usd") or 0.0)


class CachedCalls:
    """Cache-through model calls for one worker process."""

    def __init__(
        self, store: CacheStore, client: ModelClient, policy: str, *, budget: BudgetGuard | None = None
    ) -> None:
        self.store = store
        self._budget = budget
        self._client = client
        self._mode = CacheMode(policy)
        self._inflight: dict[str, anyio.Event] = {}
        self._fresh: dict[str, dict[str, Any]] = {}
        self.tally = CallTally()

    @property
    def reads(self) -> bool:
        return self._mode.read

    async def lookup(self, wanted: list[Lookup]) -> dict[str, dict[str, Any]]:
        """The stored responses of these calls, by key, in one query (two when some miss).

        A call that misses under its key is looked up under its version-1 key (runs made before the
        shared store); what is found there is stored again under the current key.
        """
        if not wanted:
            return {}
        found = await self.store.get([w.key for w in wanted])
        if len(found) == len(wanted):
            return found
        old: dict[str, Lookup] = {}
        for w in wanted:
            if w.key not in found and (legacy := legacy_cache_key(w.model, w.kind, w.body)) is not None:
                old[legacy] = w
        got = await self.store.get(list(old)) if old else {}
        carried = [CacheEntry(old[k].key, old[k].model.model, r) for k, r in got.items()]
        found.update({e.key: e.response for e in carried})
        if carried and self._mode.write and not self._mode.overwrite:
            with anyio.CancelScope(shield=True):
                await self.store.put(carried)
        return found

    async def call(
        self,
        model: ModelSpec,
        kind: CallKind,
        body: dict[str, Any],
        *,
        key: str | None = None,
        lookup: bool = True,
        defer_write: bool = False,
    ) -> CallResult:
        """Answer from the cache or the model; raises ``ProviderError`` when the call fails for good."""
        key = key or cache_key(model, kind, body)
        started = time.perf_counter()
        while (waiter := self._inflight.get(key)) is not None:  # the same call is under way for another job
            await waiter.wait()
        if self._mode.read and key in self._fresh:
            self.tally.cache_hits += 1
            return CallResult(self._fresh[key], key, True, wall_ms=(time.perf_counter() - started) * 1000)
        # Claim the key before any await, so a job right behind waits for this one instead of calling too.
        event = self._inflight[key] = anyio.Event()
        try:
            if self._mode.read and lookup:
                hit = (await self.lookup([Lookup(model, kind, body, key)])).get(key)
                if hit is not None:
                    self._remember(key, hit)
                    self.tally.cache_hits += 1
                    return CallResult(hit, key, True, wall_ms=(time.perf_counter() - started) * 1000)
            asks = await self._budget.reserve(model, body) if self._budget is not None else []
            response: dict[str, Any] | None = None
            try:
                outcome = await self._client.call(model, kind, body)
                response = outcome.response
            except ProviderError as exc:
                self.tally.calls += exc.requests > 0
                self.tally.requests += exc.requests
                raise
            finally:
                if asks:
                    with anyio.CancelScope(shield=True):
                        await self._budget.settle(asks, response)  # type: ignore[union-attr]
        finally:
            event.set()
            self._inflight.pop(key, None)
        self._remember(key, outcome.response)
        self.tally.calls += 1
        self.tally.requests += outcome.requests
        self.tally.spent(outcome.response)
        result = CallResult(
            outcome.response,
            key,
            False,
            outcome.requests,
            outcome.errors,
            (time.perf_counter() - started) * 1000,
        )
        if self._mode.write:
            entry = CacheEntry(key, model.model, outcome.response)
            if defer_write:
                result.cache_entry = entry
            else:
                with anyio.CancelScope(shield=True):
                    await self.store.put([entry], overwrite=self._mode.overwrite)
        return result

    def _remember(self, key: str, response: dict[str, Any]) -> None:
        self._fresh[key] = response
        if len(self._fresh) > _FRESH_MAX:
            self._fresh.pop(next(iter(self._fresh)))
