"""The built-in local model server for a run whose config has ``serve``: started for it, or its own reused.

A server the run starts ends with it, even when the run is killed with -9 (it watches its parent). The
run knows its own server by an instance id, derived from the run's name and folder, which the server
answers ``/health`` with: a later command of the same run (``plan`` then ``run``, or a second ``run`` of
a shared run) reuses it, and any other program on the port (another program, a ``knowwhen serve``
started by hand or by another run) is refused, so a run is never answered by a server it did not ask
for. The id tells a run's server from another by mistake; it is not a secret, and a program written to
pass for the run's server could read it from the run's config.
"""

from __future__ import annotations

import hashlib
from contextlib import ExitStack

import httpx

from ..config import SweepConfig
from ..exceptions import ConfigError, ServeError
from ..messages import say

__all__ = ["ensure_server", "server_instance"]


def server_instance(config: SweepConfig) -> str:
    """The instance id of the server a run starts: the same for every command of the run."""
    seed = f"knowwhen serve\n{config.name}\n{config.output}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def _health(base: str) -> dict[str, object] | None:
    """What ``/health`` on ``base`` answers (an empty dict for anything but a JSON object), None when
    nothing listens there."""
    try:
        reply = httpx.get(f"{base}/health", timeout=2.0)
    except httpx.ConnectError:
        return None
    except httpx.HTTPError:
        return {}  # something listens, and it is not a server of ours
    try:
        body = reply.json()
    except ValueError:
        return {}
    return body if reply.status_code == 200 and isinstance(body, dict) else {}


def _served_models(base: str) -> set[str]:
    """The model names the run's own server offers."""
    try:
        reply = httpx.get(f"{base}/v1/models", timeout=2.0)
        return {m.get("id") for m in reply.json().get("data", [])}
    except (httpx.HTTPError, ValueError, AttributeError):
        return set()


def _foreign(config: SweepConfig) -> ConfigError:
    assert config.serve is not None
    host, port = config.serve.host, config.serve.port
    return ConfigError(say("serve.port_taken", port=port, host=host))


def ensure_server(config: SweepConfig, stack: ExitStack) -> None:
    """Start the built-in server for the run, or reuse the run's own already on the port; refuse any other."""
    if config.serve is None:
        return
    base = f"http://{config.serve.host}:{config.serve.port}"
    instance = server_instance(config)
    wanted = {m.model.split("/", 1)[-1] for m in config.models if m.api_base and m.api_base.startswith(base)}
    health = _health(base)
    if health is None:
        # start-up: the model server (starlette, uvicorn) loads only when a run starts one
        from ..serve import start_server_process

        try:
            server = start_server_process(
                config.serve.port, host=config.serve.host, end_with_us=True, instance=instance
            )
        except ServeError:
            after = _health(base)  # another command of the run may have started it first
            if after is None:
                raise
            if after.get("instance") != instance:
                raise _foreign(config) from None
        else:
            stack.callback(server.stop)
    elif health.get("instance") != instance:
        raise _foreign(config)
    missing = sorted(wanted - _served_models(base))
    if missing:
        raise ConfigError(
            f"serve: the server on {base} does not offer {', '.join(missing)}; "
            "check the model names against knowwhen serve's"
        )
