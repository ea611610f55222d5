"""How a working process answers the signals that stop it: Ctrl-C (SIGINT) and a scheduler's SIGTERM.

Ctrl-C stops claiming and lets the calls in flight finish; a second Ctrl-C cancels them. SIGTERM, what
Slurm and Kubernetes send before they kill a job, is a hand-over: unstarted jobs go back at once, calls
in flight get ``workers.stop_grace_s`` (below Slurm's 30 s KillWait), and the process exits with
``EXIT_REQUEUE`` so a scheduler may start it again. Either way nothing answered is lost.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

import anyio

from ..exceptions import EXIT_REQUEUE
from ..messages import say
from .worker import Worker

__all__ = ["watch_stop_signals"]


async def watch_stop_signals(
    worker: Worker, grace_s: float, stopped: Callable[[], None], cancel: Callable[[], None]
) -> None:
    """Until cancelled: the first stop signal stops ``worker`` (a hand-over on SIGTERM) and calls
    ``stopped``; a second Ctrl-C calls ``cancel``."""
    once = False
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            if signum == signal.SIGTERM and not worker.stats.handed_over:
                said = say("signal.handover", grace=f"{grace_s:.0f}", code=EXIT_REQUEUE)
                print(f"\nknowwhen: {said}", file=sys.stderr, flush=True)
                once = True
                stopped()
                worker.hand_over(grace_s)
            elif not once:
                once = True
                stopped()
                print(f"\nknowwhen: {say('signal.stopping')}", file=sys.stderr, flush=True)
                worker.stop()
            elif signum == signal.SIGINT:
                cancel()
