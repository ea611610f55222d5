"""A LiteLLM Proxy as a judge: the gateway many labs put in front of their models, run for real.

``start_litellm_proxy(config, log)`` runs ``litellm --config CONFIG --port P --host 127.0.0.1
--num_workers 1`` (no database: the proxy keeps its routing, rate limits and fallbacks in memory) with
a master key of its own, and waits until it answers. Its dependencies are pinned in the dev extras;
where they are not installed, the tests that need it skip, saying so (and fail under CI=true).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.judges import judge_missing

__all__ = ["LitellmProxy", "start_litellm_proxy"]

_START = "from litellm_cli.main import proxy_server; proxy_server()"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class LitellmProxy:
    """A running proxy: its base URL and the key a client sends (``master_key``)."""

    url: str
    master_key: str
    log: Path


@contextmanager
def start_litellm_proxy(config: dict[str, Any], folder: Path) -> Iterator[LitellmProxy]:
    """The proxy over ``config`` (its ``model_list``, ``router_settings``...), ready to take requests."""
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("litellm_cli") is None:
        judge_missing("the LiteLLM Proxy's dependencies are not installed (pip install -e '.[dev]')")
    folder.mkdir(parents=True, exist_ok=True)
    path, log = folder / "proxy.yaml", folder / "proxy.log"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    port, key = _free_port(), f"sk-{secrets.token_hex(16)}"
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "DISABLE_ADMIN_UI": "True",
    }
    env.pop("DATABASE_URL", None)  # no database: the proxy must not try to reach one
    command = [sys.executable, "-c", _START, "--config", str(path), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--num_workers", "1"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=folder
        )
    proxy = LitellmProxy(f"http://127.0.0.1:{port}", key, log)
    try:
        deadline = time.monotonic() + 180  # it imports for a long while on a busy machine
        while True:
            try:
                if httpx.get(f"{proxy.url}/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the LiteLLM Proxy did not start:\n{tail}")
            time.sleep(0.5)
        yield proxy
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
