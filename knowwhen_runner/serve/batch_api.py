"""OpenAI's files and batches endpoints, answered by the server's own chat models, as OpenAI answers.

``POST /v1/files`` (multipart, ``purpose=batch``, optional ``expires_after``) stores a JSONL file;
``GET /v1/files`` lists files (``purpose``, ``order``, ``limit``, ``after``), ``DELETE /v1/files/{id}``
deletes one. ``POST /v1/batches`` reads a file and keeps the batch (``validating``); ``GET /v1/batches``
lists batches newest first (``limit``, ``after``, ``first_id``/``last_id``/``has_more``);
``GET /v1/batches/{id}`` reports one, ``in_progress`` once looked at, and once its completion delay has
passed, answers every line's ``/v1/chat/completions`` body with the same code as the synchronous endpoint
and writes an output file (and an error file for failed lines, both ``purpose: batch_output``, living
``output_expires_after`` when asked); ``GET /v1/files/{id}/content`` returns a file;
``POST /v1/batches/{id}/cancel`` answers ``cancelling``, and the next look finds it ``cancelled``.
Faults (``BatchFaults``, set with ``POST /admin/batches``): a delay before completion, lines that fail,
batches that expire (some lines answered first), 5xx answers to retrieve and list, a missing list.
Everything is lazy (no background task): a batch moves on when it is looked at.
"""

from __future__ import annotations

import inspect
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from pydantic import ValidationError

from .batch_objects import TERMINAL, BatchError, BatchFaults, StoredBatch, StoredFile, page, parse_multipart

__all__ = ["BatchBook", "BatchFaults", "parse_multipart"]

Answer = Callable[[bytes], Awaitable[tuple[int, bytes]]]
"""Answers one chat completion body: (HTTP status, response body)."""
Query = dict[str, list[str]]
Action = Callable[[bytes, Query], Awaitable[tuple[int, bytes, bytes]]]
"""Handles one files/batches request (body, query): (HTTP status, response body, content type)."""
_JSON_TYPE = b"application/json"
_FAILED_LINE = {
    "message": "Injected fault: line failed.",
    "type": "server_error",
    "param": None,
    "code": None,
}


class BatchBook:
    """Files and batches of one server process."""

    def __init__(
        self, answer: Answer, record: Callable[[str, str, int], None], *, max_files: int = 1000
    ) -> None:
        self._answer = answer
        self.max_files = max_files
        self._record = record
        self.faults = BatchFaults()
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, StoredBatch] = {}
        self._ids = itertools.count(1)

    def route(self, method: str, path: str) -> Action | None:
        """The action for ``method path`` (``/v1`` optional), or None when it is not a files/batches route."""
        if (method, path) == ("POST", "/admin/batches"):
            return self._wrap(lambda raw, _q: self.set_faults(raw))
        parts = path.removeprefix("/v1").strip("/").split("/")
        kind, ident, tail = parts[0], (parts[1] if len(parts) > 1 else ""), "/".join(parts[2:])
        table: dict[tuple[str, str, bool, str], Callable[[bytes, Query], Any]] = {
            ("POST", "files", False, ""): lambda raw, _q: self.upload(raw),
            ("GET", "files", False, ""): lambda _raw, q: self.file_list(q),
            ("GET", "files", True, ""): lambda _raw, _q: self._file(ident).view(),
            ("DELETE", "files", True, ""): lambda _raw, _q: self.delete(ident),
            ("GET", "files", True, "content"): lambda _raw, _q: self.content(ident),
            ("POST", "batches", False, ""): lambda raw, _q: self.create(raw),
            ("GET", "batches", False, ""): lambda _raw, q: self.listing(q),
            ("GET", "batches", True, ""): lambda _raw, _q: self.retrieve(ident),
            ("POST", "batches", True, "cancel"): lambda _raw, _q: self.cancel(ident),
        }
        handler = table.get((method, kind, bool(ident), tail))
        return None if handler is None else self._wrap(handler)

    @staticmethod
    def _wrap(handler: Callable[[bytes, Query], Any]) -> Action:
        async def act(raw: bytes, query: Query) -> tuple[int, bytes, bytes]:
            try:
                payload = handler(raw, query)
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

    def _new_file(self, filename: str, purpose: str, content: bytes, life_s: int | None = None) -> StoredFile:
        now = int(time.time())
        expires = now + life_s if life_s is not None else None
        f = StoredFile(f"file-kw{next(self._ids)}", filename, purpose, content, now, expires)
        self.files[f.id] = f
        return f

    # -- files ------------------------------------------------------------------------------------

    def upload(self, raw: bytes) -> dict[str, Any]:
        uploaded = sum(1 for f in self.files.values() if f.purpose == "batch")
        if uploaded >= self.max_files:
            raise BatchError(
                400,
                f"this server keeps at most {self.max_files} uploaded files; delete one to upload another",
            )
        fields = parse_multipart(raw)
        purpose = fields.get("purpose", (None, b""))[1].decode()
        filename, content = fields.get("file", (None, b""))
        if purpose != "batch":
            raise BatchError(400, f"purpose: expected 'batch', got {purpose!r}")
        if not content:
            raise BatchError(400, "file: required")
        life = _expires_after(
            fields.get("expires_after[anchor]", (None, b""))[1].decode() or None,
            fields.get("expires_after[seconds]", (None, b""))[1].decode() or None,
            "expires_after",
        )
        f = self._new_file(filename or "upload.jsonl", purpose, content, life)
        self._record("", "files", 200)
        return f.view()

    def file_list(self, query: Query) -> dict[str, Any]:
        purpose = query.get("purpose", [None])[0]
        files = [f.view() for f in self.files.values() if purpose is None or f.purpose == purpose]
        if query.get("order", ["desc"])[0] != "asc":
            files.reverse()
        self._record("", "files_list", 200)
        return page(files, query, 10_000)

    def delete(self, file_id: str) -> dict[str, Any]:
        self._file(file_id)
        del self.files[file_id]
        self._record("", "files_delete", 200)
        return {"id": file_id, "object": "file", "deleted": True}

    def content(self, file_id: str) -> bytes:
        f = self._file(file_id)
        self._record("", "files_content", 200)
        return f.content

    def _file(self, file_id: str) -> StoredFile:
        f = self.files.get(file_id)
        if f is None:
            raise BatchError(404, f"No such File object: {file_id}")
        return f

    # -- batches ----------------------------------------------------------------------------------

    def create(self, raw: bytes) -> dict[str, Any]:
        body = _json_object(raw)
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
        after = body.get("output_expires_after") or {}
        life = _expires_after(after.get("anchor"), after.get("seconds"), "output_expires_after")
        now = time.time()
        expire = self.faults.expire > 0
        if expire:
            self.faults.expire -= 1
        batch = StoredBatch(
            id=f"batch_kw{next(self._ids)}",
            input_file_id=f.id,
            endpoint=endpoint,
            completion_window=str(body.get("completion_window", "24h")),
            metadata=body.get("metadata"),
            lines=lines,
            model=str(lines[0]["body"].get("model", "")) if lines else "",
            created_at=now,
            ready_at=now + self.faults.delay_s,
            expire=expire,
            output_expires_s=life,
        )
        batch.counts["total"] = len(lines)
        self.batches[batch.id] = batch
        self._record(batch.model, "batches_create", 200)
        return batch.view()

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        if self.faults.retrieve_5xx > 0:
            self.faults.retrieve_5xx -= 1
            self._record(self._batch(batch_id).model, "batches_retrieve", 503)
            raise BatchError(503, "Injected fault: service unavailable.")
        batch = self._batch(batch_id)
        await self._advance(batch)
        self._record(batch.model, "batches_retrieve", 200)
        return batch.view()

    def listing(self, query: Query) -> dict[str, Any]:
        if self.faults.list_missing:
            self._record("", "batches_list", 404)
            raise BatchError(404, "Injected fault: no route GET /v1/batches.")
        if self.faults.list_5xx > 0:
            self.faults.list_5xx -= 1
            self._record("", "batches_list", 503)
            raise BatchError(503, "Injected fault: service unavailable.")
        self._record("", "batches_list", 200)
        return page([b.view() for b in reversed(self.batches.values())], query, 100)

    def cancel(self, batch_id: str) -> dict[str, Any]:
        """Cancelling, as OpenAI answers; the batch is cancelled when next looked at."""
        batch = self._batch(batch_id)
        if batch.status not in TERMINAL and batch.status != "cancelling":
            batch.status = "cancelling"
            batch.times["cancelling"] = int(time.time())
        self._record(batch.model, "batches_cancel", 200)
        return batch.view()

    def _batch(self, batch_id: str) -> StoredBatch:
        batch = self.batches.get(batch_id)
        if batch is None:
            raise BatchError(404, f"No such Batch object: {batch_id}")
        return batch

    async def _advance(self, batch: StoredBatch) -> None:
        """Move a batch on as time has passed: validating, in progress, then finished (or cancelled)."""
        now = int(time.time())
        if batch.status == "validating":
            batch.status = "in_progress"
            batch.times["in_progress"] = now
        if batch.status == "cancelling":
            self._close(
                batch, "cancelled", [], [self._unrun(line, "batch_cancelled") for line in batch.lines]
            )
        elif batch.status == "in_progress" and time.time() >= batch.ready_at:
            await self._finish(batch)

    async def _finish(self, batch: StoredBatch) -> None:
        run = batch.lines[: self.faults.expire_answered] if batch.expire else batch.lines
        ok: list[dict[str, Any]] = []
        bad: list[dict[str, Any]] = []
        for n, line in enumerate(run):
            if n < self.faults.fail_lines:
                status, body = 500, orjson.dumps({"error": _FAILED_LINE})
            else:
                status, body = await self._answer(orjson.dumps(line["body"]))
            (ok if status == 200 else bad).append(self._line(line, status, orjson.loads(body)))
        if batch.expire:
            # As providers do: the lines not run by the deadline go to the error file.
            bad += [self._unrun(line, "batch_expired") for line in batch.lines[len(run) :]]
        batch.times["finalizing"] = int(time.time())
        self._close(batch, "expired" if batch.expire else "completed", ok, bad)

    def _line(self, line: dict[str, Any], status: int, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"batch_req_kw{next(self._ids)}",
            "custom_id": line["custom_id"],
            "response": {"status_code": status, "request_id": f"req_kw{next(self._ids)}", "body": body},
            "error": None,
        }

    def _unrun(self, line: dict[str, Any], code: str) -> dict[str, Any]:
        message = "This request could not be executed before the completion window expired."
        if code == "batch_cancelled":
            message = "This request was not executed because the batch was cancelled."
        return {
            "id": f"batch_req_kw{next(self._ids)}",
            "custom_id": line["custom_id"],
            "response": None,
            "error": {"code": code, "message": message},
        }

    def _close(
        self, batch: StoredBatch, status: str, ok: list[dict[str, Any]], bad: list[dict[str, Any]]
    ) -> None:
        def write(rows: list[dict[str, Any]], kind: str) -> str | None:
            if not rows:
                return None
            content = b"".join(orjson.dumps(r) + b"\n" for r in rows)
            # OpenAI gives output and error files alike the purpose ``batch_output``.
            return self._new_file(
                f"{batch.id}_{kind}.jsonl", "batch_output", content, batch.output_expires_s
            ).id

        batch.output_file_id = write(ok, "output")
        batch.error_file_id = write(bad, "error")
        batch.counts.update(completed=len(ok), failed=len(bad))
        batch.status = status
        batch.times[status] = int(time.time())


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BatchError(400, f"body: {exc}") from None
    if not isinstance(body, dict):
        raise BatchError(400, "body: expected a JSON object")
    return body


def _expires_after(anchor: object, seconds: object, name: str) -> int | None:
    """The life in seconds an ``expires_after`` asks for (None when absent), as OpenAI bounds it."""
    if anchor is None and seconds is None:
        return None
    if anchor != "created_at":
        raise BatchError(400, f"{name}.anchor: expected 'created_at', got {anchor!r}")
    try:
        life = int(str(seconds))
    except ValueError:
        raise BatchError(400, f"{name}.seconds: expected an integer, got {seconds!r}") from None
    if not 3600 <= life <= 2_592_000:
        raise BatchError(400, f"{name}.seconds: expected 3600 to 2592000 (1 hour to 30 days), got {life}")
    return life
