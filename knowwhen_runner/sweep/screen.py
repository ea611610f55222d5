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
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ..config import ScreenSettings, SweepConfig
from ..dataset.answer_key import occurrence_correct, task_weights
from ..dataset.files import Answer
from ..plan import open_loop_mode
from ..plan.draws import ScreenKey, screen_key
from ..queue import ControlState, JobResult, Queue
from ..scenarios import Scenario, load_scenario
from ..screening import (
    Bounds,
    Decision,
    Floor,
    NotWorseThan,
    Rule,
    TopK,
    alpha_each,
    alpha_pair,
    by_leaders,
)
from ..screening.order import complete_prefix
from ..work.screen_pace import ScreenPace

if TYPE_CHECKING:
    import numpy as np

    from ..screening.live import Standing

__all__ = [
    "SCREENED",
    "Screen",
    "open_beyond_screen",
    "open_screen",
    "screen_pace",
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


LOOK_WINDOW = 16
"""Tasks of a model's drawn order a later look reads ahead of its complete prefix (more while all are done)."""


class Screen:
    """The screen of one run in one process: look at the answers so far, settle what they settle, hold back
    the dropped. Every process that works the run looks (``knowwhen run`` and each ``knowwhen worker``);
    decisions are written once, the first one standing (``Queue.merge_meta``).

    Looks are incremental: the first reads the scenario's jobs once; each later one reads only the jobs
    still unfinished at the last look, a window of each open model's drawn order at a time (``_read``).
    """

    def __init__(self, config: SweepConfig, queue: Queue, key: ScreenKey) -> None:
        assert config.screen is not None
        self.settings = config.screen
        self.rule = screen_rule(config.screen)
        self._queue = queue
        self.key = key
        self._by_place = key.by_place()
        self._task_of = list(key.key.task_index)
        self._places, self._weights = self._occurrences()
        self.scale = self._scale()
        self._sequences: dict[str, Any] = {}  # each model's confidence sequence, fed look by look
        self.models = [m.id for m in config.models if open_loop_mode(m) in config.modes]
        self._answers: dict[str, dict[str, Answer]] = {m: {} for m in self.models}
        self._open: dict[str, dict[str, int]] | None = None  # per model: its unfinished jobs' places, by id

    def values(self) -> dict[str, np.ndarray]:
        """Each model's values over its complete prefix of the drawn order, as last read: per-task accuracy,
        or (an order of questions) each question's share of the accuracy over ``scale``, in [0, 1]."""
        import numpy as np  # start-up: a run without a screen never loads numpy

        places, weights = self._places, self._weights
        out = {}
        for model in self.models:
            answers = self._answers[model]
            done = complete_prefix(answers, self._by_place)
            correct = np.asarray(occurrence_correct(answers, self.key.key), dtype=np.float64)
            hits = np.zeros(len(self.key.order))
            np.add.at(hits, places, correct * weights)
            if self.key.unit == "questions":
                out[model] = hits[:done] * (len(self.key.order) / self.scale)
                continue
            sizes = np.zeros(len(self.key.order))
            np.add.at(sizes, places, 1.0)
            out[model] = (hits / np.maximum(sizes, 1.0))[:done]
        return out

    def _occurrences(self) -> tuple[np.ndarray, np.ndarray]:
        """Per occurrence of the key: its place in the drawn order, and its weight (an order of tasks: 1;
        of questions: its share of the card's accuracy, one over its task's occurrences and the tasks)."""
        import numpy as np  # start-up: as in ``values``

        key = self.key.key
        if self.key.unit == "questions":
            places = np.asarray([self.key.places[q] for q in key.qhashes], dtype=np.int64)
            return places, np.asarray(task_weights(key), dtype=np.float64)
        rank = {task: i for i, task in enumerate(self.key.order)}
        places = np.asarray([rank[key.tasks[t]] for t in self._task_of], dtype=np.int64)
        return places, np.ones(len(places))

    def _scale(self) -> float:
        """What a value's mean is multiplied by to give the accuracy (an order of questions: the questions
        times the largest share one question holds; of tasks: 1)."""
        import numpy as np  # start-up: as in ``values``

        if self.key.unit != "questions":
            return 1.0
        shares = np.bincount(self._places, weights=self._weights, minlength=len(self.key.order))
        return len(self.key.order) * float(shares.max(initial=0.0) or 1.0)

    def _take(self, rows: Iterable[JobResult]) -> set[str]:
        """Keep the finished jobs' answers and the unfinished jobs' places; the ids of the finished."""
        assert self._open is not None
        finished = set()
        end = len(self.key.order)
        for r in rows:
            model = r.job.model_id
            if model not in self._answers:
                continue
            if r.status in ("done", "failed"):
                self._answers[model][r.job.item] = _answer(r.job.item, r.result, r.error)
                self._open[model].pop(r.job.id, None)
                finished.add(r.job.id)
            else:
                self._open[model][r.job.id] = self.key.places.get(r.job.item, end)
        return finished

    async def _read(self) -> None:
        """Bring every model's answers up to date (a decided one's too: its jobs in flight still finish)."""
        if self._open is None:
            self._open = {m: {} for m in self.models}
            self._take(await self._queue.results({self.settings.scenario}))
            return
        reading = [m for m in self.models if self._open[m]]
        while reading:
            asked: dict[str, list[str]] = {}
            for model in reading:
                front = min(self._open[model].values())
                asked[model] = [i for i, p in self._open[model].items() if p < front + LOOK_WINDOW]
            finished = self._take(
                await self._queue.results_of(sorted(i for ids in asked.values() for i in ids))
            )
            # a model whose whole window was finished may have more finished past it: read on
            reading = [m for m in reading if set(asked[m]) <= finished and self._open[m]]

    async def look(self) -> dict[str, Standing]:
        """Read the new answers, settle what they settle now, hold back the dropped; every model's standing."""
        from ..screening.live import look, name_leaders  # start-up: as in ``values``

        info = await self._queue.run_info()
        before = ((info or {}).get("meta") or {}).get("screen")
        if before is not None and not self._same(
            before
        ):  # another screen's decisions: not this one's to keep
            await self._queue.holding.clear_controls(SCREENED)
        kept = self._kept(before)
        decided = {m: _standing(d) for m, d in kept.items() if d.get("decision")}
        await self._read()
        values = self.values()
        population = len(self.key.order)
        leaders = self._leaders(before) or name_leaders(self.rule, values, population)
        standings = look(
            self.rule, values, population, self.settings.alpha, decided, leaders, self.scale, self._sequences
        )
        record = await self._queue.merge_meta("screen", partial(self._merge, standings, time.time(), leaders))
        now = {m: _standing(d) for m, d in record["models"].items()}
        for model, s in now.items():
            if s.decision is Decision.DROP:
                await self._queue.holding.set_control(model, SCREENED, _reason(self.rule, s, self.key.unit))
        return now

    def prefix(self, model: str) -> int:
        """How many places of the drawn order the model has complete (as last read)."""
        return complete_prefix(self._answers[model], self._by_place)

    def open(self, model: str) -> bool:
        """Whether the model still has screened jobs unfinished (as last read)."""
        return self._open is None or bool(self._open.get(model))

    def _same(self, record: dict[str, Any] | None) -> bool:
        """Whether the run's screen record is this screen's."""
        mine = self.describe({})
        return record is not None and all(
            record.get(k) == v for k, v in mine.items() if k not in ("models", "leaders")
        )

    def _kept(self, record: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        """The models' lines of the run's screen record, if it is this screen's (else none)."""
        return dict((record or {}).get("models") or {}) if self._same(record) else {}

    def _leaders(self, record: dict[str, Any] | None) -> list[str] | None:
        """The leaders a look named before (the first named stand), if the record is this screen's."""
        return list((record or {}).get("leaders") or []) or None if self._same(record) else None

    def _merge(
        self,
        standings: dict[str, Standing],
        now: float,
        leaders: list[str] | None,
        before: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """The screen record with this look's standings merged in: a decision already written stands (the
        first process to settle a model settles it), and an open model keeps the bounds on the most tasks."""
        kept = self._kept(before)
        reference = self.rule.reference if isinstance(self.rule, NotWorseThan) else None
        models = dict(kept)
        for model, s in standings.items():
            was = kept.get(model)
            if was is None or (not was.get("decision") and was["tasks"] <= s.tasks) or model == reference:
                models[model] = _record(s, was, now)
        return self.describe(models, self._leaders(before) or leaders)

    def describe(self, models: dict[str, dict[str, Any]], leaders: list[str] | None = None) -> dict[str, Any]:
        """What the run's meta keeps of the screen (plain ``top: k``: its leaders once named, and the level
        of each paired sequence that settles it)."""
        s = self.settings
        pairs = {}
        if isinstance(self.rule, TopK) and by_leaders(self.rule):
            pairs = {"alpha_pair": alpha_pair(self.rule, s.alpha), "leaders": leaders}
        return {
            **pairs,
            "scenario": s.scenario,
            "alpha": s.alpha,
            "alpha_each": alpha_each(self.rule, len(self.models), s.alpha),
            "keep": s.keep.model_dump(exclude_none=True),
            "seed": s.seed,
            "unit": self.key.unit,
            "tasks": len(self.key.order),
            "models": models,
        }


def _standing(d: dict[str, Any]) -> Standing:
    from ..screening.live import Standing  # start-up: as in ``Screen.values``

    decision = Decision(d["decision"]) if d.get("decision") else None
    return Standing(Bounds(d["lower"], d["upper"]), d["tasks"], decision, d.get("leaders_above"))


HISTORY_POINTS = 48
"""Points of a model's sequence the record keeps; past that, every other one of the older points goes."""


def _record(s: Standing, before: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """One model's line in the meta: bounds, tasks, decision and when it came (kept from the look that made
    it), and its sequence over time (``history``)."""
    at = (before or {}).get("decided_at") if (before or {}).get("decision") else None
    return {
        "lower": s.bounds.lower,
        "upper": s.bounds.upper,
        "tasks": s.tasks,
        "decision": s.decision.value if s.decision else None,
        "decided_at": at if at is not None else (now if s.decision else None),
        **({} if s.above is None else {"leaders_above": s.above}),
        "history": _history((before or {}).get("history") or [], s, now),
    }


def _history(points: list[list[float]], s: Standing, now: float) -> list[list[float]]:
    """The sequence over time: ``[tasks, lower, upper, when]`` at each look that saw more answers (or a
    decision), at most ``HISTORY_POINTS``: the first and the latest always stay, older ones are thinned."""
    point = [s.tasks, round(s.bounds.lower, 4), round(s.bounds.upper, 4), round(now, 1)]
    if points and points[-1][0] == s.tasks and not s.decision:
        return points
    points = [*points, point]
    while len(points) > HISTORY_POINTS:
        points = [points[0], *points[2:-1:2], *points[-1:]] if len(points) > 3 else points[-HISTORY_POINTS:]
    return points


def _reason(rule: Rule, s: Standing, unit: str) -> str:
    what = {TopK: "not among the kept", Floor: "below the floor", NotWorseThan: "worse than the reference"}
    if s.above is not None:
        return (
            f"screened out after {s.tasks} {unit}: every leader of the screen surely more accurate "
            f"(bounds {s.bounds.lower:.3f} to {s.bounds.upper:.3f})"
        )
    return (
        f"screened out after {s.tasks} {unit}: {what[type(rule)]} (bounds {s.bounds.lower:.3f} to "
        f"{s.bounds.upper:.3f})"
    )


def screened_models(controls: Iterable[Any]) -> set[str]:
    """The models a screen holds back, from ``queue.holding.controls``."""
    return {c.model_id for c in controls if c.state == SCREENED}


LOOK_AT_MOST_S = 2.0
"""The longest a screened run goes without a look when no answer of its own arrives (another process's)."""


def screen_pace(config: SweepConfig) -> ScreenPace | None:
    """The pace a screened run's worker keeps with its screen (None without ``screen:``)."""
    if config.screen is None:
        return None
    models = [m.id for m in config.models if open_loop_mode(m) in config.modes]
    return ScreenPace(config.screen.scenario, models)


async def screened_work(
    config: SweepConfig,
    queue: Queue,
    scenarios: Mapping[str, Scenario] | None,
    work: Awaitable[T],
    *,
    release: bool = True,
    pace: ScreenPace | None = None,
) -> T:
    """Await ``work`` while the config's screen looks each time answers are recorded (``pace``: the
    worker's claims wait for those looks; at least every ``LOOK_AT_MOST_S``, once before, once after); a
    run without ``screen:`` lets the models an earlier screen held back work again (``release``: a worker
    leaves that to ``knowwhen run``)."""
    screen = await open_screen(config, queue, scenarios, release=release)
    if screen is None:
        if pace is not None:
            pace.stop()  # no screen in this process: its claims are not held for looks
        return await work
    if pace is not None:
        pace.places = screen.key.places
    await _look(screen, pace)
    async with anyio.create_task_group() as tg:

        async def looking() -> None:
            while True:
                if pace is not None:
                    await pace.wait(LOOK_AT_MOST_S)
                else:
                    await anyio.sleep(LOOK_AT_MOST_S)
                await _look(screen, pace)

        tg.start_soon(looking)
        try:
            return await work
        finally:
            tg.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await screen.look()
    raise AssertionError("unreachable")  # the task group returns through ``work``'s result


async def _look(screen: Screen, pace: ScreenPace | None) -> None:
    """One look; the pace learns how far each model's complete prefix reaches, and which models the look
    left open or dropped."""
    standings = await screen.look()
    if pace is not None:
        still_open = [m for m, s in standings.items() if s.decision is None and screen.open(m)]
        dropped = [m for m, s in standings.items() if s.decision is Decision.DROP]
        pace.looked({m: screen.prefix(m) for m in screen.models}, still_open, dropped)


async def open_beyond_screen(queue: Queue, counts: Mapping[str, int]) -> bool:
    """Whether jobs are still open other than the pending jobs of models a screen held back."""
    if not counts.get("pending") and not counts.get("running"):
        return False
    held = screened_models(await queue.holding.controls())
    return any(c.status == "running" or c.model_id not in held for c in await queue.counts(open_only=True))


async def open_screen(
    config: SweepConfig, queue: Queue, scenarios: Mapping[str, Scenario] | None, *, release: bool = True
) -> Screen | None:
    """The run's screen (None without ``screen:``, or on a machine without the screened scenario's files);
    a run without one lets the screened-out models work again (unless not to ``release`` them)."""
    spec = next((s for s in config.scenarios if config.screen and s.id == config.screen.scenario), None)
    if spec is not None:
        scenario = (scenarios or {}).get(spec.id)
        if scenario is None and spec.path is not None and spec.path.exists():
            scenario = load_scenario(spec)  # a resumed run reads no scenario it does not re-plan
        return None if scenario is None else Screen(config, queue, screen_key(config, scenario))
    if release:
        await queue.holding.clear_controls(SCREENED)
        info = await queue.run_info()
        if ((info or {}).get("meta") or {}).get("screen"):
            await queue.update_meta({"screen": None})
    return None
