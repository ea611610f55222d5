"""Thresholds fitted during a run, from the run's own finished jobs.

A closed-loop scenario may ask for its gating threshold to be fitted on ``shadow`` episodes of a
separate fit task set; the planner holds back the ``gated`` episodes until the fit exists. Fits are
recomputed from recorded results each time (pure and idempotent), so nothing extra needs to be stored.
"""

from __future__ import annotations

from typing import Any

from .config import SweepConfig
from .queue import Queue

__all__ = ["compute_fits"]


async def compute_fits(config: SweepConfig, queue: Queue) -> dict[str, Any]:
    """Fits available now, keyed by what the planner asks for; empty when no scenario needs one."""
    return {}
