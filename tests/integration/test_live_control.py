"""`knowwhen pause`/`resume` on a run worked by two processes on PostgreSQL: every worker stops calling
the paused model within seconds, its jobs stay pending, and after `resume` the run finishes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config
from tests.pg import temporary_database

pytestmark = pytest.mark.slow


@pytest.fixture
def pg() -> Iterator[str]:
    with temporary_database() as url:
        yield url


def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_pause_and_resume_across_two_processes(server: ServerProcess, pg: str, tmp_path: Path) -> None:
    """Paused mid-run, a model gets no request from either process after a few seconds (status shows it
    paused, without an ETA, beside the working model's ETA); resumed, it finishes."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=20)  # 90 questions
    slow = {"requests_per_minute": 300, "max_in_flight": 2}  # 5 a second, shared by the fleet
    models = [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": server.base_url,
            "rate_limit": slow,
        },
        {
            "id": "prior",
            "model": "hosted_vllm/prior",
            "kind": "decision",
            "api_base": server.base_url,
            "rate_limit": slow,
        },
    ]
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    out = str(tmp_path / "out")
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(config), "-q", "--db", pg, "--processes", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: server.count(model="lexical") >= 5)
        paused = knowwhen("pause", out, "lexical", "--db", pg, "--run", "t")
        assert paused.returncode == 0 and "paused lexical" in paused.stdout, paused.stdout + paused.stderr
        time.sleep(4.0)  # workers read the controls every 2 s; calls in flight finish
        before = server.count(model="lexical")
        time.sleep(4.0)
        assert server.count(model="lexical") == before < 90  # nothing more, from either process
        status = knowwhen("status", out, "--db", pg, "--run", "t")
        assert "paused lexical" in " ".join(status.stdout.split())
        live = json.loads(knowwhen("status", out, "--db", pg, "--run", "t", "--json").stdout)["models"]
        assert live["lexical"]["eta_s"] is None  # paused: no ETA
        assert live["prior"]["pending"] == 0 or live["prior"]["eta_s"] > 0  # still working: an ETA
        resumed = knowwhen("resume", out, "lexical", "--db", pg, "--run", "t")
        assert resumed.returncode == 0 and "resumed lexical" in resumed.stdout
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode == 3:  # the other model finished first: the run ended with lexical paused
        assert "paused" in stdout
        proc_again = knowwhen("run", str(config), "-q", "--db", pg)
        assert proc_again.returncode == 0, proc_again.stdout + proc_again.stderr
    else:
        assert proc.returncode == 0, stdout + stderr
    assert server.count(model="lexical") == 90 and server.count(model="prior") == 90
