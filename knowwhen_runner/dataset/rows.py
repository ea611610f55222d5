"""The published row kinds as typed models: what a row of each file of the benchmark may hold.

Every reader of a file it did not write (``knowwhen score``, ``import``, ``fetch-dataset``, the scenario
loaders) checks each row against its kind's model here before it uses a value of it, so a wrong type, a
confidence that is no probability or a negative count is one sentence naming the file, line and field,
and the same row is refused by every command. The models check; the readers keep the row as it came
(``check_row`` returns it), so what a valid file says reaches the run unchanged.

Fields follow the dataset card. Nulls are what the published files hold where a value does not apply
(an LLM's confidence, a refused answer, a call that made no request), so every optional field takes null.
Unknown fields are allowed on every kind: a later release of the dataset may add columns, and no reader
reads them. Types are strict: a number written as a string is refused, not converted.

A confidence or probability must be a probability (0 to 1) on a row that counts (``valid`` answers, L1
rows without an error or marked correct); a row that did not count may keep the out-of-range figure that made it invalid,
as the runner records it, but never a value that is not a finite number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..exceptions import ScenarioError
from .answer_rows import PROB_TOLERANCE

__all__ = [
    "ROW_KINDS",
    "AnswerKeyRow",
    "CorpusFile",
    "IsolatedAnswerRow",
    "LeaderboardFileRow",
    "ModelRow",
    "PublishedAnswerRow",
    "QuestionRow",
    "TaskRow",
    "check_row",
]

_Count = Annotated[int, Field(ge=0)]
_Finite = Annotated[float, Field(allow_inf_nan=False)]
_NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="allow")


def _probability(value: float | None, name: str, counts: bool, slack: float = 0.0) -> None:
    if value is not None and counts and not 0.0 <= value <= 1.0 + slack:
        raise ValueError(f"field '{name}' is {value!r} on a row that counts, not a probability (0 to 1)")


class QuestionRow(_Row):
    """A line of ``questions*.jsonl[.gz]``: one state with its options."""

    qhash: str
    state: Any = Field(description="The state as the decision model reads it (text, or any JSON value).")
    options: list[str] = Field(min_length=1)
    descriptions: list[str | None] | None = None
    map: dict[str, str] | None = None

    @model_validator(mode="after")
    def _state_given(self) -> QuestionRow:
        if self.state is None:
            raise ValueError("field 'state' is null")
        return self


class GoldAux(_Row):
    acceptable_tools: list[str] | None = None
    acceptable_tools_unfiltered: list[str] | None = None


class AnswerKeyRow(_Row):
    """A line of ``occurrences.jsonl[.gz]`` (the answer key): one appearance of a question in a trajectory."""

    task: str
    qhash: str
    gold: str | None = None
    gold_aux: GoldAux | None = None
    step: _Count | None = None
    source: str | None = None
    dp: str | None = None
    stratum: str | None = None
    gold_status: str | None = None
    label_provenance: str | None = None


class CorpusFile(_Row):
    """``corpus.json``: the tasks that count (and the hashes of the files they came from)."""

    eligible_tasks: list[str]


class PublishedAnswerRow(_Row):
    """A line of ``answers_*.jsonl[.gz]`` (L2), of any answer schema: one model's answer to one question."""

    model: str
    qhash: str
    variant: str | None = None
    schema_version: _Count | None = None
    answer: str | None = Field(description="Required: the chosen option, or null when there is none.")
    confidence: _Finite | None = None
    reported_confidence: _Finite | None = None
    probabilities: list[_Finite | None] | dict[str, _Finite | None] | None = None
    valid: bool
    error: str | None = None
    error_kind: str | None = None
    attempts: _Count | None = None
    requests: _Count | None = None
    cost_usd: _NonNegative | None = None
    latency_ms: _NonNegative | None = None
    wall_ms: _NonNegative | None = None
    input_tokens: _Count | None = None
    output_tokens: _Count | None = None
    cache_hit: bool | None = None
    retry_errors: list[str] | None = None
    extra_choices: list[str | None] | None = None
    batch: str | None = None

    @model_validator(mode="after")
    def _probabilities_are_probabilities(self) -> PublishedAnswerRow:
        _probability(self.confidence, "confidence", self.valid)
        probs = self.probabilities
        if not (self.valid and probs):
            return self
        # min and max, not a loop of checks: a row holds a probability per option (69 to 129 of them)
        values = [v for v in (probs.values() if isinstance(probs, dict) else probs) if v is not None]
        if values:  # the runner's own rule: the probabilities sum to 1 within PROB_TOLERANCE
            _probability(min(values), "probabilities", True, PROB_TOLERANCE)
            _probability(max(values), "probabilities", True, PROB_TOLERANCE)
        return self


class IsolatedAnswerRow(_Row):
    """A line of ``isolated/answers.jsonl[.gz]`` (L1): a model's answer to one BFCL or When2Call item."""

    model: str
    id: str
    source: str
    dp: str
    correct: bool
    category: str | None = None
    param: str | None = None
    pred: Any = None
    gold: Any = None
    conf: _Finite | None = None
    error: str | None = None
    refusal: bool | None = None
    cost_usd: _NonNegative | None = None
    latency_ms: _NonNegative | None = None
    request_questions: _Count | None = None
    input_tokens: _Count | None = None
    output_tokens: _Count | None = None
    model_id: str | None = None
    attempts: _Count | None = None
    requests: _Count | None = None
    cache_hit: bool | None = None
    retry_errors: list[str] | None = None
    error_kind: str | None = None

    @model_validator(mode="after")
    def _conf_is_a_probability(self) -> IsolatedAnswerRow:
        _probability(self.conf, "conf", self.error is None or self.correct)
        return self


class ModelRow(_Row):
    """A line of ``models.jsonl[.gz]``: a model id (``model``, or ``id``), its name, kind and levels."""

    model: str | None = None
    id: str | None = None
    name: str | None = None
    model_name: str | None = None
    kind: str | None = None
    levels: list[str] | None = None

    @model_validator(mode="after")
    def _has_an_id(self) -> ModelRow:
        if self.model is None and self.id is None:
            raise ValueError("missing field 'model' (the model id)")
        return self


class LeaderboardFileRow(_Row):
    """A line of ``leaderboard/headline_numbers.jsonl[.gz]``: one published number."""

    model: str
    level: str
    metric: str
    task_set: str | None = None
    value: str | _Finite | None = None
    value_num: _Finite | None = None
    model_name: str | None = None


class TaskRow(_Row):
    """A line of ``tasks/decisiongym_tasks.jsonl[.gz]`` or of a task list: a DecisionGym task."""

    task_id: str
    seed: int
    suite: str | dict[str, Any]
    set: str | None = None
    index: int | None = None


ROW_KINDS: dict[str, type[_Row]] = {
    "questions": QuestionRow,
    "answer key": AnswerKeyRow,
    "corpus": CorpusFile,
    "answers": PublishedAnswerRow,
    "isolated answers": IsolatedAnswerRow,
    "models": ModelRow,
    "leaderboard": LeaderboardFileRow,
    "tasks": TaskRow,
}
"""Every published row kind and its model."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


def _field_path(loc: tuple[int | str, ...]) -> list[str]:
    """The field names of an error's location, up to the first union member or list index in it."""
    out = []
    for part in loc:
        if not isinstance(part, str) or part in _TYPE_TAGS or "[" in part or "-" in part:
            break
        out.append(part)
    return out


def _problem(exc: ValidationError) -> str:
    """The first error of a row's validation as the end of one sentence: ``field 'x' ...``."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(_field_path(err["loc"]))
    msg = str(err["msg"])
    if err["type"] == "missing":
        return f"missing field '{loc}'"
    if not loc:  # a rule over several fields says which field itself
        return msg.removeprefix("Value error, ")
    return f"field '{loc}': {msg[0].lower()}{msg[1:]} (got {_shown(err.get('input'))})"


def check_row(kind: type[_Row], path: Path | str, line: int, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` unchanged when it is a valid row of ``kind``; else ``ScenarioError`` naming file, line, field."""
    try:
        kind.model_validate(row)
    except ValidationError as exc:
        raise ScenarioError(f"{path}:{line}: {_problem(exc)}") from None
    except RecursionError:
        raise ScenarioError(f"{path}:{line}: a value is nested too deeply to read") from None
    return row
