"""The shared pieces of the config models: the frozen base, id and env-name shapes, what a key looks like."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

CONFIG_SCHEMA_VERSION = 1

CachePolicy = Literal["read-write", "read-only", "refresh", "off"]
_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Shapes of real provider keys; a value like this anywhere in a config is refused.
_KEY_SHAPE = re.compile(r"^(sk-|sk_|xai-|gsk_|AIza|hf_|ts-)[A-Za-z0-9_\-]{8,}$|^[A-Za-z0-9]{40,}$")
_SECRET_FIELDS = {"api_key", "apikey", "key", "token", "secret", "password", "authorization"}
# Request arguments the runner sets itself on every call: a model's params may not override them.
_RUNNER_PARAMS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "state",
        "questions",
        "api_base",
        "base_url",
        "api_key",
        "timeout",
        "max_retries",
        "num_retries",
        "stream",
    }
)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
