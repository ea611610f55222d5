"""A worker's limit groups ("lanes"): what each holds in hand, what its limiter says of it, and what the
``Scheduler`` claims for it. A job is in its lane's hand from its claim until it is answered, handed to a
provider batch, or given back.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence

import anyio

from ..config import ModelSpec, WorkerSettings
from ..jobs import Job
from ..provider import Limiters
from ..queue import ClaimQuota
from .scheduler import Lane, Scheduler

__all__ = ["Lanes"]

_RECORD_MAX = 512  # answered jobs waiting for the recorder, beyond those in hand, before claims wait
_HELD_MAX = 8192  # claimed and not yet recorded, when workers.concurrency sets no bound


class Lanes:
    """The limit groups of one worker's models, each with its jobs in hand."""

    def __init__(
        self, models: Sequence[ModelSpec], limiters: Limiters | None, settings: WorkerSettings
    ) -> None:
        self._limiters = limiters
        self._specs = {m.id: m for m in models}
        self._members: dict[str, list[str]] = {}
        self._key: dict[str, str] = {}
        for spec in models:
            key = limiters[spec.id].limit_key if limiters is not None else spec.limit_key()
            key = key or spec.limit_key()
            self._members.setdefault(key, []).append(spec.id)
            self._key[spec.id] = key
        self._in_hand: Counter[str] = Counter()
        cap = settings.concurrency
        # A cap a user sets bounds what is in hand, not only what runs: a worker told to run one job at a
        # time does not sit on leased episodes another worker could be running.
        self.scheduler = Scheduler(batch_size=settings.batch_size, total_cap=cap)
        #: Claims wait while this many jobs are claimed and not yet recorded.
        self.held_cap = _HELD_MAX if cap is None else _RECORD_MAX + cap + settings.batch_size
        self._asked: dict[str, int] = {}
        self._left = anyio.Event()

    def lane(
        self,
        key: str,
        gone: dict[str, str] | frozenset[str] = frozenset(),
        aside: frozenset[str] = frozenset(),
    ) -> Lane:
        """One group as the scheduler sees it now (models in ``gone`` left out; a model set aside, in
        ``aside``, makes its group take one job at a time, for the probe)."""
        members = self._members[key]
        free = tuple(m for m in members if m not in gone)
        probing = any(m in aside for m in free)
        if self._limiters is None:
            spec = self._specs[members[0]]
            return Lane(key, free, None, spec.rate_limit.max_in_flight, None, self._in_hand[key])
        lim = self._limiters[members[0]]
        down, free_in = lim.down(), lim.paused_for()
        if down and (not lim.may_probe() or lim.gave_up()):
            free_in = math.inf
        return Lane(
            key, free, lim.rate_per_s(), lim.max_in_flight, lim.latency_s, self._in_hand[key], free_in,
            down or probing,
        )  # fmt: skip

    def quotas(
        self, gone: dict[str, str], aside: frozenset[str] = frozenset(), room: dict[str, int] | None = None
    ) -> list[ClaimQuota]:
        """What to claim now, per group (``Scheduler.quotas``); a group whose models all have ``room`` (a
        screen's window) claims no more than it."""
        lanes = [self.lane(key, gone, aside) for key in self._members]
        self._asked = self.scheduler.quotas(lanes, time.monotonic())
        if room:
            by_lane = {lane.key: lane for lane in lanes}
            for key, n in list(self._asked.items()):
                models = by_lane[key].models
                if models and all(m in room for m in models):
                    self._asked[key] = min(n, sum(room[m] for m in models))
            self._asked = {k: n for k, n in self._asked.items() if n > 0}
        by_key = {lane.key: lane for lane in lanes}
        return [ClaimQuota(frozenset(by_key[k].models), n) for k, n in self._asked.items()]

    def claimed(self, quotas: list[ClaimQuota], jobs: list[Job]) -> None:
        """Count a claim's jobs in their groups' hands; a group that got fewer than asked is empty a while."""
        got: Counter[str] = Counter(self._key[j.model_id] for j in jobs)
        self._in_hand.update(got)
        now = time.monotonic()
        for key, asked in self._asked.items():
            self.scheduler.claimed(key, asked, got[key], now)
        self._asked = {}

    def left(self, model_id: str, *, cache_hit: bool = False) -> None:
        """A job of the model left its group's hand (answered, handed on or given back)."""
        key = self._key[model_id]
        self._in_hand[key] -= 1
        self.scheduler.answered(key, cache_hit=cache_hit)
        self._left.set()

    async def changed(self, within_s: float) -> None:
        """Wait until a job leaves a hand (or ``within_s`` passes)."""
        with anyio.move_on_after(within_s):
            await self._left.wait()
        self._left = anyio.Event()

    def wake(self) -> None:
        """Ask every group again at the next claim (jobs may be pending again)."""
        self.scheduler.wake()

    def in_hand(self) -> dict[str, int]:
        """Jobs in hand per group."""
        return {key: n for key, n in self._in_hand.items() if n}
