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


def test_jobs_done_lately_are_found_by_the_index_of_done_jobs_by_time(tmp_path: Path, monkeypatch) -> None:
    """The sums of jobs done lately (a tally's, added to its kept sums) and the pace's count of them walk
    the index of done jobs by time from where they start, never every done job of the run (SQLite would
    rather take the tally index, which covers them, without being told)."""
    from sqlalchemy import event

    from knowwhen_runner.queue import tallies

    monkeypatch.setattr(tallies, "_KEEP_FROM", 0)
    monkeypatch.setattr(tallies, "_REFRESH_S", 0.0)  # the second tally adds to the kept sums (a range)
    queue = open_queue(f"sqlite:///{tmp_path / 'q.db'}", "r")
    jobs = [
        Job(id=f"j{i:04d}", model_id="m", mode="model", scenario_id="s", item=f"q{i}") for i in range(300)
    ]
    anyio.run(queue.enqueue, jobs, {})
    claimed = anyio.run(queue.claim, "w", 200, 30.0)
    anyio.run(queue.complete, "w", [(j.id, {"cost_usd": 0.5}) for j in claimed])
    seen: list[tuple[str, object]] = []
    event.listen(queue._engine, "before_cursor_execute", lambda *a: seen.append((a[2], a[3])))  # type: ignore[attr-defined]
    anyio.run(queue.model_tallies)
    anyio.run(queue.model_tallies)
    anyio.run(queue.done_lately, 300.0)
    anyio.run(queue.close)
    conn = sqlite3.connect(tmp_path / "q.db")
    by_time = [(sql, params) for sql, params in seen if sql.startswith("SELECT") and "updated_at >" in sql]
    assert len(by_time) >= 3, seen
    for sql, params in by_time:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]  # type: ignore[arg-type]
        assert any("kw_jobs_done_at" in step and "updated_at>" in step for step in plan), (sql, plan)
    conn.close()
