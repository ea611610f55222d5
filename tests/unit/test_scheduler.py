"""The scheduler on a fake clock: each limit group claims what its own rate and latency need, whatever
the groups beside it do (slow, paused, backing off)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from knowwhen_runner.work.scheduler import Lane, Scheduler

_TICK = 0.05


@dataclass
class _Model:
    """A simulated group: starts requests at its rate, each takes ``latency`` s; ``paused_until`` a back-off."""

    key: str
    rate: float
    latency: float
    max_in_flight: int = 16
    paused_until: float = 0.0
    waiting: list[float] = field(default_factory=list)  # claimed, not started (claim times)
    running: list[float] = field(default_factory=list)  # end times
    next_start: float = 0.0
    done: int = 0

    def lane(self, now: float) -> Lane:
        return Lane(
            self.key,
            (self.key,),
            self.rate,
            self.max_in_flight,
            self.latency,
            len(self.waiting) + len(self.running),
            free_in_s=max(0.0, self.paused_until - now),
        )

    def step(self, now: float) -> None:
        self.done += sum(1 for end in self.running if end <= now)
        self.running = [end for end in self.running if end > now]
        while (
            self.waiting
            and now >= self.paused_until
            and self.next_start <= now
            and len(self.running) < self.max_in_flight
        ):
            self.waiting.pop(0)
            self.running.append(now + self.latency)
            self.next_start = max(self.next_start, now - _TICK) + 1 / self.rate


def _simulate(models: list[_Model], seconds: float, batch: int = 64, cap: int | None = None) -> Counter[str]:
    """Run the claim loop for ``seconds`` of fake time; returns the jobs claimed per group."""
    scheduler = Scheduler(batch_size=batch, total_cap=cap)
    claimed: Counter[str] = Counter()
    by_key = {m.key: m for m in models}
    now = 0.0
    while now < seconds:
        for m in models:
            m.step(now)
        for key, n in scheduler.quotas([m.lane(now) for m in models], now).items():
            by_key[key].waiting.extend([now] * n)
            claimed[key] += n
            scheduler.claimed(key, n, n, now)  # the queue always has more
        now += _TICK
    return claimed


def test_a_slow_group_holds_only_its_own_share() -> None:
    """Beside a group at 1/s, five groups at 5/s each claim (and finish) about 5 a second, and the slow
    one holds no more than a few jobs at any time."""
    fast = [_Model(f"fast{i}", rate=5.0, latency=0.05) for i in range(5)]
    slow = _Model("slow", rate=1.0, latency=0.05)
    claimed = _simulate([*fast, slow], seconds=20.0)
    for m in fast:
        assert 90 <= m.done <= 105, (m.key, m.done)
        assert claimed[m.key] - m.done <= 6  # what it holds is what it starts soon
    assert 18 <= slow.done <= 21
    assert claimed["slow"] - slow.done <= 3


def test_slow_answers_get_in_hand_by_little_s_law() -> None:
    """A group whose answers take 2 s at 4/s keeps about 8 in flight (and reaches its rate); one whose
    answers take 10 ms keeps one or two; neither more than its in-flight cap plus what it starts soon."""
    laggard = _Model("laggard", rate=4.0, latency=2.0)
    quick = _Model("quick", rate=4.0, latency=0.01)
    scheduler = Scheduler(batch_size=64)
    assert 10 <= scheduler.target(laggard.lane(0.0)) <= 16 + 2
    assert scheduler.target(quick.lane(0.0)) <= 4
    _simulate([laggard, quick], seconds=20.0)
    assert laggard.done >= 0.9 * 4.0 * 18  # its rate, less the first answers' 2 s
    assert quick.done >= 0.95 * 4.0 * 20


def test_a_paused_group_claims_nothing_while_others_keep_their_rate() -> None:
    """A group paused for 10 s (a 429's Retry-After) claims nothing until the pause nears its end; the
    groups beside it finish at their own rate."""
    fast = [_Model(f"fast{i}", rate=5.0, latency=0.05) for i in range(3)]
    paused = _Model("paused", rate=5.0, latency=0.05, paused_until=10.0)
    scheduler = Scheduler(batch_size=64)
    claims_in_pause = 0
    now = 0.0
    models = [*fast, paused]
    while now < 20.0:
        for m in models:
            m.step(now)
        quotas = scheduler.quotas([m.lane(now) for m in models], now)
        for m in models:
            n = quotas.get(m.key, 0)
            m.waiting.extend([now] * n)
            if m is paused and now < 9.0:
                claims_in_pause += n
        now += _TICK
    assert claims_in_pause == 0
    assert all(95 <= m.done <= 105 for m in fast)
    assert 45 <= paused.done <= 52  # its rate after the pause


def test_a_backing_off_group_under_a_tight_total_cap_leaves_the_others_their_share() -> None:
    """With a total cap of 12 jobs in hand and a group that backs off every other second, the other
    groups still get their claims: the shares are split evenly when the cap binds, never taken by the
    group that cannot start its jobs."""
    steady = [_Model(f"s{i}", rate=3.0, latency=0.5) for i in range(3)]
    flappy = _Model("flappy", rate=20.0, latency=0.5)
    scheduler = Scheduler(batch_size=8, total_cap=12)
    now = 0.0
    models = [*steady, flappy]
    while now < 20.0:
        flappy.paused_until = now + 1.0 if int(now) % 2 == 0 else 0.0
        for m in models:
            m.step(now)
        for key, n in scheduler.quotas([m.lane(now) for m in models], now).items():
            next(m for m in models if m.key == key).waiting.extend([now] * n)
        now += _TICK
    for m in steady:
        assert m.done >= 0.85 * 3.0 * 19.5, (m.key, m.done)


def test_a_group_that_came_back_empty_is_not_asked_again_at_once() -> None:
    """A claim that found fewer jobs than asked leaves that group out of claims for a moment, then back."""
    scheduler = Scheduler(batch_size=64)
    lane = Lane("done", ("done",), 5.0, 16, 0.05, 0)
    assert scheduler.quotas([lane], 0.0)
    scheduler.claimed("done", 4, 0, 0.0)
    assert scheduler.quotas([lane], 0.3) == {}
    assert scheduler.quotas([lane], 0.7)


def test_a_group_answered_from_the_cache_is_claimed_in_whole_batches_under_a_total_cap() -> None:
    """``workers.concurrency`` bounds the jobs waiting for a call: a replayed group's jobs are answered as
    they arrive, so its claims are whole batches whatever the cap (a rerun is not slowed by it), while a
    group that calls its model beside it stays within the cap."""
    scheduler = Scheduler(batch_size=64, total_cap=32)
    replay = Lane("replay", ("replay",), None, 64, None, 0)
    assert scheduler.quotas([replay], 0.0) == {"replay": 32}  # nothing known yet: within the cap
    for _ in range(20):
        scheduler.answered("replay", cache_hit=True)
    assert scheduler.quotas([replay], 0.1) == {"replay": 64}
    calls = Lane("calls", ("calls",), 100.0, 64, 0.5, 28)
    assert scheduler.quotas([replay, calls], 0.2) == {"calls": 4, "replay": 60}  # calls: 28 + 4 = the cap
    busy_replay = Lane("replay", ("replay",), None, 64, None, 40)  # enough in hand: it asks for none
    assert scheduler.quotas([busy_replay, calls], 0.3) == {"calls": 4}  # its hand is not the cap's
