"""Scenario kind ``states``: recorded agent states in the AgentDecisionBench layout (L2, open loop).

One item per distinct question (``qhash``). A shift re-rendering (``variant: nosurf|nodist``) is read
from ``questions_<variant>.jsonl[.gz]`` in the same folder; its questions keep the main qhashes, so the
shared answer key joins them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..config import ScenarioSpec
from ..dataset.files import Question, QuestionSet, load_question_set
from ..dataset.subset import DEFAULT_SEED, SubsetRecord, whole_groups
from ..exceptions import ScenarioError
from ..jsonio import file_sha256, find_jsonl
from .scenario import Scenario

__all__ = ["StatesPlan", "load_states", "planned_questions", "question_item"]


class StatesPlan(NamedTuple):
    """What a states scenario asks of its question set: the questions, and with a ``limit`` the tasks
    drawn (whole tasks, so the per-task rule runs over complete ones) and what the subset is of."""

    qhashes: list[str]
    tasks: list[str] | None = None
    subset: SubsetRecord | None = None


def planned_questions(spec: ScenarioSpec, qset: QuestionSet) -> StatesPlan:
    """The questions a states scenario asks: every one, or with a ``limit`` those of whole tasks drawn in
    seeded order while their questions fit in the limit (``dataset.subset.whole_groups``)."""
    if spec.limit is None:
        return StatesPlan(sorted(qset.questions))
    eligible = set(qset.corpus.eligible_tasks)  # the tasks the per-task rule scores
    by_task: dict[str, set[str]] = {}
    occurrences = 0
    for o in qset.occurrences:
        if o.task in eligible:
            occurrences += 1
            if o.qhash in qset.questions:
                by_task.setdefault(o.task, set()).add(o.qhash)
    seed = DEFAULT_SEED if spec.seed is None else spec.seed
    tasks = whole_groups(by_task, spec.limit, seed)
    if len(tasks) == len(by_task):  # a limit that covers every task is no subset
        return StatesPlan(sorted(qset.questions))
    qhashes = sorted(set().union(*(by_task[t] for t in tasks))) if tasks else []
    record = SubsetRecord(
        of=len(qset.questions),
        asked=len(qhashes),
        seed=seed,
        unit="questions",
        tasks_of=len(by_task),
        tasks_asked=len(tasks),
        occurrences_of=occurrences,
    )
    return StatesPlan(qhashes, tasks, record)


def question_item(question: Question) -> dict[str, Any]:
    """The JSON-able form of a question that a job reads."""
    item: dict[str, Any] = {
        "state": question.state,
        "options": list(question.options),
        "descriptions": list(question.descriptions),
    }
    if question.map:
        item["map"] = question.map
    return item


def load_states(spec: ScenarioSpec) -> Scenario:
    if spec.path is None:  # the config validator requires one; this keeps the type honest
        raise ScenarioError(f"scenario {spec.id!r}: a states scenario needs a path")
    stem = "questions" if spec.variant in (None, "main") else f"questions_{spec.variant}"
    qset = load_question_set(spec.path, questions_stem=stem)
    planned = planned_questions(spec, qset)
    items = {q: question_item(qset.questions[q]) for q in planned.qhashes}
    files = {}
    for name in (stem, "occurrences"):
        found = find_jsonl(spec.path, name)
        if found is not None:
            files[found.name] = file_sha256(found)
    corpus = spec.path / "corpus.json"
    if corpus.is_file():
        files["corpus.json"] = file_sha256(corpus)
    return Scenario(
        id=spec.id,
        kind="states",
        version=spec.version,
        items=items,
        files=files,
        variant=spec.variant,
        subset=planned.subset,
    )
