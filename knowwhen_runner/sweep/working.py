"""Working the queue in this process: the worker, its progress bar, and the signals that stop it.

``work_queue`` is what every working process runs for a stage: ``run`` (``sweep``) and ``worker``
(``fleet``) alike.
"""

from __future__ import annotations

import functools
import sys

import anyio

from ..cache import CacheStore, cache_url, open_cache
from ..config import SweepConfig
from ..jobs import Items
from ..messages import say
from ..provider import (
    AutoTransport,
    FleetLimits,
    LearnedLimits,
    Limiters,
    ModelClient,
    ProviderTransport,
    Secrets,
)
from ..queue import Queue, open_ledger
from ..work.screen_pace import ScreenPace
from ..work.stop_signals import watch_stop_signals
from ..work.worker import Worker, WorkStats
from .notify import notify
from .progress import SweepProgress, progress_totals

__all__ = ["work_queue"]


async def work_queue(
    config: SweepConfig,
    queue: Queue,
    secrets: Secrets,
    items: Items,
    *,
    progress: bool = True,
    fleet: FleetLimits | None = None,
    transport: ProviderTransport | None = None,
    cache: CacheStore | None = None,
    start_together: int = 0,
    pace: ScreenPace | None = None,
) -> tuple[WorkStats, bool]:
    """Work the queue in this process with a progress bar; Ctrl-C stops gracefully, twice cancels.

    ``fleet``: rate limits shared by every process of the run; ``transport``: how requests and provider
    batches are sent (unless given, each model's ``transport:``: direct or litellm, ``AutoTransport``;
    tests pass a ``MockTransport``); ``cache``: the response store (default: the
    one the config names, opened for this call); ``start_together``: the processes of a ``run --processes
    N`` start that wait for each other before their first claim (``work/start_together.py``); ``pace``: a
    screened run's claims kept in step with its screen (``screened_work``).
    """
    if cache is None:
        async with open_cache(cache_url(config)) as store:
            return await work_queue(
                config,
                queue,
                secrets,
                items,
                progress=progress,
                fleet=fleet,
                transport=transport,
                cache=store,
                start_together=start_together,
                pace=pace,
            )
    if fleet is None and any(m.adapts() for m in config.models) and not config.db_url.startswith("memory"):
        # learned limits are kept in the run database for the next run, even without a fleet
        async with open_ledger(config.db_url) as ledger:
            return await _work(
                config, queue, secrets, items, progress, None, transport, cache, ledger, start_together, pace
            )
    return await _work(
        config, queue, secrets, items, progress, fleet, transport, cache, None, start_together, pace
    )


async def _work(
    config: SweepConfig,
    queue: Queue,
    secrets: Secrets,
    items: Items,
    progress: bool,
    fleet: FleetLimits | None,
    transport: ProviderTransport | None,
    cache: CacheStore,
    learned: LearnedLimits | None,
    start_together: int,
    pace: ScreenPace | None,
) -> tuple[WorkStats, bool]:
    limiters = Limiters(config.models, fleet=fleet, max_outage_s=config.workers.max_outage_s, learned=learned)
    limiters.tell_stated(_say_stated)
    tries, error_rate = max(2, config.workers.max_attempts + 1), config.workers.set_aside_error_rate
    transport = transport or AutoTransport(config.models, config.workers.transport)
    client = ModelClient(
        limiters,
        secrets,
        transport=transport,
        max_tries=tries,
        set_aside_error_rate=error_rate,
        set_aside_probe_s=config.workers.set_aside_probe_s,
    )
    client.failing.on_set_aside = functools.partial(_say_set_aside, config.workers.set_aside_probe_s)
    total, already = await progress_totals(queue)  # the open jobs alone, when the plan's size is kept
    display = SweepProgress(total, already, backing_off=limiters.backing_off, enabled=progress)
    worker = Worker(
        config,
        queue,
        client,
        items,
        cache=cache,
        limiters=limiters,
        batch_transport=transport,
        on_progress=lambda s: display.update(s.done, s.cost_usd, s.failed, s.runner_errors),
        on_quarantine=lambda model_id, reason: _quarantined(config, model_id, reason),
        on_set_aside=lambda model_id, cause: _set_aside_told(config, model_id, cause),
        start_together=start_together,
        pace=pace,
    )
    display.batches = worker.batches.describe if worker.batches is not None else None
    try:
        with display:
            return await _until_done(worker, display, config.workers.stop_grace_s)
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()


async def _until_done(worker: Worker, display: SweepProgress, grace: float) -> tuple[WorkStats, bool]:
    """Run the worker beside its signal watch and the display's tick; what it did, and whether it was
    interrupted."""
    interrupted = False
    async with anyio.create_task_group() as tg:

        def stopped() -> None:
            nonlocal interrupted
            interrupted = True

        async def watch_signals() -> None:
            await watch_stop_signals(worker, grace, stopped, tg.cancel_scope.cancel)

        async def work() -> None:
            await worker.run()
            tg.cancel_scope.cancel()

        async def tick() -> None:
            while True:  # nothing is recorded while the database is away: the line still says so
                await anyio.sleep(1.0)
                display.tick()

        tg.start_soon(watch_signals)
        tg.start_soon(tick)
        tg.start_soon(work)
    return worker.stats, interrupted


def _say_stated(name: str, kind: str, stated: float, configured: float) -> None:
    said = say(
        "progress.stated_limit",
        name=name,
        stated=f"{stated:,.0f}",
        kind=kind,
        configured=f"{configured:,.0f}",
    )
    print(f"\nknowwhen: {said}", file=sys.stderr, flush=True)


def _quarantined(config: SweepConfig, model_id: str, reason: str) -> None:
    _say_quarantined(model_id, reason)
    notify(config, "quarantine", f"{model_id} is quarantined: {reason}", wait=False)


def _set_aside_told(config: SweepConfig, model_id: str, cause: str | None) -> None:
    """The run's hooks hear that a model was set aside (``cause``), or is back (None)."""
    if cause is not None:
        notify(config, "set_aside", f"{model_id} is set aside: {cause}", wait=False)
    else:
        notify(
            config, "back", f"{model_id} is back: a probe answered, its jobs are answered again", wait=False
        )


def _say_set_aside(probe_s: float, model_id: str, reason: str) -> None:
    said = say("progress.set_aside", model=model_id, reason=reason, every=f"{probe_s:g}")
    print(f"\nknowwhen: {said}", file=sys.stderr, flush=True)


def _say_quarantined(model_id: str, reason: str) -> None:
    print(
        f"\nknowwhen: {say('progress.quarantined', model=model_id, reason=reason)}",
        file=sys.stderr,
        flush=True,
    )
