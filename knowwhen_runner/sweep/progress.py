"""The progress display of long work: done/total, rate, ETA, cost so far, models down or backing off.

On a terminal it is a live rich bar; elsewhere (CI, a batch node's log) one plain line every 10 s, and one
as soon as a model goes down or comes back. It says which models are down (an outage) or backing off (their
provider's 429s), when the run database is away (since when) and how many runner errors (bugs) sent jobs back.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from ..queue import SET_ASIDE, Queue, database_down_since

__all__ = ["SweepProgress", "planned_jobs", "progress_totals"]


def planned_jobs(meta: dict[str, Any]) -> int | None:
    """How many jobs the run's live plan holds, from its cells kept with the run (None: none are kept,
    as in a run planned by an earlier release or imported)."""
    cells = meta.get("cells")
    return sum(int(cell[-1]) for cell in cells) if cells else None


async def progress_totals(queue: Queue) -> tuple[int, int]:
    """The jobs of the plan and those already finished, for the progress bar. When the plan's size is
    kept with the run, only the open jobs are counted (an index of them: the cost follows the work left);
    else every status is counted from the status index."""
    info = await queue.run_info()
    planned = planned_jobs(info["meta"]) if info is not None else None
    if planned is not None:
        return planned, max(0, planned - sum(c.n for c in await queue.counts(open_only=True)))
    totals = await queue.status_totals()  # from an index: the rows of done jobs are never read
    total = sum(n for status, n in totals.items() if status != SET_ASIDE)
    return total, totals.get("done", 0) + totals.get("failed", 0)


class SweepProgress:
    """Shows the progress of a run; ``update`` is cheap and may be called on every recorded batch."""

    def __init__(
        self,
        total: int,
        already: int,
        *,
        backing_off: Callable[[], list[tuple[str, float, bool]]],
        enabled: bool = True,
        console: Console | None = None,
    ) -> None:
        self.total, self.already = total, already
        self._backing_off = backing_off
        self._console = console or Console(stderr=True, emoji=False)
        self._live = enabled and self._console.is_terminal
        self._plain = enabled and not self._live
        self._start = time.monotonic()
        self._last_line = 0.0
        self._done = already
        self._cost = 0.0
        self._failed = 0
        self._last: tuple[int, float, int, int] = (0, 0.0, 0, 0)
        self._down: frozenset[str] = frozenset()  # the models down as the last plain line said
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self.batches: Callable[[], str] | None = None
        """Describes the provider batches in flight (set when some model answers through a Batch API)."""

    def __enter__(self) -> SweepProgress:
        if self._live:
            self._progress = Progress(
                TextColumn("[bold]knowwhen[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[cost]}"),
                TextColumn("[yellow]{task.fields[backoff]}"),
                console=self._console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(
                "run", total=self.total, completed=self.already, rate="", cost="", backoff=""
            )
        return self

    def update(self, done_now: int, cost_usd: float, failed: int, runner_errors: int = 0) -> None:
        self._last = (done_now, cost_usd, failed, runner_errors)
        self._done = self.already + done_now + failed
        self._cost, self._failed = cost_usd, failed
        elapsed = max(1e-6, time.monotonic() - self._start)
        rate = (done_now + failed) / elapsed
        holding = self._backing_off()
        down = frozenset(m for m, _s, is_down in holding if is_down)
        backoff = ", ".join(_waiting(m, s, is_down) for m, s, is_down in holding)
        batches = self.batches() if self.batches is not None else ""
        backoff = ", ".join(part for part in (_db_down(), backoff, batches) if part)
        if runner_errors:
            backoff = ", ".join(
                p for p in (backoff, f"{runner_errors} runner errors (see runner-errors.log)") if p
            )
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task,
                completed=self._done,
                rate=f"{rate:,.0f} jobs/s",
                cost=f"${cost_usd:,.4f}",
                backoff=backoff,
            )
        elif self._plain and (time.monotonic() - self._last_line >= 10 or down != self._down):
            # every 10 s, and at once when a model goes down or comes back: a log says when the outage was
            self._last_line, self._down = time.monotonic(), down
            eta = f"{(self.total - self._done) / rate:,.0f}s" if rate > 0 else "unknown"
            print(
                f"knowwhen: {self._done}/{self.total} jobs, {rate:,.1f}/s, ETA {eta}, "
                f"cost ${cost_usd:,.4f}, failed {failed}" + (f", {backoff}" if backoff else ""),
                file=sys.stderr,
                flush=True,
            )

    def tick(self) -> None:
        """Show the line again with what was last known (the database's state may have changed)."""
        self.update(*self._last)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()


def _waiting(model: str, seconds: float, down: bool) -> str:
    """A model that holds its requests: down (an outage: it is probed) or backing off (its provider's 429s)."""
    if down:
        return f"{model} down" + (f" (next probe in {seconds:.0f}s)" if seconds >= 0.5 else "")
    return f"{model} backing off {seconds:.0f}s"


def _db_down() -> str:
    since = database_down_since()
    if since is None:
        return ""
    return (
        f"database down since {time.strftime('%H:%M:%S', time.localtime(since))} ({time.time() - since:.0f}s)"
    )
