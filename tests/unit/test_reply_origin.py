"""A reply is the model's own: the names a provider answers a model with (``ModelSpec.answers_as``), and
what a litellm response says about who answered (``Origin``).

The rule accepts the documented forms (the name asked, with or without litellm's provider prefix, a
provider's dated or numbered snapshot of it, a ``served_as`` alias) and nothing else: each accepted and
each rejected form is a case below.
"""

from __future__ import annotations

import os

import pytest

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider.retry import classify, retry_hint
from knowwhen_runner.provider.transport import Origin, _origin


def _model(model: str, **kw: object) -> ModelSpec:
    return ModelSpec(id="m", model=model, kind="llm", **kw)


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("openai/gpt-4o", "gpt-4o-2024-08-06"),  # OpenAI: a dated snapshot of the alias asked
        ("gpt-4o", "gpt-4o"),  # the same name, no provider prefix either side
        ("gpt-4", "gpt-4-0613"),  # OpenAI's older month-day snapshots
        ("anthropic/claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022"),  # -latest answered as a date
        ("mistral/mistral-large-latest", "mistral-large-2411"),  # Mistral's year-month versions
        ("gemini/gemini-1.5-pro", "gemini-1.5-pro-002"),  # Google's numbered stable versions
        ("hosted_vllm/lexical", "lexical"),  # vLLM answers with its served name, without litellm's prefix
        ("hosted_vllm/lexical", "hosted_vllm/lexical"),  # litellm puts its provider back in front
        ("hosted_vllm/meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),  # a HF name
        ("openai/Agent-Sim", "agent-sim"),  # case is the provider's to choose
    ],
)
def test_the_documented_forms_of_the_model_asked_are_its_own(asked: str, answered: str) -> None:
    """Each documented way a provider names the model asked is accepted."""
    assert _model(asked).answers_as(answered)


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("openai/agent-sim", "lexical-llm"),  # a gateway's fallback to another model
        ("openai/gpt-4o", "gpt-4o-mini"),  # a smaller sibling that starts with the name asked
        ("openai/gpt-4o", "gpt-4o-mini-2024-07-18"),  # ... and its snapshot
        ("gpt-4", "gpt-4-0125-preview"),  # a preview is another model
        ("openai/gpt-4o", "gpt-4o-2024-08-06-ft"),  # a fine-tune of the snapshot
        ("hosted_vllm/lexical", "prior"),  # another deployment behind the same base
        ("hosted_vllm/lexical", "lexical-2"),  # a suffix that is no snapshot
        ("hosted_vllm/x", "openai/x"),  # another provider's x
        ("hosted_vllm/jev-latest", "lexical"),  # an alias the server resolves: needs served_as
    ],
)
def test_another_models_name_is_not_the_models_own(asked: str, answered: str) -> None:
    """Each name of another model is rejected."""
    assert not _model(asked).answers_as(answered)


def test_served_as_names_the_aliases_a_provider_answers_with() -> None:
    """``served_as`` (a string or a list) adds exactly its names and their snapshots, nothing else."""
    one = _model("hosted_vllm/jev-latest", served_as="lexical")
    many = _model("azure/my-deployment", served_as=["gpt-4o", "gpt-4o-mini"])
    assert one.answers_as("lexical") and not one.answers_as("prior")
    assert many.answers_as("gpt-4o-2024-08-06") and many.answers_as("gpt-4o-mini")
    assert not many.answers_as("gpt-4.1")


def _litellm_response(model: str, headers: dict[str, str], raw: dict[str, str] | None = None) -> object:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from knowwhen_runner.provider import load_litellm

    resp = load_litellm().ModelResponse(model=model)
    resp._hidden_params = {"additional_headers": headers, "headers": raw or {}}
    return resp


def test_a_litellm_response_says_who_answered_and_whether_a_gateway_fell_back() -> None:
    """A real litellm response through the LiteLLM Proxy: the body's model, the proxy's model group and its
    attempted fallbacks, read as litellm forwards them (``llm_provider-``) or as sent."""
    forwarded = _litellm_response(
        "lexical-llm",
        {
            "llm_provider-x-litellm-attempted-fallbacks": "1",
            "llm_provider-x-litellm-model-group": "lexical-llm",
        },
    )
    assert _origin(forwarded) == Origin("lexical-llm", "lexical-llm", 1)
    raw = _litellm_response("agent-sim", {}, {"x-litellm-attempted-fallbacks": "0"})
    assert _origin(raw) == Origin("agent-sim", None, 0)
    garbled = _litellm_response("agent-sim", {"x-litellm-attempted-fallbacks": "many"})
    assert _origin(garbled).fallbacks == 0


@pytest.mark.parametrize(
    ("name", "value", "seconds"),
    [
        ("retry-after", "3", 3.0),
        ("llm_provider-retry-after", "2", 2.0),  # the LiteLLM Proxy forwards the provider's hint so
        ("retry-after-ms", "250", 0.25),  # OpenAI's, in milliseconds
        ("llm_provider-retry-after-ms", "1500", 1.5),
        ("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # an HTTP date in the past: at once
    ],
)
def test_every_retry_hint_a_gateway_forwards_is_read(name: str, value: str, seconds: float) -> None:
    """classify reads each form of retry hint as the wait of a rate-limited request."""

    class Limited(Exception):
        status_code = 429

    exc = Limited("slow down")
    exc.litellm_response_headers = {name: value}  # type: ignore[attr-defined]
    verdict = classify(exc)
    assert verdict.kind == "rate_limited" and verdict.wait == pytest.approx(seconds)


def test_a_retry_hint_as_an_http_date_is_the_time_until_then() -> None:
    """An HTTP date in the future is the seconds until it; an unreadable hint is no hint."""
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_hint("Thu, 01 Jan 2026 12:00:30 GMT", now=now) == pytest.approx(30.0)
    assert retry_hint("soon", now=now) is None
    assert retry_hint("soon", 0.001) is None


def test_a_batch_line_from_another_model_is_no_answer() -> None:
    """A provider batch's line whose body names another model fails (its job is asked again); the model's
    own name or snapshot, or no name, is its answer."""
    from knowwhen_runner.provider.batch_wire import result_line

    model = _model("openai/gpt-4o-mini")

    def line(name: str | None) -> dict[str, object]:
        body = {"choices": [], **({"model": name} if name else {})}
        return {"custom_id": "j1", "response": {"status_code": 200, "body": body}}

    other = result_line(line("gpt-4o"), dict, model.answers_as)
    assert other.response is None and other.error is not None and "another model, 'gpt-4o'" in other.error
    for own in ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", None):
        assert result_line(line(own), dict, model.answers_as).response is not None
