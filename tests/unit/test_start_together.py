"""``run --processes N`` starts its processes claiming together: who counts as one of them, and the wait
on a real SQLite queue (its worker rows and its database clock)."""

from __future__ import annotations

from pathlib import Path

import anyio

from knowwhen_runner.queue import open_queue
from knowwhen_runner.work.start_together import WAIT_S, joined, start_together


def _row(worker: str, started: float, stopped: float | None = None) -> dict[str, object]:
    return {"id": worker, "started_at": started, "stopped_at": stopped}


def test_peers_are_this_starts_processes_not_an_earlier_runs() -> None:
    """A worker that stopped before this one registered, or registered long before it and never
    stopped (killed), belongs to an earlier start; one that registered meanwhile and already stopped
    (it found nothing to claim) is a peer."""
    rows = [
        _row("old-stopped", 10.0, 20.0),
        _row("old-killed", 100.0 - WAIT_S - 1.0),
        _row("planner", 99.0),
        _row("me", 100.0),
        _row("quick", 100.5, 101.0),
        _row("late", 104.0),
    ]
    assert joined(rows, "me") == 4


def test_the_processes_go_once_all_have_registered(tmp_path: Path) -> None:
    """Three processes on one run: each waits until the third has registered, then all go at once."""
    queue = open_queue(f"sqlite:///{tmp_path / 'run.db'}", "t")
    went: list[float] = []

    async def process(name: str, delay: float) -> None:
        await anyio.sleep(delay)
        await queue.register_worker(name)
        await start_together(queue, name, 3, lambda: False)
        went.append(anyio.current_time())

    async def go() -> None:
        await queue.init_run("", {})
        async with anyio.create_task_group() as tg:
            began = anyio.current_time()
            for i, delay in enumerate((0.0, 0.3, 1.0)):
                tg.start_soon(process, f"w{i}", delay)
        assert len(went) == 3
        assert min(went) - began >= 1.0  # nobody went before the last registered
        assert max(went) - began < WAIT_S / 2
        await queue.close()

    anyio.run(go)


def test_a_stop_ends_the_wait(tmp_path: Path) -> None:
    """A process told to stop while it waits for peers that never come does not wait out ``WAIT_S``."""
    queue = open_queue(f"sqlite:///{tmp_path / 'run.db'}", "t")

    async def go() -> float:
        await queue.init_run("", {})
        await queue.register_worker("alone")
        stop_at = anyio.current_time() + 0.5
        waited = await start_together(queue, "alone", 2, lambda: anyio.current_time() >= stop_at)
        await queue.close()
        return waited

    assert anyio.run(go) < WAIT_S / 2
