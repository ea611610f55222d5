"""The worker loop: claim a job, call its model through the cache, record what came back.

Read in this order: ``worker`` (claim, call, record), ``recording`` (its recorder and heartbeat),
``scheduler`` and ``lanes`` (work in hand per limit group), ``screen_pace`` (a screened run's claims
kept one window ahead of its screen's looks), ``holds`` (what the worker leaves alone),
``handover`` (how it stops), ``quarantine`` (which failures hold a model back), ``budget`` (spending
caps), ``calls`` (cache-through calls), ``outcome`` (what its loops hand on), ``batch_lane`` (questions
through provider Batch APIs), ``episode`` (one closed-loop episode), ``stop_signals`` (Ctrl-C and
SIGTERM), ``event_loop`` (uvloop for workers), ``runner_errors`` (the runner's own errors, logged, never
a job's failure).
"""

from __future__ import annotations

from .outcome import WorkStats
from .worker import Worker

__all__ = ["WorkStats", "Worker"]
