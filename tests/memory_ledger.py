"""The fleet ledger's arithmetic in memory (``queue.limits.LimitLedger``), on a test's fake clock.

Request starts are GCRA with no burst, as the ledger keeps them: a reservation of k starts (and t
tokens) moves the key's next start k intervals (and its next token t token intervals) past the latest
of both, now and the pause asked for; a give-back moves it back only if nobody
reserved after. In-flight shares are the ledger's too when ``shares`` is set: each holder gets its
max-min fair share of the cap, never what the others still hold (else every holder may use the cap).
One key, as the limiter tests use one. The ledger's clock is the fake clock plus ``offset``.
``tests/contract/test_ledger_twin.py`` holds it to the real ledger's answers on SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from knowwhen_runner.queue.limits import fair_shares

__all__ = ["MemoryLedger"]


class _Clock(Protocol):
    def now(self) -> float: ...


@dataclass(frozen=True)
class _Got:
    start: float
    now: float
    end: float


class MemoryLedger:
    """Reservations, give-backs and (with ``shares``) in-flight shares of one key, in memory."""

    def __init__(self, clock: _Clock, offset: float = 0.0, *, shares: bool = False) -> None:
        self.clock, self.offset, self.shares = clock, offset, shares
        self.next = 0.0  # the key's next request start
        self.next_token = 0.0  # when its token budget allows the next request
        self.blocks: list[tuple[float, float, float]] = []  # (asked at, first start, end), on its clock
        self.holds: dict[str, tuple[int, int]] = {}  # holder -> (permits, wants)

    async def reserve(
        self, key: str, count: int, interval: float, *, tokens: int = 0, token_interval: float = 0.0,
        pause_until: float = 0.0,
    ) -> _Got:  # fmt: skip
        now = self.clock.now() + self.offset
        start = max(self.next, self.next_token, now, pause_until)
        self.next = start + count * interval
        self.next_token = start + tokens * token_interval
        self.blocks.append((now, start, self.next))
        return _Got(start, now, self.next)

    async def give_back(self, key: str, first: float, end: float) -> bool:
        if self.next != end:
            return False
        self.next = max(first, self.clock.now() + self.offset)
        return True

    async def hold(self, key: str, holder: str, *, want: int, in_use: int, cap: int, ttl: float) -> int:
        if not self.shares:
            return cap
        others = {h: pw for h, pw in self.holds.items() if h != holder}
        held = sum(permits for permits, _ in others.values())
        fair = fair_shares(cap, {**{h: w for h, (_, w) in others.items()}, holder: want})
        share = max(0, min(fair[holder], cap - held))
        self.holds[holder] = (max(share, in_use), want)
        return share

    async def learned(self) -> dict:  # type: ignore[type-arg]
        return {}

    async def learn(self, *args: object, **kw: object) -> object:
        raise AssertionError("not adaptive")
