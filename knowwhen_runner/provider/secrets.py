"""API keys: read from the environment variables a config names, and redacted from every message kept.

The redaction itself is ``knowwhen_runner.redaction.redact``, the one function every boundary uses; the
keys read here are registered with it, as the config loader registers every credential it expands.
"""

from __future__ import annotations

import os

from ..config import ModelSpec, params_env_refs
from ..exceptions import ConfigError
from ..redaction import add_secret, redact

__all__ = ["Secrets"]


class Secrets:
    """The API keys of a run, read from the environment variables its config names; redacts them."""

    def __init__(self, models: list[ModelSpec]) -> None:
        self._env = {m.id: m.api_key_env for m in models}
        self._refs = {m.id: params_env_refs(m) for m in models}
        for m in models:
            if m.api_key_env:
                add_secret(os.environ.get(m.api_key_env), m.api_key_env)
            for name in self._refs[m.id]:
                add_secret(os.environ.get(name), name)

    def missing(self) -> list[tuple[str, str]]:
        """(model id, variable) for every model whose key variable, or a variable its params name, is unset."""
        needed = [(mid, env) for mid, env in self._env.items() if env]
        needed += [(mid, name) for mid, names in self._refs.items() for name in names]
        return [(mid, env) for mid, env in needed if not os.environ.get(env)]

    def require(self, where: str = "") -> None:
        """Raise ``ConfigError`` naming the first model and variable that ``missing`` finds."""
        for model_id, env in self.missing():
            what = "its API key in " if env == self._env[model_id] else ""
            raise ConfigError(
                f"model {model_id!r} needs {what}the environment variable {env}, which is not set{where}"
            )

    def key_for(self, model: ModelSpec) -> str | None:
        return os.environ.get(model.api_key_env) if model.api_key_env else None

    def redact(self, text: str) -> str:
        return redact(text)
