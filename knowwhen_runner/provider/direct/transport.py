"""``DirectTransport``: a ``Transport`` that sends System One decisions and chat completions itself, one
request each over the process's pooled HTTP client, to the models whose wire the runner knows
(``ModelSpec.why_not_direct``); litellm is never imported for them.

What it gives back is what ``LitellmTransport`` gives for the same reply: the normalised response, the
limit news of the reply's headers, and who answered (the body's ``model``, a gateway's headers). What it
raises is read by ``retry.classify`` as litellm's exception for the same answer (``failures``).
"""

from __future__ import annotations

from typing import Any

import httpx

from ... import __version__
from ...config import ModelSpec, resolve_params
from ..adaptive import read_limit_headers
from ..transport import CallKind, Reply, origin_from
from .chat import chat_request, read_chat
from .failures import failure_for
from .pool import Pool
from .systemone import read_decision, systemone_request

__all__ = ["DirectTransport"]

_USER_AGENT = f"knowwhen-runner/{__version__}"


class DirectTransport:
    """Requests to System One and OpenAI-compatible chat servers, without litellm."""

    def __init__(self) -> None:
        self._pool = Pool()

    def preload(self) -> None:
        return None  # nothing slow to start

    async def prepare(self, model: ModelSpec) -> None:
        # The pooled client now, before a rate-limit slot is taken: making one loads the CA certificates
        # (tens of milliseconds on the event loop), which would hold up requests whose slots are due.
        self._pool.client()

    async def aclose(self) -> None:
        """Close the pooled connections (at the end of the event loop that made them)."""
        await self._pool.aclose()

    async def send(
        self, model: ModelSpec, kind: CallKind, body: dict[str, Any], api_key: str | None
    ) -> Reply:
        why = model.why_not_direct()
        if why is not None or kind != model.kind:
            raise ValueError(
                f"{model.id}: no direct request ({why or f'a {kind} call to a {model.kind} model'})"
            )
        params = resolve_params(model)
        key = api_key or "not-needed"
        if kind == "decision":
            url, data, headers = systemone_request(model, body, key, params.get("extra_headers"))
        else:
            url, data, headers = chat_request(model, body, key, params)
        headers.setdefault("User-Agent", _USER_AGENT)
        response = await self._pool.client().post(
            url, content=data, headers=headers, timeout=httpx.Timeout(model.timeout_s)
        )
        if response.status_code >= 300:
            raise failure_for(response, model.model.partition("/")[0])
        read = read_decision if kind == "decision" else read_chat
        normalised, named = read(model, response)
        return Reply(normalised, read_limit_headers(response.headers), origin_from(named, response.headers))
