"""SQLite query plans the queue's speed depends on: a batch of results finds each job by its key."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import orjson
import pytest

from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import engine as sql_engine
from knowwhen_runner.queue import open_queue
from knowwhen_runner.queue import outcomes as sql_outcomes


@pytest.mark.skipif(
    not sql_engine._SQLITE_BULK, reason="this SQLite has no UPDATE ... FROM or JSON functions"
)
def test_a_batch_of_results_is_matched_by_primary_key(tmp_path: Path) -> None:
    """The one-statement completion walks the batch and looks each job up, never the run's jobs."""
    url = f"sqlite:///{tmp_path / 'q.db'}"
    queue = open_queue(url, "r")
    jobs = [
        Job(id=f"j{i:05d}", model_id="m", mode="model", scenario_id="s", item=f"q{i}") for i in range(2000)
    ]
    anyio.run(queue.enqueue, jobs, {})
    anyio.run(queue.close)
    conn = sqlite3.connect(tmp_path / "q.db")
    batch = orjson.dumps([[f"j{i:05d}", "{}", 0.0, 0, 0] for i in range(0, 64, 2)]).decode()
    plan = [
        row[3]
        for row in conn.execute(f"EXPLAIN QUERY PLAN {sql_outcomes._SQLITE_COMPLETE}", (0.0, batch, "r"))
    ]
    assert any(step.startswith("SCAN json_each") for step in plan), plan
    assert any("kw_jobs USING INDEX" in step and "id=?" in step for step in plan), plan
    assert not any("kw_jobs_status" in step or step.startswith("SCAN kw_jobs") for step in plan), plan
    changed = conn.execute(sql_outcomes._SQLITE_COMPLETE, (0.0, batch, "r")).rowcount
    assert changed == 32
    conn.close()
