"""The config's notify command and URL hear of a quarantine, of a run ending with work left, and of a
run that finished."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow


@pytest.fixture
def listener() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A loopback HTTP server that keeps the JSON bodies posted to it."""
    posted: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            posted.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", posted
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_notify_command_and_url_hear_quarantine_failure_and_finish(
    server: ServerProcess, tmp_path: Path, listener: tuple[str, list[dict[str, Any]]]
) -> None:
    """A quarantined model sends `quarantine` then `failure` (jobs left); the fixed rerun sends `finish`."""
    url, posted = listener
    log = tmp_path / "events.txt"
    command = f"sh -c 'echo \"$KNOWWHEN_EVENT $KNOWWHEN_RUN $KNOWWHEN_MESSAGE\" >> {log}'"
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)
    config = write_config(
        tmp_path / "c.yaml", server.base_url, scenario, notify={"command": command, "url": url}
    )
    server.set_faults([{"fault": "401", "model": "lexical-llm"}])
    held = knowwhen("run", str(config), "-q", "--no-probe")
    assert held.returncode == 3, held.stdout + held.stderr
    server.clear_faults()
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = log.read_text().splitlines()
    events = [line.split(" ", 1)[0] for line in lines]
    assert events == ["quarantine", "failure", "finish"], lines
    assert "lexical-llm is quarantined" in lines[0] and " t " in lines[0]
    assert "18 pending" in lines[1] and "quarantined lexical-llm" in lines[1]
    assert [p["event"] for p in posted] == ["quarantine", "failure", "finish"]
    assert all(p["run"] == "t" for p in posted) and "36 done" in posted[-1]["message"]
