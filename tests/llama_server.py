"""llama.cpp's server serving the Gemma 3 270M file, both built once per machine by ``.ci/llama-server``
into a cache outside the clone (``KNOWWHEN_LLAMA_CACHE``, default ``~/.cache``): started the same way for
the read-out test and its benchmark, with the settings that make its log-probabilities repeatable
(no context checkpoints; the callers send ``cache_prompt: false``).

The test's server computes on one thread: beside the rest of a parallel suite, two threads that wait for
each other at every step of a matrix product took two to three times as long as one (9.5 s against 23 to
30 s for the same three prompts with the machine's two cores busy). The benchmark gives it two."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from knowwhen_runner.serve.process import free_port

__all__ = ["CACHE", "MODEL", "SERVER", "llama_server"]

CACHE = Path(os.environ.get("KNOWWHEN_LLAMA_CACHE") or Path.home() / ".cache")
SERVER = CACHE / "llama-build" / "bin" / "llama-server"
MODEL = CACHE / "gemma-3-270m-q4_k_m.gguf"


@contextmanager
def llama_server(threads: int = 1, wait_s: float = 120) -> Iterator[str]:
    """The server on a free loopback port, computing on ``threads``, up (its base URL, without /v1);
    stopped afterwards."""
    port = free_port()
    # fmt: off
    process = subprocess.Popen(
        [str(SERVER), "-m", str(MODEL), "--alias", "gemma-3-270m", "--host", "127.0.0.1",
         "--port", str(port), "-c", "4096", "-t", str(threads), "-np", "1", "--ctx-checkpoints", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # fmt: on
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None:
                raise RuntimeError("llama-server exited at start")
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server was not up within {wait_s:.0f} s")
            time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=20)
