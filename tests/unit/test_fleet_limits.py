"""Fleet-wide rate limits: several holders (processes) on one ledger share one model's limits."""

from __future__ import annotations

import time

import anyio

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider.limit_keys import FleetLimiter, FleetLimits, Limiter, Limiters
from knowwhen_runner.queue.limits import LimitLedger, fair_shares

_counter = iter(range(1_000_000))


def _spec(**rate: float) -> ModelSpec:
    """A model with its own limit key, so tests sharing a database do not share a limit."""
    n = next(_counter)
    return ModelSpec(id="m", model=f"hosted_vllm/m{n}", kind="decision", rate_limit=rate)  # type: ignore[arg-type]


def _fleet(url: str, spec: ModelSpec, holders: int) -> tuple[list[Limiter], list[LimitLedger]]:
    """One ledger and one limiter per holder, as separate processes would have them."""
    ledgers = [LimitLedger(url) for _ in range(holders)]
    limiters = []
    for i, ledger in enumerate(ledgers):
        limiters.append(Limiters([spec], fleet=FleetLimits(ledger, f"holder-{i}"))["m"])
    return limiters, ledgers


def test_fair_shares_split_the_cap_without_exceeding_wants() -> None:
    """Max-min fair: small wants are met in full, the rest is split evenly, nothing is left idle."""
    assert fair_shares(16, {"a": 32, "b": 32}) == {"a": 8, "b": 8}
    assert fair_shares(16, {"a": 2, "b": 32, "c": 32}) == {"a": 2, "b": 7, "c": 7}
    assert sum(fair_shares(16, {"a": 9, "b": 9, "c": 9}).values()) == 16
    assert fair_shares(4, {"a": 0, "b": 10}) == {"a": 0, "b": 4}


def test_limiters_are_local_outside_a_fleet() -> None:
    """Without a fleet a process keeps its limits in memory, as before."""
    assert type(Limiters([_spec(requests_per_minute=60)])["m"]) is Limiter


def test_request_slots_are_spaced_across_holders(db_url: str) -> None:
    """Two holders at 1200 requests/min together: no half second sees more than its 10 requests."""

    async def go() -> list[float]:
        limiters, ledgers = _fleet(db_url, _spec(requests_per_minute=1200), 2)
        assert all(isinstance(lim, FleetLimiter) for lim in limiters)
        starts: list[float] = []

        async def request(lim: Limiter) -> None:
            async with lim.slot():
                starts.append(time.monotonic())

        async with anyio.create_task_group() as tg:
            for i in range(40):
                tg.start_soon(request, limiters[i % 2])
        for ledger in ledgers:
            await ledger.close()
        return sorted(starts)

    starts = anyio.run(go)
    busiest = max(sum(1 for s in starts if t <= s < t + 0.5) for t in starts)
    # 0.5 s holds 10 intervals; +2 for starts whose timers a loaded machine woke late, bunched with the
    # next ones (seen at 12 with every core busy; a limiter that let both holders take the same slots gives 20)
    assert busiest <= 10 + 2
    # and the rate is reached, not just respected: far from a limiter that waits whole seconds or spaces
    # the two holders' slots one after the other (a loaded machine's timers wake late, so not to the ms)
    assert starts[-1] - starts[0] < 39 * 0.05 * 3


def test_in_flight_cap_holds_across_holders_and_is_shared(db_url: str) -> None:
    """max_in_flight=3 over two busy holders: never more than 3 at once, and both get to run."""

    async def go() -> tuple[int, list[int]]:
        limiters, ledgers = _fleet(db_url, _spec(max_in_flight=3), 2)
        open_now = peak = 0
        done = [0, 0]

        async def request(i: int) -> None:
            nonlocal open_now, peak
            async with limiters[i].slot():
                open_now += 1
                peak = max(peak, open_now)
                await anyio.sleep(0.03)
                open_now -= 1
            done[i] += 1

        async with anyio.create_task_group() as tg:
            for n in range(60):
                tg.start_soon(request, n % 2)
        for ledger in ledgers:
            await ledger.close()
        return peak, done

    peak, done = anyio.run(go)
    assert peak <= 3 and done == [30, 30]


def test_a_silent_holders_share_lapses(db_url: str) -> None:
    """A holder that dies holding permits (no release, no renewal) frees them after its lease."""

    async def go() -> float:
        spec = _spec(max_in_flight=2)
        dead, ledger = LimitLedger(db_url), LimitLedger(db_url)
        assert await dead.hold(spec.limit_key(), "dead", want=2, in_use=0, cap=2, ttl=1.0) == 2
        await dead.hold(spec.limit_key(), "dead", want=2, in_use=2, cap=2, ttl=1.0)
        live = Limiters([spec], fleet=FleetLimits(ledger, "live"))["m"]
        started = time.monotonic()
        async with live.slot():
            waited = time.monotonic() - started
        await dead.close()
        await ledger.close()
        return waited

    assert 0.5 < anyio.run(go) < 5.0


def test_a_pause_reaches_the_other_holders(db_url: str) -> None:
    """A 429 seen by one holder pauses the model's next slots for every holder."""

    async def go() -> float:
        limiters, ledgers = _fleet(db_url, _spec(requests_per_minute=6000), 2)
        async with limiters[0].slot():  # learns the ledger's clock
            pass
        limiters[0].penalize(1.0)

        async def paused_request() -> None:
            async with limiters[0].slot():
                pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(paused_request)
            await anyio.sleep(0.2)
            started = time.monotonic()
            async with limiters[1].slot():
                waited = time.monotonic() - started
        for ledger in ledgers:
            await ledger.close()
        return waited

    assert anyio.run(go) > 0.5
