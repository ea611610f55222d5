"""Which limit groups to claim jobs for now, and how many: work in hand kept per group, sized from its own
rate and latency, so a slow, paused or backing-off model holds only its own share (Little's law: a group
starting ``r`` requests a second that each take ``L`` seconds needs about ``r × L`` jobs in hand, plus what
it starts before the next claim). Pure: the worker tells it what each group is doing, times included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["Lane", "Scheduler"]

_HORIZON_S = 0.5  # claims come this often at least: a group keeps what it starts meanwhile in hand
_HEADROOM = 1.25  # in hand beyond rate × latency, for the latency's jitter
_FIRST_LATENCY_S = 0.5  # a group's request latency until one is seen
_EMPTY_RETRY_S = 0.5  # a group whose claim came back short is asked for again after this
_CACHED = 0.5  # a group whose jobs are mostly answered from the cache is claimed for in batches


@dataclass(frozen=True, slots=True)
class Lane:
    """One limit group as the worker sees it now."""

    key: str
    models: tuple[str, ...]  # its models whose jobs may be claimed now (held-back ones left out)
    rate_per_s: float | None  # requests it may start per second; None: no rate limit
    max_in_flight: int
    latency_s: float | None  # a request's recent duration; None: none seen yet
    in_hand: int  # jobs claimed for it and not yet answered
    free_in_s: float = 0.0  # until it may start a request (a pause, a back-off, a down model's probe)
    down: bool = False  # every request fails lately: one job at a time probes it


@dataclass
class _Seen:
    hits: float = 0.0  # the share of its recent jobs answered from the cache (moving average)
    empty_until: float = -math.inf  # no pending job of it was found: not asked for again until then


@dataclass
class Scheduler:
    """Per group: how many jobs to keep in hand (``target``) and how many to claim now (``quotas``)."""

    batch_size: int  # the most jobs one claim takes
    total_cap: int | None = None  # the most jobs in hand across groups (``workers.concurrency``)
    _seen: dict[str, _Seen] = field(default_factory=dict)
    _turn: int = 0

    def target(self, lane: Lane) -> int:
        """Jobs to keep in hand: what the group has in flight at its rate and latency, with headroom, plus
        what it starts before the next claim; within its in-flight cap and the next claim's worth."""
        if lane.down:
            return 1
        if self._cached(lane.key):
            return self.batch_size
        if lane.rate_per_s is None:
            return lane.max_in_flight + self.batch_size
        latency = lane.latency_s if lane.latency_s is not None else _FIRST_LATENCY_S
        in_flight = min(float(lane.max_in_flight), lane.rate_per_s * latency)
        ahead = max(1, math.ceil(lane.rate_per_s * _HORIZON_S))
        return min(lane.max_in_flight + ahead, math.ceil(in_flight * _HEADROOM) + ahead)

    def quotas(self, lanes: list[Lane], now: float) -> dict[str, int]:
        """How many jobs to claim now per group: up to its target, none for a group that cannot start one
        soon (paused, backing off, down and not to be probed) or had none pending a moment ago; within one
        claim's size and the total cap (which groups answered from the cache are outside), shared out
        evenly when they bind."""
        want: dict[str, int] = {}
        for lane in lanes:
            seen = self._seen.get(lane.key)
            if not lane.models or lane.free_in_s > _HORIZON_S or (seen and seen.empty_until > now):
                continue
            target = self.target(lane)
            n = target - lane.in_hand
            if n > 0 and n >= target // 2:  # refill at half: claims of a few jobs each, not one by one
                want[lane.key] = n
        if self.total_cap is None:
            return self._share(want, self.batch_size)
        # The cap bounds the jobs that wait for a call. A group answered from the cache is claimed in
        # whole batches outside it: its jobs are answered as they arrive and never hold a caller.
        cached = {k for k in want if self._cached(k)}
        capped = {k: n for k, n in want.items() if k not in cached}
        waiting = sum(lane.in_hand for lane in lanes if not self._cached(lane.key))
        got = self._share(capped, min(self.batch_size, self.total_cap - waiting))
        rest = self.batch_size - sum(got.values())
        return {**got, **self._share({k: want[k] for k in cached}, rest)}

    def _cached(self, key: str) -> bool:
        seen = self._seen.get(key)
        return seen is not None and seen.hits > _CACHED

    def _share(self, want: dict[str, int], room: int) -> dict[str, int]:
        """Water-filling: every group gets what it wants up to an equal share; the rest goes round."""
        if room <= 0 or not want:
            return {}
        if sum(want.values()) <= room:
            return want
        keys = sorted(want)
        self._turn = (self._turn + 1) % len(keys)
        keys = keys[self._turn :] + keys[: self._turn]  # whoever gets the odd job goes round
        got = dict.fromkeys(keys, 0)
        while room > 0:
            open_keys = [k for k in keys if got[k] < want[k]]
            if not open_keys:
                break
            each = max(1, room // len(open_keys))
            for k in open_keys:
                give = min(each, want[k] - got[k], room)
                got[k] += give
                room -= give
                if room == 0:
                    break
        return {k: n for k, n in got.items() if n > 0}

    def claimed(self, key: str, asked: int, got: int, now: float) -> None:
        """What a claim brought: a group that came back short has nothing pending for a moment."""
        if got < asked:
            self._seen.setdefault(key, _Seen()).empty_until = now + _EMPTY_RETRY_S

    def answered(self, key: str, *, cache_hit: bool) -> None:
        """A job of the group was answered (from the cache or not)."""
        seen = self._seen.setdefault(key, _Seen())
        seen.hits += 0.1 * (float(cache_hit) - seen.hits)

    def wake(self) -> None:
        """Jobs may be pending again (released by a worker, re-queued): ask every group again."""
        for seen in self._seen.values():
            seen.empty_until = -math.inf
