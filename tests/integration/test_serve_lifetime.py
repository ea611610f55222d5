"""A `knowwhen serve` started by a run ends with the run, even when the run is killed with -9."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from knowwhen_runner.serve.process import free_port
from tests.helpers import make_question_set, write_config

pytestmark = pytest.mark.slow


def _servers_on(port: int) -> list[int]:
    """Pids of local server processes listening on ``port`` (started by the run under test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"knowwhen_runner.serve" in args and str(port).encode() in args:
            found.append(int(entry.name))
    return found


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_kill_9_of_the_run_ends_its_server_and_frees_the_port(tmp_path: Path) -> None:
    """kill -9 a run that started its own server: within seconds the server is gone and its port is free."""
    port = free_port("127.0.0.1")
    base = f"http://127.0.0.1:{port}"
    scenario = make_question_set(tmp_path / "qs", n_tasks=10)
    slow = {"requests_per_minute": 60, "max_in_flight": 1}  # keeps the run going for a while
    models = [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": base,
            "rate_limit": slow,
        }
    ]
    config = write_config(tmp_path / "c.yaml", base, scenario, models=models, serve={"port": port})
    run = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(config), "-q", "--no-probe"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        assert _servers_on(port), "the run did not start its server"
        time.sleep(1.0)  # the run is working
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        deadline = time.monotonic() + 15
        while (_servers_on(port) or not _port_free(port)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _servers_on(port) and _port_free(port)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in _servers_on(port):  # only when the test failed: leave nothing behind
            os.kill(pid, signal.SIGKILL)
