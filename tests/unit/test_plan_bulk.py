"""A first plan's bulk insert (secondary indexes built after the rows, a bigger SQLite page cache) puts the
same rows in the queue as a plan inserted row by row beside other runs' jobs, and a planning process killed
half-way leaves a run that plans again cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy import create_engine, text

from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import open_queue
from tests.helpers import job_indexes

_COLUMNS = "id, model_id, mode, scenario, item, payload, draw, status, attempts, lease_owner, result"


def _grid(n_items: int = 700) -> Iterator[Job]:
    """A small grid of questions and episodes: three models, payloads shared and not, some drawn places."""
    question = {"kind": "question"}
    for m in ("a", "b", "c"):
        for i in range(n_items):
            yield Job(f"{m}{i:05d}q", m, "model", "s", f"i{i}", question, draw=i % 7 if m == "b" else 0)
    for i in range(40):
        yield Job(f"e{i:03d}", "a", "gated", "ep", f"t{i}", {"kind": "episode", "tau": 0.5, "seed": i})


def _rows(url: str, run: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [
                tuple(r)
                for r in conn.execute(
                    text(f"SELECT {_COLUMNS} FROM kw_jobs WHERE run = :r ORDER BY id"), {"r": run}
                )
            ]
    finally:
        engine.dispose()


def _enqueue(url: str, run: str, jobs: Iterator[Job]) -> int:
    queue = open_queue(url, run)

    async def go() -> int:
        try:
            return await queue.enqueue(jobs, {("s", "i0"): {"q": 1}})
        finally:
            await queue.close()

    return anyio.run(go)


def test_a_first_plan_holds_the_rows_and_indexes_of_one_inserted_beside_other_runs(fresh_db_url: str) -> None:
    """The first plan of an empty jobs table (indexes built after) against the same plan inserted where
    another run's jobs keep the indexes in place: the same rows, the same indexes, and a second enqueue
    of the plan adds nothing."""
    assert _enqueue(fresh_db_url, "first", _grid()) == 2140
    indexes = job_indexes(fresh_db_url)
    assert {"kw_jobs_status", "kw_jobs_pending", "kw_jobs_pending_model", "kw_jobs_owner"} <= set(indexes)
    assert _enqueue(fresh_db_url, "beside", _grid()) == 2140  # the table holds jobs: indexes kept as they are
    assert job_indexes(fresh_db_url) == indexes
    first = _rows(fresh_db_url, "first")
    assert len(first) == 2140
    assert first == _rows(fresh_db_url, "beside")
    assert [r[0] for r in first] == sorted(j.id for j in _grid())
    assert first[0][5] == '{"kind":"question"}' and first[0][6:9] == (0, "pending", 0)
    assert _enqueue(fresh_db_url, "first", _grid()) == 0


_KILLED_MID_PLAN = """
import os, signal, sys
import anyio
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import open_queue
from tests.helpers import job_indexes

def jobs():
    for i in range(120_000):
        if i == 60_000:  # half the plan handed to the database (a batch of it inserted): killed
            os.kill(os.getpid(), signal.SIGKILL)
        yield Job(f"{i:06d}", "a", "model", "s", f"i{i}", {"kind": "question"})

queue = open_queue(sys.argv[1], "killed")
anyio.run(queue.enqueue, jobs(), {})
"""


def test_a_plan_killed_half_way_leaves_a_run_that_plans_again(fresh_db_url: str) -> None:
    """A process killed while it inserts a first plan (its indexes dropped for the while) leaves no job
    and every index in place; planning again puts the whole plan in."""
    _enqueue(fresh_db_url, "other", iter(()))  # the tables made, with no job: the plan below is a first
    before = job_indexes(fresh_db_url)
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_PLAN, fresh_db_url], capture_output=True, text=True
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert _rows(fresh_db_url, "killed") == []
    assert job_indexes(fresh_db_url) == before
    if fresh_db_url.startswith("sqlite"):
        engine = create_engine(fresh_db_url)
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"
        engine.dispose()
    jobs = (Job(f"{i:06d}", "a", "model", "s", f"i{i}", {"kind": "question"}) for i in range(120_000))
    assert _enqueue(fresh_db_url, "killed", jobs) == 120_000
    assert job_indexes(fresh_db_url) == before
    assert len(_rows(fresh_db_url, "killed")) == 120_000


def test_the_plan_page_cache_is_given_back(tmp_path: Path) -> None:
    """The bigger page cache is the plan's alone: the connection the pool hands out next has its own."""
    queue = open_queue(f"sqlite:///{tmp_path / 'q.db'}", "r")

    def cache_size() -> int:
        with queue._engine.connect() as conn:  # type: ignore[attr-defined]
            return int(conn.exec_driver_sql("PRAGMA cache_size").scalar())

    async def go() -> tuple[int, int]:
        try:
            await queue.enqueue(iter(()), {})
            before = cache_size()
            await queue.enqueue(_grid(10), {})
            return before, cache_size()
        finally:
            await queue.close()

    before, after = anyio.run(go)
    assert after == before and abs(before) < 100_000


def test_the_indexes_a_plan_leaves_in_place_are_those_no_planned_job_enters() -> None:
    """A first plan builds every secondary index of the jobs table again after its rows, except the partial
    indexes no planned (pending, unleased) job has an entry in: those are kept, and every such index is."""
    from knowwhen_runner.queue import schema
    from knowwhen_runner.queue.first_plan.bulk import _NO_PLANNED_JOB

    no_pending_entry = set()
    for index in schema.jobs.indexes:
        where = index.dialect_options["sqlite"]["where"]
        if where is not None and "pending" not in str(where):
            no_pending_entry.add(index.name)
    assert no_pending_entry == _NO_PLANNED_JOB
