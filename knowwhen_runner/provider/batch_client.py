"""Provider Batch APIs through the transport: upload a JSONL of chat requests, create, poll, read back, cancel.

Every request goes through the ``BatchTransport`` (``LitellmTransport``: OpenAI's files and batches endpoints,
which OpenAI-compatible servers share; ``MockTransport`` in tests). Each batch carries our key in its
``metadata``, so a process that died between creating a batch and writing its provider id down finds
it again (``find``, paging through the provider's list) instead of submitting it twice. Answers are normalised by the transport with the
synchronous path's code, and priced here at the batch price.
"""

from __future__ import annotations

from typing import Any

from ..config import ModelSpec
from ..exceptions import ProviderError
from .batch_wire import BatchLine, BatchState, LineResult, request_file
from .prices import batch_token_prices
from .transport import BatchTransport, LitellmTransport

__all__ = ["METADATA_KEY", "BatchClient", "BatchLine", "BatchState", "LineResult"]

METADATA_KEY = "knowwhen_batch"
"""The batch ``metadata`` field that holds the runner's batch key."""

FIND_PAGES = 50
"""Most pages of the provider's batch list one lookup reads before it gives up (unknown, not absent)."""
CLOCK_SKEW_S = 3600.0
"""How much earlier than our row the provider's clock may date the batch: older batches end a lookup."""


class BatchClient:
    """Files and batches requests for one process (keys are passed per call, never stored)."""

    def __init__(self, transport: BatchTransport | None = None) -> None:
        self._transport: BatchTransport = transport or LitellmTransport()

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

    async def find(
        self, model: ModelSpec, key: str, api_key: str | None, since: float | None = None
    ) -> str | None:
        """The provider id of the batch created with our ``key``, or None when the provider has none.

        The list is read page by page (``after`` the last batch of the previous page), newest first, until
        a batch carries our key in its metadata, the list ends, or a page reaches batches older than
        ``since`` (when our row was written, less ``CLOCK_SKEW_S``). A lookup that reads ``FIND_PAGES``
        pages without an answer raises: the batch is then unknown, not absent.
        """
        await self._transport.prepare(model)
        after: str | None = None
        for _ in range(FIND_PAGES):
            page = await self._transport.list_batches(model, api_key, after)
            for batch in page.batches:
                if batch.metadata.get(METADATA_KEY) == key:
                    return batch.provider_id
            if not page.has_more or not page.batches:
                return None
            oldest = page.batches[-1].created_at
            if since is not None and oldest is not None and oldest < since - CLOCK_SKEW_S:
                return None
            after = page.batches[-1].provider_id
        raise ProviderError(
            f"batch {key} not found in the first {FIND_PAGES} pages of the list", kind="retry"
        )

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
