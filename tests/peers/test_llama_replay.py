"""llama-cpp-python's OpenAI-compatible server, replayed over real loopback HTTP from recorded exchanges.

The cassettes in tests/fixtures/llama_cpp/ were recorded against the real server (see its README);
these tests need neither the server nor a compiler.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.exceptions import ProviderError
from knowwhen_runner.provider import Limiters, ModelClient, Secrets, Verdict, classify, llm_body
from knowwhen_runner.provider.transport import llm_response
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.sweep import RunRequest, run_sweep

from .cassette import read_cassette
from .llama_cases import CASSETTES, MODEL, PARAMS, RAW_CASES, runner_item, sweep_config
from .replay import MISS_STATUS, Replay, replay_server

RAW = CASSETTES / "raw.jsonl"
SWEEP = CASSETTES / "sweep.jsonl.gz"
_CASES = {case.name: case for case in RAW_CASES}


@pytest.fixture(scope="module")
def raw() -> Any:
    with replay_server(RAW) as replay:
        yield replay
    replay.assert_all_matched()


def _spec(base: str) -> ModelSpec:
    return ModelSpec(id="gemma", model=f"openai/{MODEL}", kind="llm", api_base=f"{base}/v1", params=PARAMS)


def _call(replay: Replay, name: str) -> Any:
    """The litellm response to one recorded case, or the exception it raised."""
    from knowwhen_runner.provider import load_litellm

    litellm = load_litellm()

    async def go() -> Any:
        try:
            return await litellm.acompletion(
                model=f"openai/{MODEL}",
                api_base=f"{replay.url}/v1",
                api_key="not-needed",
                max_retries=0,
                timeout=30,
                **PARAMS,
                **_CASES[name].kwargs,
            )
        except Exception as exc:
            return exc

    return anyio.run(go)


def _normalised(replay: Replay, name: str) -> dict[str, Any]:
    resp = _call(replay, name)
    assert not isinstance(resp, Exception), resp
    return llm_response(_spec(replay.url), resp)


# --- the server's refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["required", "runner_required"])
def test_required_tool_choice_is_a_500_that_classify_retries(raw: Replay, name: str) -> None:
    """llama-cpp answers tool_choice 'required' with an HTTP 500 (empty message) that `classify` deems retryable."""
    exc = _call(raw, name)
    assert type(exc).__name__ == "InternalServerError", exc
    assert exc.status_code == 500
    assert classify(exc) == Verdict("retry", None, 500)


@pytest.mark.parametrize("name", ["history_no_content", "history_content_null"])
def test_tool_call_turn_without_content_is_a_500(raw: Replay, name: str) -> None:
    """An assistant tool-call turn without content, or with content null (litellm drops the key), gets HTTP 500."""
    exc = _call(raw, name)
    assert type(exc).__name__ == "InternalServerError", exc
    assert "has no attribute 'content'" in str(exc)
    assert classify(exc) == Verdict("retry", None, 500)
    sent = json.loads(next(e.request for e in read_cassette(RAW) if e.label == name))
    assert "content" not in sent["messages"][2]


def test_runner_open_loop_request_fails_for_good_after_its_retries(raw: Replay) -> None:
    """The open-loop request with the default tool_choice 'required' fails every try through `ModelClient.call`."""
    spec = _spec(raw.url)
    client = ModelClient(Limiters([spec]), Secrets([spec]), max_tries=2, max_backoff_s=0.01)
    with pytest.raises(ProviderError) as failed:
        anyio.run(client.call, spec, "llm", llm_body(runner_item()))
    assert (failed.value.kind, failed.value.status) == ("retry", 500)


# --- what it accepts, normalised by the runner ---------------------------------------------------------


def test_runner_auto_request_gets_a_tool_call_the_runner_reads(raw: Replay) -> None:
    """With tool_choice 'auto' the runner's request gets a tool call (content null, llama-cpp's call id, '{ }' arguments) that `_llm_response` reads."""
    message = _call(raw, "runner_auto").choices[0].message
    assert message.content is None
    assert message.tool_calls[0].id.startswith("call__0_cancel_order_cmpl-")
    out = _normalised(raw, "runner_auto")
    assert out["choice"] == "cancel_order" and out["choice"] in runner_item()["options"]
    assert out["arguments"] == "{ }" and out["content"] is None
    assert out["input_tokens"] > 0 and out["output_tokens"] > 0


def test_auto_may_answer_with_an_empty_message_instead_of_a_call(raw: Replay) -> None:
    """With tool_choice 'auto' llama-cpp may pick 'message' and reply with empty text: the runner sees no choice."""
    out = _normalised(raw, "auto")
    assert out["choice"] is None and out["arguments"] is None
    assert out["content"] == ""


def test_forced_tool_choice_is_honoured(raw: Replay) -> None:
    """tool_choice naming a function gets a call of that function with arguments following its schema."""
    out = _normalised(raw, "forced")
    assert out["choice"] == "find_customer"
    assert set(json.loads(out["arguments"])) == {"email"}


def test_tool_call_turn_with_empty_content_is_accepted(raw: Replay) -> None:
    """An assistant tool-call turn carrying content '' is answered with HTTP 200 and a next call."""
    out = _normalised(raw, "history_content_empty")
    assert out["choice"] == "get_orders"
    assert set(json.loads(out["arguments"])) == {"customer_id"}


def test_one_call_per_reply_and_a_garbled_legacy_function_call(raw: Replay) -> None:
    """Asked for two calls, llama-cpp returns one; its legacy function_call names another tool, so the runner reads tool_calls."""
    message = _call(raw, "several_calls").choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["find_customer"]
    recorded = next(e for e in read_cassette(RAW) if e.label == "several_calls").response_json()
    assert recorded["choices"][0]["message"]["function_call"]["name"] == "get_orders:"
    assert _normalised(raw, "several_calls")["choice"] == "find_customer"


# --- the cassettes and the replay ----------------------------------------------------------------------


def test_every_raw_case_was_recorded_against_the_aliased_model() -> None:
    """Every raw case is in the cassette once, and each 200 names the served alias, not a file path."""
    exchanges = read_cassette(RAW)
    assert [e.label for e in exchanges] == [case.name for case in RAW_CASES]
    for e in exchanges:
        if e.status == 200:
            assert e.response_json()["model"] == MODEL


def test_unknown_request_gets_599_naming_the_cassette(raw: Replay) -> None:
    """A request not in the cassette gets HTTP 599 saying which cassette, where it differs and how to re-record."""
    body = {**json.loads(read_cassette(RAW)[0].request), "temperature": 1}
    reply = httpx.post(f"{raw.url}/v1/chat/completions", json=body)
    assert reply.status_code == MISS_STATUS
    message = reply.json()["error"]["message"]
    assert "raw.jsonl" in message and "$.temperature: recorded 0; sent 1" in message
    assert "re-record" in message
    raw.misses.remove(message)


def test_small_sweep_replays_from_the_cassette(server: ServerProcess, tmp_path: Path) -> None:
    """A sweep of 10 questions and 2 episodes against the recorded llama-cpp server sends only recorded requests and finishes."""
    recorded = read_cassette(SWEEP)
    with replay_server(SWEEP) as replay:
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump(sweep_config(f"{replay.url}/v1", server.base_url, tmp_path / "out")))
        summary = run_sweep(RunRequest(config, finalize=False, progress=False))
    replay.assert_all_matched()
    assert summary.counts == {"done": summary.planned}
    assert replay.hits == len(recorded)
