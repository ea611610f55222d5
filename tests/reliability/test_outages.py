"""A model that goes down is waited for, never failed: outages spend no attempts, and the exit code says
what is left. Jobs that fail while the model is up fail for good and make the run exit non-zero."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess, start_server_process
from knowwhen_runner.serve.process import free_port
from tests.helpers import knowwhen, make_question_set, read_answers, write_config

pytestmark = [pytest.mark.reliability, pytest.mark.slow]


def _config(tmp_path: Path, base_url: str, n_tasks: int = 4, **workers: object) -> Path:
    scenario = make_question_set(tmp_path / "qs", n_tasks=n_tasks)  # 4.5 questions a task
    spec = {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base_url}
    return write_config(
        tmp_path / "c.yaml",
        base_url,
        scenario,
        models=[spec],
        workers={"concurrency": 4, "max_attempts": 2, **workers},
    )


def _said(done: subprocess.CompletedProcess[str]) -> str:
    """What the command printed, with rich's line wrapping undone."""
    return " ".join(done.stdout.split())


def _rows(tmp_path: Path) -> list[dict]:
    return read_answers(tmp_path / "out" / "qs" / "answers_lexical.jsonl.gz", drop_timing=False)


def _db(tmp_path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(tmp_path / "out" / "knowwhen.db") as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.journey("run.stopped_waiting", "run.pending")
def test_a_model_down_for_longer_than_the_run_waits_leaves_its_jobs_pending(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Every request a 503: no job fails or spends an attempt, probes are spaced, exit 3; back up, all answered."""
    server.set_faults([{"fault": "503"}])
    cfg = _config(tmp_path, server.base_url, max_outage_s=4)
    first = knowwhen("run", str(cfg), "-q")
    assert first.returncode == 3, first.stdout + first.stderr
    assert "stopped waiting for lexical: " in _said(first)
    assert "18 jobs are still pending: run the same command again to continue" in _said(first)
    # 8 failures open the breaker; then one probe at a time, 1, 2, 4 s apart: a handful, not hundreds
    assert server.count() <= 8 + 4 + 6
    assert _db(tmp_path, "SELECT status, count(*) FROM kw_jobs GROUP BY status") == [("pending", 18)]
    assert _db(tmp_path, "SELECT max(attempts) FROM kw_jobs") == [(0,)]
    server.clear_faults()
    server.reset_stats()
    second = knowwhen("run", str(cfg), "-q")
    assert second.returncode == 0, second.stdout + second.stderr
    assert server.count() == 18
    rows = _rows(tmp_path)
    assert len(rows) == 18 and all(r["valid"] and r["attempts"] == 1 for r in rows)


def test_a_401_on_every_call_fails_no_job_it_stops_before_spending_or_quarantines(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A 401 on every call: pre-flight stops the run before any job (exit 2); without the probe the model is
    quarantined after the calls in flight (exit 3); no job ever fails, and a plain rerun finishes the run."""
    server.set_faults([{"fault": "401"}])
    cfg = _config(tmp_path, server.base_url)
    first = knowwhen("run", str(cfg), "-q")
    assert first.returncode == 2, first.stdout + first.stderr
    assert "lexical cannot go" in " ".join(first.stderr.split()) and server.count() == 1
    second = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert second.returncode == 3, second.stdout + second.stderr
    assert "quarantined lexical" in _said(second) and "failed 0" in _said(second)
    assert server.count() <= 1 + 4  # the probe, then at most the calls in flight (concurrency 4)
    server.clear_faults()
    server.reset_stats()
    fixed = knowwhen("run", str(cfg), "-q")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert server.count() == 18 and all(r["valid"] and r["attempts"] == 1 for r in _rows(tmp_path))


def test_a_server_that_answers_500_to_everything_is_set_aside_with_the_reason(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A 500 is an answer (a server refusing a request shape), not an outage: the model is set aside (not
    down) by the sequential test, at the pre-flight (no-go after 14 requests) and in the run (14 requests,
    the calls in flight, a probe), and the run stops waiting for it after max_outage_s."""
    server.set_faults([{"fault": "500"}])
    cfg = _config(tmp_path, server.base_url, max_outage_s=8, set_aside_probe_s=3)
    probed = knowwhen("run", str(cfg), "-q")
    assert probed.returncode == 2, probed.stdout + probed.stderr
    assert "lexical cannot go" in probed.stderr and "HTTP 500" in probed.stderr
    assert server.count() == 14  # seven probe calls of two tries: the test sets it aside at the 14th
    server.reset_stats()
    done = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert done.returncode == 3, done.stdout + done.stderr
    said = _said(done) + " ".join(done.stderr.split())
    assert "set aside lexical" in said and "HTTP 500" in said and "is down" not in said
    # 14 failed requests set it aside; at most the calls in flight (4) and three probes (every 3 s) beside
    assert 14 <= server.count() <= 14 + 4 + 3
    assert _db(tmp_path, "SELECT status, count(*) FROM kw_jobs GROUP BY status") == [("pending", 18)]


def test_a_refused_connection_is_named_as_such_not_as_an_http_status(tmp_path: Path) -> None:
    """Nothing listening: the recorded errors say no HTTP response came back, never 'HTTP 500'; the model
    is down (waited for, then given up on), never set aside, neither in the run's words nor in `status`."""
    base = f"http://127.0.0.1:{free_port()}"
    cfg = _config(tmp_path, base, max_outage_s=2)
    done = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no HTTP response (connection refused)" in _said(done)
    assert "HTTP 500" not in _said(done) + done.stderr
    assert "stopped waiting for lexical" in _said(done) and "set aside" not in _said(done) + done.stderr
    status = knowwhen("status", str(tmp_path / "out"), "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["held_back"] == []


def test_a_sweep_waits_out_its_model_server_going_away_and_answers_every_job(tmp_path: Path) -> None:
    """The server is killed mid-run and restarted 12 s later on its port: exit 0, every job answered once."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cfg = _config(tmp_path, base, n_tasks=40, concurrency=2)
    first = start_server_process(port)
    run = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    second: ServerProcess | None = None
    try:
        # Slow the server down so the run is still going when it is killed.
        first.set_faults([{"fault": "slow", "delay_s": 0.05}])
        deadline = time.monotonic() + 60
        while first.count() < 40 and time.monotonic() < deadline:
            time.sleep(0.1)
        first.stop()
        time.sleep(12)
        second = start_server_process(port)
        out, err = run.communicate(timeout=240)
    finally:
        run.kill()
        for process in (first, second):
            if process is not None:
                process.stop()
    assert run.returncode == 0, out + err
    rows = _rows(tmp_path)
    assert len(rows) == 180 and all(r["valid"] for r in rows)
    assert max(r["attempts"] for r in rows) == 1  # the outage spent no attempt
    # The jobs that met the outage went back to the queue: no failed attempt was recorded for any job.
    assert _db(tmp_path, "SELECT count(*) FROM kw_attempts") == [(0,)]
    assert "failed 0," in " ".join(out.split())


def test_episodes_wait_for_their_agent_llm_without_spinning(tmp_path: Path) -> None:
    """The agent's server is killed for 10 s mid-run: every episode ends done, and the waiting episodes are
    not claimed and replayed over and over (cache hits stay near what the episodes really replay)."""
    agent_port, decider = free_port(), start_server_process()
    agent = start_server_process(agent_port)
    config = {
        "name": "eps",
        "output": str(tmp_path / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": decider.base_url},
            {
                "id": "agent",
                "model": "openai/agent-sim",
                "kind": "llm",
                "api_base": f"http://127.0.0.1:{agent_port}/v1",
            },
        ],
        "modes": ["model", "shadow"],
        "scenarios": [
            {"id": "l3", "kind": "episodes", "agent": "agent", "suite": "common", "split": "bench", "n": 12}
        ],
        "workers": {"concurrency": 4},
    }
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    agent.set_faults([{"fault": "slow", "delay_s": 0.1}])
    run = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    restarted: ServerProcess | None = None
    try:
        deadline = time.monotonic() + 90
        while agent.count() < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        agent.stop()
        time.sleep(10)
        restarted = start_server_process(agent_port)
        out, err = run.communicate(timeout=300)
    finally:
        run.kill()
        for server in (decider, restarted):
            if server is not None:
                server.stop()
    assert run.returncode == 0, out + err
    said = " ".join(out.split())
    assert "answered 24 jobs" in said and "went back to the queue to wait" in said
    hits = int(said.split(" answers from the cache")[0].rsplit(" ", 1)[1])
    assert hits < 24 * 15, said  # a replay per wait, not one per claim loop turn (thousands)
