"""Answer rows: one model's answer to one question, in the AgentDecisionBench answers schema.

A row says what the model answered and whether the answer can be scored (``valid``): a choice outside
the options, a missing answer, a confidence outside [0, 1] or probabilities that do not sum to 1 make
a row invalid with its reason in ``error`` — recorded, never silently counted as correct.

``confidence`` means what the benchmark's card says: the model's probability for the chosen option.
System One servers report their own ``confidence`` (the vendor's is how far the top probability sits
above uniform), so it is derived from ``probabilities`` wherever the model gave them, and what the
server said is kept in ``reported_confidence`` (answer schema 2; rows of schema 1 are upgraded on read).

``answer_row`` / ``failed_row`` are what the queue records (``probabilities`` keyed by option name);
``file_row`` is the row of an answers file (schema 4): every key on every row with one type whatever the
value (an LLM's null confidence, an error string, a retry history), ``variant`` on every row, and
``probabilities`` as a list aligned with the question's ``options``, so Hugging Face ``datasets`` types
each column once. ``record_row`` turns a file row of any schema back into the recorded form.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ANSWER_FIELDS",
    "ANSWER_SCHEMA_VERSION",
    "PROB_TOLERANCE",
    "AnswerRow",
    "AnswerRowDict",
    "answer_row",
    "choice_confidence",
    "failed_row",
    "file_row",
    "probabilities_problem",
    "probability_list",
    "probability_map",
    "record_row",
    "upgrade_row",
    "validate_response",
]

ANSWER_SCHEMA_VERSION = 4
"""4: ``error_kind``, the class of the error that failed a job for good (null when it got an answer), so
an import fails the job again with it. 3: the export's file rows (every key on every row)."""
PROB_TOLERANCE = 0.02
"""How far from 1 a reply's probabilities may sum and still make a valid answer."""

AnswerRowDict = dict[str, Any]
"""An answer row as it travels (a job's result, a line of an answers file): the JSON object ``AnswerRow``
describes."""


def choice_confidence(response: dict[str, Any]) -> Any:
    """The card's confidence: the probability of the chosen option, or the server's figure without them."""
    probs, choice = response.get("probabilities"), response.get("choice")
    if isinstance(probs, dict) and choice in probs:
        value = probs[choice]
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return response.get("confidence")


def upgrade_row(row: AnswerRowDict) -> AnswerRowDict:
    """A stored answer row in the current schema (a schema 1 row kept the server's confidence)."""
    if "reported_confidence" in row or row.get("answer") is None:
        return row if "reported_confidence" in row else {**row, "reported_confidence": None}
    derived = choice_confidence({**row, "choice": row.get("answer")})
    return {**row, "confidence": derived, "reported_confidence": row.get("confidence")}


def validate_response(item: dict[str, Any], response: dict[str, Any]) -> str | None:
    """Why a normalised response cannot be scored, or None when it can."""
    choice = response.get("choice")
    if choice is None:
        readout = response.get("readout")
        if isinstance(readout, dict) and readout.get("invalid"):
            return f"no answer: {readout['invalid']}"
        return "no answer: the model refused or left the question out"
    if choice not in item["options"]:
        return f"choice {str(choice)[:80]!r} is not one of the options"
    conf = choice_confidence(response)
    if conf is not None and (
        not isinstance(conf, (int, float)) or not 0.0 <= float(conf) <= 1.0 or math.isnan(conf)
    ):
        return f"confidence {conf!r} is not a probability"
    probs = response.get("probabilities")
    if probs:
        values = list(probs.values())
        if any(not isinstance(v, (int, float)) or v < 0 for v in values):
            return "probabilities contain a negative or non-numeric value"
        total = float(sum(values))
        if abs(total - 1.0) > PROB_TOLERANCE:
            return f"probabilities sum to {total:.4f}, not 1"
    return None


def answer_row(
    *,
    model_id: str,
    qhash: str,
    item: dict[str, Any],
    response: dict[str, Any],
    attempts: int,
    requests: int,
    wall_ms: float,
    cache_hit: bool,
    errors: list[str] | None = None,
) -> AnswerRowDict:
    """The row for one answered question (valid or not)."""
    problem = validate_response(item, response)
    row: AnswerRowDict = {
        "model": model_id,
        "qhash": qhash,
        "answer": response.get("choice"),
        "confidence": choice_confidence(response),
        "reported_confidence": response.get("confidence"),
        "probabilities": response.get("probabilities"),
        "valid": problem is None,
        "error": problem,
        "error_kind": None,
        "attempts": attempts,
        "requests": requests,
        "cost_usd": response.get("cost_usd"),
        "latency_ms": response.get("latency_ms"),
        "wall_ms": round(wall_ms, 3),
        "input_tokens": response.get("input_tokens"),
        "output_tokens": response.get("output_tokens"),
        "cache_hit": cache_hit,
        "retry_errors": errors or [],
        "extra_choices": [c.get("name") for c in response.get("extra_tool_calls") or []] or None,
    }
    if response.get("readout") is not None:  # a read-out's diagnostics, for the manifest (not in files)
        row["readout"] = response["readout"]
    return row


def failed_row(
    *, model_id: str, qhash: str, error: str, attempts: int, error_kind: str = "error"
) -> AnswerRowDict:
    """The row for a question whose call failed for good: no answer, counted as wrong; ``error_kind`` is
    the kind its last attempt recorded (``queue.AttemptKind``)."""
    return {
        "model": model_id,
        "qhash": qhash,
        "answer": None,
        "confidence": None,
        "reported_confidence": None,
        "probabilities": None,
        "valid": False,
        "error": error,
        "error_kind": error_kind,
        "attempts": attempts,
        "requests": None,
        "cost_usd": None,
        "latency_ms": None,
        "wall_ms": None,
        "input_tokens": None,
        "output_tokens": None,
        "cache_hit": False,
        "retry_errors": [],
        "extra_choices": None,
    }


class AnswerRow(BaseModel):
    """One row of an answers file (schema 4): every key present on every row, one type per key."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, json_schema_extra={"x-answer-schema-version": ANSWER_SCHEMA_VERSION}
    )

    schema_version: Literal[4] = Field(
        4, description="The answers file schema (3 since the export, 4 with error_kind)."
    )
    model: str
    variant: str = Field(description="The question variant: main, nosurf or nodist (main on common states).")
    qhash: str
    answer: str | None
    confidence: float | None = Field(
        description="The model's probability for the chosen option (the card's)."
    )
    reported_confidence: float | None = Field(
        description="The confidence the server reported, on its own scale (answer schema 2)."
    )
    probabilities: list[float | None] | None = Field(
        description="One probability per option, in the order of the question's options (null where the "
        "model gave none for that option); null when the model gave no probabilities (LLMs)."
    )
    valid: bool
    error: str | None
    error_kind: str | None = Field(
        description="The kind of error that failed the job for good (fatal, retry, rate_limited, batch, "
        "error...); null when the job got an answer (answer schema 4)."
    )
    attempts: int
    requests: int | None
    cost_usd: float | None
    latency_ms: float | None
    wall_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cache_hit: bool
    retry_errors: list[str] = Field(description="The error of each failed attempt before the last, in order.")
    extra_choices: list[str | None] | None = Field(
        description="LLMs: the tools of further calls in the same reply (only the first is the answer)."
    )
    batch: str | None = Field(
        description="The provider batch (Batch API) that answered; null for synchronous calls and cache hits.",
    )


ANSWER_FIELDS = tuple(AnswerRow.model_fields)
"""The keys of an answers-file row, in file order."""

_FLOATS = ("confidence", "reported_confidence", "cost_usd", "latency_ms", "wall_ms")
_INTS = ("requests", "input_tokens", "output_tokens")


def probability_list(probs: Any, options: Sequence[str]) -> list[float | None] | None:
    """Probabilities keyed by option name as a list aligned with ``options`` (None: none were given)."""
    if not isinstance(probs, Mapping) or not probs:
        return None
    # A float is kept as it is (``_float`` of one is itself): the common case, 69 times a row.
    return [v if type(v) is float else _float(v) for v in map(probs.get, options)]


def probability_map(probs: Any, options: Sequence[str] | None) -> dict[str, float] | None:
    """Probabilities of a file row (a list aligned with ``options``, or a schema 2 object) keyed by option."""
    if isinstance(probs, Mapping):
        return dict(probs) or None
    if isinstance(probs, list) and options is not None and len(probs) == len(options):
        return {
            o: float(p) for o, p in zip(options, probs, strict=True) if isinstance(p, int | float)
        } or None
    return None


def probabilities_problem(probs: Any, options: Sequence[str] | None) -> str | None:
    """Why a file row's ``probabilities`` cannot be read (a list must have one value per option)."""
    if probs is not None and not isinstance(probs, Mapping | list):
        return "must be a list (one per option) or an object"
    if isinstance(probs, list) and options is not None and len(probs) != len(options):
        return f"has {len(probs)} values for {len(options)} options"
    return None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def file_row(row: Mapping[str, Any], *, variant: str | None, options: Sequence[str]) -> dict[str, Any]:
    """The answers-file row (``AnswerRow``) of a recorded row, whatever schema it was recorded in."""
    row = upgrade_row(dict(row))
    out: dict[str, Any] = {
        "schema_version": ANSWER_SCHEMA_VERSION,
        "model": str(row.get("model")),
        "variant": variant or str(row.get("variant") or "main"),
        "qhash": str(row.get("qhash")),
        "answer": _text(row.get("answer")),
    }
    out.update({name: _float(row.get(name)) for name in _FLOATS[:2]})
    probs = row.get("probabilities")
    out["probabilities"] = probs if isinstance(probs, list) else probability_list(probs, options)
    out["valid"] = bool(row.get("valid"))
    out["error"] = _text(row.get("error"))
    out["error_kind"] = _text(row.get("error_kind"))
    out["attempts"] = _int(row.get("attempts")) or 1
    out["requests"] = _int(row.get("requests"))
    out.update({name: _float(row.get(name)) for name in _FLOATS[2:]})
    out.update({name: _int(row.get(name)) for name in _INTS[1:]})
    out["cache_hit"] = bool(row.get("cache_hit"))
    out["retry_errors"] = [str(e) for e in row.get("retry_errors") or []]
    extra = row.get("extra_choices")
    out["extra_choices"] = [_text(c) for c in extra] if isinstance(extra, list) and extra else None
    out["batch"] = _text(row.get("batch"))
    return out


def record_row(row: Mapping[str, Any], options: Sequence[str] | None) -> dict[str, Any]:
    """A file row of any schema (1 to 4, or the dataset's published rows) as the queue records answers:
    probabilities by option name; a row that says nothing of the server's own confidence has none."""
    out = {k: v for k, v in row.items() if k not in ("schema_version", "variant")}
    out["probabilities"] = probability_map(row.get("probabilities"), options)
    out.setdefault("reported_confidence", None)
    out["cache_hit"] = bool(out.get("cache_hit"))
    out["retry_errors"] = list(out.get("retry_errors") or [])
    return out
