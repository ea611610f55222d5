"""The request starts one process holds from the fleet's ledger, and how many it reserves at once.

A busy model reserves a block covering about ``BLOCK_S`` at its rate. A model whose calls come one after
another (a closed-loop chain: agent, decision, agent ...) would pay a ledger round trip per call; while
nobody else's starts are ahead of it in the ledger, it reserves ahead: a block covering its next
``AHEAD_CALLS`` calls at the pace it has shown (start to start, which is its latency plus the other
side's), never more than ``AHEAD_SPAN_S`` ahead. What it does not use is given back (``unused``), or
passes within that span (a crashed process).

A start is used at most ``LATE_S`` after its time, never before it: the ledger spaces starts
``1.002 x 60/N`` s apart, so at most N requests start in any 60 s window as long as none starts 0.12 s
late (N + 1 starts span 60.12 s).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Protocol

__all__ = ["AHEAD_SPAN_S", "LATE_S", "HeldSlots"]

LATE_S = 0.09  # below the 0.12 s the 1.002 spacing margin leaves in a minute
BLOCK_S = 0.1  # a busy model's block covers about this long at its rate
MAX_BLOCK = 64
AHEAD_CALLS = 2  # a chain's block covers about this many of its next calls
AHEAD_SPAN_S = 0.5  # the farthest ahead a chain reserves; a crashed holder's starts pass within it
_GAP_WEIGHT = 0.3  # of the latest gap in the moving average of a chain's pace


class Reserved(Protocol):
    """What the ledger returns for a reservation (``queue.limits.Reservation``)."""

    @property
    def start(self) -> float: ...
    @property
    def now(self) -> float: ...
    @property
    def end(self) -> float: ...


class HeldSlots:
    """Starts held from the ledger (on its clock), the chain's pace, and what may be given back."""

    def __init__(self) -> None:
        self._starts: deque[float] = deque()
        self._end: float | None = None  # the key's next start as our last reservation left it
        self.gap: float | None = None  # start to start, while calls come one at a time
        self._last: float | None = None
        self.contended = False  # the last reservation found others' starts ahead of it

    def take(self, now: float) -> float | None:
        """The first held start usable at ``now`` (ledger clock); those passed unused are dropped."""
        while self._starts and self._starts[0] + LATE_S < now:
            self._starts.popleft()
        return self._starts.popleft() if self._starts else None

    def size(self, interval: float, waiting: int) -> int:
        """How many starts to reserve: a busy model's block, or a chain's reserve-ahead."""
        busy = max(1, min(MAX_BLOCK, int(BLOCK_S / interval), waiting))
        gap = self.gap
        if waiting > 1 or self.contended or gap is None or gap + interval > AHEAD_SPAN_S:
            return busy
        ahead = math.ceil(AHEAD_CALLS * gap / interval) + 1
        return max(busy, min(MAX_BLOCK, ahead, int(AHEAD_SPAN_S / interval)))

    def add(self, got: Reserved, count: int, interval: float, not_before: float) -> None:
        """Hold the ``count`` starts of a reservation (the first is taken next)."""
        self._starts.extend(got.start + i * interval for i in range(count))
        self._end = got.end
        self.contended = got.start > max(got.now, not_before) + interval

    def started(self, at: float, *, one_at_a_time: bool) -> None:
        """A request started at ``at``: learn the chain's pace (only calls that come one at a time)."""
        if one_at_a_time and self._last is not None:
            gap = at - self._last
            self.gap = gap if self.gap is None else self.gap + _GAP_WEIGHT * (gap - self.gap)
        elif not one_at_a_time:
            self.gap = None
        self._last = at

    def unused(self) -> tuple[float, float] | None:
        """(first unused start, the reservation's end) to give back, now forgotten here; None if none."""
        first, end = (self._starts[0] if self._starts else None), self._end
        self.forget()
        return None if first is None or end is None else (first, end)

    def end_if_all_taken(self) -> float | None:
        """The last reservation's end, if every start of it has been taken (else None)."""
        return None if self._starts else self._end

    def forget(self) -> None:
        """Drop every held start (reserved at an old rate, or before a pause)."""
        self._starts.clear()
        self._end = None
