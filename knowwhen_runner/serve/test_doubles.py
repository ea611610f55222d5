"""Decision models for tests only: an answer-key oracle and a random chooser. Neither is a baseline.

``oracle-test-double`` knows the answer: it finds the DecisionGym task the state came from (the one whose
request the TASK line quotes and whose replayed HISTORY renders this very state, searched among the first
seeds of the preset suites' non-evaluation splits and any task lists named in ``KNOWWHEN_ORACLE_TASKS``)
and answers the answer key's canonical tool with probability 1. With it in charge every episode must
succeed, so it tests the loop, not a model.
``random-test-double`` answers a random option with a random confidence (seeded by the question), so that
gating has a model it must learn not to trust.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..gym import SUITES, Suite, Task, answer_key, make_task, replay
from ..gym.splits import SPLITS
from ..jsonio import iter_jsonl
from .gym_text import history_calls, state_sections

__all__ = ["ORACLE_TASKS_ENV", "OracleDecisionModel", "RandomDecisionModel"]

ORACLE_TASKS_ENV = "KNOWWHEN_ORACLE_TASKS"
_SEARCHED_SEEDS = 2000  # per preset suite and split


def _candidates() -> Iterator[tuple[Suite, int]]:
    """Task lists named in the environment first, then the splits' first seeds, nearest first."""
    for name in filter(None, os.environ.get(ORACLE_TASKS_ENV, "").split(os.pathsep)):
        for _line, row in iter_jsonl(Path(name)):
            yield Suite.from_json(row["suite"]), int(row["seed"])
    for offset in range(_SEARCHED_SEEDS):
        for suite in SUITES.values():
            for split in ("fit", "bench", "train"):
                yield suite, SPLITS[split] + offset


@dataclass
class OracleDecisionModel:
    """Answers the answer key's canonical tool (test double: it reads the task the state came from).

    ``searches``: a state from no task it has met costs a search of thousands of tasks, so the server runs
    it off its event loop."""

    searches = True

    _found: dict[tuple[str, tuple[str, ...]], list[Task]] = field(default_factory=dict)
    _search: Iterator[tuple[Suite, int]] = field(default_factory=_candidates)

    def _task(
        self, state: str, labels: tuple[str, ...], calls: list[tuple[str, dict[str, Any]]]
    ) -> Task | None:
        """The task whose replayed history renders exactly this state (generic requests repeat)."""
        key = (state_sections(state).get("TASK", ""), labels)
        checked = 0
        while True:
            tasks = self._found.get(key, [])
            for task in tasks[checked:]:
                if replay(task, calls).state() == state:
                    return task
            checked = len(tasks)
            nxt = next(self._search, None)
            if nxt is None:
                return None
            task = make_task(*nxt)
            self._found.setdefault((task.request, task.options), []).append(task)

    def decide(
        self, state: object, labels: Sequence[str], descriptions: Sequence[str | None]
    ) -> Sequence[float]:
        """Probability 1 on the canonical next tool; uniform when the task is not found or has ended."""
        text = state if isinstance(state, str) else ""
        calls = history_calls(text)
        task = self._task(text, tuple(labels), calls)
        gold = answer_key(task, calls).gold if task is not None else ""
        if gold not in labels:
            return [1.0 / len(labels)] * len(labels)
        return [1.0 if label == gold else 0.0 for label in labels]


@dataclass(frozen=True)
class RandomDecisionModel:
    """A random option with a random confidence, the same for the same question (test double)."""

    def decide(
        self, state: object, labels: Sequence[str], descriptions: Sequence[str | None]
    ) -> Sequence[float]:
        """Normalised exponential draws, cubed so that some answers come out confident."""
        digest = hashlib.sha256(repr((state, tuple(labels))).encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        weights = [rng.expovariate(1.0) ** 3 for _ in labels]
        total = sum(weights)
        return [w / total for w in weights]
