"""An AgentDecisionBench answer key compiled for scoring, and which occurrences an answer set got right.

The card's rule: an answer is right when, trimmed and lower-cased, it is one of the state's acceptable
tools (the gold tool when that list is empty). Plain Python, no numpy: a run's start compiles the key of
a screened scenario without loading the metrics (``scoring``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from ..exceptions import ScenarioError
from .files import Answer, QuestionSet

__all__ = ["MUST_ASK_TOOL", "AnswerKey", "as_key", "compile_key", "occurrence_correct", "task_weights"]

MUST_ASK_TOOL = "request_clarification"
"""The shift's name for ``ask_user``; must-ask occurrences are those where it is the only acceptable tool."""


def _norm(name: str) -> str:
    return name.strip().lower()


@dataclass(frozen=True, slots=True)
class AnswerKey:
    """An answer key reduced to what scoring needs, one entry per counted occurrence (parallel tuples).

    Only occurrences of eligible tasks are kept. ``maps`` holds the nosurf renaming per qhash, with both
    sides trimmed and lower-cased. ``empty_tasks`` are eligible tasks without any occurrence: they are left
    out of every mean (there is nothing to score), and listed so the omission is visible.
    ``all_occurrences`` and ``all_tasks`` count the eligible tasks' occurrences and tasks of the whole
    key: when a run planned a subset, the key holds only its occurrences and these say out of how many.
    """

    tasks: tuple[str, ...]
    qhashes: tuple[str, ...]
    task_index: tuple[int, ...]
    acceptable: tuple[frozenset[str], ...]
    strata: tuple[str, ...]
    must_ask: tuple[bool, ...]
    maps: Mapping[str, Mapping[str, str]]
    empty_tasks: tuple[str, ...]
    all_occurrences: int = 0
    all_tasks: int = 0

    @property
    def is_subset(self) -> bool:
        return len(self.qhashes) < self.all_occurrences


def compile_key(
    qset: QuestionSet, *, must_ask_tool: str = MUST_ASK_TOOL, planned: Collection[str] | None = None
) -> AnswerKey:
    """Compile a question set's answer key for scoring; raises if no eligible task has an occurrence.

    ``planned``: the questions (qhashes) a run asked. The key then holds only their occurrences, and
    the per-task rule runs over the tasks that have one: a subset is scored as itself, not as the
    whole set with the rest wrong.
    """
    eligible = {task: i for i, task in enumerate(qset.corpus.eligible_tasks)}
    every = [o for o in qset.occurrences if o.task in eligible]
    chosen = None if planned is None else set(planned)
    kept = every if chosen is None else [o for o in every if o.qhash in chosen]
    present = sorted({o.task for o in kept}, key=eligible.__getitem__)
    if not present:
        raise ScenarioError(f"{qset.path}: no occurrence belongs to an eligible task of corpus.json")
    all_present = {o.task for o in every}
    index = {task: i for i, task in enumerate(present)}
    acceptable = tuple(frozenset(_norm(t) for t in (o.acceptable_tools or (o.gold,))) for o in kept)
    maps = {q.qhash: {_norm(k): _norm(v) for k, v in q.map.items()} for q in qset.questions.values() if q.map}
    return AnswerKey(
        tasks=tuple(present),
        qhashes=tuple(o.qhash for o in kept),
        task_index=tuple(index[o.task] for o in kept),
        acceptable=acceptable,
        strata=tuple(o.stratum for o in kept),
        must_ask=tuple(ok == {_norm(must_ask_tool)} for ok in acceptable),
        maps=maps,
        empty_tasks=tuple(t for t in qset.corpus.eligible_tasks if t not in all_present),
        all_occurrences=len(every),
        all_tasks=len(all_present),
    )


def as_key(key: AnswerKey | QuestionSet) -> AnswerKey:
    """The compiled key (a question set is compiled whole)."""
    return key if isinstance(key, AnswerKey) else compile_key(key)


def _choice(answer: Answer | None, mapping: Mapping[str, str] | None) -> str | None:
    """The normalised tool an answer chose, or None when it does not count (missing/errored/invalid/null)."""
    if answer is None or answer.error or not answer.valid or answer.answer is None:
        return None
    choice = _norm(answer.answer)
    return mapping.get(choice, choice) if mapping else choice


def occurrence_correct(answers: Mapping[str, Answer], key: AnswerKey | QuestionSet) -> list[bool]:
    """Whether each occurrence of the compiled key was answered right (same order as ``key.qhashes``)."""
    k = as_key(key)
    out: list[bool] = []
    for qhash, ok in zip(k.qhashes, k.acceptable, strict=True):
        choice = _choice(answers.get(qhash), k.maps.get(qhash))
        out.append(choice is not None and choice in ok)
    return out


def task_weights(key: AnswerKey | QuestionSet) -> list[float]:
    """Per-occurrence weights 1 / (occurrences of its task × tasks): the weighted mean is the task mean."""
    k = as_key(key)
    sizes = [0] * len(k.tasks)
    for t in k.task_index:
        sizes[t] += 1
    return [1.0 / (sizes[t] * len(k.tasks)) for t in k.task_index]
