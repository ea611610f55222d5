"""The places of a screened scenario's jobs in the order drawn for the screen (``screen:`` in the config).

A screened job's ``draw`` is its question's place in the drawn order, counted from minus the length of the
order, so claims (lowest ``draw`` first, then id) take a model's screened questions in the drawn order,
before any of its other jobs (``draw`` 0). Job ids do not change: the order is not identity. Plain
``top: k`` draws an order of questions; the other questions draw an order of tasks (a question then takes
its task's place, so claims go task by task).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..config import ScreenSettings, SweepConfig
from ..dataset.answer_key import AnswerKey, compile_key
from ..dataset.files import load_question_set
from ..scenarios import Scenario
from ..screening.order import drawn_order, question_places

__all__ = ["ScreenKey", "draw_places", "order_unit", "screen_key"]

Unit = Literal["tasks", "questions"]


def order_unit(screen: ScreenSettings) -> Unit:
    """What a screen's order draws: questions for plain ``top: k`` (settled by paired tests, which a finer
    order lets stop sooner), tasks for the other questions (settled by per-model bounds over task means)."""
    return "questions" if screen.keep.top is not None and not screen.keep.within else "tasks"


@dataclass(frozen=True)
class ScreenKey:
    """The screened scenario's answer key and drawn order (tasks, or questions: ``unit``), each question's
    place in it."""

    key: AnswerKey
    order: list[str]
    places: dict[str, int]
    unit: Unit = "tasks"

    def by_place(self) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in self.order]
        for qhash, place in self.places.items():
            out[place].append(qhash)
        return out


def screen_key(config: SweepConfig, scenario: Scenario) -> ScreenKey:
    """Load the screened scenario's answer key and draw its order (from the screen's seed)."""
    assert config.screen is not None
    spec = next(s for s in config.scenarios if s.id == scenario.id)
    assert spec.path is not None  # a states scenario, checked by the config
    stem = "questions" if spec.variant in (None, "main") else f"questions_{spec.variant}"
    key = compile_key(load_question_set(spec.path, questions_stem=stem), planned=set(scenario.items))
    unit = order_unit(config.screen)
    if unit == "questions":
        order = drawn_order(key.qhashes, config.screen.seed)
        return ScreenKey(key, order, {q: i for i, q in enumerate(order)}, unit)
    order = drawn_order(key.tasks, config.screen.seed)
    places = question_places(
        ((key.tasks[t], q) for t, q in zip(key.task_index, key.qhashes, strict=True)), order
    )
    return ScreenKey(key, order, places)


def draw_places(config: SweepConfig, scenario: Scenario) -> dict[str, int] | None:
    """Each question's ``draw`` in ``scenario`` by item (None when the screen does not screen it)."""
    if config.screen is None or config.screen.scenario != scenario.id:
        return None
    drawn = screen_key(config, scenario)
    start = -len(drawn.order)
    return {item: start + place for item, place in drawn.places.items()}
