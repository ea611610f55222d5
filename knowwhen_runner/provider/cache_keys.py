"""The response cache: content-addressed keys and the policy that says when to read and write.

A key lists its inputs explicitly: the model's identity (the litellm model string and the revision the
user declares; the api_base only when the user says the endpoint defines the model, ``identity:
endpoint``), the read-out and its settings for a model answering through one, the kind of call, the request body and the output-affecting params. Never the API key,
never runtime knobs (concurrency, timeouts, retries, the port a model is served on): changing those
must not miss the cache, and two models must never share an entry. Entries live in a store shared by
runs (``cache/``). Errors are never cached.

Version 1 keys (releases before the shared store) held the provider and api_base of every model;
``legacy_cache_key`` computes them so the entries of earlier runs are still found.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..config import ModelSpec
from ..jsonio import dumps

__all__ = ["CACHE_KEY_VERSION", "CacheMode", "cache_key", "legacy_cache_key"]

CACHE_KEY_VERSION = 2


def _normalise_base(api_base: str | None) -> str:
    base = (api_base or "").rstrip("/")
    return base.removesuffix("/v1")


def cache_key(model: ModelSpec, kind: str, body: dict[str, Any]) -> str:
    """sha256 over the sorted JSON of everything that decides a response."""
    ident = {
        "v": CACHE_KEY_VERSION,
        "model": model.model,
        "revision": model.revision,
        "endpoint": _normalise_base(model.api_base) if model.identity == "endpoint" else None,
        "kind": kind,
        "body": body,
        "params": model.params,
    }
    if model.readout is not None and kind == "decision":
        # Named only when there is one, so every other key stays what it was.
        ident["readout"] = model.readout.model_dump()
    return hashlib.sha256(dumps(ident, sort_keys=True)).hexdigest()


def legacy_cache_key(model: ModelSpec, kind: str, body: dict[str, Any]) -> str | None:
    """The version-1 key of the same call (None for a model with a revision or a read-out: version 1 had neither)."""
    if model.revision is not None or model.readout is not None:
        return None
    ident = {
        "v": 1,
        "provider": model.model.split("/", 1)[0] if "/" in model.model else "",
        "model": model.model,
        "api_base": _normalise_base(model.api_base),
        "kind": kind,
        "body": body,
        "params": model.params,
    }
    return hashlib.sha256(dumps(ident, sort_keys=True)).hexdigest()


class CacheMode:
    """What a cache policy allows."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.read = policy in ("read-write", "read-only")
        self.write = policy in ("read-write", "refresh")
        self.overwrite = policy == "refresh"
