"""What a direct request cost, from the reply's token counts, without importing litellm.

The config's price when it has one (as ``prices.call_cost``), else litellm's list price read from its
price file (``prices.listed_price``), 0 for a model served on this machine, else unknown (None), as
litellm prices them: per input and output token, cached input at its own price where the list has one.
A listed price of another shape (per query, tiers above a context length) is litellm's to compute:
``auto`` leaves such a model with litellm (``flat_price``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ...config import ModelSpec
from ..prices import listed_price, token_prices

__all__ = ["flat_price", "priced_reply", "reply_cost", "stated_cost"]

_FLAT_KEYS = frozenset(
    {
        "input_cost_per_token",
        "output_cost_per_token",
        "cache_read_input_token_cost",
        "input_cost_per_token_batches",
        "output_cost_per_token_batches",
    }
)


# Prices of what a direct request never asks for (a service tier, web search): they never apply to it.
_UNASKED = ("_priority", "_flex", "search_context_cost_per_query")


def flat_price(model: ModelSpec) -> bool:
    """Whether ``reply_cost`` prices the model as litellm would: a configured price, a local model, no
    list price, or a list price per token alone."""
    if model.pricing is not None:
        return True
    entry = listed_price(model)
    if entry is None:
        return True
    priced = {
        key
        for key, value in entry.items()
        if ("cost" in key or "price" in key) and value and not key.endswith(_UNASKED)
    }
    return priced <= _FLAT_KEYS


def reply_cost(model: ModelSpec, tokens_in: int, tokens_out: int, cached_in: int = 0) -> float | None:
    """USD for one reply (None: no price is known)."""
    if model.pricing is not None:
        p = model.pricing
        return tokens_in * p.input_per_million / 1e6 + tokens_out * p.output_per_million / 1e6 + p.per_request
    prices = token_prices(model)
    if prices is None:
        return None
    per_in, per_out = prices
    entry = listed_price(model) if cached_in else None
    cached_price = entry.get("cache_read_input_token_cost") if entry else None
    if cached_price is None:
        return tokens_in * per_in + tokens_out * per_out
    cached = min(cached_in, tokens_in)
    return (tokens_in - cached) * per_in + cached * float(cached_price) + tokens_out * per_out


_STATED = ("x-litellm-response-cost", "llm_provider-x-litellm-response-cost")


def stated_cost(headers: Mapping[str, str]) -> float | None:
    """The cost a gateway states of a reply (the LiteLLM Proxy's ``x-litellm-response-cost``, which
    litellm's client reads as the response's cost where it knows no price); None where none is stated."""
    for name in _STATED:
        value = headers.get(name)
        if value is None:
            continue
        try:
            cost = float(value)
        except ValueError:
            continue
        if math.isfinite(cost) and cost >= 0:
            return cost
    return None


def priced_reply(
    model: ModelSpec, headers: Mapping[str, str], tokens_in: int, tokens_out: int, cached: int
) -> float | None:
    """The runner's price of a reply, else the cost a gateway states of it (as litellm takes it)."""
    cost = reply_cost(model, tokens_in, tokens_out, cached)
    return cost if cost is not None else stated_cost(headers)
