"""OpenAI-compatible chat completions on the wire, as litellm sends them: the request, and the reply read
into the normalised LLM response (``transport.llm_response``'s fields).

``openai/`` models go the way of the OpenAI SDK that litellm drives: ``{base}/chat/completions``, compact
JSON (``ensure_ascii`` off). ``hosted_vllm/`` models go litellm's own way: the same path unless the base
already ends in it, and Python's default JSON (``ensure_ascii`` on, spaces after separators): the bytes
match, so a server that counts tokens by size counts the same. Params go into the body as they are,
``extra_body`` merged into it; ``extra_headers`` go over the SDK's headers (the key too), and under
litellm's own key for ``hosted_vllm/``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from ...config import ModelSpec
from .costs import priced_reply
from .failures import unreadable

__all__ = ["chat_request", "read_chat"]

_SEPARATE = frozenset({"extra_body", "extra_headers"})


def chat_request(
    model: ModelSpec, body: dict[str, Any], api_key: str, params: Mapping[str, Any]
) -> tuple[str, bytes, dict[str, str]]:
    """The URL, body bytes and headers of one chat completion."""
    provider, _, name = model.model.partition("/")
    base = (model.api_base or "").rstrip("/")
    payload: dict[str, Any] = {"model": name, **body}
    payload.update({k: v for k, v in params.items() if k not in _SEPARATE})
    payload.update(params.get("extra_body") or {})
    extra = params.get("extra_headers") or {}
    if provider == "openai":  # the SDK's headers, the extra ones over them (the key too)
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        _merge(headers, extra)
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        return f"{base}/chat/completions", data, headers
    headers = {}  # litellm's: the extra headers, its key over them, a content type unless one is given
    _merge(headers, {**extra, "Authorization": f"Bearer {api_key}"})
    if not any(name.lower() == "content-type" for name in headers):
        headers["Content-Type"] = "application/json"
    url = base if "chat/completions" in base else f"{base}/chat/completions"
    return url, json.dumps(payload).encode(), headers


def _merge(headers: dict[str, str], extra: Mapping[str, str]) -> None:
    """``extra`` over ``headers``, a name in any case replacing the same name."""
    for name, value in extra.items():
        for same in [k for k in headers if k.lower() == str(name).lower()]:
            del headers[same]
        headers[str(name)] = str(value)


def read_chat(model: ModelSpec, response: httpx.Response) -> tuple[dict[str, Any], str | None]:
    """The normalised LLM response of a reply, and the model the reply names."""
    provider = model.model.partition("/")[0]
    try:
        payload = orjson.loads(response.content)
        message = payload["choices"][0]["message"]
        calls = [_call(c) for c in message.get("tool_calls") or []]
        usage = payload.get("usage") or {}
        tokens_in = int(usage.get("prompt_tokens") or 0)
        tokens_out = int(usage.get("completion_tokens") or 0)
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    except (orjson.JSONDecodeError, LookupError, TypeError, ValueError, AttributeError) as exc:
        why = f"not a chat completion ({type(exc).__name__}: {exc})"
        raise unreadable(response, provider, why, keep_status=provider == "hosted_vllm") from None
    content = message.get("content")
    out: dict[str, Any] = {
        "choice": calls[0][0] if calls else None,
        "arguments": calls[0][1] if calls else None,
        "confidence": None,
        "probabilities": None,
        "content": content if isinstance(content, str) else None,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost_usd": priced_reply(model, response.headers, tokens_in, tokens_out, cached),
    }
    if len(calls) > 1:
        out["extra_tool_calls"] = [{"name": n, "arguments": a} for n, a in calls[1:]]
    named = payload.get("model")
    return out, named if isinstance(named, str) else None


def _call(raw: dict[str, Any]) -> tuple[str, str]:
    """A tool call's name and arguments (arguments given as an object are written as JSON, as litellm does)."""
    function = raw["function"]
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments)
    return function["name"], arguments
