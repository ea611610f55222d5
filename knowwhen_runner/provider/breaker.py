"""A model's breaker: consecutive failed requests, when the model went down, and the one probe at a time.

A model whose last ``BREAKER_AFTER`` requests or more all failed is *down*: its limiter pauses it longer
at each failure (up to ``BREAKER_MAX_S`` between probes, so a model back up is noticed within that) and
lets one request through at a time to probe it. Down for longer than ``max_outage_s``, the run gives up
waiting for it (its jobs stay pending).
"""

from __future__ import annotations

from .clock import Clock

__all__ = ["BREAKER_AFTER", "BREAKER_MAX_S", "Breaker"]

BREAKER_AFTER = 8  # consecutive failed requests before the model is down (paused, then probed)
BREAKER_MAX_S = 30.0  # the longest pause between probes: a model back up is noticed within this


class Breaker:
    """The failure side of one limiter: its count of failures in a row, since when it is down, its probe."""

    def __init__(self, clock: Clock, max_outage_s: float) -> None:
        self._clock = clock
        self.max_outage_s = max_outage_s
        self.failures_in_row = 0
        self.down_since: float | None = None  # when the breaker opened (the clock's time), while it is open
        self.probing = False  # a probe request of a down model is under way
        self.last_error: str | None = None  # the last failed request's error, for the sentence that says so

    def down(self) -> bool:
        """Whether the breaker is open: the model's last ``BREAKER_AFTER`` requests or more all failed."""
        return self.failures_in_row >= BREAKER_AFTER

    def outage_s(self) -> float:
        """How long the model has been down (0 when it is up)."""
        return 0.0 if self.down_since is None else self._clock.now() - self.down_since

    def gave_up(self) -> bool:
        """Down for longer than ``max_outage_s``: the run stops waiting for the model."""
        return self.down() and self.outage_s() > self.max_outage_s

    def record(self, ok: bool, retry_after: float | None = None) -> float | None:
        """Count consecutive failures; past the threshold, how long to pause the model (longer at each)."""
        if ok:
            self.failures_in_row = 0
            self.down_since = None
            return None
        self.failures_in_row += 1
        if self.failures_in_row < BREAKER_AFTER:
            return None
        if self.down_since is None:
            self.down_since = self._clock.now()
        extra = self.failures_in_row - BREAKER_AFTER
        return max(retry_after or 0.0, min(BREAKER_MAX_S, 2.0 ** min(extra, 6)))
