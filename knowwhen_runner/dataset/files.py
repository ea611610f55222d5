"""Readers for the AgentDecisionBench file layout: questions, answer keys, answers, corpus, models, leaderboard.

A question-set folder (``common_states/``, ``shift/``, or one of ours) holds ``questions.jsonl[.gz]``,
``occurrences.jsonl[.gz]``, ``corpus.json`` and ``answers_*.jsonl[.gz]`` (any answer schema). Readers validate as they go and
raise ``ScenarioError`` naming the file and line; they never guess from file names what a row says.
Every row is first checked against its kind's typed model (``rows``), whatever filter the caller asked
for, so ``score`` and ``import`` refuse the same rows. Answer rows are many (150k on the common states),
so what a reader keeps of them is a named tuple, not a model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..exceptions import ScenarioError
from ..jsonio import dumps, find_jsonl, iter_jsonl, read_json
from .answer_rows import probabilities_problem, probability_map
from .rows import (
    AnswerKeyRow,
    CorpusFile,
    IsolatedAnswerRow,
    LeaderboardFileRow,
    ModelRow,
    PublishedAnswerRow,
    QuestionRow,
    check_row,
)

__all__ = [
    "QUESTION_TEXT",
    "Answer",
    "AnswerTable",
    "Corpus",
    "IsolatedAnswer",
    "LeaderboardRow",
    "ModelInfo",
    "Occurrence",
    "Question",
    "QuestionSet",
    "compute_qhash",
    "find_answer_files",
    "iter_answer_rows",
    "iter_isolated_rows",
    "load_answers",
    "load_question_set",
    "read_answers",
    "read_corpus",
    "read_isolated_answers",
    "read_leaderboard",
    "read_models",
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
    once: dict[Any, Any] = {}  # equal option or description lists (most of one agent's) are kept once
    for line, row in iter_jsonl(path):
        check_row(QuestionRow, path, line, row)
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
        options, descriptions = once.setdefault(options, options), tuple(descriptions_raw)
        m = row.get("map")
        if m is not None and not (isinstance(m, dict) and all(isinstance(v, str) for v in m.values())):
            raise ScenarioError(f"{path}:{line}: field 'map' must map tool names to tool names")
        if qhash in out:
            raise ScenarioError(f"{path}:{line}: duplicate qhash {qhash}")
        out[qhash] = Question(qhash, state, options, once.setdefault(descriptions, descriptions), m)
    return out


def read_occurrences(path: Path, questions: dict[str, Question] | None = None) -> list[Occurrence]:
    """Read an answer key; with ``questions`` given, an occurrence of an unknown qhash is an error."""
    out: list[Occurrence] = []
    seen: set[tuple[str, str, int, str]] = set()
    for line, row in iter_jsonl(path):
        check_row(AnswerKeyRow, path, line, row)
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
    check_row(CorpusFile, path, 1, raw)
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


# --- answers -------------------------------------------------------------------------------------------


class Answer(NamedTuple):
    """One model's answer to one question (one row of an ``answers_*`` file)."""

    qhash: str
    answer: str | None
    confidence: float | None
    valid: bool
    error: Any
    cost_usd: float
    latency_ms: float | None
    probabilities: dict[str, float] | None


AnswerTable = dict[tuple[str, str], dict[str, Answer]]
"""``{(model, variant): {qhash: Answer}}``; rows without a ``variant`` field (common states) are ``main``."""


def find_answer_files(folder: Path) -> list[Path]:
    """Every ``answers_*.jsonl`` and ``answers_*.jsonl.gz`` in a question-set folder, sorted by name."""
    files = [*Path(folder).glob("answers_*.jsonl"), *Path(folder).glob("answers_*.jsonl.gz")]
    return sorted(p for p in files if p.is_file())


def _number(path: Path, line: int, row: dict[str, Any], name: str) -> float | None:
    value = row.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(f"{path}:{line}: field '{name}' must be a number or null")
    return float(value)


def _answer_row(path: Path, line: int, row: dict[str, Any], question: Any) -> Answer:
    options = getattr(question, "options", None)  # schema 3 probabilities follow the question's options
    answer = row.get("answer", ...)
    if answer is ... or not (answer is None or isinstance(answer, str)):
        raise ScenarioError(f"{path}:{line}: field 'answer' must be present, a string or null")
    valid = _require(path, line, row, "valid", bool)
    if problem := probabilities_problem(row.get("probabilities"), options):
        raise ScenarioError(f"{path}:{line}: field 'probabilities' {problem}")
    return Answer(
        row["qhash"],
        answer,
        _number(path, line, row, "confidence"),
        valid,
        row.get("error"),
        _number(path, line, row, "cost_usd") or 0.0,
        _number(path, line, row, "latency_ms"),
        probability_map(row.get("probabilities"), options),
    )


AnswerRowAt = tuple[Path, int, str, str, dict[str, Any]]
"""(file, line, model, variant, row) of a checked answer row."""


def iter_answer_rows(
    paths: Iterable[Path],
    questions: Mapping[str, Any] | None = None,
    *,
    models: Collection[str] | None = None,
    variant: str | None = None,
) -> Iterator[AnswerRowAt]:
    """Every answer row of ``paths`` that matches ``models`` and ``variant``, each checked (every row of the
    files is checked against ``PublishedAnswerRow``, kept or not).

    With ``questions`` given, an answer to an unknown qhash is an error, and the probabilities must have one
    value per option of its question; a second answer of the same model and variant to the same qhash is
    always one, whichever file it is in.
    """
    where: dict[tuple[str, str, str], str] = {}
    for path in paths:
        for line, row in iter_jsonl(path):
            check_row(PublishedAnswerRow, path, line, row)
            model, qhash = row["model"], row["qhash"]
            var = row.get("variant") or "main"
            if (models is not None and model not in models) or (variant is not None and var != variant):
                continue
            if questions is not None and qhash not in questions:
                raise ScenarioError(f"{path}:{line}: answer for unknown qhash {qhash} (not in the questions)")
            if (model, var, qhash) in where:
                first = where[(model, var, qhash)]
                raise ScenarioError(
                    f"{path}:{line}: duplicate answer of model {model} ({var}) to qhash {qhash}, first at {first}"
                )
            options = getattr((questions or {}).get(qhash), "options", None)
            if problem := probabilities_problem(row.get("probabilities"), options):
                raise ScenarioError(f"{path}:{line}: field 'probabilities' {problem}")
            where[(model, var, qhash)] = f"{path.name}:{line}"
            yield path, line, model, var, row


def read_answers(
    paths: Iterable[Path],
    questions: Mapping[str, Any] | None = None,
    *,
    models: Collection[str] | None = None,
    variant: str | None = None,
) -> AnswerTable:
    """Read answer files into ``{(model, variant): {qhash: Answer}}`` (the rows of ``iter_answer_rows``)."""
    table: AnswerTable = {}
    for path, line, model, var, row in iter_answer_rows(paths, questions, models=models, variant=variant):
        qhash = row["qhash"]
        table.setdefault((model, var), {})[qhash] = _answer_row(path, line, row, (questions or {}).get(qhash))
    return table


def load_answers(
    folder: Path,
    questions: Mapping[str, Any] | None = None,
    *,
    models: Collection[str] | None = None,
    variant: str | None = None,
) -> AnswerTable:
    """Read every answers file of a question-set folder (see ``read_answers``)."""
    paths = find_answer_files(folder)
    if not paths:
        raise ScenarioError(f"{folder}: no answers_*.jsonl[.gz] files")
    return read_answers(paths, questions, models=models, variant=variant)


# --- isolated answers, models, leaderboard ---------------------------------------------------------------


class IsolatedAnswer(NamedTuple):
    """One L1 row: a model's answer to one BFCL or When2Call item, already marked correct or not."""

    id: str
    source: str
    dp: str
    correct: bool
    conf: float | None
    error: Any


def iter_isolated_rows(
    path: Path, *, models: Collection[str] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every row of an isolated answers file of ``models``, each checked (every row of the file is checked
    against ``IsolatedAnswerRow``, kept or not); a repeated (model, id) is an error."""
    seen: set[tuple[str, str]] = set()
    for line, row in iter_jsonl(path):
        check_row(IsolatedAnswerRow, path, line, row)
        model, item = row["model"], row["id"]
        if models is not None and model not in models:
            continue
        if (model, item) in seen:
            raise ScenarioError(f"{path}:{line}: duplicate row for model {model} and item {item}")
        seen.add((model, item))
        yield line, row


def read_isolated_answers(
    path: Path, *, models: Collection[str] | None = None
) -> dict[str, list[IsolatedAnswer]]:
    """Read ``isolated/answers.jsonl[.gz]`` into ``{model: [rows]}`` (the rows of ``iter_isolated_rows``)."""
    out: dict[str, list[IsolatedAnswer]] = {}
    for _line, row in iter_isolated_rows(path, models=models):
        answer = IsolatedAnswer(
            row["id"], row["source"], row["dp"], row["correct"], row.get("conf"), row.get("error")
        )
        out.setdefault(row["model"], []).append(answer)
    return out


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One row of ``models.jsonl[.gz]``: a model id, its display name, kind, and the levels it was run on."""

    id: str
    name: str
    kind: str
    raw: dict[str, Any] = field(default_factory=dict)


def read_models(path: Path) -> list[ModelInfo]:
    """Read ``models.jsonl[.gz]``; the id is ``model`` (as in every other file) or ``id``. A model listed
    twice must say the same of itself both times (name and kind); the second row is then left out."""
    out: dict[str, ModelInfo] = {}
    first: dict[str, int] = {}
    for line, row in iter_jsonl(path):
        check_row(ModelRow, path, line, row)
        ident = row.get("model") or row.get("id")
        if not isinstance(ident, str):
            raise ScenarioError(f"{path}:{line}: missing field 'model' (the model id)")
        name = row.get("name", row.get("model_name")) or ident
        info = ModelInfo(ident, str(name), str(row.get("kind") or ""), row)
        if ident in out:
            was = out[ident]
            field_ = "kind" if was.kind != info.kind else "name" if was.name != info.name else None
            if field_ is not None:
                raise ScenarioError(
                    f"{path}:{line}: field '{field_}': model {ident} is listed again as "
                    f"{getattr(info, field_)!r}, but as {getattr(was, field_)!r} on line {first[ident]}"
                )
            continue
        out[ident], first[ident] = info, line
    return list(out.values())


@dataclass(frozen=True, slots=True)
class LeaderboardRow:
    """One published number: which model, level, task set and metric, and its value as printed."""

    line: int
    model: str
    level: str
    task_set: str
    metric: str
    value: str
    value_num: float | None
    raw: dict[str, Any] = field(default_factory=dict)


def read_leaderboard(path: Path) -> list[LeaderboardRow]:
    """Read ``leaderboard/headline_numbers.jsonl[.gz]``."""
    out: list[LeaderboardRow] = []
    for line, row in iter_jsonl(path):
        check_row(LeaderboardFileRow, path, line, row)
        model = _require(path, line, row, "model", str)
        level = _require(path, line, row, "level", str)
        metric = _require(path, line, row, "metric", str)
        task_set = row.get("task_set") or ""
        value_num = _number(path, line, row, "value_num")
        value = row.get("value")
        shown = value if isinstance(value, str) else ("" if value is None else str(value))
        out.append(LeaderboardRow(line, model, level, str(task_set), metric, shown, value_num, row))
    return out
