"""The built-in local model server for a run whose config has ``serve``: started for it, or reused.

A server the run starts ends with it, even when the run is killed with -9 (it watches its parent)."""

from __future__ import annotations

from contextlib import ExitStack

import httpx

from ..config import SweepConfig
from ..exceptions import ConfigError

__all__ = ["ensure_server"]


def _served_models(base: str) -> set[str] | None:
    """The model names a running local server offers, or None when nothing answers there."""
    try:
        reply = httpx.get(f"{base}/v1/models", timeout=2.0)
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        return None
    return {m.get("id") for m in reply.json().get("data", [])}


def ensure_server(config: SweepConfig, stack: ExitStack) -> None:
    """Start the built-in server for the run, or reuse one already on the port if it serves our models."""
    if config.serve is None:
        return
    base = f"http://{config.serve.host}:{config.serve.port}"
    wanted = {m.model.split("/", 1)[-1] for m in config.models if m.api_base and m.api_base.startswith(base)}
    offered = _served_models(base)
    if offered is None:
        # start-up: the model server (starlette, uvicorn) loads only when a run starts one
        from ..serve import start_server_process

        server = start_server_process(config.serve.port, host=config.serve.host, end_with_us=True)
        stack.callback(server.stop)
        offered = _served_models(base) or set()
    missing = sorted(wanted - offered)
    if missing:
        raise ConfigError(
            f"serve: the server on {base} does not offer {', '.join(missing)} (another program, or an older "
            "knowwhen serve?); stop it or choose another serve.port"
        )
