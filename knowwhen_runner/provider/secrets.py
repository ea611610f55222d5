"""API keys: read from the environment variables a config names, and redacted from every message kept."""

from __future__ import annotations

import os
import re

from ..config import ModelSpec

__all__ = ["Secrets"]


class Secrets:
    """The API keys of a run, read from the environment variables its config names; redacts them."""

    def __init__(self, models: list[ModelSpec]) -> None:
        self._env = {m.id: m.api_key_env for m in models}
        values = {os.environ.get(m.api_key_env, "") for m in models if m.api_key_env}
        self._values = sorted((v for v in values if len(v) >= 4), key=len, reverse=True)

    def missing(self) -> list[tuple[str, str]]:
        """(model id, variable) for every model whose key variable is not set."""
        return [(mid, env) for mid, env in self._env.items() if env and not os.environ.get(env)]

    def key_for(self, model: ModelSpec) -> str | None:
        return os.environ.get(model.api_key_env) if model.api_key_env else None

    def redact(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, "[REDACTED]")
        # Keys echoed back by providers often arrive truncated or in a header.
        text = re.sub(r"(Bearer\s+)[A-Za-z0-9._\-]{8,}", r"\1[REDACTED]", text)
        return re.sub(r"\b(sk-|sk_|gsk_|xai-|hf_)[A-Za-z0-9_\-]{6,}", "[REDACTED]", text)
