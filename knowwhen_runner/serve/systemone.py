"""System One requests and answers: a body parsed into typed questions, and each answer built from a
decision model's probabilities the way the vendor documents it (choice, noul and score).

A body that is not a valid request raises ``InvalidRequest``, which carries one entry of the vendor's
validation error (``{"detail": [{"loc": ["body", ...], "msg", "type"}]}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

__all__ = [
    "MAX_LABELS",
    "MAX_LEVELS",
    "MIN_LEVELS",
    "InvalidRequest",
    "SystemOneQuestion",
    "SystemOneRequest",
    "build_answer",
    "choice_confidence",
    "flatten_text",
    "parse_request",
    "score_confidence",
]

MAX_LABELS = 255
MIN_LEVELS, MAX_LEVELS = 2, 10
QuestionType = Literal["noul", "choice", "score"]
_TYPES: tuple[QuestionType, ...] = ("noul", "choice", "score")
_TEXT = (str, dict, list)  # instructions and descriptions: text, or structured text (object or array)
_NOUL_SIDES = frozenset({"true", "false"})
_PLAIN = frozenset({str, type(None)})


class InvalidRequest(Exception):
    """The body is not a valid System One request (HTTP 422); ``loc`` is the path below ``body``."""

    def __init__(self, loc: Sequence[str | int], msg: str, kind: str) -> None:
        super().__init__(f"{'.'.join(map(str, loc)) or 'body'}: {msg}")
        self.loc, self.msg, self.kind = list(loc), msg, kind

    def detail(self) -> dict[str, object]:
        """One entry of the vendor's ``detail`` list."""
        return {"loc": ["body", *self.loc], "msg": self.msg, "type": self.kind}


@dataclass(frozen=True)
class SystemOneQuestion:
    """One question as the reference models see it: options with flattened descriptions.

    A noul's options are ``true`` and ``false``; a score's are its levels ``"0"``..``"n-1"``, with the
    levels as given kept in ``levels`` for the answer's legend.
    """

    type: QuestionType
    labels: tuple[str, ...]
    descriptions: tuple[str | None, ...]
    levels: tuple[object, ...] = ()


@dataclass(frozen=True)
class SystemOneRequest:
    """A parsed request: the model asked for, the state as sent, and the questions by caller's name."""

    model: str
    state: object
    questions: dict[str, SystemOneQuestion]


def flatten_text(value: object) -> str:
    """Structured text as plain text: strings as they are, objects as ``key: value`` lines, arrays as lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "\n".join(f"{key}: {flatten_text(item)}" for key, item in value.items())
    if isinstance(value, list):
        return "\n".join(flatten_text(item) for item in value)
    return "" if value is None else orjson.dumps(value).decode()


def _text(value: object, loc: list[str | int], *, nullable: bool = True) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, _TEXT):
        raise InvalidRequest(loc, "Input should be a valid string, object or array", "string_type")
    return flatten_text(value)


def _noul(q: Mapping[str, Any], loc: list[str | int]) -> SystemOneQuestion:
    criteria = q.get("criteria")
    if criteria is None:
        criteria = {}
    elif not isinstance(criteria, dict) or not set(criteria) <= _NOUL_SIDES:
        raise InvalidRequest(
            [*loc, "criteria"], "Input should be an object with 'true' and/or 'false'", "model_type"
        )
    instructions = _text(q.get("instructions"), [*loc, "instructions"])
    true = _text(criteria.get("true"), [*loc, "criteria", "true"])
    false = _text(criteria.get("false"), [*loc, "criteria", "false"])
    return SystemOneQuestion("noul", ("true", "false"), (true or instructions or "", false))


def _choice(q: Mapping[str, Any], loc: list[str | int]) -> SystemOneQuestion:
    criteria = q.get("criteria")
    if not isinstance(criteria, dict):
        kind = "missing" if criteria is None else "dict_type"
        raise InvalidRequest([*loc, "criteria"], "Input should be a valid dictionary", kind)
    if not 0 < len(criteria) <= MAX_LABELS:
        kind = "too_short" if not criteria else "too_long"
        raise InvalidRequest([*loc, "criteria"], f"Should have 1 to {MAX_LABELS} options", kind)
    _text(q.get("instructions"), [*loc, "instructions"])
    descriptions = tuple(criteria.values())
    # Plain strings and nulls, as the runner sends them, need no work: this is the hot path of a sweep.
    if not set(map(type, descriptions)) <= _PLAIN:
        descriptions = tuple(_text(d, [*loc, "criteria", label]) for label, d in criteria.items())
    return SystemOneQuestion("choice", tuple(criteria), descriptions)


def _score(q: Mapping[str, Any], loc: list[str | int]) -> SystemOneQuestion:
    levels = q.get("criteria")
    if not isinstance(levels, list):  # an object of levels is refused: the order must be explicit
        kind = "missing" if levels is None else "list_type"
        raise InvalidRequest([*loc, "criteria"], "Input should be a valid list", kind)
    if not MIN_LEVELS <= len(levels) <= MAX_LEVELS:
        kind = "too_short" if len(levels) < MIN_LEVELS else "too_long"
        raise InvalidRequest([*loc, "criteria"], f"Should have {MIN_LEVELS} to {MAX_LEVELS} levels", kind)
    _text(q.get("instructions"), [*loc, "instructions"])
    descriptions = tuple(
        _text(level, [*loc, "criteria", i], nullable=False) for i, level in enumerate(levels)
    )
    return SystemOneQuestion("score", tuple(str(i) for i in range(len(levels))), descriptions, tuple(levels))


_PARSERS = {"noul": _noul, "choice": _choice, "score": _score}


def parse_request(body: object) -> SystemOneRequest:
    """Check a decoded JSON body and return the request it makes; unknown fields are ignored."""
    if not isinstance(body, dict):
        raise InvalidRequest([], "Input should be a valid dictionary", "dict_type")
    for key in ("model", "state", "questions"):
        if body.get(key) is None:
            raise InvalidRequest([key], "Field required", "missing")
    model, state, questions = body["model"], body["state"], body["questions"]
    if not isinstance(model, str) or not model:
        raise InvalidRequest(["model"], "Input should be a non-empty string", "string_type")
    if not isinstance(state, _TEXT):
        raise InvalidRequest(["state"], "Input should be a valid string, object or array", "union_type")
    if not isinstance(questions, dict) or not questions:
        raise InvalidRequest(["questions"], "Input should be a non-empty object", "too_short")
    parsed: dict[str, SystemOneQuestion] = {}
    for name, q in questions.items():
        loc: list[str | int] = ["questions", name]
        if not isinstance(q, dict):
            raise InvalidRequest(loc, "Input should be a valid dictionary", "model_attributes_type")
        kind = q.get("type")
        if kind not in _TYPES:
            msg = f"Input tag {kind!r} does not match any of the expected tags: 'noul', 'choice', 'score'"
            raise InvalidRequest(loc, msg, "union_tag_invalid" if "type" in q else "union_tag_not_found")
        parsed[name] = _PARSERS[kind](q, [*loc, kind])
    return SystemOneRequest(model, state, parsed)


def choice_confidence(probs: Sequence[float]) -> float:
    """The vendor's choice confidence: how far the top probability sits above uniform, in [0, 1]."""
    return _above_uniform(max(probs), len(probs))


def _above_uniform(top: float, k: int) -> float:
    if k <= 1:
        return 1.0
    return min(1.0, max(0.0, (top - 1 / k) / (1 - 1 / k)))


def score_confidence(probs: Sequence[float]) -> float:
    """The vendor's score confidence: 1 minus the spread around the most probable level, relative to the
    spread of a uniform distribution (1 when all the mass is on one level, 0 when it is uniform)."""
    n = len(probs)
    if n <= 1:
        return 1.0
    mode = max(range(n), key=probs.__getitem__)
    spread = sum(p * abs(i - mode) for i, p in enumerate(probs))
    uniform = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return min(1.0, max(0.0, 1 - spread / uniform))


def build_answer(question: SystemOneQuestion, probs: Sequence[float]) -> dict[str, Any]:
    """The wire answer to ``question`` from one probability per option (in option order)."""
    if question.type == "noul":
        return {"type": "noul", "noul": probs[0]}
    probabilities = dict(zip(question.labels, probs, strict=True))
    if question.type == "score":
        return {
            "type": "score",
            "score": sum(i * p for i, p in enumerate(probs)),
            "legend": dict(zip(question.labels, question.levels, strict=True)),
            "probabilities": probabilities,
            "confidence": score_confidence(probs),
        }
    best = max(range(len(probs)), key=probs.__getitem__)
    return {
        "type": "choice",
        "choice": question.labels[best],
        "confidence": _above_uniform(probs[best], len(probs)),
        "probabilities": probabilities,
    }
