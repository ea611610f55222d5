"""Provider Batch APIs through litellm: upload a JSONL of chat requests, create, poll, read back, cancel.

The only batch code that calls litellm (``litellm.acreate_file``, ``acreate_batch``, ``aretrieve_batch``,
``afile_content``, ``alist_batches``, ``acancel_batch``; OpenAI's files and batches endpoints, which
OpenAI-compatible servers share). Each batch carries our key in its ``metadata``, so a process that
died between creating a batch and writing its provider id down finds it again (``find``) instead of
submitting it twice. Answers are normalised by ``transport.llm_response``, the synchronous path's code,
and priced at the batch price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import orjson

from ..config import ModelSpec
from .litellm_loader import load_litellm
from .prices import batch_token_prices, register_price
from .transport import llm_response

__all__ = ["METADATA_KEY", "BatchClient", "BatchLine", "BatchState", "LineResult"]

METADATA_KEY = "knowwhen_batch"
"""The batch ``metadata`` field that holds the runner's batch key."""
_FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True, slots=True)
class BatchLine:
    """One request of a batch: our id for it (``custom_id``) and its chat completion body."""

    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BatchState:
    """What the provider says of a batch."""

    provider_id: str
    status: str
    output_file_id: str | None
    error_file_id: str | None

    @property
    def finished(self) -> bool:
        return self.status in _FINISHED


@dataclass(frozen=True, slots=True)
class LineResult:
    """One request's outcome: the normalised response (as the synchronous path stores it), or an error."""

    custom_id: str
    response: dict[str, Any] | None
    error: str | None = None


def _provider(model: ModelSpec) -> str:
    """litellm's provider for the files and batches calls; OpenAI-compatible servers speak OpenAI's."""
    prefix = model.model.split("/", 1)[0] if "/" in model.model else "openai"
    return prefix if prefix in ("azure", "vertex_ai", "bedrock", "mistral", "xai") else "openai"


async def _litellm() -> Any:
    """litellm, imported off the event loop (the first import takes seconds; leases must keep beating)."""
    return await anyio.to_thread.run_sync(load_litellm)


class BatchClient:
    """Files and batches requests for one process (keys are passed per call, never stored)."""

    def _kw(self, model: ModelSpec, api_key: str | None) -> dict[str, Any]:
        return {
            "custom_llm_provider": _provider(model),
            "api_base": model.api_base,
            "api_key": api_key or "not-needed",
            "timeout": model.timeout_s,
            "max_retries": 0,  # retries are the poll loop's: a failed poll is simply tried next round
        }

    def request_body(self, model: ModelSpec, body: dict[str, Any]) -> dict[str, Any]:
        """The chat body of one batch line: the synchronous request's fields and the model's params."""
        name = model.model.split("/", 1)[1] if "/" in model.model else model.model
        return {"model": name, **model.params, **body}

    async def submit(self, model: ModelSpec, key: str, lines: list[BatchLine], api_key: str | None) -> str:
        """Upload the lines and create the batch; its provider id."""
        litellm = await _litellm()
        kw = self._kw(model, api_key)
        content = b"".join(
            orjson.dumps(
                {"custom_id": ln.custom_id, "method": "POST", "url": "/v1/chat/completions", "body": ln.body}
            )
            + b"\n"
            for ln in lines
        )
        uploaded = await litellm.acreate_file(file=(f"{key}.jsonl", content), purpose="batch", **kw)
        batch = await litellm.acreate_batch(
            completion_window="24h",
            endpoint="/v1/chat/completions",
            input_file_id=uploaded.id,
            metadata={METADATA_KEY: key},
            **kw,
        )
        return str(batch.id)

    async def find(self, model: ModelSpec, key: str, api_key: str | None) -> str | None:
        """The provider id of the batch created with our ``key``, if the provider has one."""
        litellm = await _litellm()
        page = await litellm.alist_batches(limit=100, **self._kw(model, api_key))
        for batch in getattr(page, "data", None) or []:
            if (getattr(batch, "metadata", None) or {}).get(METADATA_KEY) == key:
                return str(batch.id)
        return None

    async def retrieve(self, model: ModelSpec, provider_id: str, api_key: str | None) -> BatchState:
        litellm = await _litellm()
        b = await litellm.aretrieve_batch(batch_id=provider_id, **self._kw(model, api_key))
        return BatchState(provider_id, str(b.status), b.output_file_id, b.error_file_id)

    async def cancel(self, model: ModelSpec, provider_id: str, api_key: str | None) -> None:
        litellm = await _litellm()
        await litellm.acancel_batch(batch_id=provider_id, **self._kw(model, api_key))

    async def results(self, model: ModelSpec, state: BatchState, api_key: str | None) -> list[LineResult]:
        """Every line the provider reports on, answered or failed (lines it never reports are missing)."""
        litellm = await _litellm()
        register_price(litellm, model)
        out: list[LineResult] = []
        for file_id in (state.output_file_id, state.error_file_id):
            if not file_id:
                continue
            content = await litellm.afile_content(file_id=file_id, **self._kw(model, api_key))
            for raw in bytes(content.content).splitlines():
                if raw.strip():
                    out.append(self._line(model, orjson.loads(raw)))
        return out

    def _line(self, model: ModelSpec, line: dict[str, Any]) -> LineResult:
        custom_id = str(line.get("custom_id"))
        response = line.get("response") or {}
        body = response.get("body") if isinstance(response, dict) else None
        if response.get("status_code") == 200 and isinstance(body, dict):
            litellm = load_litellm()
            normalised = llm_response(model, litellm.ModelResponse(**body))
            normalised["cost_usd"] = self.cost(model, normalised["input_tokens"], normalised["output_tokens"])
            return LineResult(custom_id, normalised)
        error = line.get("error") or (body or {}).get("error") or {}
        status = response.get("status_code") if isinstance(response, dict) else None
        code = error.get("code") or (f"HTTP {status}" if status else "error")
        return LineResult(custom_id, None, f"batch line {code}: {error.get('message') or 'no answer'}"[:500])

    @staticmethod
    def cost(model: ModelSpec, tokens_in: int, tokens_out: int) -> float | None:
        """A batch answer's cost at the batch price (None when no price is known)."""
        prices = batch_token_prices(model)
        if prices is None:
            return None
        (p_in, p_out), _listed = prices
        per_request = model.pricing.per_request if model.pricing is not None else 0.0
        return tokens_in * p_in + tokens_out * p_out + per_request
