"""Scenario kind ``states``: recorded agent states in the AgentDecisionBench layout (L2, open loop).

One item per distinct question (``qhash``). A shift re-rendering (``variant: nosurf|nodist``) is read
from ``questions_<variant>.jsonl[.gz]`` in the same folder; its questions keep the main qhashes, so the
shared answer key joins them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..config import ScenarioSpec
from ..dataset.files import Question, load_question_set
from ..exceptions import ScenarioError
from ..jsonio import file_sha256, find_jsonl
from .scenario import Scenario

__all__ = ["load_states", "planned_qhashes", "question_item"]


def planned_qhashes(spec: ScenarioSpec, qhashes: Iterable[str]) -> list[str]:
    """The questions a states scenario asks: sorted by qhash, the first ``limit`` of them."""
    ordered = sorted(qhashes)
    return ordered[: spec.limit] if spec.limit is not None else ordered


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
    qhashes = planned_qhashes(spec, qset.questions)
    items = {q: question_item(qset.questions[q]) for q in qhashes}
    files = {}
    for name in (stem, "occurrences"):
        found = find_jsonl(spec.path, name)
        if found is not None:
            files[found.name] = file_sha256(found)
    corpus = spec.path / "corpus.json"
    if corpus.is_file():
        files["corpus.json"] = file_sha256(corpus)
    return Scenario(
        id=spec.id, kind="states", version=spec.version, items=items, files=files, variant=spec.variant
    )
