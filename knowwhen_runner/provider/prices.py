"""What a call costs: one rule for the dry run's estimate and the run's recorded cost."""

from __future__ import annotations

from typing import Any

from ..config import ModelSpec
from .litellm_loader import load_litellm

__all__ = ["BATCH_FALLBACK_RATE", "batch_token_prices", "call_cost", "register_price", "token_prices"]

BATCH_FALLBACK_RATE = 0.5
"""A batch costs this share of the synchronous price when litellm lists no batch price for the model."""


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
    litellm = load_litellm()
    info = litellm.model_cost.get(model.model) or litellm.model_cost.get(model.model.split("/", 1)[-1])
    if info:
        return float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0)
    return (0.0, 0.0) if _is_local(model) else None


def register_price(litellm: Any, model: ModelSpec) -> None:
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


def call_cost(model: ModelSpec, resp: Any, tokens_in: int, tokens_out: int) -> float | None:
    """The config's price when it has one, else what litellm computed for the response (None: unknown)."""
    if model.pricing is not None:
        p = model.pricing
        return tokens_in * p.input_per_million / 1e6 + tokens_out * p.output_per_million / 1e6 + p.per_request
    hidden = getattr(resp, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    return float(cost) if cost is not None else None


def batch_token_prices(model: ModelSpec) -> tuple[tuple[float, float], bool] | None:
    """USD per input and output token through the provider's Batch API, and whether that price is listed.

    litellm's batch prices (``input_cost_per_token_batches``) when it has them; otherwise half the
    synchronous price (``BATCH_FALLBACK_RATE``, not listed); None when the synchronous price is unknown.
    """
    if model.pricing is None:
        litellm = load_litellm()
        info = litellm.model_cost.get(model.model) or litellm.model_cost.get(model.model.split("/", 1)[-1])
        if info and info.get("input_cost_per_token_batches") is not None:
            out = info.get("output_cost_per_token_batches")
            return (float(info["input_cost_per_token_batches"]), float(out or 0.0)), True
    sync = token_prices(model)
    if sync is None:
        return None
    return (sync[0] * BATCH_FALLBACK_RATE, sync[1] * BATCH_FALLBACK_RATE), False
