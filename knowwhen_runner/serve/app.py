"""The local model server as a plain ASGI app: System One, chat completions, and admin endpoints.

Each side answers errors in its own peers' shape: chat completions in OpenAI's (``{"error": {...}}``, which
litellm maps), System One in the vendor's (``{"detail": [...]}`` for validation, ``{"detail": {"error_type",
"message"}}`` otherwise). Request bodies may be zstd or gzip encoded, as the vendor SDK sends them.

It is a bare ASGI callable with a route table rather than a framework app because benchmarks measure the
runner against it: every request should cost the server tens of microseconds, not the runner's budget.
It is also what lets the ``reset`` fault reach the connection's transport and drop it without a reply.

A request's route and admin token are checked before its body is read, and a body is read only up to
``BodyLimits``: a request refused before its body arrived whole ends its connection after the reply
(``reply_unread``), so the rest of the body is never received (a 1 GB POST costs the server about what
its headers cost).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import orjson
from pydantic import TypeAdapter, ValidationError

from .admin_guard import admin_refusal
from .batch_api import BatchBook
from .encoding import (
    BodyLimits,
    BodyTimeout,
    BodyTooLarge,
    UndecodableBody,
    UnsupportedEncoding,
    declared_length,
    decode_body,
    read_body,
    reply_unread,
)
from .faults import FaultBook, FaultRule, RpmLimits, ceil_seconds, retry_after_header
from .models import RELEASE_DATE, ModelRegistry
from .readout import LogprobsRefusal, echo_choices, first_token_logprobs
from .stats import STATUS_RESET, Stats
from .systemone import InvalidRequest, build_answer, parse_request

__all__ = ["ServeApp", "create_app"]

_RULES = TypeAdapter(list[FaultRule])
_JSON = [(b"content-type", b"application/json")]
_SYSTEMONE_PATHS = frozenset({"/v1/systemone", "/systemone"})
_HTTP_FAULTS = {
    "400": (400, "invalid_request_error", "Injected fault: bad request."),
    "422": (422, "invalid_request_error", "Injected fault: unprocessable request."),
    "429": (429, "rate_limit_error", "Injected fault: rate limit exceeded."),
    "529": (529, "overloaded_error", "Injected fault: the server is overloaded."),
    "500": (500, "server_error", "Injected fault: internal server error."),
    "503": (503, "service_unavailable", "Injected fault: service unavailable."),
}


_AUTH: ContextVar[str] = ContextVar("authorization", default="")
_URL: ContextVar[str] = ContextVar("url", default="")


@dataclass
class Reply:
    """An HTTP reply, or (``reset``) an instruction to drop the connection without one."""

    status: int
    body: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=lambda: list(_JSON))
    reset: bool = False


class BadRequest(Exception):
    """The request body is not a valid request for its endpoint (HTTP 422)."""


def _json(status: int, payload: object, headers: list[tuple[bytes, bytes]] | None = None) -> Reply:
    return Reply(status, orjson.dumps(payload), [*_JSON, *(headers or [])])


def _retry_headers(retry_after: float | None) -> list[tuple[bytes, bytes]]:
    return [] if retry_after is None else [(b"retry-after", retry_after_header(retry_after).encode())]


def _error(
    status: int, kind: str, message: str, code: str | None = None, retry_after: float | None = None
) -> Reply:
    """An error in OpenAI's shape (chat completions, admin and unknown routes)."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return _json(status, body, _retry_headers(retry_after))


def _vendor_error(
    status: int, kind: str, message: str, code: str | None = None, retry_after: float | None = None
) -> Reply:
    """An error in the System One vendor's shape; ``code`` has no place in it."""
    body = {"detail": {"error_type": kind, "message": message}}
    return _json(status, body, _retry_headers(retry_after))


def _invalid(exc: InvalidRequest) -> Reply:
    """A System One validation error: 422 with the vendor's ``detail`` list."""
    return _json(422, {"detail": [exc.detail()]})


ErrorShape = Callable[..., Reply]
Handler = Callable[[bytes, dict[str, list[str]]], Awaitable[Reply]]


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise BadRequest(message)


def _chat_seed(body: Any) -> int | None:
    """The request's sampling ``seed`` (OpenAI's parameter), when it is an integer."""
    seed = body.get("seed") if isinstance(body, dict) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _chat_request(body: Any) -> tuple[str, list[Any], list[Any], object]:
    _require(isinstance(body, dict), "body: expected a JSON object")
    model, messages, tools = body.get("model"), body.get("messages"), body.get("tools") or []
    _require(isinstance(model, str) and bool(model), "model: required string")
    _require(isinstance(messages, list) and bool(messages), "messages: a non-empty list")
    _require(isinstance(tools, list), "tools: a list")
    return model, messages, tools, body.get("tool_choice", "auto")


def _corrupt_answer(answer: dict[str, Any], fault: str) -> None:
    """Make a well-formed choice answer wrong in the way ``fault`` names (in place)."""
    if fault == "bad_choice":
        answer["choice"] = "__not_an_option__"
    elif fault == "bad_probs":
        answer["probabilities"] = {k: v * 0.5 for k, v in answer["probabilities"].items()}
    elif fault == "no_confidence":
        answer.pop("confidence", None)


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a thread of its own that a stopping server does not wait for (the default executor's
    threads are joined at exit: a stop signal would wait out the search)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def work() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the awaiting request, which answers with it
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=work, name="serve-search", daemon=True).start()
    return await done


class ServeApp:
    """ASGI app holding the registry, the fault book, rate limits and stats (one process, one state)."""

    def __init__(
        self,
        registry: ModelRegistry,
        faults: FaultBook | None = None,
        limits: RpmLimits | None = None,
        stats: Stats | None = None,
        admin_token: str | None = None,
        body_limits: BodyLimits | None = None,
        max_files: int = 1000,
        instance: str | None = None,
    ) -> None:
        self.registry = registry
        self.instance = instance
        self.admin_token = admin_token
        self.body_limits = body_limits or BodyLimits()
        self.faults = faults or FaultBook()
        self.limits = limits or RpmLimits()
        self.stats = stats or Stats()
        self._ids = itertools.count(1)
        self._searching = asyncio.Lock()  # one search at a time: a searching decider's state is not shared
        self.batches = BatchBook(self._batch_line, self.stats.record, max_files=max_files)
        self.routes: dict[tuple[str, str], Handler] = {
            ("POST", "/v1/systemone"): self.systemone,
            ("POST", "/systemone"): self.systemone,
            ("POST", "/v1/chat/completions"): self.chat,
            ("POST", "/chat/completions"): self.chat,
            ("POST", "/v1/completions"): self.completions,
            ("POST", "/completions"): self.completions,
            ("GET", "/v1/models"): self.models,
            ("GET", "/health"): self.health,
            ("GET", "/admin/faults"): self.get_faults,
            ("POST", "/admin/faults"): self.set_faults,
            ("DELETE", "/admin/faults"): self.clear_faults,
            ("GET", "/admin/limits"): self.get_limits,
            ("POST", "/admin/limits"): self.set_limits,
            ("GET", "/admin/stats"): self.get_stats,
            ("POST", "/admin/reset"): self.reset_stats,
        }

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        handler = self.routes.get((scope["method"], path)) or self._batch_route(scope["method"], path)
        headers = dict(scope.get("headers", ()))
        encoding = headers.get(b"content-encoding", b"").decode("latin-1")
        _AUTH.set(headers.get(b"authorization", b"").decode("latin-1"))
        _URL.set(_request_url(scope, headers))
        shape: ErrorShape = _vendor_error if path in _SYSTEMONE_PATHS else _error
        declared = declared_length(headers)
        read = declared == 0  # nothing to read, or (below) read whole
        limit = self.body_limits.max_bytes
        if handler is None:
            # The URL as it was sent, as many gateways echo it: a secret in a base URL comes back here.
            reply = _error(404, "not_found_error", f"No route {scope['method']} {_URL.get()}.")
        elif refused := admin_refusal(scope["method"], path, headers, self.admin_token):
            reply = _error(*refused)
        elif declared is not None and declared > limit:
            reply = shape(
                413, "request_too_large", f"the request body is larger than this server takes ({limit} bytes)"
            )
        else:
            try:
                body = await read_body(receive, self.body_limits)
                read = True
                if encoding:
                    body = self._decode(body, encoding)
            except BodyTimeout as exc:
                reply = shape(408, "request_timeout", str(exc))
            except (UnsupportedEncoding, UndecodableBody, BodyTooLarge) as exc:
                status, kind = _ENCODING_ERRORS[type(exc)]
                reply = shape(status, kind, str(exc))
            else:
                query = parse_qs(scope.get("query_string", b"").decode()) if scope.get("query_string") else {}
                if scope["method"] == "POST" and not path.startswith("/admin"):
                    self.stats.record_body(path, len(body))
                reply = await handler(body, query)
        if reply.reset:
            await _drop_connection(send)
            return
        if not read:  # the rest of the body is never received
            await reply_unread(send, reply.status, reply.headers, reply.body)
            return
        await send({"type": "http.response.start", "status": reply.status, "headers": reply.headers})
        await send({"type": "http.response.body", "body": reply.body})

    def _decode(self, body: bytes, encoding: str) -> bytes:
        """The body with its content encoding undone, counted in the stats by encoding."""
        body, codings = decode_body(body, encoding)
        if codings:
            self.stats.record_encoding(codings)
        return body

    # -- model endpoints -------------------------------------------------------------------------

    async def _gate(self, model: str, endpoint: str) -> tuple[Reply | None, FaultRule | None]:
        """Rate limit, then faults: an error reply to send instead of answering, and the fault that fired."""
        shape: ErrorShape = _vendor_error if endpoint == "systemone" else _error
        wait = self.limits.admit(model)
        if wait is not None:
            message = f"Rate limit for {model} exceeded."
            return shape(429, "rate_limit_error", message, retry_after=ceil_seconds(wait)), None
        rule = self.faults.pick(model, endpoint)
        if rule is None:
            return None, None
        if rule.delay_s:
            await asyncio.sleep(rule.delay_s)
        if rule.fault in _HTTP_FAULTS:
            status, kind, message = _HTTP_FAULTS[rule.fault]
            return shape(status, kind, message, retry_after=rule.retry_after), rule
        if rule.fault == "401":
            # Like providers that echo the rejected key back: the runner must redact it before storing.
            token = _AUTH.get().removeprefix("Bearer ").strip()
            return shape(401, "authentication_error", f"Incorrect API key provided: {token}."), rule
        if rule.fault == "404_echo":
            return shape(404, "not_found_error", f"No deployment at {_URL.get()}."), rule
        if rule.fault == "reset":
            return Reply(STATUS_RESET, reset=True), rule
        if rule.fault == "malformed":
            return Reply(200, b'{"model": "' + model.encode() + b'", "answers": {"'), rule
        return None, rule

    async def systemone(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """Answer System One noul, choice and score questions."""
        try:
            request = parse_request(orjson.loads(raw))
        except orjson.JSONDecodeError as exc:
            return self._done("", "systemone", _invalid(InvalidRequest([], str(exc), "json_invalid")))
        except InvalidRequest as exc:
            return self._done("", "systemone", _invalid(exc))
        model = request.model
        decider = self.registry.decision.get(model)
        if decider is None:
            return self._done(model, "systemone", _unknown_model(model, _vendor_error))
        early, rule = await self._gate(model, "systemone")
        if early is not None:
            return self._done(model, "systemone", early)
        answers: dict[str, Any] = {}
        for name, question in request.questions.items():
            if getattr(decider, "searches", False):
                # Seconds for a state it has not met (the oracle test double replays thousands of tasks):
                # off the event loop, so that other requests, health checks and a stop signal are answered.
                async with self._searching:
                    probs = await _in_daemon_thread(
                        decider.decide, request.state, question.labels, question.descriptions
                    )
            else:
                probs = decider.decide(request.state, question.labels, question.descriptions)
            answers[name] = build_answer(question, probs)
            if rule is not None and question.type == "choice":
                _corrupt_answer(answers[name], rule.fault)
        if rule is not None and rule.fault == "missing_answer":
            answers = {}
        usage = {"input_tokens": max(1, len(raw) // 4), "output_tokens": 0}
        payload = {"model": self.registry.resolve(model), "answers": answers, "usage": usage}
        return self._done(model, "systemone", _json(200, payload))

    async def chat(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """Answer an OpenAI chat completion, with one tool call when tools are offered."""
        return await self._chat(raw, "chat")

    async def _batch_line(self, raw: bytes) -> tuple[int, bytes]:
        """Answer one line of a batch: the chat endpoint's answer, without its rate limits and faults."""
        reply = await self._chat(raw, "batch_line")
        return reply.status, reply.body

    async def _chat(self, raw: bytes, endpoint: str) -> Reply:
        try:
            parsed = orjson.loads(raw)
            model, messages, tools, tool_choice = _chat_request(parsed)
        except (orjson.JSONDecodeError, BadRequest) as exc:
            return self._done("", endpoint, _error(422, "invalid_request_error", str(exc)))
        if parsed.get("logprobs") and model in self.registry.decision and endpoint == "chat":
            return await self._readout(model, parsed, len(raw), chat=True)
        chat_model = self.registry.chat.get(model)
        if chat_model is None:
            return self._done(model, endpoint, _unknown_model(model, _error))
        early, rule = await self._gate(model, "chat") if endpoint == "chat" else (None, None)
        if early is not None:
            return self._done(model, endpoint, early)
        message = chat_model.complete(messages, tools, tool_choice, seed=_chat_seed(parsed))
        calls = message.get("tool_calls")
        if rule is not None and calls:
            if rule.fault == "bad_choice":
                calls[0]["function"]["name"] = "__not_a_tool__"
            elif rule.fault == "missing_answer":
                message = {"role": "assistant", "content": ""}
                calls = None
            elif rule.fault == "extra_tool_call":  # as some servers do: more calls than asked for
                other = next(
                    (
                        t["function"]["name"]
                        for t in tools
                        if t["function"]["name"] != calls[0]["function"]["name"]
                    ),
                    calls[0]["function"]["name"],
                )
                calls.append(
                    {
                        "id": f"{calls[0]['id']}-extra",
                        "type": "function",
                        "function": {"name": other, "arguments": "{}"},
                    }
                )
        prompt_tokens = max(1, len(raw) // 4)
        completion_tokens = 8 + len(orjson.dumps(calls or message.get("content") or "")) // 4
        payload = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"refusal": None, **message},
                    "finish_reason": "tool_calls" if calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return self._done(model, endpoint, _json(200, payload))

    async def completions(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """Answer an OpenAI (legacy) completion of a decision model: the likelihood read-out's echo."""
        try:
            parsed = orjson.loads(raw)
            _require(isinstance(parsed, dict), "body: expected a JSON object")
            model = parsed.get("model")
            _require(isinstance(model, str) and bool(model), "model: required string")
        except (orjson.JSONDecodeError, BadRequest) as exc:
            return self._done("", "completions", _error(422, "invalid_request_error", str(exc)))
        if model not in self.registry.decision:
            return self._done(model, "completions", _unknown_model(model, _error))
        return await self._readout(model, parsed, len(raw), chat=False)

    async def _readout(self, model: str, body: dict[str, Any], size: int, *, chat: bool) -> Reply:
        """A decision model read out as a plain language model (``serve/readout``): one chat token with
        top_logprobs, or echoed completions, with the gate's rate limits and faults."""
        endpoint = "chat" if chat else "completions"
        early, _rule = await self._gate(model, "chat")
        if early is not None:
            return self._done(model, endpoint, early)
        decide = self.registry.decision[model].decide
        choices: list[dict[str, Any]]
        try:
            if chat:
                top = first_token_logprobs(
                    body.get("messages") or [], int(body.get("top_logprobs") or 0), decide
                )
                first = top[0] if top else {"token": "A", "logprob": 0.0}
                logprobs = {"content": [{**first, "top_logprobs": top}]}
                choices = [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": first["token"]},
                        "logprobs": logprobs,
                        "finish_reason": "length",
                    }
                ]
            else:
                prompts = body.get("prompt")
                prompts = prompts if isinstance(prompts, list) else [prompts]
                choices = echo_choices([str(p) for p in prompts], decide)
                if not body.get("echo"):  # only the generated token, as without echo
                    for choice in choices:
                        lp = choice["logprobs"]
                        choice["text"] = "."
                        choice["logprobs"] = {k: v[-1:] if isinstance(v, list) else v for k, v in lp.items()}
        except (LogprobsRefusal, TypeError, ValueError) as exc:
            return self._done(model, endpoint, _error(400, "invalid_request_error", str(exc)))
        prompt_tokens = max(1, size // 4)
        payload = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{next(self._ids)}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(choices),
                "total_tokens": prompt_tokens + len(choices),
            },
        }
        return self._done(model, endpoint, _json(200, payload))

    def _done(self, model: str, endpoint: str, reply: Reply) -> Reply:
        self.stats.record(model, endpoint, reply.status)
        if model and not reply.reset:
            reply.headers.extend(self.limits.state_headers(model))
        return reply

    # -- files and batches: routed by serve/batch_api.py -------------------------------------------

    def _batch_route(self, method: str, path: str) -> Handler | None:
        """The handler of an OpenAI files/batches route (or ``POST /admin/batches``), None for other paths."""
        action = self.batches.route(method, path)
        if action is None:
            return None
        chosen = action

        async def handler(raw: bytes, query: dict[str, list[str]]) -> Reply:
            status, body, content_type = await chosen(raw, query)
            return Reply(status, body, [(b"content-type", content_type)])

        return handler

    # -- discovery and admin ---------------------------------------------------------------------

    async def models(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """The model list in both peers' shapes: OpenAI's ``data`` and the System One vendor's ``models``."""
        names = self.registry.names()
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "knowwhen"} for n in names]
        models = [
            {"name": n, "description": self.registry.describe(n), "release_date": RELEASE_DATE} for n in names
        ]
        return _json(200, {"object": "list", "data": data, "models": models})

    async def health(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """Liveness, for the process helper to wait on, with the instance id it was started with (if any):
        a run that starts a server knows it by this id from any other program on the port."""
        return _json(200, {"status": "ok", "instance": self.instance})

    async def get_faults(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """The active rules with their remaining counts."""
        return _json(200, [rule.status() for rule in self.faults.rules])

    async def set_faults(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """Replace the active rules with the posted list."""
        try:
            rules = _RULES.validate_json(raw or b"[]")
        except ValidationError as exc:
            return _error(422, "invalid_request_error", str(exc))
        self.faults.replace(rules)
        return await self.get_faults(raw, query)

    async def clear_faults(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """Remove every rule."""
        self.faults.replace([])
        return _json(200, [])

    async def get_limits(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """The enforced requests-per-minute per model."""
        return _json(200, self.limits.limits)

    async def set_limits(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """Replace the enforced limits with the posted {model: rpm} object (0 or null removes one).

        ``?headers=0`` stops stating the limits in reply headers (they then show only as 429s).
        """
        try:
            limits = TypeAdapter(dict[str, int | None]).validate_json(raw or b"{}")
        except ValidationError as exc:
            return _error(422, "invalid_request_error", str(exc))
        headers = query.get("headers", [None])[0]
        self.limits.replace(
            {m: n for m, n in limits.items() if n},
            headers=None if headers is None else headers not in ("0", "false"),
        )
        return _json(200, self.limits.limits)

    async def get_stats(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """Counts and records; ``?records=0`` leaves records out, ``?since=T`` keeps those at or after T."""
        since = float(query["since"][0]) if "since" in query else None
        records = query.get("records", ["1"])[0] not in ("0", "false")
        return _json(200, self.stats.snapshot(since=since, records=records))

    async def reset_stats(self, raw: bytes, query: dict[str, list[str]]) -> Reply:
        """Zero every count and record."""
        self.stats.reset()
        return _json(200, {"total": 0})


def _request_url(scope: dict[str, Any], headers: dict[bytes, bytes]) -> str:
    """The URL as the client sent it: its host header, raw (still percent-encoded) path and query."""
    host = headers.get(b"host", b"").decode("latin-1")
    path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{scope.get('scheme', 'http')}://{host}{path}{'?' + query if query else ''}"


def _unknown_model(model: str, shape: ErrorShape) -> Reply:
    return shape(404, "not_found_error", f"The model {model!r} does not exist.", code="model_not_found")


_ENCODING_ERRORS: dict[type[Exception], tuple[int, str]] = {
    UnsupportedEncoding: (415, "unsupported_media_type"),
    UndecodableBody: (400, "invalid_request_error"),
    BodyTooLarge: (413, "request_too_large"),
}


async def _drop_connection(send: Any) -> None:
    """Close the TCP connection without any response bytes.

    uvicorn does not expose the transport to the app, but its ``send`` is a bound method of the
    request cycle that owns it. If that ever changes, the nearest equivalent is used: start a response
    and fail mid-way, which makes uvicorn close the connection with the body incomplete.
    """
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is not None:
        transport.abort()
        await asyncio.sleep(0)  # let uvicorn see the disconnect before it tries to answer for us
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]})
    raise ConnectionAbortedError("reset fault: connection dropped mid-response")


def create_app(
    *,
    faults: list[FaultRule] | None = None,
    enforce_rpm: dict[str, int] | None = None,
    limit_headers: bool = True,
    registry: ModelRegistry,
    admin_token: str | None = None,
    body_limits: BodyLimits | None = None,
    max_files: int = 1000,
    instance: str | None = None,
) -> ServeApp:
    """The app over a registry of models, its starting faults and rate limits (and admin token, if any),
    taking bodies within ``body_limits`` and keeping at most ``max_files`` uploaded files; ``instance``:
    the id ``/health`` answers with."""
    return ServeApp(
        registry=registry,
        faults=FaultBook(faults or []),
        limits=RpmLimits(enforce_rpm or {}, headers=limit_headers),
        admin_token=admin_token,
        body_limits=body_limits,
        max_files=max_files,
        instance=instance,
    )
