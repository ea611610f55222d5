"""Model calls: the only module that talks to litellm, and the one place that decides retries.

Decision models are asked one System One ``choice`` question through ``litellm.asystemone``; LLMs are
given the options as tools through ``litellm.acompletion``. ``classify`` maps any exception to retry /
retry-after / rate-limited / fatal; tenacity waits (``Retry-After`` replaces the backoff); a 429 or 529
pauses the model for every task of this process. A model that is down (its requests keep failing) is
probed one request at a time; a call that meets it down makes no request and raises ``ProviderError``
of kind ``down``, so its job goes back to the queue without spending an attempt. litellm is imported on the first real call, so a run
answered wholly from the cache never pays for its import.
Responses are normalised into plain dicts (what the cache stores); API keys are read from the
environment at call time and redacted from every message we keep.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from ..config import ModelSpec
from ..dataset.files import QUESTION_TEXT
from ..exceptions import ProviderError
from .ratelimit import Limiter, Limiters

__all__ = [
    "CallOutcome",
    "ModelClient",
    "Secrets",
    "Verdict",
    "classify",
    "decision_body",
    "llm_body",
    "preload_litellm",
    "token_prices",
    "transport_failure",
]

_QUESTION_NAME = "next_tool"
_SYSTEM_PROMPT = (
    "You are the tool-choice step of a customer-service agent. Read the agent's state and call the one "
    "tool the agent should call next."
)
_litellm: Any = None
_import_lock = threading.Lock()


def _import_litellm() -> Any:
    global _litellm
    with _import_lock:
        if _litellm is None:
            import litellm

            import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before the import)

            litellm.suppress_debug_info = True
            litellm.telemetry = False
            for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "httpx"):
                logging.getLogger(name).setLevel(logging.CRITICAL)
            _litellm = litellm
    return _litellm


def preload_litellm() -> None:
    """Import litellm on a background thread (it takes seconds) while the run plans and claims."""
    if _litellm is None:
        threading.Thread(target=_import_litellm, name="litellm-import", daemon=True).start()


# --- request bodies (pure) ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _criteria(options: tuple[str, ...], descriptions: tuple[str | None, ...]) -> dict[str, str | None]:
    return dict(zip(options, descriptions, strict=True))


@functools.lru_cache(maxsize=256)
def _tools(options: tuple[str, ...], descriptions: tuple[str | None, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": desc or "",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for name, desc in zip(options, descriptions, strict=True)
    ]


def decision_body(item: dict[str, Any]) -> dict[str, Any]:
    """The System One request for one question: one ``choice`` question over the options.

    Questions of one set share their option list, so the criteria map is built once per list (and must
    not be mutated by callers).
    """
    criteria = _criteria(tuple(item["options"]), tuple(item["descriptions"]))
    return {
        "state": item["state"],
        "questions": {
            _QUESTION_NAME: {"type": "choice", "instructions": QUESTION_TEXT, "criteria": criteria}
        },
    }


def llm_body(item: dict[str, Any], tool_choice: str = "required") -> dict[str, Any]:
    """The chat request for one question: the state as the user message, the options as tools.

    ``tool_choice`` is the model's setting (``ModelSpec.tool_choice``): some servers refuse "required".
    """
    messages = [
        {"role": "system", "content": _SYSTEM_PROMPT},
        {"role": "user", "content": f"{item['state']}\n\n{QUESTION_TEXT}"},
    ]
    tools = _tools(tuple(item["options"]), tuple(item["descriptions"]))
    return {"messages": messages, "tools": tools, "tool_choice": tool_choice}


# --- secrets --------------------------------------------------------------------------------------------


class Secrets:
    """The API keys of a run, read from the environment variables its config names; redacts them."""

    def __init__(self, models: list[ModelSpec]) -> None:
        self._env = {m.id: m.api_key_env for m in models}
        values = {os.environ.get(m.api_key_env, "") for m in models if m.api_key_env}
        self._values = sorted((v for v in values if len(v) >= 4), key=len, reverse=True)

    def missing(self) -> list[tuple[str, str]]:
        """(model id, variable) for every model whose key variable is not set."""
        return [(mid, env) for mid, env in self._env.items() if env and not os.environ.get(env)]

    def key_for(self, model: ModelSpec) -> str | None:
        return os.environ.get(model.api_key_env) if model.api_key_env else None

    def redact(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, "[REDACTED]")
        # Keys echoed back by providers often arrive truncated or in a header.
        text = re.sub(r"(Bearer\s+)[A-Za-z0-9._\-]{8,}", r"\1[REDACTED]", text)
        return re.sub(r"\b(sk-|sk_|gsk_|xai-|hf_)[A-Za-z0-9_\-]{6,}", "[REDACTED]", text)


# --- classification -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do about one failed request."""

    kind: str  # "retry" | "retry_after" | "rate_limited" | "fatal"
    wait: float | None = None
    status: int | None = None


def _retry_after(exc: BaseException) -> float | None:
    for source in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        if not source:
            continue
        try:
            value = source.get("retry-after") or source.get("Retry-After")
        except AttributeError:
            continue
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            return None
    return None


def transport_failure(exc: BaseException) -> str | None:
    """What went wrong when no HTTP response came back (refused, dropped, timed out), else None.

    litellm reports these with a made-up status (a refused connection is an "InternalServerError" with
    status 500 on the chat path), so the cause chain decides, not the class or the status.
    """
    seen: BaseException | None = exc
    for _ in range(12):
        if seen is None:
            break
        if isinstance(seen, httpx.TimeoutException) or type(seen).__name__ in ("Timeout", "TimeoutError"):
            return "timed out"
        if isinstance(seen, httpx.ConnectError | ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, httpx.RemoteProtocolError | httpx.ReadError | ConnectionResetError):
            return "connection dropped"
        seen = seen.__cause__ or seen.__context__
    return None


def classify(exc: BaseException) -> Verdict:
    """The one place that decides whether and how a failed request is retried."""
    if isinstance(exc, ProviderError):  # ours: already decided (e.g. "down")
        return Verdict(exc.kind, None, exc.status)
    if transport_failure(exc) is not None:
        return Verdict("retry", None, None)  # no HTTP response: no status to report
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    wait = _retry_after(exc)
    name = type(exc).__name__
    if status in (429, 529) or name == "RateLimitError":
        return Verdict("rate_limited", wait, status or 429)
    if name in (
        "Timeout",
        "APIConnectionError",
        "ServiceUnavailableError",
        "InternalServerError",
        "BadGatewayError",
    ):
        return Verdict("retry_after" if wait is not None else "retry", wait, status)
    if status is not None and (status >= 500 or status in (408, 409, 425)):
        return Verdict("retry_after" if wait is not None else "retry", wait, status)
    if status is not None and 400 <= status < 500:
        return Verdict("fatal", None, status)
    if isinstance(exc, (ValueError, KeyError, TypeError)) and name not in ("JSONDecodeError",):
        return Verdict("fatal", None, status)
    return Verdict("retry", wait, status)


# --- calls ----------------------------------------------------------------------------------------------


@dataclass
class _Tally:
    """What one logical call has done so far: requests made, failures charged to it, errors seen."""

    requests: int = 0
    failures: int = 0
    charged: int = 0  # failures that count against the call's tries
    errors: list[str] = field(default_factory=list)


@dataclass
class CallOutcome:
    """A normalised response (what the cache stores) and what it took to get it."""

    response: dict[str, Any]
    requests: int
    errors: list[str] = field(default_factory=list)


def _is_local(model: ModelSpec) -> bool:
    base = model.api_base or ""
    return model.model.startswith("hosted_vllm/") or "://127." in base or "://localhost" in base


def token_prices(model: ModelSpec) -> tuple[float, float] | None:
    """USD per input and per output token: the config's price, litellm's list price, 0 for a model
    served on this machine or self-hosted (``hosted_vllm/``), else None (unknown).

    The one rule for what a call costs: the dry run's estimate and the run's recorded cost both use it.
    """
    if model.pricing is not None:
        return model.pricing.input_per_million / 1e6, model.pricing.output_per_million / 1e6
    litellm = _import_litellm()
    info = litellm.model_cost.get(model.model) or litellm.model_cost.get(model.model.split("/", 1)[-1])
    if info:
        return float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0)
    return (0.0, 0.0) if _is_local(model) else None


def _register_price(litellm: Any, model: ModelSpec) -> None:
    """Tell litellm the price of a model it has no list price for (ours, or self-hosted: 0).

    Besides recording the right cost, this spares litellm a failing price lookup on every call, which
    is about a third of its CPU time per call.
    """
    known = model.model in litellm.model_cost or model.model.split("/", 1)[-1] in litellm.model_cost
    if model.pricing is None and (known or not _is_local(model)):
        return
    p = model.pricing
    litellm.register_model(
        {
            model.model: {
                "input_cost_per_token": p.input_per_million / 1e6 if p else 0.0,
                "output_cost_per_token": p.output_per_million / 1e6 if p else 0.0,
                "litellm_provider": model.model.split("/", 1)[0],
                "mode": "chat",
            }
        }
    )


class ModelClient:
    """Calls models with retries and rate limits; one per worker process."""

    def __init__(
        self, limiters: Limiters, secrets: Secrets, *, max_tries: int = 6, max_backoff_s: float = 30.0
    ):
        self._limiters = limiters
        self._secrets = secrets
        self._max_tries = max_tries
        self._max_backoff = max_backoff_s
        self._priced: set[str] = set()

    async def call(self, model: ModelSpec, kind: str, body: dict[str, Any]) -> CallOutcome:
        """Make one logical call (several requests when retried); raise ``ProviderError`` when it fails.

        Only failures while the model is up count against ``max_tries``: a probe of a down model that
        fails, or a call that finds the model down, raises kind ``down`` (the job waits in the queue).
        """
        limiter = self._limiters[model.id]
        if _litellm is None or model.id not in self._priced:
            # Before taking a rate-limit slot: a slot granted now must be used now, not after an import.
            # Off the event loop: the first import takes seconds, and cache hits must not wait for it.
            litellm = _litellm or await anyio.to_thread.run_sync(_import_litellm)
            if model.id not in self._priced:
                _register_price(litellm, model)
                self._priced.add(model.id)
        tally = _Tally()
        tokens = len(str(body)) // 4

        def note(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            if exc is None or isinstance(exc, ProviderError):
                return
            verdict = classify(exc)
            tally.errors.append(self._describe(exc, verdict))
            limiter.last_error = tally.errors[-1]
            if verdict.kind == "rate_limited":
                limiter.penalize(verdict.wait if verdict.wait is not None else self._backoff(tally.charged))

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            verdict = classify(exc) if exc else Verdict("retry")
            if limiter.down():
                return 0.0  # the model is down: its pause, not a backoff, says when to try
            if verdict.wait is not None:
                return min(verdict.wait, 600.0)
            return self._backoff(tally.failures)

        retrying = AsyncRetrying(
            stop=lambda _state: tally.charged >= self._max_tries,
            wait=wait,
            retry=retry_if_exception(lambda e: classify(e).kind in ("retry", "retry_after", "rate_limited")),
            after=note,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    response = await self._attempt(model, kind, body, limiter, tally, tokens)
        except ProviderError as exc:
            exc.requests = tally.requests
            raise
        except Exception as exc:
            verdict = classify(exc)
            message = self._describe(exc, verdict)
            if not tally.errors or tally.errors[-1] != message:
                tally.errors.append(message)
            raise ProviderError(
                message, kind=verdict.kind, status=verdict.status, requests=tally.requests
            ) from None
        return CallOutcome(response, tally.requests, tally.errors)

    async def _attempt(
        self,
        model: ModelSpec,
        kind: str,
        body: dict[str, Any],
        limiter: Limiter,
        tally: _Tally,
        tokens: int,
    ) -> dict[str, Any]:
        """One request, unless the model is down and another request is probing it (or its pause runs)."""
        if limiter.down() and not limiter.may_probe():
            raise self._down(model, limiter, tally)
        async with limiter.slot(tokens):
            probe = limiter.down()
            if probe:
                if not limiter.may_probe():
                    raise self._down(model, limiter, tally)
                limiter.probing = True
            try:
                tally.requests += 1
                started = time.perf_counter()
                try:
                    response = await self._request(model, kind, body)
                except Exception as exc:
                    verdict = classify(exc)
                    if verdict.kind in ("retry", "retry_after"):
                        limiter.record(ok=False, retry_after=verdict.wait)
                    tally.failures += 1
                    # A probe of a down model, or a refused connection (nothing listens: never the
                    # request's fault), is not charged to the call; the breaker counts it instead.
                    tally.charged += not (probe or transport_failure(exc) == "connection refused")
                    raise
                limiter.record(ok=True)
            finally:
                if probe:
                    limiter.probing = False
        response["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
        return response

    def _down(self, model: ModelSpec, limiter: Limiter, tally: _Tally) -> ProviderError:
        last = limiter.last_error or "earlier requests failed"
        if limiter.gave_up():
            message = (
                f"{model.id} has been down for {limiter.outage_s():.0f} s, longer than the run waits "
                f"(workers.max_outage_s = {limiter.max_outage_s:.0f}); last error: {last}"
            )
        else:
            message = f"{model.id} is down ({limiter.failures_in_row} failed requests in a row; last: {last})"
        return ProviderError(message, kind="down", requests=tally.requests)

    def _backoff(self, charged: int) -> float:
        base = min(self._max_backoff, 0.5 * 2 ** max(0, charged - 1))
        return base * (0.5 + random.random() / 2)

    def _describe(self, exc: BaseException, verdict: Verdict) -> str:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        transport = transport_failure(exc)
        if transport is not None:
            prefix = f"no HTTP response ({transport}): "
        else:
            prefix = f"HTTP {verdict.status} " if verdict.status else ""
        return self._secrets.redact(f"{prefix}{type(exc).__name__}: {text}"[:500])

    async def _request(self, model: ModelSpec, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        litellm = _litellm
        key = self._secrets.key_for(model) or "not-needed"
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
            return self._decision_response(model, resp)
        resp = await litellm.acompletion(
            model=model.model,
            api_base=model.api_base,
            api_key=key,
            timeout=model.timeout_s,
            messages=body["messages"],
            tools=body["tools"],
            tool_choice=body["tool_choice"],
            max_retries=0,  # the OpenAI SDK would retry on its own; retries are ours (classify)
            **model.params,
        )
        return self._llm_response(model, resp)

    def _cost(self, model: ModelSpec, resp: Any, tokens_in: int, tokens_out: int) -> float | None:
        if model.pricing is not None:
            p = model.pricing
            return (
                tokens_in * p.input_per_million / 1e6
                + tokens_out * p.output_per_million / 1e6
                + p.per_request
            )
        hidden = getattr(resp, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        return float(cost) if cost is not None else None

    def _decision_response(self, model: ModelSpec, resp: Any) -> dict[str, Any]:
        usage = getattr(resp, "usage", None)
        tokens_in = int(getattr(usage, "input_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "output_tokens", 0) or 0)
        answer = (getattr(resp, "answers", None) or {}).get(_QUESTION_NAME)
        out: dict[str, Any] = {
            "choice": None,
            "confidence": None,
            "probabilities": None,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost_usd": self._cost(model, resp, tokens_in, tokens_out),
        }
        if answer is not None:
            out["choice"] = getattr(answer, "choice", None)
            out["confidence"] = getattr(answer, "confidence", None)
            probs = getattr(answer, "probabilities", None)
            out["probabilities"] = dict(probs) if probs else None
        return out

    def _llm_response(self, model: ModelSpec, resp: Any) -> dict[str, Any]:
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
            "cost_usd": self._cost(model, resp, tokens_in, tokens_out),
        }
        if len(calls) > 1:  # the first is acted on; the others are kept, and counted where they matter
            out["extra_tool_calls"] = [
                {"name": c.function.name, "arguments": c.function.arguments} for c in calls[1:]
            ]
        return out
