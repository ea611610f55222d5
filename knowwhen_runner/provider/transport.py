"""The network seam: one request to one model, through litellm, or through a fake for tests.

``Transport.send`` makes exactly one HTTP request (no retries: those are the client's) and returns the
normalised response the cache stores, or raises what the provider raised. ``LitellmTransport`` is the
only code that calls litellm; ``MockTransport`` answers in-process from a handler, so the worker loop,
retries, pausing and recording are unit-tested without a server.

The normalised response keeps what the server said: a decision's ``confidence`` is the server's own
figure (answer rows derive the card's from ``probabilities``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio.to_thread

from ..config import ModelSpec
from .adaptive import read_limit_headers
from .bodies import QUESTION_NAME
from .litellm_loader import litellm_loaded, load_litellm, preload_litellm
from .prices import call_cost, register_price

__all__ = [
    "LIMITS_KEY",
    "CallKind",
    "LitellmTransport",
    "MockTransport",
    "Sent",
    "Transport",
    "decision_response",
    "llm_response",
]

CallKind = Literal["decision", "llm"]
#: Key of a sent response holding what its headers said about rate limits (``adaptive.LimitNews``);
#: the client takes it out before the response is stored.
LIMITS_KEY = "_limits"


class Transport(Protocol):
    """Sends one request to one model."""

    def preload(self) -> None:
        """Start slow set-up in the background (a call is coming soon); must return at once."""
        ...

    async def prepare(self, model: ModelSpec) -> None:
        """Get ready to call ``model`` (imports, prices); called before its first request."""
        ...

    async def send(
        self, model: ModelSpec, kind: CallKind, body: dict[str, Any], api_key: str | None
    ) -> dict[str, Any]:
        """One request; the normalised response, or the provider's exception."""
        ...


class LitellmTransport:
    """Requests through litellm: ``asystemone`` for decision models, ``acompletion`` for LLMs."""

    def __init__(self) -> None:
        self._prepared: set[str] = set()

    def preload(self) -> None:
        preload_litellm()

    async def prepare(self, model: ModelSpec) -> None:
        if litellm_loaded() and model.id in self._prepared:
            return
        # Off the event loop: the first import takes seconds, and cache hits must not wait for it.
        litellm = await anyio.to_thread.run_sync(load_litellm)
        if model.id not in self._prepared:
            register_price(litellm, model)
            self._prepared.add(model.id)

    async def send(
        self, model: ModelSpec, kind: CallKind, body: dict[str, Any], api_key: str | None
    ) -> dict[str, Any]:
        litellm = load_litellm()
        key = api_key or "not-needed"
        if kind == "decision":
            resp = await litellm.asystemone(
                model=model.model,
                state=body["state"],
                questions=body["questions"],
                api_base=model.api_base,
                api_key=key,
                timeout=model.timeout_s,
                **model.params,
            )
            return _with_limits(decision_response(model, resp), resp)
        resp = await litellm.acompletion(
            model=model.model,
            api_base=model.api_base,
            api_key=key,
            timeout=model.timeout_s,
            messages=body["messages"],
            tools=body["tools"],
            tool_choice=body["tool_choice"],
            max_retries=0,  # the OpenAI SDK would retry on its own; retries are ours (classify)
            **{**model.params, **({"seed": body["seed"]} if "seed" in body else {})},
        )
        return _with_limits(llm_response(model, resp), resp)


def _with_limits(out: dict[str, Any], resp: Any) -> dict[str, Any]:
    """Keep what the response's headers said about rate limits under ``LIMITS_KEY`` (not cached)."""
    hidden = getattr(resp, "_hidden_params", None) or {}
    news = read_limit_headers(hidden.get("additional_headers") if isinstance(hidden, dict) else None)
    if news.says_anything():
        out[LIMITS_KEY] = news
    return out


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


@dataclass(frozen=True, slots=True)
class Sent:
    """One request a ``MockTransport`` received."""

    model: str
    kind: CallKind
    body: dict[str, Any]


Handler = Callable[[ModelSpec, CallKind, dict[str, Any]], "dict[str, Any] | BaseException | Awaitable[Any]"]


@dataclass
class MockTransport:
    """Answers in-process: ``handler(model, kind, body)`` returns the normalised response, or an exception
    to raise (``error`` builds ones that ``classify`` reads like a provider's); every request is kept."""

    handler: Handler
    sent: list[Sent] = field(default_factory=list)

    def preload(self) -> None:
        return None

    async def prepare(self, model: ModelSpec) -> None:
        return None

    async def send(
        self, model: ModelSpec, kind: CallKind, body: dict[str, Any], api_key: str | None
    ) -> dict[str, Any]:
        self.sent.append(Sent(model.id, kind, body))
        got = self.handler(model, kind, body)
        if inspect.isawaitable(got):
            got = await got
        if isinstance(got, BaseException):
            raise got
        return dict(got)

    @staticmethod
    def error(status: int, message: str = "", retry_after: float | None = None) -> Exception:
        """An HTTP error as litellm raises it: ``status_code``, and ``Retry-After`` in its headers."""
        exc = _MockHTTPError(message or f"mock HTTP {status}")
        exc.status_code = status
        exc.litellm_response_headers = {} if retry_after is None else {"retry-after": str(retry_after)}
        return exc


class _MockHTTPError(Exception):
    status_code: int
    litellm_response_headers: dict[str, str]
