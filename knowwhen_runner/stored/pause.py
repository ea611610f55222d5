"""Live control of a running run: pause a model, resume it (``knowwhen pause``/``resume``).

A pause is a row in the run's database (``queue.holding.set_control``); every worker of the fleet reads those
rows every few seconds and stops claiming the model's jobs, which stay pending; calls in flight finish.
A pause outlasts the run (a rerun keeps it) until ``resume``.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from ..exceptions import ConfigError
from ..messages import say
from ..queue import Queue
from .reader import open_existing

__all__ = ["pause_model", "resume_model"]


async def _known(queue: Queue, run_dir: str | Path, model_id: str) -> None:
    """Raise ``ConfigError`` naming the run's models when ``model_id`` is none of them."""
    models = sorted({c.model_id for c in await queue.counts()})
    if model_id not in models:
        raise ConfigError(
            say("pause.unknown_model", run_dir=run_dir, model=model_id, models=", ".join(models) or "none")
        )


def pause_model(run_dir: str | Path, model_id: str, *, db: str | None = None, run: str | None = None) -> bool:
    """Hold ``model_id`` back in the run; False if it was paused already."""

    async def go() -> bool:
        queue, _name = open_existing(Path(run_dir), db, run)
        async with queue:
            await _known(queue, run_dir, model_id)
            return await queue.holding.set_control(model_id, "paused", "paused with knowwhen pause")

    return anyio.run(go)


def resume_model(
    run_dir: str | Path, model_id: str, *, db: str | None = None, run: str | None = None
) -> bool:
    """Let the run claim ``model_id``'s jobs again; False if it was not paused."""

    async def go() -> bool:
        queue, _name = open_existing(Path(run_dir), db, run)
        async with queue:
            await _known(queue, run_dir, model_id)
            return await queue.holding.clear_controls("paused", model_id) > 0

    return anyio.run(go)
