"""A headless Chromium driven from the command line: the DOM after the page's scripts ran, or a screenshot.

``--virtual-time-budget`` lets the page run its fetches and timers before the DOM is dumped, so a
view that renders from the viewer's JSON endpoints is read as a user would see it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def _run(binary: str, args: list[str], url: str, budget_ms: int) -> str:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            *args,
            url,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


OFFLINE = ["--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"]
"""Flags that leave the browser no network: every request goes to a closed port, no name resolves."""


def dump_dom(
    binary: str, url: str, *, budget_ms: int = 3000, offline: bool = False, size: str | None = None
) -> str:
    """The page's DOM once its scripts have run for ``budget_ms`` of virtual time (``size``: the window's
    "width,height" in CSS pixels, for layout read by the page's scripts)."""
    window = [f"--window-size={size}"] if size else []
    return _run(binary, ["--dump-dom", *window, *(OFFLINE if offline else [])], url, budget_ms)


def screenshot(binary: str, url: str, path: Path, *, size: str = "1100,700", budget_ms: int = 3000) -> None:
    _run(binary, ["--hide-scrollbars", f"--window-size={size}", f"--screenshot={path}"], url, budget_ms)


def data_n(dom: str, element_id: str) -> int:
    """The ``data-n`` number of the element with ``element_id`` (the views put their counts there)."""
    found = re.search(rf'id="{element_id}"[^>]*data-n="(\d+)"', dom)
    assert found, f"no #{element_id} with a count in the page"
    return int(found.group(1))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def viewer(python: str, run_dir: Path, *extra: str) -> Iterator[str]:
    """``knowwhen view RUN_DIR`` in a subprocess on a free loopback port; yields its base URL."""
    port = free_port()
    log = run_dir.parent / f"view-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [python, "-m", "knowwhen_runner", "view", str(run_dir), "--port", str(port), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ},
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/live", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the viewer did not come up"
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
