"""The objects behind ``knowwhen serve``'s files and batches endpoints, shaped as OpenAI returns them.

``StoredFile`` and ``StoredBatch`` keep what a provider keeps and render OpenAI's ``file`` and ``batch``
objects (``view``); ``page`` cuts a newest-first list as OpenAI's list endpoints do (``limit``, ``after``,
``first_id``/``last_id``/``has_more``); ``BatchFaults`` is what the endpoints do wrong on request;
``parse_multipart`` reads an upload's form fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BatchError", "BatchFaults", "StoredBatch", "StoredFile", "page", "parse_multipart"]

TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
WINDOW_S = 86_400
"""The completion window (``24h``, the only one OpenAI offers)."""


class BatchError(Exception):
    """A request the batches endpoints refuse: its HTTP status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BatchFaults(BaseModel):
    """What the batches endpoints do wrong, and how slowly they finish."""

    model_config = ConfigDict(extra="forbid")

    delay_s: float = Field(default=0.0, ge=0.0)
    """Seconds from creation until a batch is completed (it reports ``in_progress`` until then)."""
    fail_lines: int = Field(default=0, ge=0)
    """The first this-many lines of each batch fail (a 500 in the error file)."""
    expire: int = Field(default=0, ge=0)
    """The next this-many batches expire instead of completing (their unrun lines go to the error file)."""
    expire_answered: int = Field(default=0, ge=0)
    """Lines of an expiring batch answered before it expires (in its output file, as OpenAI keeps them)."""
    retrieve_5xx: int = Field(default=0, ge=0)
    """The next this-many retrieve requests answer 503."""
    refuse_create: int = Field(default=0, ge=0)
    """The next this-many batch creations are refused with 400 (as by a provider without batches)."""
    list_5xx: int = Field(default=0, ge=0)
    """The next this-many batch list requests answer 503."""
    list_missing: bool = False
    """The batch list endpoint answers 404, as at a provider that has none."""


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int
    expires_at: int | None = None

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }


@dataclass
class StoredBatch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, Any] | None
    lines: list[dict[str, Any]]
    model: str
    created_at: float
    ready_at: float
    expire: bool
    output_expires_s: int | None = None  # ``output_expires_after.seconds``: its output and error files' life
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    times: dict[str, int] = field(default_factory=dict)  # "in_progress" -> when it began, and so on
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})

    def view(self) -> dict[str, Any]:
        stamps = ("in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled")
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "model": self.model,
            "errors": None,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.created_at),
            "expires_at": int(self.created_at) + WINDOW_S,
            **{f"{name}_at": self.times.get(name) for name in stamps},
            "request_counts": dict(self.counts),
            "metadata": self.metadata,
        }


def page(items: list[Any], query: dict[str, list[str]], default_limit: int) -> dict[str, Any]:
    """A list response of ``items`` (newest first, each with ``id``): ``limit`` of them after ``after``."""
    try:
        limit = int(query.get("limit", [str(default_limit)])[0])
    except ValueError:
        raise BatchError(400, "limit: expected an integer") from None
    if not 1 <= limit <= default_limit:
        raise BatchError(400, f"limit: expected 1 to {default_limit}, got {limit}")
    ids = [item["id"] for item in items]
    after = query.get("after", [None])[0]
    start = ids.index(after) + 1 if after in ids else 0
    data = items[start : start + limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": start + len(data) < len(items),
    }


def parse_multipart(body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Form fields of a multipart body: name -> (filename or None, value). The boundary is the first line."""
    first, _, _ = body.partition(b"\r\n")
    if not first.startswith(b"--") or len(first) < 3:
        raise BatchError(400, "expected a multipart/form-data body")
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in body.split(first)[1:]:
        if part.startswith(b"--"):
            break
        head, sep, value = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            continue
        disposition = next(
            (h for h in head.decode("latin-1").split("\r\n") if h.lower().startswith("content-disposition")),
            "",
        )
        params = dict(
            (k.strip().lower(), v.strip().strip('"'))
            for k, _, v in (p.partition("=") for p in disposition.split(";")[1:])
        )
        if "name" in params:
            out[params["name"]] = (params.get("filename"), value.removesuffix(b"\r\n"))
    return out
