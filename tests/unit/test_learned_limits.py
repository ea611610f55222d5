"""Learned limits in the ledger: one state per limit key for the fleet, kept for the next run."""

from __future__ import annotations

import time

import anyio
import pytest

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider.adaptive import LearnedLimit, LimitNews
from knowwhen_runner.provider.limit_keys import FleetLimiter, FleetLimits, Limiter, Limiters
from knowwhen_runner.queue.limits import LimitLedger

_counter = iter(range(1_000_000))


def _spec() -> ModelSpec:
    """An adaptive model (no limit given, a remote server) with a limit key of its own."""
    n = next(_counter)
    return ModelSpec(id="m", model=f"openai/remote-{n}", kind="llm")


def test_the_ledger_takes_one_cut_per_hold_and_a_raise_only_on_the_state_it_saw(db_url: str) -> None:
    async def go() -> None:
        async with LimitLedger(db_url) as ledger:
            key = _spec().limit_key()
            start = LearnedLimit(rpm=1000, source="growing", changed_at=100.0)
            assert await ledger.learn(key, start, "set", seen=0.0, hold_s=5) == start
            cut = LearnedLimit(rpm=500, ceiling=1000, source="429", changed_at=110.0, cut_at=110.0)
            assert (await ledger.learn(key, cut, "cut", seen=100.0, hold_s=5)).rpm == 500
            # another process's cut for the same overshoot, 2 s later: the first one stands
            again = LearnedLimit(rpm=400, ceiling=800, source="429", changed_at=112.0, cut_at=112.0)
            assert (await ledger.learn(key, again, "cut", seen=100.0, hold_s=5)).rpm == 500
            # a raise by a process that had not seen the cut is refused; it gets the cut state back
            stale = LearnedLimit(rpm=2000, source="growing", changed_at=113.0)
            assert (await ledger.learn(key, stale, "raise", seen=100.0, hold_s=5)).rpm == 500
            fresh = LearnedLimit(rpm=600, ceiling=1000, source="429", changed_at=115.0, cut_at=110.0)
            assert (await ledger.learn(key, fresh, "raise", seen=110.0, hold_s=5)).rpm == 600
            assert (await ledger.learned())[key].rpm == 600

    anyio.run(go)


def test_a_new_run_starts_from_what_an_earlier_run_learned(db_url: str) -> None:
    """A limiter opened on a database with a learned row sends at that rate from its first request."""
    spec = _spec()

    async def go() -> tuple[float, float]:
        async with LimitLedger(db_url) as ledger:
            known = LearnedLimit(rpm=1200, ceiling=1250, source="429", changed_at=time.time())
            await ledger.learn(spec.limit_key(), known, "set", seen=0.0, hold_s=5)
        async with LimitLedger(db_url) as ledger:  # the next run
            limiter = Limiters([spec], learned=ledger)["m"]
            assert type(limiter) is Limiter and limiter.adaptive is not None
            assert limiter.adaptive.rpm == 60  # nothing read yet
            async with limiter.slot():
                pass
            return limiter.adaptive.rpm, limiter._interval

    rpm, interval = anyio.run(go)
    assert rpm == 1200
    assert interval == pytest.approx(1.002 * 60 / 1200)


def test_a_cut_by_one_process_reaches_the_others(db_url: str) -> None:
    """Two processes of a fleet: the one that meets a 429 cuts the shared rate; the other follows it."""
    spec = _spec()

    async def go() -> tuple[float, float]:
        async with LimitLedger(db_url) as one, LimitLedger(db_url) as two:
            a = Limiters([spec], fleet=FleetLimits(one, "a"))["m"]
            b = Limiters([spec], fleet=FleetLimits(two, "b"))["m"]
            assert isinstance(a, FleetLimiter) and isinstance(b, FleetLimiter)
            assert a.adaptive is not None and b.adaptive is not None
            a.heard(LimitNews(requests_limit=30), ok=True)  # the provider states 30 requests/min
            async with a.slot():  # the next request records it in the ledger
                pass
            deadline = time.monotonic() + 10
            while b.adaptive.rpm != 30 and time.monotonic() < deadline:
                async with b.slot():
                    pass
                await anyio.sleep(0.2)
            return a.adaptive.rpm, b.adaptive.rpm

    assert anyio.run(go) == (30, 30)
