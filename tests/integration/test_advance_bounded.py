"""A later stage hands its workers the items of the work left, never the whole run's: a run whose many
questions are done gets back the gated episodes' tasks alone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio

from knowwhen_runner.config import load_config
from knowwhen_runner.jobs import Items
from knowwhen_runner.queue import open_queue
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.sweep.advance import advance_stages
from tests.helpers import knowwhen, make_question_set
from tests.integration.test_episodes import _models, _tasks, _write


def test_a_released_stage_brings_the_open_jobs_items_alone(server: ServerProcess, tmp_path: Path) -> None:
    """400 tasks' questions done, the shadow fit done by a worker: with the gated episodes open again,
    ``advance_stages`` returns their 8 tasks' items, while the run holds hundreds more."""
    scenarios = [
        {"id": "qs", "path": str(make_question_set(tmp_path / "qs", n_tasks=400))},
        _tasks("fit", "fit", 6, modes=[]),
        _tasks("ev", "bench", 8, tau={"fit": "fit", "target": "llm"}),
    ]
    path = _write(
        tmp_path / "run", _models(server.base_url, "oracle-test-double"), scenarios, ["llm", "gated"]
    )
    planned = knowwhen("run", str(path), "-q", "--plan-only")
    assert planned.returncode == 0, planned.stderr
    db = tmp_path / "run" / "out" / "knowwhen.db"
    with sqlite3.connect(db) as conn:  # the questions answered: what is left is the closed loop
        conn.execute("UPDATE kw_jobs SET status = 'done', result = '{}' WHERE scenario = 'qs'")
    worked = knowwhen("worker", "--db", f"sqlite:///{db}", "-q", "--no-finalize")
    assert worked.returncode == 0, worked.stderr
    with sqlite3.connect(db) as conn:
        (gated,) = conn.execute(
            "SELECT count(*) FROM kw_jobs WHERE mode = 'gated' AND status = 'done'"
        ).fetchone()
        conn.execute("UPDATE kw_jobs SET status = 'pending', result = NULL WHERE mode = 'gated'")
    assert gated == 8

    async def go() -> tuple[Items | None, int]:
        queue = open_queue(f"sqlite:///{db}", "l3")
        try:
            released = await advance_stages(load_config(path), queue, "w")
            return released, len(await queue.items())
        finally:
            await queue.close()

    released, held = anyio.run(go)
    assert released is not None
    assert {scenario for scenario, _task in released} == {"ev"}
    assert len(released) == 8
    assert held > 400 * 2
