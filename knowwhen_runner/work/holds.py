"""What a worker leaves alone, and why: the one place its loops ask.

Models the run holds back (``queue.holding.controls``: quarantined or paused by hand, read every few seconds),
models this worker found fatally failing or answering invalidly too often (quarantined at once, written
to the queue with their reason and told to ``on_quarantine``), models whose budget is spent, models down
or set aside (``provider.failing``) for longer than the run waits (given up), models set aside until
their next probe, and episodes parked because a model they need is down or set aside. The models this
worker's test sets aside are written to the run too (a ``set_aside`` row, told to ``on_set_aside``, cleared
when a probe brings the model back) so ``status``, the live view and the hooks name them; no worker holds
back on that row.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..config import ModelSpec, WorkerSettings
from ..jobs import Job
from ..provider import FailingModels, Limiters
from ..queue import HOLDING_STATES, HoldingBack, ModelControl
from .outcome import Cause
from .quarantine import InvalidAnswers

__all__ = ["Holds"]

_CONTROLS_EVERY_S = 2.0  # how often a worker reads which models the run holds back (quarantine, pause)
_CAUSES: dict[str, Cause] = {
    "quarantined": "quarantined",
    "paused": "paused",
    "screened": "screened out",
    "set_aside": "set aside",
}


class Holds:
    """Which models (and parked episodes) the worker holds back now, with why."""

    def __init__(
        self,
        queue: HoldingBack,
        models: dict[str, ModelSpec],
        settings: WorkerSettings,
        limiters: Limiters | None,
        on_quarantine: Callable[[str, str], None] | None = None,
        failing: FailingModels | None = None,
        on_set_aside: Callable[[str, str | None], None] | None = None,
    ) -> None:
        self._queue = queue
        self._failing = failing
        self._models = models
        self._limiters = limiters
        self._on_quarantine = on_quarantine
        self._on_set_aside = on_set_aside  # (model, cause) when set aside, (model, None) when back
        self._told_aside: set[str] = set()  # models this worker wrote to the run as set aside
        self.controls: dict[str, ModelControl] = {}  # what the run holds back, as last read
        self._read_at = -math.inf
        self._quarantined: dict[str, str] = {}  # models this worker found fatally failing: what to fix
        self._reported: set[str] = set()  # of those, the ones written to the queue
        self._spent: dict[str, str] = {}  # models whose budget is spent: the scope
        self.parked: dict[str, Job] = {}  # held episodes that wait for a down model
        self._invalid = InvalidAnswers(settings.quarantine_invalid_share, settings.quarantine_min_answers)

    # -- models -------------------------------------------------------------------------------------------

    def models(self) -> dict[str, str]:
        """Models whose jobs this worker leaves pending, with why: held back by the run (quarantined or
        paused), quarantined by this worker, or over budget."""
        held = {model_id: control.reason for model_id, control in self.controls.items()}
        return {**held, **self._quarantined, **self._spent}

    def gone(self) -> dict[str, str]:
        """Models held back or given up on (down too long): nothing of theirs is worked."""
        return {**self.given_up(), **self.models()}

    def given_up(self) -> dict[str, str]:
        """Models this worker stopped waiting for (down or set aside too long), with their last error."""
        down = self._limiters.given_up() if self._limiters is not None else {}
        return {**down, **(self._failing.given_up() if self._failing is not None else {})}

    def resting(self) -> dict[str, str]:
        """Models set aside whose next probe is not due: none of their jobs is claimed meanwhile."""
        if self._failing is None:
            return {}
        return {m: self._failing.failing(m) or "set aside" for m in self._failing.resting()}

    def set_aside(self) -> frozenset[str]:
        """Models set aside (probed one job at a time)."""
        return frozenset(self._failing.aside) if self._failing is not None else frozenset()

    def quarantine(self, model_id: str, reason: str) -> None:
        """Stop calling a model now (it is written to the queue when its outcome is recorded)."""
        self._quarantined.setdefault(model_id, reason)

    def spend(self, scope: str, model_ids: list[str]) -> None:
        """A budget scope is spent: its models are held back."""
        for model_id in model_ids:
            self._spent.setdefault(model_id, scope)

    def answered(self, model_id: str, valid: bool, error: str | None) -> str | None:
        """Count an open-loop answer; the reason when the model's invalid answers now quarantine it."""
        why = self._invalid.add(model_id, valid, error)
        if why is not None:
            self.quarantine(model_id, why)
        return why

    async def report(self, reasons: dict[str, str]) -> None:
        """Write the models this worker quarantined to the queue (once each) and tell ``on_quarantine``."""
        for model_id, reason in reasons.items():
            if model_id in self._reported:
                continue
            self._reported.add(model_id)
            if await self._queue.set_control(model_id, "quarantined", reason) and self._on_quarantine:
                self._on_quarantine(model_id, reason)
        if reasons:
            await self.refresh(now=True)

    async def refresh(self, *, now: bool = False) -> None:
        """Learn which models the run holds back (every few seconds, or ``now``)."""
        if not now and time.monotonic() - self._read_at < _CONTROLS_EVERY_S:
            return
        self._read_at = time.monotonic()
        self.controls = {c.model_id: c for c in await self._queue.controls() if c.state in HOLDING_STATES}

    async def tell_set_aside(self) -> None:
        """Write to the run the models this worker's test set aside since it last looked, and clear those a
        probe brought back; the hook hears of a row this call added or removed (once for the fleet)."""
        aside = {m: a.cause or a.reason for m, a in self._failing.aside.items()} if self._failing else {}
        if aside.keys() == self._told_aside:
            return
        for model_id in sorted(aside.keys() - self._told_aside):
            self._told_aside.add(model_id)
            new = await self._queue.set_control(model_id, "set_aside", aside[model_id], replace=True)
            if new and self._on_set_aside is not None:
                self._on_set_aside(model_id, aside[model_id])
        for model_id in sorted(self._told_aside - aside.keys()):
            self._told_aside.discard(model_id)
            if await self._queue.clear_controls("set_aside", model_id) and self._on_set_aside is not None:
                self._on_set_aside(model_id, None)

    # -- parked episodes ----------------------------------------------------------------------------------

    def _episode_models(self, job: Job) -> list[str]:
        payload = job.payload
        return [m for m in (payload.get("agent"), payload.get("decision_model"), job.model_id) if m]

    def cause(self, job: Job) -> Cause | None:
        """Why the job's model (or a model its episode needs) is held back now, in the words a summary
        says it; None when none is."""
        for model_id in self._episode_models(job) if job.kind == "episode" else [job.model_id]:
            if model_id in self._spent:
                return "over budget"
            if model_id in self._quarantined:
                return "quarantined"
            control = self.controls.get(model_id)
            if control is not None:
                return _CAUSES[control.state]
            if model_id in self.resting():
                return "set aside"
        return None

    def holds_back(self, job: Job) -> bool:
        """A job of a model held back, or an episode that needs one (its agent, say)."""
        held = self.models()
        if job.kind != "episode":
            return job.model_id in held
        return any(m in held for m in self._episode_models(job))

    def waits_for_a_down_model(self, job: Job) -> bool:
        """An episode that would meet a down model it may not probe now, one given up on, or one held back
        (quarantined: an episode of another model that needs it waits, parked, until the run ends)."""
        if job.kind != "episode":
            return False
        if any(m in self.models() or m in self.resting() for m in self._episode_models(job)):
            return True
        if self._limiters is None:
            return False
        limiters = [self._limiters[m] for m in self._episode_models(job) if m in self._models]
        return any(lim.down() and (not lim.may_probe() or lim.gave_up()) for lim in limiters)

    def park(self, claimed: list[Job]) -> list[Job]:
        """Park the claimed episodes that cannot start (leased, off the callers); the rest, to start."""
        for job in claimed:
            if self.waits_for_a_down_model(job):
                self.parked[job.id] = job
        return [job for job in claimed if job.id not in self.parked]

    def unpark(self) -> list[Job]:
        """Parked episodes whose models may be probed again (they go back to the queue for whoever is free)."""
        ready = [job for job in self.parked.values() if not self.waits_for_a_down_model(job)]
        for job in ready:
            del self.parked[job.id]
        return ready

    def next_probe_in(self) -> float:
        """Seconds until the first down model may be probed again (bounded: 0.2 to 2 s)."""
        if self._limiters is None:
            return 0.5
        waits = [self._limiters[m].paused_for() for m in self._models if self._limiters[m].down()]
        if self._failing is not None:
            waits += [a.probe_at - time.monotonic() for a in self._failing.aside.values()]
        return min(2.0, max(0.2, min(waits, default=0.2)))
