"""The places of a screened scenario's jobs in the order drawn for the screen (``screen:`` in the config).

A screened job's ``draw`` is its question's place in the drawn order of tasks, counted from minus the number
of tasks, so claims (lowest ``draw`` first, then id) take a model's screened questions task by task in the
drawn order, before any of its other jobs (``draw`` 0). Job ids do not change: the order is not identity.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import SweepConfig
from ..dataset.answer_key import AnswerKey, compile_key
from ..dataset.files import load_question_set
from ..scenarios import Scenario
from ..screening.order import drawn_order, question_places

__all__ = ["ScreenKey", "draw_places", "screen_key"]


@dataclass(frozen=True)
class ScreenKey:
    """The screened scenario's answer key and drawn order: tasks in order, each question's place."""

    key: AnswerKey
    order: list[str]
    places: dict[str, int]

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
