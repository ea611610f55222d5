"""``AutoTransport``: each model's requests go direct where the runner knows the wire (``transport:``),
else through litellm; provider batches always go through litellm. It is the ``ProviderTransport`` a run
wires, so a run whose every model goes direct never imports litellm.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...config import ModelSpec
from ...config.transport_spec import TransportChoice
from ..batch_wire import BatchPage, BatchState, LineResult
from ..litellm_loader import preload_litellm
from ..transport import CallKind, LitellmTransport, Reply
from .costs import flat_price
from .transport import DirectTransport

__all__ = ["AutoTransport", "goes_direct", "litellm_needed", "preload_litellm_for"]


def goes_direct(model: ModelSpec, default: TransportChoice = "auto") -> bool:
    """Whether this model's requests go direct: its wire is known, and under ``auto`` its price is one
    the runner computes as litellm does (``costs.flat_price``)."""
    if model.wire(default) is None:
        return False
    return (model.transport or default) == "direct" or flat_price(model)


def litellm_needed(models: Iterable[ModelSpec], default: TransportChoice = "auto") -> bool:
    """Whether a run of these models imports litellm: a model that does not go direct, or that batches."""
    return any(m.batches() or not goes_direct(m, default) for m in models)


def preload_litellm_for(models: Iterable[ModelSpec], default: TransportChoice = "auto") -> None:
    """Start importing litellm in the background if a run of these models needs it (``litellm_needed``)."""
    if litellm_needed(models, default):
        preload_litellm()


class AutoTransport:
    """Direct requests where ``goes_direct``, litellm's elsewhere and for batches (a ``ProviderTransport``).

    ``models``: those the run will call, to know whether litellm is needed at all (None: assume it is).
    """

    def __init__(self, models: Iterable[ModelSpec] | None = None, default: TransportChoice = "auto") -> None:
        self.direct = DirectTransport()
        self.litellm = LitellmTransport()
        self._default: TransportChoice = default
        self._routes: dict[str, bool] = {}
        self._needs_litellm = True if models is None else litellm_needed(models, default)

    def _direct(self, model: ModelSpec) -> bool:
        route = self._routes.get(model.id)
        if route is None:
            route = self._routes[model.id] = goes_direct(model, self._default)
        return route

    def preload(self) -> None:
        if self._needs_litellm:
            self.litellm.preload()

    async def prepare(self, model: ModelSpec) -> None:
        await (self.direct if self._direct(model) else self.litellm).prepare(model)

    async def send(
        self, model: ModelSpec, kind: CallKind, body: dict[str, Any], api_key: str | None
    ) -> Reply:
        return await (self.direct if self._direct(model) else self.litellm).send(model, kind, body, api_key)

    async def aclose(self) -> None:
        await self.direct.aclose()

    # -- provider batches: litellm's ---------------------------------------------------------------

    async def upload_batch_file(
        self, model: ModelSpec, name: str, content: bytes, api_key: str | None
    ) -> str:
        return await self.litellm.upload_batch_file(model, name, content, api_key)

    async def create_batch(
        self, model: ModelSpec, input_file_id: str, metadata: dict[str, str], api_key: str | None
    ) -> str:
        return await self.litellm.create_batch(model, input_file_id, metadata, api_key)

    async def list_batches(
        self, model: ModelSpec, api_key: str | None, after: str | None = None
    ) -> BatchPage:
        return await self.litellm.list_batches(model, api_key, after)

    async def retrieve_batch(self, model: ModelSpec, provider_id: str, api_key: str | None) -> BatchState:
        return await self.litellm.retrieve_batch(model, provider_id, api_key)

    async def cancel_batch(self, model: ModelSpec, provider_id: str, api_key: str | None) -> None:
        await self.litellm.cancel_batch(model, provider_id, api_key)

    async def batch_results(self, model: ModelSpec, file_id: str, api_key: str | None) -> list[LineResult]:
        return await self.litellm.batch_results(model, file_id, api_key)
