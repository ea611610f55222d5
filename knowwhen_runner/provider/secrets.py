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

    def require(self, where: str = "", *, skip: frozenset[str] = frozenset()) -> None:
        """Raise ``ConfigError`` naming every model (but those in ``skip``) and variable ``missing`` finds."""
        said = [
            f"model {model_id!r} needs {'its API key in ' if env == self._env[model_id] else ''}the "
            f"environment variable {env}"
            for model_id, env in self.missing()
            if model_id not in skip
        ]
        if len(said) == 1:
            raise ConfigError(f"{said[0]}, which is not set{where}")
        if said:
            raise ConfigError(f"{len(said)} environment variables are not set{where}: {'; '.join(said)}")

    def key_for(self, model: ModelSpec) -> str | None:
        return os.environ.get(model.api_key_env) if model.api_key_env else None

    def redact(self, text: str) -> str:
        return redact(text)
