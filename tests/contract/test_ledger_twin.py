"""The limiter tests' fake-clock ledger (``tests/memory_ledger.py``) answers as the real one does.

The fleet limiter's property tests run on virtual time, which a ledger in a database cannot follow (its
statements run on a thread, and SQLite's clock is this machine's), so they use a model of the ledger's
arithmetic. Here the model and ``LimitLedger`` on SQLite and PostgreSQL answer one script of
reservations, give-backs and in-flight shares, each start set past any clock (``pause_until``), so
that the clocks' readings play no part and the answers must be equal.
"""

from __future__ import annotations

from typing import Any

import anyio

from knowwhen_runner.queue import open_ledger
from tests.memory_ledger import MemoryLedger
from tests.pg import db_url, pg_url  # noqa: F401

_AFTER = 4e9  # past any clock: every start is the ledger's arithmetic alone


class _Still:
    def now(self) -> float:
        return 0.0


async def _script(ledger: Any) -> list[object]:
    said: list[object] = []

    async def reserve(count: int, tokens: int = 0) -> Any:
        got = await ledger.reserve(
            "k", count, 0.5, tokens=tokens, token_interval=0.01 if tokens else 0.0, pause_until=_AFTER
        )
        said.append(("reserve", got.start, got.end))
        return got

    first = await reserve(3)
    second = await reserve(2, tokens=100)  # its tokens hold the next start back past its own end
    said.append(("give back, not the last", await ledger.give_back("k", first.start + 0.5, first.end)))
    said.append(("give back, the last", await ledger.give_back("k", second.start + 0.5, second.end)))
    await reserve(1)
    for holder, want, in_use in (("a", 5, 0), ("b", 4, 0), ("a", 5, 2), ("b", 4, 1), ("c", 0, 0)):
        share = await ledger.hold("k", holder, want=want, in_use=in_use, cap=6, ttl=600.0)
        said.append(("hold", holder, share))
    return said


def test_the_fake_clock_ledger_answers_as_the_real_one(db_url: str) -> None:  # noqa: F811
    async def real() -> list[object]:
        async with open_ledger(db_url) as ledger:
            return await _script(ledger)

    expected = anyio.run(real)
    assert anyio.run(_script, MemoryLedger(_Still(), shares=True)) == expected
    assert expected[:3] == [
        ("reserve", _AFTER, _AFTER + 1.5),
        ("reserve", _AFTER + 1.5, _AFTER + 2.5),
        ("give back, not the last", False),
    ]
