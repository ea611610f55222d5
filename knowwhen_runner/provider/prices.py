"""What a call costs: one rule for the dry run's estimate and the run's recorded cost.

List prices are litellm's (``litellm.model_cost``). Importing litellm takes seconds, so a model's price
is looked up there only when litellm lists its name: the names are read from litellm's price file
without importing it, and a model it does not list (any model served on this machine) costs no import.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

from ..config import ModelSpec
from .litellm_loader import litellm_loaded, load_litellm

__all__ = [
    "BATCH_FALLBACK_RATE",
    "batch_token_prices",
    "call_cost",
    "listed_price",
    "register_price",
    "token_prices",
]

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
    info = listed_price(model)
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
        info = listed_price(model)
        if info and info.get("input_cost_per_token_batches") is not None:
            out = info.get("output_cost_per_token_batches")
            return (float(info["input_cost_per_token_batches"]), float(out or 0.0)), True
    sync = token_prices(model)
    if sync is None:
        return None
    return (sync[0] * BATCH_FALLBACK_RATE, sync[1] * BATCH_FALLBACK_RATE), False


def listed_price(model: ModelSpec) -> dict[str, Any] | None:
    """litellm's price entry of the model (by its name, or its name without the provider), if any.

    Until litellm is imported its price file is the whole list (litellm loads that file, there being no
    network for its online list), so the entry is read from the file: no import for a price."""
    names = (model.model, model.model.split("/", 1)[-1])
    cost = load_litellm().model_cost if litellm_loaded() else _price_file()
    if cost is None:  # the file is not where litellm keeps it: litellm's own list, then
        cost = load_litellm().model_cost
    entry = cost.get(names[0]) or cost.get(names[1])
    return _resolved(cost, entry) if isinstance(entry, dict) else None


def _resolved(cost: dict[str, Any], entry: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """An entry of the price file with its ``alias_of`` resolved as litellm resolves it on import: the
    aliased entry's fields, the alias's own over them."""
    target = cost.get(entry["alias_of"]) if "alias_of" in entry and depth < 8 else None
    if not isinstance(target, dict):
        return entry
    own = {k: v for k, v in entry.items() if k != "alias_of"}
    return {**_resolved(cost, target, depth + 1), **own}


@functools.cache
def _price_file() -> dict[str, Any] | None:
    """litellm's price file, read without importing litellm (None: not found)."""
    spec = importlib.util.find_spec("litellm")
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        path = Path(folder) / "model_prices_and_context_window_backup.json"
        try:
            found = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(found, dict):
            return found
    return None
