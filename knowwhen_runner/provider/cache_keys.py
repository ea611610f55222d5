"""The response cache: content-addressed keys and the policy that says when to read and write.

A key lists its inputs explicitly: the model's identity (provider, litellm model string, api_base), the
kind of call, the request body and the output-affecting params. Never the API key, never runtime knobs
(concurrency, timeouts, retries): changing those must not miss the cache, and two models must never share
an entry. Entries live in the run database (``queue/``), so a shared PostgreSQL shares the cache too.
Errors are never cached.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..config import ModelSpec
from ..jsonio import dumps

__all__ = ["CACHE_KEY_VERSION", "CacheMode", "cache_key"]

CACHE_KEY_VERSION = 1


def _normalise_base(api_base: str | None) -> str:
    base = (api_base or "").rstrip("/")
    return base.removesuffix("/v1")


def cache_key(model: ModelSpec, kind: str, body: dict[str, Any]) -> str:
    """sha256 over the sorted JSON of everything that decides a response."""
    ident = {
        "v": CACHE_KEY_VERSION,
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
