"""A request that keeps a reference model searching for seconds holds up nothing else: the oracle test
double meeting a state from no task replays thousands of tasks, off the server's event loop, and a stop
signal ends the server without waiting for that search."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time

import httpx

STRANGER = {
    "model": "oracle-test-double",
    "state": "TASK: a request no DecisionGym task makes\nHISTORY:\n",
    "questions": {"q": {"type": "choice", "criteria": {"a": "A.", "b": None}}},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_long_search_leaves_health_answered_and_a_stop_signal_obeyed() -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            try:
                httpx.get(f"{url}/health", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        ended: list[BaseException | int] = []

        def ask() -> None:
            try:
                ended.append(httpx.post(f"{url}/v1/systemone", json=STRANGER, timeout=600).status_code)
            except httpx.HTTPError as exc:
                ended.append(exc)

        search = threading.Thread(target=ask, daemon=True)
        search.start()
        time.sleep(0.5)  # the search is under way (it replays thousands of tasks: seconds)
        assert httpx.get(f"{url}/health", timeout=60).status_code == 200
        assert search.is_alive(), "the search ended before health was asked: nothing was proved"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        # The server ended while the search's request was still unanswered: it did not wait it out.
        search.join(timeout=60)
        assert ended and isinstance(ended[0], httpx.HTTPError), ended
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
