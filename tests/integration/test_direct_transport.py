"""The direct transport against litellm's, on the real local server: for the same call both send the same
request (the same JSON after key order and the same byte count, to the same path, with the same key,
content type and extra headers), read the same normalised reply, limit news and origin, and for the same
failed answer raise what ``classify`` reads alike (retry or not, the wait, the status, whether any HTTP
response came back)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import anyio
import pytest

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider import DirectTransport, LitellmTransport, Reply, decision_body, llm_body
from knowwhen_runner.provider.adaptive import read_limit_headers
from knowwhen_runner.provider.retry import classify, error_headers, transport_failure
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.serve.process import free_port
from tests.wire_recorder import Recorded, WireRecorder, wire_recorder

pytestmark = pytest.mark.slow  # litellm's import alone takes seconds

ITEM = {
    "state": "TASK: a refund for Zoë — order #12\nHISTORY:\n- find_customer(email='zoë@example.com')\n",
    "options": ["find_customer", "ask_user", "refund_order"],
    "descriptions": ["Look up a customer by e-mail.", None, "Refund an order (ü, ß, 日本)."],
}
PARAMS = {
    "temperature": 0.25,
    "top_p": 0.9,
    "max_tokens": 64,
    "seed": 3,
    "stop": ["\n\n"],
    "presence_penalty": 0.1,
    "frequency_penalty": 0.0,
    "extra_body": {"cache_prompt": False},
    "extra_headers": {"X-Title": "knowwhen", "Authorization": "Bearer not-this-one"},
}


def _episode_body() -> dict[str, Any]:
    """A closed-loop turn: a tool call and its result, a nudge, and a forced tool with a seed."""
    body = llm_body(ITEM)
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "find_customer", "arguments": '{"e": 1}'},
    }
    body["messages"] = [
        *body["messages"],
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "found: Zoë (ü)"},
        {"role": "assistant", "content": "Let me think."},
        {"role": "user", "content": "Call one tool."},
    ]
    body["tool_choice"] = {"type": "function", "function": {"name": "ask_user"}}
    body["seed"] = 7
    return body


# (case id, model string, kind, api_base suffix, params, body, key)
CASES: list[tuple[str, str, str, str, dict[str, Any], dict[str, Any], str | None]] = [
    ("systemone", "hosted_vllm/lexical", "decision", "/v1/", {}, decision_body(ITEM), None),
    (
        "systemone-headers",
        "hosted_vllm/lexical",
        "decision",
        "",
        {"extra_headers": PARAMS["extra_headers"]},
        decision_body(ITEM),
        "sk-test-key-0123456789",
    ),
    *[
        (f"systemone-{p}", f"{p}/lexical", "decision", "", {}, decision_body(ITEM), "key-1")
        for p in ("lm_studio", "ollama", "typesafe", "eu_jev", "nace")
    ],
    ("chat-openai", "openai/agent-sim", "llm", "/v1", {}, llm_body(ITEM), "sk-test-key-0123456789"),
    ("chat-openai-params", "openai/agent-sim", "llm", "/v1", PARAMS, llm_body(ITEM), "key-2"),
    ("chat-openai-episode", "openai/agent-sim", "llm", "/v1", {}, _episode_body(), None),
    ("chat-vllm", "hosted_vllm/lexical-llm", "llm", "/v1/", {}, llm_body(ITEM), None),
    ("chat-vllm-params", "hosted_vllm/agent-sim", "llm", "/v1", PARAMS, llm_body(ITEM), "key-3"),
    ("chat-vllm-episode", "hosted_vllm/agent-sim", "llm", "/v1", {}, _episode_body(), "key-4"),
]
# Hosted vendors' prefixes on this machine's server: litellm leaves their price unknown (None) where the
# runner's rule, which the direct transport follows, says a model served here costs 0 (prices.token_prices).
PRICED_APART = ("typesafe", "eu_jev", "nace")


@pytest.fixture(scope="module")
def recorder(serve: ServerProcess) -> Iterator[WireRecorder]:
    with wire_recorder(serve.base_url) as proxy:
        yield proxy


def _both(model: ModelSpec, kind: str, body: dict[str, Any], key: str | None) -> list[Reply | BaseException]:
    """The outcome of one call through litellm, then through the direct transport."""

    async def go() -> list[Reply | BaseException]:
        out: list[Reply | BaseException] = []
        direct = DirectTransport()
        for transport in (LitellmTransport(), direct):
            await transport.prepare(model)
            try:
                out.append(await transport.send(model, kind, body, key))  # type: ignore[arg-type]
            except Exception as exc:
                out.append(exc)
        await direct.aclose()
        return out

    return anyio.run(go)


def _headers_that_matter(seen: Recorded) -> dict[str, str]:
    return {k: v for k, v in seen.headers.items() if k in ("authorization", "content-type", "x-title")}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_both_transports_send_the_same_request_and_read_the_same_reply(
    server: ServerProcess, recorder: WireRecorder, case: tuple[Any, ...]
) -> None:
    """The same request (JSON after key order, byte count, path, key, content type, extra headers) and
    the same normalised reply, origin and limit news, whichever transport sends it."""
    _id, model_string, kind, suffix, params, body, key = case
    model = ModelSpec(id="m", model=model_string, kind=kind, api_base=recorder.url + suffix, params=params)
    recorder.seen.clear()
    via_litellm, direct = _both(model, kind, body, key)
    assert isinstance(via_litellm, Reply) and isinstance(direct, Reply), (via_litellm, direct)
    sent_litellm, sent_direct = recorder.seen
    recorder.seen.clear()
    assert sent_direct.path == sent_litellm.path
    assert json.loads(sent_direct.body) == json.loads(sent_litellm.body)
    assert len(sent_direct.body) == len(sent_litellm.body)  # the same escapes and separators
    assert _headers_that_matter(sent_direct) == _headers_that_matter(sent_litellm)
    assert _headers_that_matter(sent_direct)["content-type"] == "application/json"
    mine, theirs = dict(direct.response), dict(via_litellm.response)
    if model_string.split("/")[0] in PRICED_APART:
        assert theirs.pop("cost_usd") is None and mine.pop("cost_usd") == 0.0
    assert mine == theirs and mine["choice"] is not None
    assert direct.origin == via_litellm.origin
    assert direct.limits == via_litellm.limits


def test_limit_headers_and_a_gateway_s_origin_are_read_alike(
    server: ServerProcess, recorder: WireRecorder
) -> None:
    """Stated limits and a gateway's fallback headers read the same on the chat path; on System One the
    direct transport reads them too, where litellm's decisions replies keep no headers."""
    server.set_rpm_limits({"agent-sim": 100_000, "lexical": 100_000})
    recorder.reply_headers = {"x-litellm-model-group": "agent-sim", "x-litellm-attempted-fallbacks": "1"}
    try:
        chat = ModelSpec(id="c", model="openai/agent-sim", kind="llm", api_base=recorder.url + "/v1")
        via_litellm, direct = _both(chat, "llm", llm_body(ITEM), None)
        decision = ModelSpec(id="d", model="hosted_vllm/lexical", kind="decision", api_base=recorder.url)
        _, direct_decision = _both(decision, "decision", decision_body(ITEM), None)
    finally:
        recorder.reply_headers = {}
        recorder.seen.clear()
    assert isinstance(via_litellm, Reply) and isinstance(direct, Reply)
    counted = {"requests_remaining": None, "tokens_remaining": None}  # one request apart
    assert replace(direct.limits, **counted) == replace(via_litellm.limits, **counted)
    assert direct.limits.requests_limit == 100_000 and direct.limits.requests_remaining is not None
    assert direct.origin == via_litellm.origin and direct.origin.fallbacks == 1
    assert direct.origin.is_other(chat)
    assert isinstance(direct_decision, Reply)
    assert direct_decision.limits.requests_limit == 100_000 and direct_decision.origin.fallbacks == 1


def _reading(outcome: Reply | BaseException) -> tuple[Any, ...]:
    """What the retry rules read of a failed request: the verdict, why no response came, the limit news
    of its headers."""
    assert isinstance(outcome, BaseException), outcome
    headers = error_headers(outcome)
    return classify(outcome), transport_failure(outcome), read_limit_headers(headers[0] if headers else None)


_WIRES = {
    "systemone": ("hosted_vllm/lexical", "decision", "", "systemone"),
    "chat-openai": ("openai/agent-sim", "llm", "/v1", "chat"),
    "chat-vllm": ("hosted_vllm/agent-sim", "llm", "/v1", "chat"),
}
_FAULTS = ["400", "401", "404_echo", "422", "429", "529", "500", "503", "malformed", "reset", "slow"]


@pytest.mark.parametrize("fault", _FAULTS)
def test_a_fault_is_read_alike_by_the_retry_rules(server: ServerProcess, fault: str) -> None:
    """An injected fault (error status with or without Retry-After, a malformed reply, a dropped
    connection, a timeout) raises, through either transport and on every wire, what the retry rules
    read the same way."""
    for model_string, kind, suffix, endpoint in _WIRES.values():
        model = ModelSpec(
            id="m", model=model_string, kind=kind, api_base=server.base_url + suffix, timeout_s=0.5
        )
        body = decision_body(ITEM) if kind == "decision" else llm_body(ITEM)
        rule: dict[str, Any] = {"fault": fault, "endpoint": endpoint, "count": 2}
        rule["delay_s"] = 1.0 if fault == "slow" else 0.0
        if fault in ("429", "529", "503"):
            rule["retry_after"] = 2
        server.set_faults([rule])
        via_litellm, direct = _both(model, kind, body, "key")
        assert _reading(direct) == _reading(via_litellm), model_string


@pytest.mark.parametrize("status", [403, 408, 409, 502, 504, 520])
def test_an_error_status_the_server_cannot_send_is_read_alike(recorder: WireRecorder, status: int) -> None:
    """Statuses litellm maps by name (a 408 or 504 is its ``Timeout``) read the same on every wire."""
    for model_string, kind, suffix, _ in _WIRES.values():
        model = ModelSpec(
            id="m", model=model_string, kind=kind, api_base=f"{recorder.url}/status/{status}{suffix}"
        )
        body = decision_body(ITEM) if kind == "decision" else llm_body(ITEM)
        via_litellm, direct = _both(model, kind, body, None)
        assert _reading(direct) == _reading(via_litellm), model_string
        assert classify(direct).wait in (3.0, None)


def test_a_refused_connection_is_read_alike() -> None:
    """Nothing listening: no HTTP response, 'connection refused', on every wire."""
    dead = f"http://127.0.0.1:{free_port()}"
    for model_string, kind, suffix, _ in _WIRES.values():
        model = ModelSpec(id="m", model=model_string, kind=kind, api_base=dead + suffix)
        body = decision_body(ITEM) if kind == "decision" else llm_body(ITEM)
        via_litellm, direct = _both(model, kind, body, None)
        assert _reading(direct) == _reading(via_litellm)
        assert transport_failure(direct) == "connection refused"  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["openai/gpt-4o-mini", "openai/gpt-4.1"])
def test_a_listed_openai_model_s_request_is_the_same(recorder: WireRecorder, name: str) -> None:
    """A name litellm lists (its catalog's request rules) gets the same request bytes either way; the
    server serves no such model, so both answers are the same 404."""
    model = ModelSpec(id="m", model=name, kind="llm", api_base=recorder.url + "/v1", params=PARAMS)
    recorder.seen.clear()
    via_litellm, direct = _both(model, "llm", llm_body(ITEM), "key")
    sent_litellm, sent_direct = recorder.seen
    recorder.seen.clear()
    assert json.loads(sent_direct.body) == json.loads(sent_litellm.body)
    assert len(sent_direct.body) == len(sent_litellm.body)
    assert _headers_that_matter(sent_direct) == _headers_that_matter(sent_litellm)
    assert _reading(direct) == _reading(via_litellm) and classify(direct).status == 404  # type: ignore[arg-type]
