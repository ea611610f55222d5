"""Provider Batch APIs through the transport: upload a JSONL of chat requests, create, poll, read back, cancel.

Every request goes through the ``Transport`` (``LitellmTransport``: OpenAI's files and batches endpoints,
which OpenAI-compatible servers share; ``MockTransport`` in tests). Each batch carries our key in its
``metadata``, so a process that died between creating a batch and writing its provider id down finds
it again (``find``) instead of submitting it twice. Answers are normalised by the transport with the
synchronous path's code, and priced here at the batch price.
"""

from __future__ import annotations

from typing import Any

from ..config import ModelSpec
from .batch_wire import BatchLine, BatchState, LineResult, request_file
from .prices import batch_token_prices
from .transport import LitellmTransport, Transport

__all__ = ["METADATA_KEY", "BatchClient", "BatchLine", "BatchState", "LineResult"]

METADATA_KEY = "knowwhen_batch"
"""The batch ``metadata`` field that holds the runner's batch key."""


class BatchClient:
    """Files and batches requests for one process (keys are passed per call, never stored)."""

    def __init__(self, transport: Transport | None = None) -> None:
        self._transport: Transport = transport or LitellmTransport()

    def request_body(self, model: ModelSpec, body: dict[str, Any]) -> dict[str, Any]:
        """The chat body of one batch line: the synchronous request's fields and the model's params."""
        name = model.model.split("/", 1)[1] if "/" in model.model else model.model
        return {"model": name, **model.params, **body}

    async def submit(self, model: ModelSpec, key: str, lines: list[BatchLine], api_key: str | None) -> str:
        """Upload the lines and create the batch; its provider id."""
        # Off the event loop on first use (litellm's import takes seconds; leases must keep beating).
        await self._transport.prepare(model)
        content = request_file(lines)
        file_id = await self._transport.upload_batch_file(model, f"{key}.jsonl", content, api_key)
        return await self._transport.create_batch(model, file_id, {METADATA_KEY: key}, api_key)

    async def find(self, model: ModelSpec, key: str, api_key: str | None) -> str | None:
        """The provider id of the batch created with our ``key``, if the provider has one."""
        await self._transport.prepare(model)
        for batch in await self._transport.list_batches(model, api_key):
            if batch.metadata.get(METADATA_KEY) == key:
                return batch.provider_id
        return None

    async def retrieve(self, model: ModelSpec, provider_id: str, api_key: str | None) -> BatchState:
        await self._transport.prepare(model)
        return await self._transport.retrieve_batch(model, provider_id, api_key)

    async def cancel(self, model: ModelSpec, provider_id: str, api_key: str | None) -> None:
        await self._transport.prepare(model)
        await self._transport.cancel_batch(model, provider_id, api_key)

    async def results(self, model: ModelSpec, state: BatchState, api_key: str | None) -> list[LineResult]:
        """Every line the provider reports on, answered or failed (lines it never reports are missing)."""
        await self._transport.prepare(model)
        out: list[LineResult] = []
        for file_id in (state.output_file_id, state.error_file_id):
            if file_id:
                lines = await self._transport.batch_results(model, file_id, api_key)
                out.extend(self.priced(model, ln) for ln in lines)
        return out

    def priced(self, model: ModelSpec, line: LineResult) -> LineResult:
        """An answered line with its cost at the batch price (a failed line as it is)."""
        if line.response is None:
            return line
        response = line.response
        cost = self.cost(model, response["input_tokens"], response["output_tokens"])
        return LineResult(line.custom_id, {**response, "cost_usd": cost}, line.error)

    @staticmethod
    def cost(model: ModelSpec, tokens_in: int, tokens_out: int) -> float | None:
        """A batch answer's cost at the batch price (None when no price is known)."""
        prices = batch_token_prices(model)
        if prices is None:
            return None
        (p_in, p_out), _listed = prices
        per_request = model.pricing.per_request if model.pricing is not None else 0.0
        return tokens_in * p_in + tokens_out * p_out + per_request
