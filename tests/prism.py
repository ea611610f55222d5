"""OpenAI's published API description as a judge: Stoplight Prism proxying to ``knowwhen serve``.

``start_prism(upstream)`` runs ``prism proxy tests/openai_spec/openapi.json UPSTREAM --errors`` on a free
loopback port. Every request through it, and every response back, is checked against OpenAI's spec (the
chat completions, files and batches operations, with the corrections listed in
``tests/openai_spec/CORRECTIONS.md``); a request or response outside it is answered with Prism's error
instead, and logged, so ``SpecProxy.violations`` names it and the test fails. Error statuses the spec
does not describe (OpenAI's spec lists only 200s; a 404 or an injected 503 are real provider answers)
are not violations.

Prism is the npm package pinned in ``.ci/prism/package.json``, installed there by ``.ci/run`` (or here on
first use with ``npm ci``); tests that need it skip, saying so, only where node or npm is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.judges import judge_missing

__all__ = ["SpecProxy", "batch_input_errors", "prism_command", "start_prism"]

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tests" / "openai_spec" / "openapi.json"
PRISM_DIR = ROOT / ".ci" / "prism"
_ALLOWED = "Unable to match the returned status code"  # an error status the spec does not list


def prism_command() -> list[str]:
    """The prism executable (installed from the pinned package.json if needed), or skip without node/npm."""
    binary = PRISM_DIR / "node_modules" / ".bin" / "prism"
    if binary.exists() and shutil.which("node"):
        return [str(binary)]
    if not (shutil.which("node") and shutil.which("npm")):
        judge_missing("node and npm are needed to run the OpenAPI-validating proxy (Stoplight Prism)")
    subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(PRISM_DIR)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return [str(binary)]


def _chat_request_validator() -> Draft202012Validator:
    spec = orjson.loads(SPEC.read_bytes())
    registry = Registry().with_resource("urn:openai", Resource(spec, DRAFT202012))
    root = {"$ref": "urn:openai#/components/schemas/CreateChatCompletionRequest"}
    return Draft202012Validator(root, registry=registry)


def batch_input_errors(content: bytes, name: str) -> list[str]:
    """What in a batch input file breaks the spec: each line a chat completion request (``custom_id``,
    ``method`` POST, ``url`` /v1/chat/completions, and a ``body`` valid as ``CreateChatCompletionRequest``)."""
    validator = _chat_request_validator()
    errors: list[str] = []
    for n, raw in enumerate(content.splitlines(), 1):
        line = orjson.loads(raw)
        if not isinstance(line.get("custom_id"), str) or line.get("method") != "POST":
            errors.append(f"{name}:{n}: expected a custom_id and method POST")
        if line.get("url") != "/v1/chat/completions":
            errors.append(f"{name}:{n}: url {line.get('url')!r}")
        errors += [f"{name}:{n}: body: {e.message}" for e in validator.iter_errors(line.get("body"))][:3]
    return errors


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SpecProxy:
    """A running Prism proxy: its base URL (use it as ``api_base``) and its log."""

    url: str
    log: Path
    _mark: int = 0
    _since: float = 0.0

    def start_test(self) -> None:
        """Only what happens from now on counts for ``violations``."""
        self._mark = self.log.stat().st_size
        self._since = time.time()

    def violations(self) -> list[str]:
        """Log lines since ``start_test`` saying a request or response was outside the spec, and what in
        the batch input files uploaded since then breaks it."""
        with self.log.open("rb") as fh:
            fh.seek(self._mark)
            text = fh.read().decode("utf-8", "replace")
        found = [
            line.strip()
            for line in text.splitlines()
            if ("✖" in line or "Violation" in line) and _ALLOWED not in line
        ]
        return found + self._input_errors()

    def _input_errors(self) -> list[str]:
        """Errors of the batch input files the server holds (read from it through the proxy)."""
        with httpx.Client(base_url=self.url, timeout=30) as client:
            listed = client.get("/files", params={"purpose": "batch"})
            if listed.status_code != 200:
                return [f"GET /files?purpose=batch: {listed.status_code}"]
            errors: list[str] = []
            for f in listed.json()["data"]:
                if f["created_at"] >= self._since - 1:
                    content = client.get(f"/files/{f['id']}/content").content
                    errors += batch_input_errors(content, f["filename"])
            return errors


@contextmanager
def start_prism(upstream: str, log: Path) -> Iterator[SpecProxy]:
    """Prism proxying to ``upstream`` (a base URL ending in ``/v1``), ready to take requests."""
    port = _free_port()
    command = [*prism_command(), "proxy", str(SPEC), upstream, "--errors", "-h", "127.0.0.1", "-p", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    proxy = SpecProxy(f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{proxy.url}/files/none", timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"prism did not start: {log.read_text(errors='replace')[-2000:]}"
                    ) from None
                time.sleep(0.2)
        yield proxy
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
