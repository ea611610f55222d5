"""Batch API prices, and batch output lines read back through the synchronous path's normalising."""

from __future__ import annotations

import pytest

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider.batch_client import BatchClient
from knowwhen_runner.provider.batch_wire import result_line
from knowwhen_runner.provider.prices import batch_token_prices
from knowwhen_runner.provider.transport import chat_body_response, llm_response


def _llm(**kw: object) -> ModelSpec:
    return ModelSpec.model_validate(
        {"id": "g", "model": "openai/gpt-4o-mini", "kind": "llm", "batch": {}, **kw}
    )


def test_listed_batch_prices_come_from_litellm() -> None:
    """A model litellm lists batch prices for is priced at them (half of gpt-4o-mini's list price)."""
    (p_in, p_out), listed = batch_token_prices(_llm())  # type: ignore[misc]
    assert listed and (p_in, p_out) == pytest.approx((7.5e-8, 3e-7))


def test_without_a_listed_batch_price_the_batch_costs_half() -> None:
    """A price from the config (no listed batch price) is halved for batches, and says it is not listed."""
    model = _llm(pricing={"input_per_million": 2.0, "output_per_million": 8.0})
    (p_in, p_out), listed = batch_token_prices(model)  # type: ignore[misc]
    assert not listed and (p_in, p_out) == pytest.approx((1e-6, 4e-6))


def test_batch_config_is_for_llms_only() -> None:
    """A decision model cannot be sent through a Batch API (its calls are System One, not chat)."""
    with pytest.raises(ValueError, match="only LLMs"):
        ModelSpec.model_validate({"id": "d", "model": "hosted_vllm/lexical", "kind": "decision", "batch": {}})


@pytest.mark.parametrize(
    ("model", "api_base", "ok"),
    [
        ("anthropic/claude-3-5-haiku-latest", None, False),  # litellm cannot create Anthropic batches
        ("gemini/gemini-2.0-flash", None, False),
        ("hosted_vllm/lexical-llm", None, False),  # an OpenAI-compatible server, but where?
        ("hosted_vllm/lexical-llm", "http://127.0.0.1:9/v1", True),
        ("openai/gpt-4o-mini", None, True),
        ("azure/my-deployment", "https://x.openai.azure.com", True),
    ],
)
def test_batch_config_only_for_providers_litellm_batches(model: str, api_base: str | None, ok: bool) -> None:
    """A batch section on a model whose provider litellm cannot batch is refused, naming the provider (its
    key must never go to OpenAI's batch endpoints); ``enabled: false`` is always accepted."""
    spec = {"id": "g", "model": model, "kind": "llm", "api_base": api_base, "batch": {}}
    if ok:
        assert ModelSpec.model_validate(spec).batches()
    else:
        with pytest.raises(ValueError, match=f"no provider batches for '{model.split('/')[0]}'"):
            ModelSpec.model_validate(spec)
    assert not ModelSpec.model_validate({**spec, "batch": {"enabled": False}}).batches()


def test_an_output_line_normalises_like_a_synchronous_reply() -> None:
    """A batch output line yields the synchronous normalised response, priced at the batch price."""
    import litellm

    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "ask_user", "arguments": "{}"}}
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010},
    }
    model = _llm()
    line = {"custom_id": "j1", "response": {"status_code": 200, "body": body}, "error": None}
    got = BatchClient().priced(model, result_line(line, lambda b: chat_body_response(model, b)))
    want = llm_response(model, litellm.ModelResponse(**body))
    assert got.response is not None and got.response["choice"] == "ask_user"
    assert {k: v for k, v in got.response.items() if k != "cost_usd"} == {
        k: v for k, v in want.items() if k != "cost_usd"
    }
    assert got.response["cost_usd"] == pytest.approx(1000 * 7.5e-8 + 10 * 3e-7)
    failed = BatchClient().priced(
        model,
        result_line({"custom_id": "j2", "response": None, "error": {"code": "batch_expired"}}, dict),
    )
    assert failed.response is None and "batch_expired" in str(failed.error)
