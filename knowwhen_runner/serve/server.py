"""Run the app under uvicorn in this process, tuned for throughput (uvloop, httptools, no access log).

One worker only: faults, rate limits and stats are per-process state, and a test that injects a fault
must see it on every request. One uvloop worker already serves thousands of requests per second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import uvicorn

from .admin_guard import admin_token_for
from .app import create_app
from .defaults import default_registry
from .encoding import BodyLimits
from .faults import FaultRule

__all__ = ["run_server"]


def run_server(
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    faults: Sequence[FaultRule] = (),
    enforce_rpm: Mapping[str, int] | None = None,
    limit_headers: bool = True,
    aliases: Mapping[str, str] | None = None,
    log_level: str = "warning",
    max_body_bytes: int = BodyLimits.max_bytes,
    body_timeout_s: float = BodyLimits.timeout_s,
    max_files: int = 1000,
    instance: str | None = None,
) -> None:
    """Serve the reference models until interrupted (blocking); ``aliases``: more names for decision models;
    ``max_body_bytes``: the largest request body (an upload is one), ``body_timeout_s``: the time it may
    take to arrive; ``max_files``: how many uploaded files the server keeps at once; ``instance``: the id
    ``/health`` answers with (a run's, for the run to know its own server)."""
    registry = default_registry()
    for name, target in (aliases or {}).items():
        if target not in registry.decision:
            raise SystemExit(f"--alias {name}={target}: no decision model named {target!r}")
        registry.add_decision_alias(name, target)
    token, announce = admin_token_for(host)
    if announce:
        print(f"knowwhen serve: {announce}", flush=True)
    app = create_app(
        faults=list(faults),
        enforce_rpm=dict(enforce_rpm or {}),
        limit_headers=limit_headers,
        registry=registry,
        admin_token=token,
        body_limits=BodyLimits(max_body_bytes, body_timeout_s),
        max_files=max_files,
        instance=instance,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="off",
        access_log=False,
        log_level=log_level,
        timeout_keep_alive=30,
        backlog=4096,
    )
    uvicorn.Server(config).run()
