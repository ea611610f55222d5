"""Against the real local server: extra tool calls are kept and counted; a worker holds no slow job it
cannot start soon, so other workers find work."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set

pytestmark = pytest.mark.slow


def _write(tmp_path: Path, base: str, scenarios: list[dict[str, Any]], **workers: Any) -> Path:
    config = {
        "name": "t",
        "output": str(tmp_path / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": base},
            {"id": "agent", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base}/v1"},
        ],
        "modes": ["llm"],
        "scenarios": scenarios,
        "workers": {"concurrency": 4, "lease_seconds": 10, **workers},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _episodes(n: int) -> dict[str, Any]:
    return {"id": "eps", "kind": "episodes", "agent": "agent", "suite": "common", "split": "fit", "n": n}


def test_extra_tool_calls_are_kept_and_counted_the_first_acted_on(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Replies with two tool calls: episodes act on the first and record the other; answer rows list it."""
    server.set_faults([{"fault": "extra_tool_call", "endpoint": "chat"}])
    qs = make_question_set(tmp_path / "qs", n_tasks=2)
    cfg = _write(tmp_path, server.base_url, [{"id": "qs", "path": str(qs)}, _episodes(2)])
    done = knowwhen("run", str(cfg), "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    with gzip.open(tmp_path / "out" / "qs" / "answers_agent.jsonl.gz", "rt") as fh:
        rows = [json.loads(line) for line in fh]
    assert rows and all(
        r["valid"] and r["extra_choices"] and r["extra_choices"][0] != r["answer"] for r in rows
    )
    with sqlite3.connect(tmp_path / "out" / "knowwhen.db") as conn:
        results = [
            json.loads(r) for (r,) in conn.execute("SELECT result FROM kw_jobs WHERE scenario = 'eps'")
        ]
    for result in results:
        assert result["extra_tool_calls"] == result["steps"] > 0
        acted = [s["tool"] for s in result["trajectory"]]
        assert all(e["calls"][0]["name"] != acted[e["step"]] for e in result["extra_calls"])


def test_a_worker_with_concurrency_one_leases_one_episode_at_a_time(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Slow episodes, concurrency 1: never more than one job is leased, the rest stay claimable."""
    server.set_faults([{"fault": "slow", "delay_s": 0.2, "endpoint": "chat"}])
    cfg = _write(tmp_path, server.base_url, [_episodes(4)], concurrency=1, batch_size=8)
    run = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    db = tmp_path / "out" / "knowwhen.db"
    leased: list[int] = []
    try:
        while run.poll() is None:
            try:
                with sqlite3.connect(db, timeout=1) as conn:
                    (n,) = conn.execute("SELECT count(*) FROM kw_jobs WHERE status = 'running'").fetchone()
                    leased.append(n)
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0, out + err
    # One episode runs at a time; for a moment a finished one can still be leased while the recorder
    # writes it (tens of ms) and the next one starts. Before claims were sized, all 4 were leased at once.
    assert max(leased) <= 2 and leased.count(1) > 10 * leased.count(2)
