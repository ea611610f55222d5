"""A model that always fails is set aside for the run (its jobs pending, the others finished, the exit
code and `status` saying why and how to go on); a model that fails sometimes is not. Requests are
counted at the local server."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config
from tests.pg import temporary_database

pytestmark = pytest.mark.slow

LIMIT = 12  # workers.quarantine_failures' default
IN_FLIGHT = 4  # workers.concurrency: requests already sent when the model is set aside


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The `--db` arguments of a run on a SQLite file (none) or on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield []
        return
    with temporary_database() as url:
        yield ["--db", url]


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return " ".join((done.stdout + done.stderr).split())


def _counts(tmp_path: Path, db: list[str]) -> dict[tuple[str, str], int]:
    status = knowwhen("status", str(tmp_path / "out"), *db, "--run", "t", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    return {
        (model, state): row[state]
        for model, row in report["models"].items()
        for state in ("done", "pending", "failed")
        if row[state]
    }


def test_an_always_500_model_is_set_aside_within_its_limit_and_the_others_finish(
    server: ServerProcess, tmp_path: Path, db: list[str], tally: Counter[str]
) -> None:
    """Every request of lexical-llm a 500: at most 12 (+ in flight) reach it, lexical finishes, exit 3 and
    `status` name the quarantine; the server fixed, the same command finishes it (on SQLite: the rerun is
    the same on both)."""
    server.set_faults([{"fault": "500", "model": "lexical-llm"}])
    scenario = make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, workers={"concurrency": IN_FLIGHT})
    first = knowwhen("run", str(config), "-q", "--no-probe", *db)
    tally["faults injected"] += server.count(model="lexical-llm")
    assert first.returncode == 3, first.stdout + first.stderr
    said = _said(first)
    assert "quarantined lexical-llm" in said and "HTTP 500" in said and "run the same command again" in said
    assert LIMIT <= server.count(model="lexical-llm") <= LIMIT + IN_FLIGHT
    assert server.count(model="lexical") == 45
    assert _counts(tmp_path, db) == {("lexical", "done"): 45, ("lexical-llm", "pending"): 45}
    status = knowwhen("status", str(tmp_path / "out"), *db, "--run", "t")
    assert "quarantined lexical-llm" in _said(status) and "all failed" in _said(status)

    if db:
        return
    server.clear_faults()
    server.reset_stats()
    fixed = knowwhen("run", str(config), "-q", *db)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert _counts(tmp_path, db) == {("lexical", "done"): 45, ("lexical-llm", "done"): 45}


def test_a_model_failing_a_third_of_its_requests_is_not_set_aside(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """A 500 on a third of lexical-llm's requests (seeded): retries answer every job, exit 0, no quarantine."""
    server.set_faults([{"fault": "500", "model": "lexical-llm", "probability": 0.33, "seed": 7}])
    scenario = make_question_set(tmp_path / "qs", n_tasks=8)  # 36 questions
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, workers={"concurrency": 8})
    done = knowwhen("run", str(config), "-q")
    failed = server.count(model="lexical-llm", status=500)
    tally["faults injected"] += failed
    assert done.returncode == 0, done.stdout + done.stderr
    assert "quarantined" not in _said(done)
    assert failed >= LIMIT  # more failures than the limit, but never that many in a row
    assert _counts(tmp_path, []) == {("lexical", "done"): 36, ("lexical-llm", "done"): 36}


def _episodes_config(path: Path, base_url: str) -> Path:
    config = {
        "name": "t",
        "output": str(path.parent / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": base_url},
            {"id": "agent-sim", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base_url}/v1"},
        ],
        "modes": ["llm", "model", "shadow"],
        "scenarios": [
            {
                "id": "l3",
                "kind": "episodes",
                "agent": "agent-sim",
                "suite": "common",
                "split": "bench",
                "n": 6,
            },
        ],
        "workers": {"concurrency": IN_FLIGHT},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_an_always_500_agent_sets_its_episodes_aside_in_a_few_requests(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """Closed loop: the pre-flight says no-go after 6 failed requests; without it, an agent LLM that answers
    500 costs at most 12 (+ in flight) requests for 18 episodes, not 30 an episode; the agent is
    quarantined (not the decision model) and every episode stays pending."""
    server.set_faults([{"fault": "500", "model": "agent-sim"}])
    config = _episodes_config(tmp_path / "c.yaml", server.base_url)
    probed = knowwhen("run", str(config), "-q")
    assert probed.returncode == 2, probed.stdout + probed.stderr
    assert "pre-flight: agent-sim cannot go: it answered all 6 requests of its probe" in _said(probed)
    assert server.count(model="agent-sim") == 6
    server.reset_stats()
    done = knowwhen("run", str(config), "-q", "--no-probe")
    tally["faults injected"] += server.count(model="agent-sim")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "quarantined agent-sim" in _said(done) and "quarantined prior" not in _said(done)
    assert server.count(model="agent-sim") <= LIMIT + IN_FLIGHT
    with sqlite3.connect(tmp_path / "out" / "knowwhen.db") as conn:
        rows = conn.execute("SELECT status, count(*), max(attempts) FROM kw_jobs GROUP BY status").fetchall()
    assert [(status, n) for status, n, _ in rows] == [("pending", 18)]


def test_two_processes_set_an_always_500_agent_aside_and_both_end(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """PostgreSQL, 2 processes: each sets the agent aside within its limit, and neither waits for the
    episodes the other holds parked: the run ends (exit 3) with all 18 episodes pending."""
    server.set_faults([{"fault": "500", "model": "agent-sim"}])
    config = _episodes_config(tmp_path / "c.yaml", server.base_url)
    with temporary_database() as url:
        done = knowwhen("run", str(config), "-q", "--no-probe", "--db", url, "--processes", "2", timeout=120)
        tally["faults injected"] += server.count(model="agent-sim")
        assert done.returncode == 3, done.stdout + done.stderr
        assert "quarantined agent-sim" in _said(done)
        assert server.count(model="agent-sim") <= 2 * (LIMIT + IN_FLIGHT)
        assert _counts(tmp_path, ["--db", url]) == {("agent-sim", "pending"): 6, ("prior", "pending"): 12}
