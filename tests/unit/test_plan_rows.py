"""A plan's grid gives the queue its jobs as rows (no ``Job`` made for each question; a large grid's rows
made in a child process while the rows before them are inserted): the same rows as its jobs inserted one
by one, on SQLite and PostgreSQL; a child that stops early fails the plan and leaves no job; a planning
process killed mid-plan leaves no job, every index in place, and no child behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from sqlalchemy import create_engine, text

from knowwhen_runner.config import parse_config
from knowwhen_runner.exceptions import KnowwhenError
from knowwhen_runner.jobs import CellRows, Job
from knowwhen_runner.plan import Grid, expand
from knowwhen_runner.plan import rows as plan_rows
from knowwhen_runner.queue import open_queue
from knowwhen_runner.scenarios import load_scenario
from tests.helpers import job_indexes

ROOT = Path(__file__).resolve().parents[2]
_COLUMNS = "id, model_id, mode, scenario, item, payload, draw, status, attempts, lease_owner, result"


def _grid() -> Grid:
    """The quickstart with its common states screened: questions (drawn places and not) and episodes."""
    text_ = (ROOT / "configs" / "quickstart.yaml").read_text()
    config = parse_config(
        f"{text_}\nscreen: {{scenario: common, keep: {{top: 1}}}}\n", base=ROOT / "configs", source="q.yaml"
    )
    return expand(config, {s.id: load_scenario(s) for s in config.scenarios})


def _rows(url: str, run: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            sql = text(f"SELECT {_COLUMNS} FROM kw_jobs WHERE run = :r ORDER BY id")
            return [tuple(r) for r in conn.execute(sql, {"r": run})]
    finally:
        engine.dispose()


def _enqueue(url: str, run: str, jobs: Any) -> int:
    queue = open_queue(url, run)

    async def go() -> int:
        try:
            return await queue.enqueue(jobs, {})
        finally:
            await queue.close()

    return anyio.run(go)


def test_the_rows_of_a_grid_made_in_a_child_or_here_are_those_of_its_jobs(
    fresh_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grid's rows from the child (a first plan: indexes built after) and made here, against its
    ``Job``s inserted one by one beside them: the same rows, drawn places and episodes included."""
    grid = _grid()
    jobs = list(grid.jobs())
    started: list[int] = []
    popen = subprocess.Popen

    def spy(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        child = popen(*args, **kwargs)
        started.append(child.pid)
        return child

    monkeypatch.setattr(plan_rows.subprocess, "Popen", spy)
    monkeypatch.setattr(plan_rows, "PARALLEL_FROM", 0)
    assert _enqueue(fresh_db_url, "child", grid) == len(jobs)
    assert len(started) == 1
    monkeypatch.setattr(plan_rows, "PARALLEL_FROM", 10**9)
    assert _enqueue(fresh_db_url, "here", grid) == len(jobs)
    assert _enqueue(fresh_db_url, "jobs", jobs) == len(jobs)
    assert len(started) == 1
    child, here, one_by_one = (_rows(fresh_db_url, run) for run in ("child", "here", "jobs"))
    assert child == one_by_one and here == one_by_one
    assert len(one_by_one) == len(jobs) == len({j.id for j in jobs})
    assert {j.kind for j in jobs} == {"question", "episode"} and any(j.draw for j in jobs)
    assert _enqueue(fresh_db_url, "child", grid) == 0


def test_a_child_that_stops_early_fails_the_plan_and_leaves_no_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that sends part of a batch and exits: the plan raises and its transaction leaves nothing;
    planned again, the whole grid goes in."""
    url, grid = f"sqlite:///{tmp_path / 'q.db'}", _grid()
    monkeypatch.setattr(plan_rows, "PARALLEL_FROM", 0)
    monkeypatch.setattr(
        plan_rows,
        "_CHILD",
        "import sys; sys.stdin.buffer.read(); sys.stdout.buffer.write(bytes(4) + bytes([5, 0, 0, 0]) + b'0' * 40)",
    )
    with pytest.raises(KnowwhenError, match="stopped"):
        _enqueue(url, "r", grid)
    assert _rows(url, "r") == []
    monkeypatch.undo()
    monkeypatch.setattr(plan_rows, "PARALLEL_FROM", 0)
    assert _enqueue(url, "r", grid) == len(list(grid.jobs()))


_KILLED_MID_PLAN = """
import os, signal, subprocess, sys
import anyio
from pathlib import Path
from knowwhen_runner.jobs import CellRows
from knowwhen_runner.plan import rows
from knowwhen_runner.queue import open_queue, runs
sys.path.insert(0, sys.argv[3])
from tests.unit.test_plan_rows import _grid

rows.PARALLEL_FROM = 0
popen = subprocess.Popen

def spy(*args, **kwargs):
    child = popen(*args, **kwargs)
    Path(sys.argv[2]).write_text(str(child.pid))
    return child

subprocess.Popen = spy
insert = runs.RunTables._insert_jobs

def killed(self, conn, batch):
    added = insert(self, conn, batch)
    if isinstance(batch, CellRows):  # a batch of the child's inserted, the child still at work: killed
        os.kill(os.getpid(), signal.SIGKILL)
    return added

runs.RunTables._insert_jobs = killed
grid = _grid()
queue = open_queue(sys.argv[1], "killed")
anyio.run(queue.enqueue, grid, {})
"""


def _gone(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    try:
        return "\nState:\tZ" in status.read_text()  # a zombie has stopped (its reaper may be slow)
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_plan_killed_while_its_child_makes_rows_leaves_no_job_and_no_child(
    fresh_db_url: str, tmp_path: Path
) -> None:
    """The planning process killed after a batch of the child's rows: no job, the indexes as before, and
    the child ends (it cannot write to a process that is gone)."""
    _enqueue(fresh_db_url, "other", iter(()))  # the tables made, with no job: the plan below is a first
    before = job_indexes(fresh_db_url)
    pid_file = tmp_path / "child.pid"
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_PLAN, fresh_db_url, str(pid_file), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert _rows(fresh_db_url, "killed") == []
    assert job_indexes(fresh_db_url) == before
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 20
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(child)


class _Cells:
    """Jobs given as batches of one cell's rows (``CellRows``), as a grid gives them."""

    def __init__(self, *batches: CellRows) -> None:
        self.batches = batches

    def row_batches(self, run: str, size: int) -> Iterator[CellRows]:
        for batch in self.batches:
            yield batch._replace(shared=(run, *batch.shared[1:]))


def test_a_cell_s_shared_columns_written_into_sqlite_s_statement_are_stored_as_bound_ones(
    tmp_path: Path,
) -> None:
    """Quotes in a cell's shared columns, and a NUL (no literal holds it: bound instead), store the same
    values as the jobs' rows bound one by one."""
    url = f"sqlite:///{tmp_path / 'q.db'}"
    quoted = CellRows(
        ("", "o'brien", "model", "s'; --", '{"kind":"question","x":"\'"}'), ["a1", "b2"], ["i'1", "i2"], None
    )
    nul = CellRows(("", "m\x00", "model", "s", "{}"), ["c3", "d4"], ["i3", "i4"], [5, -2])
    assert _enqueue(url, "cells", _Cells(quoted, nul)) == 4
    jobs = [
        Job(i, model_id, mode, scenario, item, orjson.loads(payload), draw=draw)
        for (_run, i, model_id, mode, scenario, item, payload, draw) in quoted.rows() + nul.rows()
    ]
    assert _enqueue(url, "jobs", jobs) == 4
    assert _rows(url, "cells") == _rows(url, "jobs")
    assert [r[1] for r in _rows(url, "cells")] == ["o'brien", "o'brien", "m\x00", "m\x00"]
