"""A config's ``serve:`` uses only the run's own server: any other program on its port (an HTTP server
that passes for ours, a ``knowwhen serve`` started by hand, a listener that never answers) is refused in
one sentence naming the port before any model is called, and the run's own server is reused."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from knowwhen_runner.config import load_config
from knowwhen_runner.serve import start_server_process
from knowwhen_runner.serve.process import free_port
from knowwhen_runner.sweep.local_server import server_instance
from tests.helpers import knowwhen, make_question_set, write_config


class _Impostor(BaseHTTPRequestHandler):
    """Answers /health and /v1/models as the local server does (without its instance id), and counts
    every model request it is sent."""

    posts: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        if self.path == "/health":
            body = {"status": "ok"}
        else:
            body = {"data": [{"id": "lexical"}, {"id": "lexical-llm"}]}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        _Impostor.posts.append(self.path)
        self.send_response(500)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def port() -> int:
    return free_port("127.0.0.1")


def _config(tmp_path: Path, port: int) -> Path:
    base = f"http://127.0.0.1:{port}"
    return write_config(
        tmp_path / "c.yaml", base, make_question_set(tmp_path / "qs", n_tasks=2), serve={"port": port}
    )


def _refused(config: Path, port: int) -> None:
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [
        f"error: serve: port {port} on 127.0.0.1 is held by a server this run did not start (another "
        "program, or a knowwhen serve started by hand or by another run); stop it, or set serve.port and the "
        "api_base of the models it serves to a free port"
    ]
    assert not (config.parent / "out" / "answers").exists()


def test_an_http_server_passing_for_ours_is_refused(tmp_path: Path, port: int) -> None:
    """A plain HTTP server on the port answering /health and /v1/models like ours is refused by name and
    port, and is sent no model request."""
    _Impostor.posts = []
    impostor = ThreadingHTTPServer(("127.0.0.1", port), _Impostor)
    thread = threading.Thread(target=impostor.serve_forever, daemon=True)
    thread.start()
    try:
        _refused(_config(tmp_path, port), port)
    finally:
        impostor.shutdown()
        impostor.server_close()
    assert _Impostor.posts == []


@pytest.mark.journey("serve.port_taken")
def test_a_knowwhen_serve_started_by_hand_is_refused(tmp_path: Path, port: int) -> None:
    """A ``knowwhen serve`` on the port that this run did not start (no instance id, or another run's) is
    refused, and answers no model request; with serve.port and the models' api_base on a free port, as the
    sentence says, the run starts its own server there and finishes, sending the other nothing."""
    config = _config(tmp_path, port)
    for instance in (None, "another-run"):
        with start_server_process(port, instance=instance) as other:
            _refused(config, port)
            assert other.count(endpoint="systemone") == other.count(endpoint="chat") == 0
    with start_server_process(port) as other:  # the step the sentence names: the run's server elsewhere
        free = free_port("127.0.0.1")
        text = config.read_text().replace(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{free}")
        config.write_text(text.replace(f"port: {port}", f"port: {free}"))
        done = knowwhen("run", str(config), "-q")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "queue: done 18" in done.stdout
        assert other.count(endpoint="systemone") == other.count(endpoint="chat") == 0


def test_a_listener_that_never_answers_is_refused(tmp_path: Path, port: int) -> None:
    """A program that accepts connections on the port and says nothing is refused, not waited on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        _refused(_config(tmp_path, port), port)


def test_the_runs_own_server_is_reused(tmp_path: Path, port: int) -> None:
    """A server started with the run's instance id (an earlier command of the run left it up) answers the
    run's model calls, and the run starts no other."""
    config = _config(tmp_path, port)
    with start_server_process(port, instance=server_instance(load_config(config))) as own:
        done = knowwhen("run", str(config), "-q")
        assert done.returncode == 0, done.stderr
        assert own.count(endpoint="systemone", status=200) > 0
