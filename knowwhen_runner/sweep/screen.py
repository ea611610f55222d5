"""A screened run's decisions as they happen: read each model's completed tasks in the drawn order, look at
their confidence sequences, hold back the models the screen drops.

The order of tasks is drawn before the first call (``plan`` gives each screened job its place); answers are
fed to the sequences in that order, never in the order they came back: a model's sequence stops at its
first task with a question still open. A dropped model is held back (``screened``, a model control every
worker obeys); its pending jobs stay in the queue, and a later ``run`` without ``screen:`` finishes them.
What the screen settled is kept in the run's meta (``screen``), for ``status``, the live view and the report.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, TypeVar

import anyio
import numpy as np

from ..config import ScreenSettings, SweepConfig
from ..dataset.files import Answer
from ..dataset.scoring import occurrence_correct
from ..plan import open_loop_mode
from ..plan.draws import ScreenKey, screen_key
from ..queue import ControlState, Queue
from ..scenarios import Scenario
from ..screening import Bounds, Decision, Floor, NotWorseThan, Rule, TopK, alpha_each
from ..screening.live import Standing, look
from ..screening.order import complete_prefix

__all__ = [
    "SCREENED",
    "Screen",
    "open_beyond_screen",
    "open_screen",
    "screen_rule",
    "screened_models",
    "screened_work",
]

T = TypeVar("T")

SCREENED: ControlState = "screened"
"""The model-control state of a model the screen dropped."""


def screen_rule(screen: ScreenSettings) -> Rule:
    """The question a screen asks, as ``screening`` reads it."""
    keep = screen.keep
    if keep.top is not None:
        return TopK(keep.top, keep.within or 0.0)
    if keep.floor is not None:
        return Floor(keep.floor)
    assert keep.not_worse_than is not None  # the config allows exactly one
    return NotWorseThan(keep.not_worse_than.model, keep.not_worse_than.margin)


def _answer(qhash: str, result: dict[str, Any] | None, error: str | None) -> Answer:
    row = result or {}
    valid = bool(row.get("valid")) and error is None
    return Answer(
        qhash, row.get("answer"), row.get("confidence"), valid, row.get("error") or error, 0.0, None, None
    )


class Screen:
    """The screen of one run: look at the answers so far, settle what they settle, hold back the dropped."""

    def __init__(self, config: SweepConfig, queue: Queue, key: ScreenKey) -> None:
        assert config.screen is not None
        self.settings = config.screen
        self.rule = screen_rule(config.screen)
        self._queue = queue
        self._key = key
        self._by_place = key.by_place()
        self._task_of = np.asarray(key.key.task_index)
        self.models = [m.id for m in config.models if open_loop_mode(m) in config.modes]

    def _values(self, answered: dict[str, dict[str, Answer]]) -> dict[str, np.ndarray]:
        """Each model's per-task accuracy over its complete prefix of the drawn order."""
        rank = {task: i for i, task in enumerate(self._key.order)}
        out = {}
        for model in self.models:
            answers = answered.get(model, {})
            done = complete_prefix(answers, self._by_place)
            correct = np.asarray(occurrence_correct(answers, self._key.key), dtype=np.float64)
            hits = np.zeros(len(self._key.order))
            sizes = np.zeros(len(self._key.order))
            places = np.asarray([rank[self._key.key.tasks[t]] for t in self._task_of], dtype=np.int64)
            np.add.at(hits, places, correct)
            np.add.at(sizes, places, 1.0)
            out[model] = (hits / np.maximum(sizes, 1.0))[:done]
        return out

    async def look(self) -> dict[str, Standing]:
        """Read the answers, settle what they settle now, hold back the newly dropped; every model's standing."""
        answered: dict[str, dict[str, Answer]] = {}
        for r in await self._queue.results({self.settings.scenario}):
            if r.status in ("done", "failed"):
                answered.setdefault(r.job.model_id, {})[r.job.item] = _answer(r.job.item, r.result, r.error)
        info = await self._queue.run_info()
        kept = ((info or {}).get("meta") or {}).get("screen") or {}
        decided = {m: _standing(d) for m, d in (kept.get("models") or {}).items() if d.get("decision")}
        standings = look(
            self.rule, self._values(answered), len(self._key.order), self.settings.alpha, decided
        )
        now = time.time()
        record = {m: _record(s, (kept.get("models") or {}).get(m), now) for m, s in standings.items()}
        for model, s in standings.items():
            if s.decision is Decision.DROP:
                await self._queue.set_control(model, SCREENED, _reason(self.rule, s))
        await self._queue.update_meta({"screen": self.describe(record)})
        return standings

    def describe(self, models: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """What the run's meta keeps of the screen."""
        s = self.settings
        return {
            "scenario": s.scenario,
            "alpha": s.alpha,
            "alpha_each": alpha_each(self.rule, len(self.models), s.alpha),
            "keep": s.keep.model_dump(exclude_none=True),
            "seed": s.seed,
            "tasks": len(self._key.order),
            "models": models,
        }


def _standing(d: dict[str, Any]) -> Standing:
    return Standing(Bounds(d["lower"], d["upper"]), d["tasks"], Decision(d["decision"]))


def _record(s: Standing, before: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """One model's line in the meta: bounds, tasks, decision and when it came (kept from the look that made it)."""
    at = (before or {}).get("decided_at") if (before or {}).get("decision") else None
    return {
        "lower": s.bounds.lower,
        "upper": s.bounds.upper,
        "tasks": s.tasks,
        "decision": s.decision.value if s.decision else None,
        "decided_at": at if at is not None else (now if s.decision else None),
    }


def _reason(rule: Rule, s: Standing) -> str:
    what = {TopK: "not among the kept", Floor: "below the floor", NotWorseThan: "worse than the reference"}
    return (
        f"screened out after {s.tasks} tasks: {what[type(rule)]} (bounds {s.bounds.lower:.3f} to "
        f"{s.bounds.upper:.3f}); run again without screen: to finish its jobs"
    )


def screened_models(controls: Iterable[Any]) -> set[str]:
    """The models a screen holds back, from ``Queue.controls``."""
    return {c.model_id for c in controls if c.state == SCREENED}


LOOK_EVERY_S = 0.5
"""How often a screened run reads its answers and settles what they settle."""


async def screened_work(
    config: SweepConfig, queue: Queue, scenarios: Mapping[str, Scenario] | None, work: Awaitable[T]
) -> T:
    """Await ``work`` while the config's screen looks every ``LOOK_EVERY_S`` (once before, once after); a run
    without ``screen:`` lets the models an earlier screen held back work again."""
    screen = await open_screen(
        config, queue, (scenarios or {}).get(config.screen.scenario) if config.screen else None
    )
    if screen is None:
        return await work
    await screen.look()
    async with anyio.create_task_group() as tg:

        async def looking() -> None:
            took = 0.0
            while True:  # a look reads every answer of the scenario: on a big run, look less often
                await anyio.sleep(max(LOOK_EVERY_S, 10 * took))
                started = time.monotonic()
                await screen.look()
                took = time.monotonic() - started

        tg.start_soon(looking)
        try:
            return await work
        finally:
            tg.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await screen.look()
    raise AssertionError("unreachable")  # the task group returns through ``work``'s result


async def open_beyond_screen(queue: Queue, counts: Mapping[str, int]) -> bool:
    """Whether jobs are still open other than the pending jobs of models a screen held back."""
    if not counts.get("pending") and not counts.get("running"):
        return False
    held = screened_models(await queue.controls())
    return any(c.status == "running" or c.model_id not in held for c in await queue.counts(open_only=True))


async def open_screen(config: SweepConfig, queue: Queue, scenario: Scenario | None) -> Screen | None:
    """The run's screen (None without ``screen:``); a run without one lets the screened-out models work again."""
    if config.screen is None or scenario is None:
        await queue.clear_controls(SCREENED)
        info = await queue.run_info()
        if ((info or {}).get("meta") or {}).get("screen"):
            await queue.update_meta({"screen": None})
        return None
    return Screen(config, queue, screen_key(config, scenario))
