"""``MockTransport``: a ``Transport`` that answers in-process, for tests of everything above the network.

``handler(model, kind, body)`` answers each request: a normalised response (or a ``Reply``, to say what
its headers stated about limits), or an exception to raise (``MockTransport.error`` builds ones that
``classify`` reads like a provider's). Batches are kept in memory like a provider keeps them: an
uploaded file's lines are answered by the same handler when the batch finishes, after ``batch_polls``
retrieves that still see it running; ``fail`` makes the next request of a batch operation raise.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..config import ModelSpec
from .batch_wire import BatchPage, BatchState, LineResult, failed_line
from .transport import CallKind, Reply

__all__ = ["MockTransport", "Sent"]


@dataclass(frozen=True, slots=True)
class Sent:
    """One request a ``MockTransport`` received."""

    model: str
    kind: CallKind
    body: dict[str, Any]


Handler = Callable[
    [ModelSpec, CallKind, dict[str, Any]], "dict[str, Any] | Reply | BaseException | Awaitable[Any]"
]


@dataclass
class _Batch:
    """A batch as the fake provider keeps it."""

    id: str
    metadata: dict[str, str]
    requests: list[dict[str, Any]]
    polls_left: int
    status: str = "in_progress"
    results: dict[str, list[LineResult]] = field(default_factory=dict)  # file id -> its lines
    created_at: float = field(default_factory=time.time)


@dataclass
class MockTransport:
    """Answers in-process from ``handler``; every request is kept (``sent``; batch requests by
    operation name in ``batch_ops``)."""

    handler: Handler
    sent: list[Sent] = field(default_factory=list)
    batch_polls: int = 0
    page_size: int = 100  # batches per page of ``list_batches``
    fail: dict[str, list[BaseException]] = field(default_factory=dict)
    batch_ops: list[str] = field(default_factory=list)
    _files: dict[str, bytes] = field(default_factory=dict)
    _batches: dict[str, _Batch] = field(default_factory=dict)

    def preload(self) -> None:
        return None

    async def prepare(self, model: ModelSpec) -> None:
        return None

    async def send(
        self, model: ModelSpec, kind: CallKind, body: dict[str, Any], api_key: str | None
    ) -> Reply:
        self.sent.append(Sent(model.id, kind, body))
        got = await self._answer(model, kind, body)
        if isinstance(got, BaseException):
            raise got
        return got

    async def _answer(self, model: ModelSpec, kind: CallKind, body: dict[str, Any]) -> Reply | BaseException:
        got = self.handler(model, kind, body)
        if inspect.isawaitable(got):
            got = await got
        if isinstance(got, (Reply, BaseException)):
            return got
        return Reply(dict(got))

    @staticmethod
    def error(
        status: int,
        message: str = "",
        retry_after: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> Exception:
        """An HTTP error as litellm raises it: ``status_code``, and ``Retry-After`` (or ``headers``, as a
        gateway forwards them) in its headers."""
        exc = _MockHTTPError(message or f"mock HTTP {status}")
        exc.status_code = status
        sent = {} if retry_after is None else {"retry-after": str(retry_after)}
        exc.litellm_response_headers = {**sent, **(headers or {})}
        return exc

    # -- batches ------------------------------------------------------------------------------------

    def _op(self, name: str) -> None:
        self.batch_ops.append(name)
        errors = self.fail.get(name)
        if errors:
            raise errors.pop(0)

    async def upload_batch_file(
        self, model: ModelSpec, name: str, content: bytes, api_key: str | None
    ) -> str:
        self._op("upload")
        file_id = f"file-{len(self._files) + 1}"
        self._files[file_id] = content
        return file_id

    async def create_batch(
        self, model: ModelSpec, input_file_id: str, metadata: dict[str, str], api_key: str | None
    ) -> str:
        self._op("create")
        requests = [orjson.loads(raw) for raw in self._files[input_file_id].splitlines() if raw.strip()]
        batch = _Batch(f"batch-{len(self._batches) + 1}", dict(metadata), requests, self.batch_polls)
        self._batches[batch.id] = batch
        return batch.id

    async def list_batches(
        self, model: ModelSpec, api_key: str | None, after: str | None = None
    ) -> BatchPage:
        self._op("list")
        ids = list(reversed(self._batches))
        start = ids.index(after) + 1 if after in ids else 0
        page = ids[start : start + self.page_size]
        return BatchPage([self._state(self._batches[i]) for i in page], start + len(page) < len(ids))

    async def retrieve_batch(self, model: ModelSpec, provider_id: str, api_key: str | None) -> BatchState:
        self._op("retrieve")
        batch = self._batches[provider_id]
        if batch.status == "in_progress":
            if batch.polls_left > 0:
                batch.polls_left -= 1
            else:
                await self._finish(model, batch)
        return self._state(batch)

    async def cancel_batch(self, model: ModelSpec, provider_id: str, api_key: str | None) -> None:
        self._op("cancel")
        batch = self._batches[provider_id]
        if batch.status == "in_progress":
            batch.status = "cancelled"

    async def batch_results(self, model: ModelSpec, file_id: str, api_key: str | None) -> list[LineResult]:
        self._op("results")
        batch_id, _, _kind = file_id.rpartition("-")
        return list(self._batches[batch_id].results.get(file_id, []))

    async def _finish(self, model: ModelSpec, batch: _Batch) -> None:
        """Answer every line through the handler: answers to the output file, errors to the error file."""
        answered: list[LineResult] = []
        failed: list[LineResult] = []
        for request in batch.requests:
            custom_id = str(request["custom_id"])
            got = await self._answer(model, "llm", request["body"])
            if isinstance(got, BaseException):
                status = getattr(got, "status_code", None)
                failed.append(failed_line(custom_id, f"HTTP {status}" if status else "error", str(got)))
            else:
                answered.append(LineResult(custom_id, dict(got.response)))
        batch.status = "completed"
        if answered:
            batch.results[f"{batch.id}-out"] = answered
        if failed:
            batch.results[f"{batch.id}-err"] = failed

    def _state(self, batch: _Batch) -> BatchState:
        out, err = f"{batch.id}-out", f"{batch.id}-err"
        return BatchState(
            batch.id,
            batch.status,
            out if out in batch.results else None,
            err if err in batch.results else None,
            batch.metadata,
            batch.created_at,
        )


class _MockHTTPError(Exception):
    status_code: int
    litellm_response_headers: dict[str, str]
