"""What shares a rate limit, as docs/scheduling.md and docs/scaling.md say: entries of one model string at
one base URL with one key variable share one limiter; two model strings on one key have one each; one
``limit_group`` joins any models."""

from __future__ import annotations

from typing import Any

from knowwhen_runner.config.model_spec import ModelSpec
from knowwhen_runner.provider.limit_keys import Limiters

_BASE = {"kind": "llm", "api_base": "https://api.example.com/v1", "api_key_env": "EXAMPLE_KEY"}
_RATE = {"rate_limit": {"requests_per_minute": 600}}


def _limiters(*models: dict[str, Any]) -> Limiters:
    return Limiters([ModelSpec(**{**_BASE, **_RATE, **m}) for m in models])


def test_two_entries_of_one_model_string_share_one_limiter() -> None:
    """The same model at two temperatures (two ids, one model string, base and key) is one limit."""
    limiters = _limiters(
        {"id": "cold", "model": "openai/gpt-x"},
        {"id": "warm", "model": "openai/gpt-x", "params": {"temperature": 1}},
    )
    assert limiters["cold"] is limiters["warm"]


def test_two_model_strings_on_one_key_have_a_limiter_each() -> None:
    """Two models of one provider, base and key variable are two limits (the key includes the model string)."""
    limiters = _limiters({"id": "a", "model": "openai/gpt-x"}, {"id": "b", "model": "openai/gpt-y"})
    assert limiters["a"] is not limiters["b"]


def test_a_limit_group_joins_two_model_strings() -> None:
    """Naming one ``limit_group`` makes two model strings one limit."""
    limiters = _limiters(
        {"id": "a", "model": "openai/gpt-x", "limit_group": "org"},
        {"id": "b", "model": "openai/gpt-y", "limit_group": "org"},
    )
    assert limiters["a"] is limiters["b"]
