"""What a provider's files and batches endpoints exchange: the lines sent, a batch's state, a line's result.

The JSONL of requests is built by ``request_file``; a line of a result file (``{"custom_id", "response":
{"status_code", "body"}, "error"}``) is read by ``result_line``, which hands a successful body to the
transport's normaliser (the synchronous path's code) and turns anything else, another model's reply
included, into a sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..redaction import redact

__all__ = ["BatchLine", "BatchPage", "BatchState", "LineResult", "failed_line", "request_file", "result_line"]

_FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True, slots=True)
class BatchLine:
    """One request of a batch: our id for it (``custom_id``) and its chat completion body."""

    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BatchState:
    """What the provider says of a batch (``metadata``: what it was created with, as listings show it)."""

    provider_id: str
    status: str
    output_file_id: str | None
    error_file_id: str | None
    metadata: Mapping[str, str] = field(default_factory=dict)
    created_at: float | None = None  # seconds since the epoch, as the provider says

    @property
    def finished(self) -> bool:
        return self.status in _FINISHED


@dataclass(frozen=True, slots=True)
class BatchPage:
    """One page of a provider's batch list, newest first; ``has_more``: the next starts after ``batches[-1]``."""

    batches: list[BatchState]
    has_more: bool = False


@dataclass(frozen=True, slots=True)
class LineResult:
    """One request's outcome: the normalised response (as the synchronous path stores it), or an error."""

    custom_id: str
    response: dict[str, Any] | None
    error: str | None = None


def request_file(lines: list[BatchLine]) -> bytes:
    """The JSONL a batch is created from: one chat completion request per line."""
    return b"".join(
        orjson.dumps(
            {"custom_id": ln.custom_id, "method": "POST", "url": "/v1/chat/completions", "body": ln.body}
        )
        + b"\n"
        for ln in lines
    )


def failed_line(custom_id: str, code: object, message: object) -> LineResult:
    """A line without an answer: ``code`` (the provider's error code, or ``HTTP 500``) and its message."""
    # Redacted before it is cut, so a secret the provider echoes is never kept in part.
    return LineResult(custom_id, None, redact(f"batch line {code}: {message or 'no answer'}")[:500])


def result_line(
    line: dict[str, Any],
    normalise: Callable[[dict[str, Any]], dict[str, Any]],
    own: Callable[[str], bool] | None = None,
) -> LineResult:
    """One line of a result file; ``normalise`` turns a chat completion body into the normalised response.
    A body whose ``model`` is not the model asked (``own``, ``ModelSpec.answers_as``) is no answer."""
    custom_id = str(line.get("custom_id"))
    response = line.get("response") or {}
    body = response.get("body") if isinstance(response, dict) else None
    if response.get("status_code") == 200 and isinstance(body, dict):
        answered = body.get("model")
        if own is not None and isinstance(answered, str) and answered and not own(answered):
            return failed_line(custom_id, "other_model", f"the reply came from another model, {answered!r}")
        return LineResult(custom_id, normalise(body))
    error = line.get("error") or (body or {}).get("error") or {}
    status = response.get("status_code") if isinstance(response, dict) else None
    return failed_line(
        custom_id, error.get("code") or (f"HTTP {status}" if status else "error"), error.get("message")
    )
