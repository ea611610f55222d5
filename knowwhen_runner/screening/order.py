"""The order a screen asks its tasks (or questions) in: drawn from a seed before the first call, the same for
every model.

Tasks (or questions) are sorted by a hash of the seed and the task's name (or the question's hash) (a uniform random order that no library update
can change), so any prefix is a uniform sample without replacement and every model of the race answers the
same tasks in the same order (the paired bounds need it). A question that several tasks share takes the
earliest place among them: a task is complete once every question placed at or before it is answered.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

__all__ = ["complete_prefix", "drawn_order", "question_places"]


def drawn_order(tasks: Iterable[str], seed: int) -> list[str]:
    """The tasks (or questions) in the order drawn for ``seed``."""
    key = f"knowwhen-screen\x00{seed}\x00".encode()
    return sorted(set(tasks), key=lambda task: (hashlib.sha256(key + task.encode()).digest(), task))


def question_places(occurrences: Iterable[tuple[str, str]], order: Sequence[str]) -> dict[str, int]:
    """Each question's place: the earliest place, in ``order``, of a task it occurs in (``(task, qhash)`` pairs;
    tasks outside the order are left out)."""
    place = {task: i for i, task in enumerate(order)}
    out: dict[str, int] = {}
    for task, qhash in occurrences:
        if task in place:
            out[qhash] = min(out.get(qhash, place[task]), place[task])
    return out


def complete_prefix(answered: Iterable[str], questions_by_place: Sequence[Sequence[str]]) -> int:
    """How many places of the drawn order are complete: every question placed at them or before is answered."""
    have = set(answered)
    for i, questions in enumerate(questions_by_place):
        if any(q not in have for q in questions):
            return i
    return len(questions_by_place)
