"""Start the local server as a child process and drive its admin endpoints.

A separate process, not a thread: the runner and the tests then reach it over real loopback HTTP
exactly as they reach a hosted provider, and the server's event loop never competes with theirs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from ..exceptions import ServeError
from .admin_guard import ADMIN_TOKEN_ENV, ADMIN_TOKEN_HEADER, admin_token_for
from .faults import FaultRule

__all__ = ["ServerProcess", "free_port", "start_server_process"]

_START_TIMEOUT_S = 20.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free right now (another process could still take it before we bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """A running ``knowwhen serve`` child: its URL, its admin calls, and how to stop it."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        host: str,
        port: int,
        log_path: str,
        admin_token: str | None = None,
    ) -> None:
        self.process = process
        self.host = host
        self.port = port
        self.log_path = log_path
        self.base_url = f"http://{host}:{port}"
        # Admin writes carry a JSON content type, and the admin token when the server has one.
        token = admin_token or os.environ.get(ADMIN_TOKEN_ENV)
        headers = {"content-type": "application/json", **({ADMIN_TOKEN_HEADER: token} if token else {})}
        self._admin = httpx.Client(base_url=self.base_url, timeout=10.0, headers=headers)

    # -- admin -----------------------------------------------------------------------------------

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._admin.request(method, path, **kwargs)
        response.raise_for_status()
        return response.json()

    def stats(self, *, records: bool = True, since: float | None = None) -> dict[str, Any]:
        """Counts per model/endpoint/status and recent [timestamp, model, endpoint, status] records."""
        params: dict[str, str] = {"records": "1" if records else "0"}
        if since is not None:
            params["since"] = repr(since)
        result: dict[str, Any] = self._call("GET", "/admin/stats", params=params)
        return result

    def count(
        self, *, model: str | None = None, endpoint: str | None = None, status: int | None = None
    ) -> int:
        """How many requests matched the given model, endpoint and status (None matches any)."""
        return sum(
            row["count"]
            for row in self.stats(records=False)["counts"]
            if (model is None or row["model"] == model)
            and (endpoint is None or row["endpoint"] == endpoint)
            and (status is None or row["status"] == status)
        )

    def set_batch_faults(self, **faults: Any) -> dict[str, Any]:
        """Replace the batch endpoints' faults and completion delay (``BatchFaults``; none clears them)."""
        result: dict[str, Any] = self._call("POST", "/admin/batches", json=faults)
        return result

    def set_faults(self, rules: Iterable[FaultRule | Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Replace the active fault rules (see ``FaultRule`` for the fields)."""
        body = [r.model_dump() if isinstance(r, FaultRule) else dict(r) for r in rules]
        result: list[dict[str, Any]] = self._call("POST", "/admin/faults", json=body)
        return result

    def clear_faults(self) -> None:
        """Remove every fault rule."""
        self._call("DELETE", "/admin/faults")

    def set_rpm_limits(self, limits: Mapping[str, int], *, headers: bool = True) -> None:
        """Replace the enforced requests-per-minute per model (an empty mapping removes them all).

        ``headers``: state the limits in ``x-ratelimit-*`` reply headers (else they show only as 429s).
        """
        self._call("POST", "/admin/limits", json=dict(limits), params={"headers": "1" if headers else "0"})

    def reset_stats(self) -> None:
        """Zero the request counts and records."""
        self._call("POST", "/admin/reset")

    def reset(self) -> None:
        """As started: no fault rules, no batch faults, no enforced limits, zeroed counts."""
        self.clear_faults()
        self.set_batch_faults()
        self.set_rpm_limits({})
        self.reset_stats()

    # -- lifetime --------------------------------------------------------------------------------

    def alive(self) -> bool:
        """Whether the child process is still running."""
        return self.process.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the child, kill it if it does not exit in time, and clean up."""
        self._admin.close()
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _wait_healthy(self, timeout: float, instance: str | None = None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise ServeError(f"the local model server exited at start: {self._log_tail()}")
            try:
                reply = self._admin.get("/health", timeout=1.0)
                if reply.status_code == 200 and (instance is None or _instance_of(reply) == instance):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise ServeError(f"the local model server did not answer on {self.base_url} within {timeout:.0f} s")

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                lines = fh.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"


def _instance_of(reply: httpx.Response) -> str | None:
    """The instance id in a ``/health`` reply (None: not one of ours, or started without one)."""
    try:
        body = reply.json()
    except ValueError:
        return None
    found = body.get("instance") if isinstance(body, dict) else None
    return found if isinstance(found, str) else None


def start_server_process(
    port: int = 0,
    extra_args: Sequence[str] = (),
    *,
    host: str = "127.0.0.1",
    timeout: float = _START_TIMEOUT_S,
    end_with_us: bool = False,
    instance: str | None = None,
) -> ServerProcess:
    """Spawn ``python -m knowwhen_runner.serve`` and return once ``/health`` answers.

    With ``port=0`` a free port is picked (and a few others tried if it is taken before the child binds).
    Raises ``ServeError`` if the server exits or stays silent past ``timeout``. ``end_with_us``: the
    server ends when this process does, even killed with -9 (``parent_watch``). ``instance``: the id its
    ``/health`` answers with; a server that answers with another (a program already on the port that
    answered before the child could fail to bind) is refused with ``ServeError``.
    """
    if end_with_us:
        extra_args = [*extra_args, "--parent-pid", str(os.getpid())]
    if instance is not None:
        extra_args = [*extra_args, "--instance", instance]
    attempts = 3 if port == 0 else 1
    # Beyond loopback the child needs an admin token; choose it here so the admin calls can carry it.
    token = admin_token_for(host)[0]
    for attempt in range(attempts):
        chosen = port or free_port(host)
        fd, log_path = tempfile.mkstemp(prefix="knowwhen-serve-", suffix=".log")
        with os.fdopen(fd, "wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "knowwhen_runner.serve",
                    "--host",
                    host,
                    "--port",
                    str(chosen),
                    *extra_args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, ADMIN_TOKEN_ENV: token} if token else None,
            )
        server = ServerProcess(process, host, chosen, log_path, admin_token=token)
        try:
            server._wait_healthy(timeout, instance)
            return server
        except ServeError:
            server.stop()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")
