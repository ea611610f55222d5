"""A screened run's claims kept in step with its screen: a model the screen has not settled has at most one
window of its screened jobs claimed past the complete prefix of the drawn order its screen has seen, and
every answer recorded wakes the screen for a look.

So however fast a server answers, the screen sees a model's answers before the model is given more of its
drawn order: a model the screen drops after ``P`` places has sent at most ``P`` plus ``CLAIM_WINDOW``
requests (those in flight among them), wherever its rate limit stands. The screen (``sweep.screen``) tells
the pace each job's place (``places``), looks when answers arrive (``wait``), and says how far each model's
complete prefix reaches and which models are still open or dropped (``looked``); the worker asks how many
jobs each model may still claim (``room``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import anyio

from ..jobs import Job

__all__ = ["CLAIM_WINDOW", "ScreenPace"]

CLAIM_WINDOW = 16
"""Screened jobs of an open model claimed past its complete prefix at once (in hand, or answered and not yet
in the prefix a look saw)."""


@dataclass
class _Out:
    model: str
    place: float  # its place in the drawn order (inf: none known)
    answered: bool = False


class ScreenPace:
    """One process's window on each open model's screened jobs."""

    def __init__(self, scenario: str, models: Iterable[str], window: int = CLAIM_WINDOW) -> None:
        self.scenario = scenario
        self.window = window
        self.active = True  # False: this process has no screen (its scenario's files are elsewhere)
        self.places: Mapping[str, int] = {}  # each screened question's place in the drawn order
        self._open = set(models)  # models the screen has not settled, with screened jobs unfinished
        self.dropped: set[str] = set()
        self._out: dict[str, _Out] = {}  # screened jobs claimed by this process, not yet in a prefix
        self._count: Counter[str] = Counter()
        self._answered = anyio.Event()
        self._looked = anyio.Event()

    def claimed(self, jobs: Iterable[Job]) -> None:
        """Count the screened jobs of open models among a claim's."""
        for job in jobs:
            if not self.active or job.scenario_id != self.scenario or job.model_id not in self._open:
                continue
            if job.id in self._out:
                continue  # claimed again without leaving (a lost claim reply): counted once
            self._out[job.id] = _Out(job.model_id, self.places.get(job.item, math.inf))
            self._count[job.model_id] += 1

    def left(self, answered: Iterable[str], back: Iterable[str]) -> None:
        """Jobs left the worker's hand: ``answered`` (recorded, for good) stay in the window until a look's
        prefix passes them, and wake the screen; those given ``back`` (to be claimed again) leave it."""
        for job_id in back:
            out = self._out.pop(job_id, None)
            if out is not None:
                self._count[out.model] -= 1
        for job_id in answered:
            out = self._out.get(job_id)
            if out is not None:
                out.answered = True
                self._answered.set()

    def room(self) -> dict[str, int]:
        """How many jobs each open model may claim now (a model with none is not claimed for)."""
        if not self.active:
            return {}
        return {m: max(0, self.window - self._count[m]) for m in self._open}

    async def wait(self, at_most_s: float) -> None:
        """Wait until answers arrive (or ``at_most_s``: other processes' answers)."""
        with anyio.move_on_after(at_most_s if self.active else math.inf):
            await self._answered.wait()
        self._answered = anyio.Event()

    def looked(self, prefix: Mapping[str, int], still_open: Iterable[str], dropped: Iterable[str]) -> None:
        """A look saw each model's complete ``prefix`` (places): answered jobs inside it leave the window;
        ``still_open``: the models it left open (the others are claimed freely, the ``dropped`` not at all)."""
        self._open = set(still_open)
        self.dropped.update(dropped)
        for job_id, out in list(self._out.items()):
            if out.model not in self._open or (out.answered and out.place < prefix.get(out.model, 0)):
                del self._out[job_id]
                self._count[out.model] -= 1
        self._looked.set()

    async def next_look(self, at_most_s: float) -> None:
        """Wait for the screen's next look (a window may free up), or ``at_most_s``."""
        with anyio.move_on_after(at_most_s):
            await self._looked.wait()
        self._looked = anyio.Event()

    def stop(self) -> None:
        """This process has no screen: claims go as if there were none."""
        self.active = False
        self._answered.set()
