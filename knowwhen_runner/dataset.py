"""Readers for the AgentDecisionBench file layout: questions, answer keys, answers, corpus, models, leaderboard.

A question-set folder (``common_states/``, ``shift/``, or one of ours) holds ``questions.jsonl[.gz]``,
``occurrences.jsonl[.gz]``, ``corpus.json`` and ``answers_*.jsonl[.gz]``. Readers validate as they go and
raise ``ScenarioError`` naming the file and line; they never guess from file names what a row says.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .exceptions import ScenarioError
from .jsonio import dumps, find_jsonl, iter_jsonl, read_json

__all__ = [
    "QUESTION_TEXT",
    "Corpus",
    "Occurrence",
    "Question",
    "QuestionSet",
    "compute_qhash",
    "load_question_set",
    "read_corpus",
    "read_occurrences",
    "read_questions",
]

QUESTION_TEXT = "Which tool should the agent call next?"


def compute_qhash(
    state: str, options: Sequence[str], descriptions: Sequence[str | None], question: str = QUESTION_TEXT
) -> str:
    """sha256 of the exact state string, options, option descriptions and question text.

    The four parts are serialised as one compact JSON array (UTF-8, no spaces), so any change to any part,
    including the order of options, gives another question.
    """
    payload = dumps([state, list(options), list(descriptions), question])
    return hashlib.sha256(payload).hexdigest()


@dataclass(frozen=True, slots=True)
class Question:
    """One distinct state with its options, as a decision model sees it."""

    qhash: str
    state: str
    options: tuple[str, ...]
    descriptions: tuple[str | None, ...]
    map: dict[str, str] | None = None  # nosurf only: original tool name -> shifted name


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One appearance of a question in a recorded trajectory, with what would have been right there."""

    task: str
    qhash: str
    gold: str
    acceptable_tools: tuple[str, ...]
    stratum: str = "on_plan"
    step: int = 0
    source: str = ""
    dp: str = "tool_select"
    acceptable_tools_unfiltered: tuple[str, ...] = ()
    gold_status: str = "ok"
    label_provenance: str = ""


@dataclass(frozen=True, slots=True)
class Corpus:
    """``corpus.json``: the tasks that count, and the hashes of the files they came from."""

    eligible_tasks: tuple[str, ...]
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QuestionSet:
    """A whole question-set folder."""

    path: Path
    questions: dict[str, Question]
    occurrences: list[Occurrence]
    corpus: Corpus


def _require(path: Path, line: int, row: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in row:
        raise ScenarioError(f"{path}:{line}: missing field '{name}'")
    value = row[name]
    if not isinstance(value, kind):
        raise ScenarioError(f"{path}:{line}: field '{name}' has the wrong type ({type(value).__name__})")
    return value


def _str_list(path: Path, line: int, value: Any, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ScenarioError(f"{path}:{line}: field '{name}' must be a list of strings")
    return tuple(value)


def read_questions(path: Path) -> dict[str, Question]:
    """Read a questions file into ``{qhash: Question}``; a repeated qhash is an error."""
    out: dict[str, Question] = {}
    for line, row in iter_jsonl(path):
        qhash = _require(path, line, row, "qhash", str)
        state = row.get("state")
        if state is None:
            raise ScenarioError(f"{path}:{line}: missing field 'state'")
        if not isinstance(state, str):
            # System One accepts any JSON state; we keep its text form for rendering and hashing.
            state = dumps(state, sort_keys=True).decode()
        options = _str_list(path, line, _require(path, line, row, "options", list), "options")
        if not options:
            raise ScenarioError(f"{path}:{line}: field 'options' is empty")
        descriptions_raw = row.get("descriptions") or [None] * len(options)
        if not isinstance(descriptions_raw, list) or len(descriptions_raw) != len(options):
            raise ScenarioError(f"{path}:{line}: field 'descriptions' must have one entry per option")
        mapping = row.get("map")
        if mapping is not None and not (
            isinstance(mapping, dict) and all(isinstance(v, str) for v in mapping.values())
        ):
            raise ScenarioError(f"{path}:{line}: field 'map' must map tool names to tool names")
        if qhash in out:
            raise ScenarioError(f"{path}:{line}: duplicate qhash {qhash}")
        out[qhash] = Question(qhash, state, options, tuple(descriptions_raw), mapping)
    return out


def read_occurrences(path: Path, questions: dict[str, Question] | None = None) -> list[Occurrence]:
    """Read an answer key; with ``questions`` given, an occurrence of an unknown qhash is an error."""
    out: list[Occurrence] = []
    seen: set[tuple[str, str, int, str]] = set()
    for line, row in iter_jsonl(path):
        task = _require(path, line, row, "task", str)
        qhash = _require(path, line, row, "qhash", str)
        if questions is not None and qhash not in questions:
            raise ScenarioError(f"{path}:{line}: qhash {qhash} is not in the questions file")
        gold = row.get("gold")
        if gold is not None and not isinstance(gold, str):
            raise ScenarioError(f"{path}:{line}: field 'gold' must be a string")
        aux = row.get("gold_aux") or {}
        if not isinstance(aux, dict):
            raise ScenarioError(f"{path}:{line}: field 'gold_aux' must be an object")
        step = row.get("step", 0)
        source = row.get("source") or ""
        key = (task, str(source), int(step) if isinstance(step, int) else 0, qhash)
        if key in seen:
            raise ScenarioError(f"{path}:{line}: duplicate occurrence (task {task}, step {step})")
        seen.add(key)
        out.append(
            Occurrence(
                task=task,
                qhash=qhash,
                gold=gold or "",
                acceptable_tools=_str_list(path, line, aux.get("acceptable_tools"), "acceptable_tools"),
                stratum=str(row.get("stratum") or "on_plan"),
                step=key[2],
                source=str(source),
                dp=str(row.get("dp") or "tool_select"),
                acceptable_tools_unfiltered=_str_list(
                    path, line, aux.get("acceptable_tools_unfiltered"), "acceptable_tools_unfiltered"
                ),
                gold_status=str(row.get("gold_status") or "ok"),
                label_provenance=str(row.get("label_provenance") or ""),
            )
        )
    return out


def read_corpus(path: Path) -> Corpus:
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: expected a JSON object")
    tasks = raw.get("eligible_tasks")
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise ScenarioError(f"{path}: field 'eligible_tasks' must be a list of task ids")
    return Corpus(tuple(tasks), raw)


def load_question_set(folder: Path, *, questions_stem: str = "questions") -> QuestionSet:
    """Load a question-set folder in the benchmark's layout."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ScenarioError(f"{folder}: question-set folder not found")
    qpath = find_jsonl(folder, questions_stem)
    if qpath is None:
        raise ScenarioError(f"{folder}: no {questions_stem}.jsonl.gz or {questions_stem}.jsonl")
    questions = read_questions(qpath)
    opath = find_jsonl(folder, "occurrences")
    if opath is None:
        raise ScenarioError(f"{folder}: no occurrences.jsonl.gz or occurrences.jsonl (the answer key)")
    occurrences = read_occurrences(opath, questions)
    corpus_path = folder / "corpus.json"
    if corpus_path.is_file():
        corpus = read_corpus(corpus_path)
    else:
        corpus = Corpus(tuple(sorted({o.task for o in occurrences})))
    return QuestionSet(folder, questions, occurrences, corpus)
