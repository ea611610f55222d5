"""System One decisions on the wire, as litellm sends them: the request for a choice question, and the
reply read into the normalised decision response (``transport.decision_response``'s fields).

The request is litellm's to the byte: ``POST {base}/v1/systemone`` (a trailing ``/v1`` of the base
dropped), the model's name without its provider, compact JSON (``ensure_ascii`` off), a bearer key (the
self-hosted providers send none for litellm's placeholder key) and ``extra_headers`` beside it, which may
not replace the key or the content type. A reply is checked as litellm checks it: an answer of an unknown
type, a choice without a confidence, or a body that is not a System One reply is a 500.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from ...config import ModelSpec
from ..bodies import QUESTION_NAME
from .costs import priced_reply
from .failures import unreadable

__all__ = ["read_decision", "systemone_request"]

_RESERVED = frozenset({"authorization", "content-type"})
_KEYLESS = frozenset({"hosted_vllm", "lm_studio", "ollama"})  # litellm's placeholder key means none there
_PLACEHOLDER_KEY = "fake-api-key"
_ANSWER_TYPES = frozenset({"noul", "choice", "score", "box"})


def systemone_request(
    model: ModelSpec, body: dict[str, Any], api_key: str, extra_headers: Mapping[str, str] | None
) -> tuple[str, bytes, dict[str, str]]:
    """The URL, body bytes and headers of one System One request."""
    provider, _, name = model.model.partition("/")
    base = (model.api_base or "").rstrip("/").removesuffix("/v1").rstrip("/")
    payload = {"model": name, "state": body["state"], "questions": body["questions"]}
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    headers = {k: v for k, v in (extra_headers or {}).items() if k.lower() not in _RESERVED}
    if not (provider in _KEYLESS and api_key == _PLACEHOLDER_KEY):
        headers["Authorization"] = f"Bearer {api_key}"
    headers["Content-Type"] = "application/json"
    return f"{base}/v1/systemone", data, headers


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _count(value: object) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number.is_integer() else None


def read_decision(model: ModelSpec, response: httpx.Response) -> tuple[dict[str, Any], str | None]:
    """The normalised decision response of a reply, and the model the reply names."""
    provider = model.model.partition("/")[0]
    try:
        payload = orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise unreadable(response, provider, f"not JSON ({exc})") from None
    answers = payload.get("answers") if isinstance(payload, dict) else None
    if not isinstance(answers, dict):
        raise unreadable(response, provider, "no answers object")
    if any(not isinstance(a, dict) or a.get("type") not in _ANSWER_TYPES for a in answers.values()):
        raise unreadable(response, provider, "an answer of no known type")
    usage = payload.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise unreadable(response, provider, "usage is not an object")
    tokens_in = _count((usage or {}).get("input_tokens", 0))
    tokens_out = _count((usage or {}).get("output_tokens", 0))
    cached = _count((usage or {}).get("cached_tokens", 0))
    if tokens_in is None or tokens_out is None or cached is None:
        raise unreadable(response, provider, "token counts are not whole numbers")
    out: dict[str, Any] = {
        "choice": None,
        "confidence": None,
        "probabilities": None,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cost_usd": priced_reply(model, response.headers, tokens_in, tokens_out, cached),
    }
    answer = answers.get(QUESTION_NAME)
    if answer is not None and answer["type"] == "choice":  # another type answers no choice question
        out.update(_choice(answer, response, provider))
    named = payload.get("model")
    return out, named if isinstance(named, str) else None


def _choice(answer: dict[str, Any], response: httpx.Response, provider: str) -> dict[str, Any]:
    choice, probs = answer.get("choice"), answer.get("probabilities")
    confidence = _number(answer.get("confidence"))
    if not isinstance(choice, str) or not isinstance(probs, dict):
        raise unreadable(response, provider, "a choice answer without its choice or probabilities")
    if confidence is None:
        raise unreadable(response, provider, "a choice or score answer has no confidence")
    read = {str(k): _number(v) for k, v in probs.items()}
    if any(v is None for v in read.values()):
        raise unreadable(response, provider, "a probability that is not a number")
    return {"choice": choice, "confidence": confidence, "probabilities": read or None}
