"""Answer rows: one model's answer to one question, in the AgentDecisionBench answers schema.

A row says what the model answered and whether the answer can be scored (``valid``): a choice outside
the options, a missing answer, a confidence outside [0, 1] or probabilities that do not sum to 1 make
a row invalid with its reason in ``error`` — recorded, never silently counted as correct.

``confidence`` means what the benchmark's card says: the model's probability for the chosen option.
System One servers report their own ``confidence`` (the vendor's is how far the top probability sits
above uniform), so it is derived from ``probabilities`` wherever the model gave them, and what the
server said is kept in ``reported_confidence`` (answer schema 2; rows of schema 1 are upgraded on read).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ANSWER_SCHEMA_VERSION",
    "AnswerRow",
    "AnswerRowDict",
    "answer_row",
    "choice_confidence",
    "failed_row",
    "upgrade_row",
    "validate_response",
]

ANSWER_SCHEMA_VERSION = 2
_PROB_TOLERANCE = 0.02

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
        if abs(total - 1.0) > _PROB_TOLERANCE:
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
    return {
        "model": model_id,
        "qhash": qhash,
        "answer": response.get("choice"),
        "confidence": choice_confidence(response),
        "reported_confidence": response.get("confidence"),
        "probabilities": response.get("probabilities"),
        "valid": problem is None,
        "error": problem,
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


def failed_row(*, model_id: str, qhash: str, error: str, attempts: int) -> AnswerRowDict:
    """The row for a question whose call failed for good: no answer, counted as wrong."""
    return {
        "model": model_id,
        "qhash": qhash,
        "answer": None,
        "confidence": None,
        "reported_confidence": None,
        "probabilities": None,
        "valid": False,
        "error": error,
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
    """One answer row as ``answers.answer_row`` / ``failed_row`` write it (``variant`` added for shifts)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, json_schema_extra={"x-answer-schema-version": ANSWER_SCHEMA_VERSION}
    )

    model: str
    qhash: str
    answer: str | None
    confidence: float | None = Field(
        description="The model's probability for the chosen option (the card's)."
    )
    reported_confidence: float | None = Field(
        None, description="The confidence the server reported, on its own scale (answer schema 2)."
    )
    probabilities: dict[str, float] | None
    valid: bool
    error: str | None
    attempts: int
    requests: int | None
    cost_usd: float | None
    latency_ms: float | None
    wall_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cache_hit: bool
    retry_errors: list[str]
    extra_choices: list[str | None] | None = Field(
        None, description="LLMs: the tools of further calls in the same reply (only the first is the answer)."
    )
    variant: str | None = None
    batch: str | None = Field(
        None,
        description="The provider batch (Batch API) that answered; absent for synchronous calls and cache hits.",
    )
