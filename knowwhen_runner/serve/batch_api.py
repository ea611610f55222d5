"""OpenAI's files and batches endpoints, answered by the server's own chat models.

``POST /v1/files`` (multipart, ``purpose=batch``) stores a JSONL file; ``POST /v1/batches`` reads it and
keeps the batch; ``GET /v1/batches/{id}`` reports it, and once its completion delay has passed, answers
every line's ``/v1/chat/completions`` body with the same code as the synchronous endpoint and writes an
output file (and an error file for failed lines); ``GET /v1/files/{id}/content`` returns a file;
``POST /v1/batches/{id}/cancel`` cancels. Faults (``BatchFaults``, set with ``POST /admin/batches``):
a delay before completion, lines that fail, batches that expire, and 5xx answers to retrieve.
Everything is lazy (no background task): a batch moves on when it is looked at.
"""

from __future__ import annotations

import inspect
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["BatchBook", "BatchFaults", "parse_multipart"]

_TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


class BatchFaults(BaseModel):
    """What the batches endpoints do wrong, and how slowly they finish."""

    model_config = ConfigDict(extra="forbid")

    delay_s: float = Field(default=0.0, ge=0.0)
    """Seconds from creation until a batch is completed (it reports ``in_progress`` until then)."""
    fail_lines: int = Field(default=0, ge=0)
    """The first this-many lines of each batch fail (a 500 in the error file)."""
    expire: int = Field(default=0, ge=0)
    """The next this-many batches expire instead of completing (their lines go to the error file)."""
    retrieve_5xx: int = Field(default=0, ge=0)
    """The next this-many retrieve requests answer 503."""
    refuse_create: int = Field(default=0, ge=0)
    """The next this-many batch creations are refused with 400 (as by a provider without batches)."""


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }


@dataclass
class _Batch:
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
    status: str = "in_progress"
    output_file_id: str | None = None
    error_file_id: str | None = None
    done_at: float | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})

    def view(self) -> dict[str, Any]:
        t = int(self.created_at)
        end = int(self.done_at) if self.done_at is not None else None
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": None,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": t,
            "in_progress_at": t,
            "expires_at": t + 86400,
            "finalizing_at": end if self.status == "completed" else None,
            "completed_at": end if self.status == "completed" else None,
            "failed_at": None,
            "expired_at": end if self.status == "expired" else None,
            "cancelling_at": end if self.status == "cancelled" else None,
            "cancelled_at": end if self.status == "cancelled" else None,
            "request_counts": dict(self.counts),
            "metadata": self.metadata,
        }


Answer = Callable[[bytes], Awaitable[tuple[int, bytes]]]
"""Answers one chat completion body: (HTTP status, response body)."""
Action = Callable[[bytes], Awaitable[tuple[int, bytes, bytes]]]
"""Handles one files/batches request body: (HTTP status, response body, content type)."""
_JSON_TYPE = b"application/json"


class BatchError(Exception):
    """A request the batches endpoints refuse: its HTTP status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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


class BatchBook:
    """Files and batches of one server process."""

    def __init__(self, answer: Answer, record: Callable[[str, str, int], None]) -> None:
        self._answer = answer
        self._record = record
        self.faults = BatchFaults()
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self._ids = itertools.count(1)

    def route(self, method: str, path: str) -> Action | None:
        """The action for ``method path`` (``/v1`` optional), or None when it is not a files/batches route."""
        if (method, path) == ("POST", "/admin/batches"):
            return self._wrap(self.set_faults)
        parts = path.removeprefix("/v1").strip("/").split("/")
        kind, ident, tail = parts[0], (parts[1] if len(parts) > 1 else ""), "/".join(parts[2:])
        table: dict[tuple[str, str, bool, str], Callable[[bytes], Any]] = {
            ("POST", "files", False, ""): self.upload,
            ("GET", "files", True, ""): lambda _raw: self.file(ident),
            ("GET", "files", True, "content"): lambda _raw: self.content(ident),
            ("POST", "batches", False, ""): self.create,
            ("GET", "batches", False, ""): lambda _raw: self.listing(),
            ("GET", "batches", True, ""): lambda _raw: self.retrieve(ident),
            ("POST", "batches", True, "cancel"): lambda _raw: self.cancel(ident),
        }
        handler = table.get((method, kind, bool(ident), tail))
        return None if handler is None else self._wrap(handler)

    @staticmethod
    def _wrap(handler: Callable[[bytes], Any]) -> Action:
        async def act(raw: bytes) -> tuple[int, bytes, bytes]:
            try:
                payload = handler(raw)
                if inspect.isawaitable(payload):
                    payload = await payload
            except BatchError as exc:
                kind = "invalid_request_error" if exc.status < 500 else "server_error"
                error = {"error": {"message": str(exc), "type": kind, "param": None, "code": None}}
                return exc.status, orjson.dumps(error), _JSON_TYPE
            if isinstance(payload, bytes):
                return 200, payload, b"application/octet-stream"
            return 200, orjson.dumps(payload), _JSON_TYPE

        return act

    def set_faults(self, raw: bytes) -> dict[str, Any]:
        """Replace the batch faults with the posted object (an empty body clears them)."""
        try:
            self.faults = BatchFaults.model_validate_json(raw or b"{}")
        except ValidationError as exc:
            raise BatchError(422, str(exc).splitlines()[0]) from None
        return self.faults.model_dump()

    def _new_file(self, filename: str, purpose: str, content: bytes) -> _File:
        f = _File(f"file-kw{next(self._ids)}", filename, purpose, content, int(time.time()))
        self.files[f.id] = f
        return f

    # -- files ------------------------------------------------------------------------------------

    def upload(self, raw: bytes) -> dict[str, Any]:
        fields = parse_multipart(raw)
        purpose = fields.get("purpose", (None, b""))[1].decode()
        filename, content = fields.get("file", (None, b""))
        if purpose != "batch":
            raise BatchError(400, f"purpose: expected 'batch', got {purpose!r}")
        if not content:
            raise BatchError(400, "file: required")
        f = self._new_file(filename or "upload.jsonl", purpose, content)
        self._record("", "files", 200)
        return f.view()

    def file(self, file_id: str) -> dict[str, Any]:
        return self._file(file_id).view()

    def content(self, file_id: str) -> bytes:
        return self._file(file_id).content

    def _file(self, file_id: str) -> _File:
        f = self.files.get(file_id)
        if f is None:
            raise BatchError(404, f"No such File object: {file_id}")
        return f

    # -- batches ----------------------------------------------------------------------------------

    def create(self, raw: bytes) -> dict[str, Any]:
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BatchError(400, f"body: {exc}") from None
        if not isinstance(body, dict):
            raise BatchError(400, "body: expected a JSON object")
        endpoint = body.get("endpoint")
        if endpoint != "/v1/chat/completions":
            raise BatchError(400, f"endpoint: only /v1/chat/completions is served, got {endpoint!r}")
        if self.faults.refuse_create > 0:
            self.faults.refuse_create -= 1
            self._record("", "batches_create", 400)
            raise BatchError(400, "Injected fault: batches are not available for this model.")
        f = self._file(str(body.get("input_file_id")))
        lines = [orjson.loads(line) for line in f.content.splitlines() if line.strip()]
        for n, line in enumerate(lines, 1):
            if not isinstance(line, dict) or not {"custom_id", "method", "url", "body"} <= line.keys():
                raise BatchError(400, f"{f.filename}:{n}: expected custom_id, method, url and body")
        model = str(lines[0]["body"].get("model", "")) if lines else ""
        now = time.time()
        expire = self.faults.expire > 0
        if expire:
            self.faults.expire -= 1
        batch = _Batch(
            id=f"batch_kw{next(self._ids)}",
            input_file_id=f.id,
            endpoint=endpoint,
            completion_window=str(body.get("completion_window", "24h")),
            metadata=body.get("metadata"),
            lines=lines,
            model=model,
            created_at=now,
            ready_at=now + self.faults.delay_s,
            expire=expire,
        )
        batch.counts["total"] = len(lines)
        self.batches[batch.id] = batch
        self._record(model, "batches_create", 200)
        return batch.view()

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        if self.faults.retrieve_5xx > 0:
            self.faults.retrieve_5xx -= 1
            self._record(self._batch(batch_id).model, "batches_retrieve", 503)
            raise BatchError(503, "Injected fault: service unavailable.")
        batch = self._batch(batch_id)
        if batch.status == "in_progress" and time.time() >= batch.ready_at:
            await self._finish(batch)
        self._record(batch.model, "batches_retrieve", 200)
        return batch.view()

    def listing(self) -> dict[str, Any]:
        data = [b.view() for b in reversed(self.batches.values())]
        return {"object": "list", "data": data, "first_id": None, "last_id": None, "has_more": False}

    def cancel(self, batch_id: str) -> dict[str, Any]:
        batch = self._batch(batch_id)
        if batch.status not in _TERMINAL:
            self._close(
                batch, "cancelled", [], [self._unrun(line, "batch_cancelled") for line in batch.lines]
            )
        self._record(batch.model, "batches_cancel", 200)
        return batch.view()

    def _batch(self, batch_id: str) -> _Batch:
        batch = self.batches.get(batch_id)
        if batch is None:
            raise BatchError(404, f"No such Batch object: {batch_id}")
        return batch

    async def _finish(self, batch: _Batch) -> None:
        if batch.expire:
            # As providers do: the lines not run by the deadline go to the error file.
            self._close(batch, "expired", [], [self._unrun(line, "batch_expired") for line in batch.lines])
            return
        ok: list[dict[str, Any]] = []
        bad: list[dict[str, Any]] = []
        for n, line in enumerate(batch.lines):
            if n < self.faults.fail_lines:
                status, body = (
                    500,
                    orjson.dumps(
                        {
                            "error": {
                                "message": "Injected fault: line failed.",
                                "type": "server_error",
                                "param": None,
                                "code": None,
                            }
                        }
                    ),
                )
            else:
                status, body = await self._answer(orjson.dumps(line["body"]))
            row = {
                "id": f"batch_req_kw{next(self._ids)}",
                "custom_id": line["custom_id"],
                "response": {
                    "status_code": status,
                    "request_id": f"req_kw{next(self._ids)}",
                    "body": orjson.loads(body),
                },
                "error": None,
            }
            (ok if status == 200 else bad).append(row)
        self._close(batch, "completed", ok, bad)

    @staticmethod
    def _unrun(line: dict[str, Any], code: str) -> dict[str, Any]:
        message = "This request could not be executed before the completion window expired."
        if code == "batch_cancelled":
            message = "This request was not executed because the batch was cancelled."
        return {
            "id": None,
            "custom_id": line["custom_id"],
            "response": None,
            "error": {"code": code, "message": message},
        }

    def _close(self, batch: _Batch, status: str, ok: list[dict[str, Any]], bad: list[dict[str, Any]]) -> None:
        def write(rows: list[dict[str, Any]], kind: str) -> str | None:
            if not rows:
                return None
            content = b"".join(orjson.dumps(r) + b"\n" for r in rows)
            return self._new_file(f"{batch.id}_{kind}.jsonl", f"batch_{kind}", content).id

        batch.output_file_id = write(ok, "output")
        batch.error_file_id = write(bad, "error")
        batch.counts.update(completed=len(ok), failed=len(bad))
        batch.status = status
        batch.done_at = time.time()
