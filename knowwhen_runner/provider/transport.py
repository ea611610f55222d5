"""The network seam: every request to a provider, through litellm, or through a fake for tests.

``Transport.send`` makes exactly one HTTP request (no retries: those are the client's) and returns a
``Reply``: the normalised response the cache stores, and beside it what the response's headers said
about rate limits (never stored); or it raises what the provider raised. ``BatchTransport`` is the
other seam: the files and batches endpoints (``batch_client`` drives them), one request each; a caller
takes the seam it needs, and ``ProviderTransport`` is both, for what wires a worker. ``LitellmTransport`` is
the only code that sends requests through litellm; ``MockTransport`` (``mock_transport``) answers
in-process, so the worker loop, retries, pausing, recording and batches are unit-tested without a server.

The normalised response keeps what the server said: a decision's ``confidence`` is the server's own
figure (answer rows derive the card's from ``probabilities``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio.to_thread
import orjson

from ..config import ModelSpec, resolve_params
from .adaptive import LimitNews, read_limit_headers
from .batch_wire import BatchPage, BatchState, LineResult, result_line
from .bodies import QUESTION_NAME
from .litellm_loader import litellm_loaded, load_litellm, preload_litellm
from .prices import call_cost, register_price
from .readout import ChatTop, EchoLine, EchoReply, read_out

__all__ = [
    "BatchTransport",
    "CallKind",
    "LitellmTransport",
    "Origin",
    "ProviderTransport",
    "Reply",
    "Transport",
    "chat_body_response",
    "decision_response",
    "llm_response",
    "origin_from",
]

CallKind = Literal["decision", "llm"]


@dataclass(frozen=True, slots=True)
class Origin:
    """Who says they answered a request: the ``model`` of the reply's body, and what a gateway in front
    adds (the LiteLLM Proxy's ``x-litellm-model-group`` and ``x-litellm-attempted-fallbacks``). None
    where the reply does not say."""

    model: str | None = None
    group: str | None = None  # the gateway's name of what answered (its model group)
    fallbacks: int = 0  # the gateway tried another model after the one asked for failed

    def is_other(self, model: ModelSpec) -> bool:
        """Whether another model than ``model`` answered: a gateway's fallback (always), or a ``model``
        that is not the one asked, unless the gateway names the one asked as what answered. A reply that
        names no model is taken as the model's own."""
        if self.fallbacks > 0:
            return True
        if self.model is None or model.answers_as(self.model):
            return False
        return not (self.group is not None and model.answers_as(self.group))


@dataclass(frozen=True, slots=True)
class Reply:
    """One answered request: the normalised response (what the cache stores) and, beside it, what the
    response's headers said about rate limits (for the adaptive limits) and who answered (checked by the
    client); neither is stored."""

    response: dict[str, Any]
    limits: LimitNews = field(default_factory=LimitNews)
    origin: Origin = field(default_factory=Origin)


class Transport(Protocol):
    """Sends one request to one model: the seam every synchronous call goes through."""

    def preload(self) -> None:
        """Start slow set-up in the background (a call is coming soon); must return at once."""
        ...

    async def prepare(self, model: ModelSpec) -> None:
        """Get ready to call ``model`` (imports, prices); called before its first request."""
        ...

    async def send(
        self, model: ModelSpec, kind: CallKind, body: dict[str, Any], api_key: str | None
    ) -> Reply:
        """One request; the normalised response and its limit news, or the provider's exception."""
        ...


class BatchTransport(Protocol):
    """The files and batches endpoints of a model's provider, one request each (``batch_client`` drives
    them): the seam provider batches go through."""

    async def prepare(self, model: ModelSpec) -> None:
        """Get ready to call ``model`` (imports, prices); called before its first request."""
        ...

    async def upload_batch_file(
        self, model: ModelSpec, name: str, content: bytes, api_key: str | None
    ) -> str:
        """Upload a batch's JSONL of requests (``purpose=batch``); the file's id."""
        ...

    async def create_batch(
        self, model: ModelSpec, input_file_id: str, metadata: dict[str, str], api_key: str | None
    ) -> str:
        """Create a batch of chat completions from an uploaded file; its provider id."""
        ...

    async def list_batches(
        self, model: ModelSpec, api_key: str | None, after: str | None = None
    ) -> BatchPage:
        """One page of the provider's batches (with their metadata), newest first, from after ``after``."""
        ...

    async def retrieve_batch(self, model: ModelSpec, provider_id: str, api_key: str | None) -> BatchState:
        """What the provider says of one batch now."""
        ...

    async def cancel_batch(self, model: ModelSpec, provider_id: str, api_key: str | None) -> None:
        """Ask the provider to cancel a batch."""
        ...

    async def batch_results(self, model: ModelSpec, file_id: str, api_key: str | None) -> list[LineResult]:
        """Every line of a batch's output or error file, answers normalised as ``send`` normalises them."""
        ...


class ProviderTransport(Transport, BatchTransport, Protocol):
    """Both seams, for what wires a worker (``work_queue``): requests and batches reach one provider."""


class LitellmTransport:
    """Requests through litellm: ``asystemone`` for decision models, ``acompletion`` for LLMs, and the
    files and batches endpoints (a ``ProviderTransport``)."""

    def __init__(self) -> None:
        self._prepared: set[str] = set()
        self._importing: anyio.CapacityLimiter | None = None

    def preload(self) -> None:
        preload_litellm()

    async def prepare(self, model: ModelSpec) -> None:
        if litellm_loaded() and model.id in self._prepared:
            return
        if litellm_loaded():
            litellm = load_litellm()
        else:
            # Off the event loop: the first import takes seconds, and cache hits must not wait for it.
            # One thread waits for it; the other calls wait on this limiter, not in the thread pool,
            # whose threads the queue's database work needs meanwhile (each call waiting there held one).
            if self._importing is None:
                self._importing = anyio.CapacityLimiter(1)
            litellm = await anyio.to_thread.run_sync(load_litellm, limiter=self._importing)
        if model.id not in self._prepared:
            register_price(litellm, model)
            self._prepared.add(model.id)

    async def send(
        self, model: ModelSpec, kind: CallKind, body: dict[str, Any], api_key: str | None
    ) -> Reply:
        litellm = load_litellm()
        key = api_key or "not-needed"
        if kind == "decision" and model.readout is not None:
            wire = _ReadoutWire(litellm, model, key)
            response = await read_out(model.readout, body, wire)
            return Reply(response, wire.limits, wire.origin)
        if kind == "decision":
            resp = await litellm.asystemone(
                model=model.model,
                state=body["state"],
                questions=body["questions"],
                api_base=model.api_base,
                api_key=key,
                timeout=model.timeout_s,
                **resolve_params(model),
            )
            return Reply(decision_response(model, resp), _limit_news(resp), _origin(resp))
        resp = await litellm.acompletion(
            model=model.model,
            api_base=model.api_base,
            api_key=key,
            timeout=model.timeout_s,
            messages=body["messages"],
            tools=body["tools"],
            tool_choice=body["tool_choice"],
            max_retries=0,  # the OpenAI SDK would retry on its own; retries are ours (classify)
            **{**resolve_params(model), **({"seed": body["seed"]} if "seed" in body else {})},
        )
        return Reply(llm_response(model, resp), _limit_news(resp), _origin(resp))

    # -- the files and batches endpoints (OpenAI's, which OpenAI-compatible servers share) ------------

    async def upload_batch_file(
        self, model: ModelSpec, name: str, content: bytes, api_key: str | None
    ) -> str:
        uploaded = await load_litellm().acreate_file(
            file=(name, content), purpose="batch", **_batch_kw(model, api_key)
        )
        return str(uploaded.id)

    async def create_batch(
        self, model: ModelSpec, input_file_id: str, metadata: dict[str, str], api_key: str | None
    ) -> str:
        batch = await load_litellm().acreate_batch(
            completion_window="24h",
            endpoint="/v1/chat/completions",
            input_file_id=input_file_id,
            metadata=metadata,
            **_batch_kw(model, api_key),
        )
        return str(batch.id)

    async def list_batches(
        self, model: ModelSpec, api_key: str | None, after: str | None = None
    ) -> BatchPage:
        page = await load_litellm().alist_batches(after=after, limit=100, **_batch_kw(model, api_key))
        batches = [_batch_state(b) for b in getattr(page, "data", None) or []]
        return BatchPage(batches, bool(getattr(page, "has_more", False)) and bool(batches))

    async def retrieve_batch(self, model: ModelSpec, provider_id: str, api_key: str | None) -> BatchState:
        batch = await load_litellm().aretrieve_batch(
            batch_id=provider_id,
            # Else litellm's success logging downloads a finished batch's output and error files itself
            # (to price it), beside our own download: every file would be read twice.
            litellm_metadata={"batch_ignore_default_logging": True},
            **_batch_kw(model, api_key),
        )
        return _batch_state(batch, provider_id)

    async def cancel_batch(self, model: ModelSpec, provider_id: str, api_key: str | None) -> None:
        await load_litellm().acancel_batch(batch_id=provider_id, **_batch_kw(model, api_key))

    async def batch_results(self, model: ModelSpec, file_id: str, api_key: str | None) -> list[LineResult]:
        content = await load_litellm().afile_content(file_id=file_id, **_batch_kw(model, api_key))
        return [
            result_line(orjson.loads(raw), lambda body: chat_body_response(model, body), model.answers_as)
            for raw in bytes(content.content).splitlines()
            if raw.strip()
        ]


class _ReadoutWire:
    """A read-out's requests through litellm: one-token chat completions with ``top_logprobs``, and text
    completions of a batch of prompts with ``echo`` (``readout.ReadoutWire``)."""

    def __init__(self, litellm: Any, model: ModelSpec, key: str) -> None:
        self._litellm = litellm
        self._model = model
        self._key = key
        self.limits = LimitNews()
        self.origin = Origin()
        """Who answered: the first of a question's requests answered by another model, else the last."""

    def _heard(self, resp: Any) -> None:
        self.limits = _limit_news(resp)
        origin = _origin(resp)
        if not self.origin.is_other(self._model):
            self.origin = origin

    def _kw(self, extra_body: dict[str, Any]) -> dict[str, Any]:
        params = dict(resolve_params(self._model))  # a copy: without references it is the model's own
        merged = {**(params.pop("extra_body", None) or {}), **extra_body}
        return {
            "model": self._model.model,
            "api_base": self._model.api_base,
            "api_key": self._key,
            "timeout": self._model.timeout_s,
            "max_retries": 0,  # retries are ours (classify)
            **params,
            **({"extra_body": merged} if merged else {}),
        }

    async def first_token(
        self, messages: list[dict[str, str]], top_logprobs: int, extra_body: dict[str, Any]
    ) -> ChatTop:
        resp = await self._litellm.acompletion(
            messages=messages, logprobs=True, top_logprobs=top_logprobs, max_tokens=1, **self._kw(extra_body)
        )
        self._heard(resp)
        usage = getattr(resp, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        logprobs = getattr(resp.choices[0], "logprobs", None) if resp.choices else None
        content = getattr(logprobs, "content", None) or (
            logprobs.get("content") if isinstance(logprobs, dict) else None
        )
        top = None
        if content:
            first = content[0]
            entries = getattr(first, "top_logprobs", None)
            if entries is None and isinstance(first, dict):
                entries = first.get("top_logprobs")
            top = [_token_logprob(e) for e in entries or []]
        mode = getattr(resp, "logprobs_mode", None)
        return ChatTop(
            top,
            tokens_in,
            tokens_out,
            call_cost(self._model, resp, tokens_in, tokens_out),
            mode if isinstance(mode, str) else None,
        )

    async def echo(self, prompts: list[str]) -> EchoReply:
        resp = await self._litellm.atext_completion(
            prompt=prompts, echo=True, logprobs=1, max_tokens=1, temperature=0, **self._kw({})
        )
        self._heard(resp)
        usage = getattr(resp, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        choices = sorted(resp.choices, key=lambda c: int(getattr(c, "index", 0) or 0))
        lines = []
        for choice in choices:
            lp = getattr(choice, "logprobs", None)
            tokens, logprobs, offsets = (
                _logprobs_field(lp, k) for k in ("tokens", "token_logprobs", "text_offset")
            )
            lines.append(EchoLine(tokens or [], logprobs or [], offsets or []))
        return EchoReply(lines, tokens_in, tokens_out, call_cost(self._model, resp, tokens_in, tokens_out))


def _logprobs_field(logprobs: Any, key: str) -> Any:
    """One field of a choice's ``logprobs``, a dict or an object (None where it has none)."""
    return logprobs.get(key) if isinstance(logprobs, dict) else getattr(logprobs, key, None)


def _token_logprob(entry: Any) -> tuple[str, Any]:
    if isinstance(entry, dict):
        return str(entry.get("token", "")), entry.get("logprob")
    return str(getattr(entry, "token", "")), getattr(entry, "logprob", None)


def _limit_news(resp: Any) -> LimitNews:
    """What a litellm response's headers said about rate limits."""
    hidden = getattr(resp, "_hidden_params", None) or {}
    return read_limit_headers(hidden.get("additional_headers") if isinstance(hidden, dict) else None)


def _origin(resp: Any) -> Origin:
    """Who a litellm response says answered: the body's ``model`` (litellm keeps it, at most with its
    provider prefix put back) and a gateway's headers, as sent or as litellm forwards them
    (``llm_provider-``). litellm's decisions responses keep no headers: their body alone says."""
    hidden = getattr(resp, "_hidden_params", None) or {}
    sources = (hidden.get("additional_headers"), hidden.get("headers")) if isinstance(hidden, dict) else ()
    return origin_from(getattr(resp, "model", None), *sources)


def origin_from(model: object, *header_maps: object) -> Origin:
    """Who a reply says answered: the ``model`` of its body and a gateway's headers (each map as sent, or
    as litellm forwards it, ``llm_provider-`` prefixed; a map that is not one is passed over)."""
    headers: dict[str, Any] = {}
    for source in header_maps:
        if isinstance(source, Mapping):
            headers.update({str(k).lower().removeprefix("llm_provider-"): v for k, v in source.items()})
    group = headers.get("x-litellm-model-group")
    try:
        fallbacks = int(str(headers.get("x-litellm-attempted-fallbacks", 0)).strip() or 0)
    except ValueError:
        fallbacks = 0
    return Origin(
        model if isinstance(model, str) and model else None, str(group) if group else None, max(0, fallbacks)
    )


def _batch_provider(model: ModelSpec) -> str:
    """litellm's provider for the files and batches calls; OpenAI-compatible servers speak OpenAI's."""
    prefix = model.model.split("/", 1)[0] if "/" in model.model else "openai"
    return prefix if prefix in ("azure", "vertex_ai", "bedrock", "mistral", "xai") else "openai"


def _batch_kw(model: ModelSpec, api_key: str | None) -> dict[str, Any]:
    return {
        "custom_llm_provider": _batch_provider(model),
        "api_base": model.api_base,
        "api_key": api_key or "not-needed",
        "timeout": model.timeout_s,
        "max_retries": 0,  # retries are the poll loop's: a failed poll is simply tried next round
    }


def _batch_state(batch: Any, provider_id: str | None = None) -> BatchState:
    return BatchState(
        provider_id or str(batch.id),
        str(batch.status),
        batch.output_file_id,
        batch.error_file_id,
        dict(getattr(batch, "metadata", None) or {}),
        getattr(batch, "created_at", None),
    )


def chat_body_response(model: ModelSpec, body: dict[str, Any]) -> dict[str, Any]:
    """A chat completion's JSON body (a batch line's) normalised as the synchronous path's response."""
    return llm_response(model, load_litellm().ModelResponse(**body))


def decision_response(model: ModelSpec, resp: Any) -> dict[str, Any]:
    usage = getattr(resp, "usage", None)
    tokens_in = int(getattr(usage, "input_tokens", 0) or 0)
    tokens_out = int(getattr(usage, "output_tokens", 0) or 0)
    answer = (getattr(resp, "answers", None) or {}).get(QUESTION_NAME)
    out: dict[str, Any] = {
        "choice": None,
        "confidence": None,
        "probabilities": None,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost_usd": call_cost(model, resp, tokens_in, tokens_out),
    }
    if answer is not None:
        out["choice"] = getattr(answer, "choice", None)
        out["confidence"] = getattr(answer, "confidence", None)
        probs = getattr(answer, "probabilities", None)
        out["probabilities"] = dict(probs) if probs else None
    return out


def llm_response(model: ModelSpec, resp: Any) -> dict[str, Any]:
    usage = getattr(resp, "usage", None)
    tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
    tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
    message = resp.choices[0].message
    calls = getattr(message, "tool_calls", None) or []
    choice = calls[0].function.name if calls else None
    arguments = calls[0].function.arguments if calls else None
    out: dict[str, Any] = {
        "choice": choice,
        "arguments": arguments,
        "confidence": None,
        "probabilities": None,
        "content": getattr(message, "content", None),
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost_usd": call_cost(model, resp, tokens_in, tokens_out),
    }
    if len(calls) > 1:  # the first is acted on; the others are kept, and counted where they matter
        out["extra_tool_calls"] = [
            {"name": c.function.name, "arguments": c.function.arguments} for c in calls[1:]
        ]
    return out
