"""A re-plan follows what changed: an unchanged config writes nothing, a changed one plans only its cells.

Planned in-process through the run's stages into a real SQLite file and a real PostgreSQL database; the
jobs each plan hands the queue are counted as the queue reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from sqlalchemy import create_engine, text

from knowwhen_runner.config import SweepConfig, load_config
from knowwhen_runner.queue import open_queue
from knowwhen_runner.sweep.stages import Stages
from tests.helpers import make_question_set, write_config


def _model(model_id: str, variant: int) -> dict[str, Any]:
    return {
        "id": model_id,
        "model": "hosted_vllm/lexical",
        "kind": "decision",
        "api_base": "http://127.0.0.1:9",
        "params": {"variant": variant},
    }


def _config(tmp_path: Path, url: str, model_ids: list[str], variants: list[int] | None = None) -> SweepConfig:
    scenario = tmp_path / "qs"
    if not scenario.is_dir():
        make_question_set(scenario, n_tasks=3)
    models = [_model(m, v) for m, v in zip(model_ids, variants or range(len(model_ids)), strict=True)]
    return load_config(
        write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", scenario, models=models, db=url)
    )


def _plan(config: SweepConfig) -> tuple[list[int], int]:
    """Plan ``config`` into its database as a new process would; the jobs each enqueue read, and how
    many of them were new."""
    read: list[int] = []

    async def go() -> int:
        async with open_queue(config.db_url, config.name) as queue:
            real = queue.enqueue

            async def counting(jobs: Any, items: Any, **kw: Any) -> int:
                read.append(sum(1 for _ in jobs))
                return await real(jobs, items, **kw)

            queue.enqueue = counting  # type: ignore[method-assign]
            info = await queue.init_run("config", {})
            stages = Stages(config, queue, info["meta"], cache=None, work=False)
            await stages.plan(None)
            return stages.added

    return read, anyio.run(go)


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            found = conn.execute(text(sql))
            return [tuple(r) for r in found] if found.returns_rows else []
    finally:
        engine.dispose()


def _jobs(url: str, model_id: str | None = None) -> list[tuple[Any, ...]]:
    where = f" WHERE model_id = '{model_id}'" if model_id else ""
    return _rows(url, f"SELECT id, model_id, status, result, updated_at FROM kw_jobs{where} ORDER BY id")


def _finish_all(url: str) -> None:
    _rows(url, "UPDATE kw_jobs SET status = 'done', result = '{\"choice\": \"x\"}'")


def test_an_unchanged_config_hands_the_queue_nothing_and_writes_nothing(
    tmp_path: Path, fresh_db_url: str
) -> None:
    """The second plan of the same config gives the queue no job and leaves every table as it was."""
    config = _config(tmp_path, fresh_db_url, ["a", "b"])
    first, added = _plan(config)
    assert first == [added] and added > 0
    dump = [
        "SELECT * FROM kw_jobs ORDER BY id",
        "SELECT * FROM kw_items ORDER BY item",
        "SELECT * FROM kw_runs",
    ]
    before = [_rows(fresh_db_url, sql) for sql in dump]
    again, added_again = _plan(config)
    assert again == [] and added_again == 0
    assert [_rows(fresh_db_url, sql) for sql in dump] == before


def test_a_model_added_plans_only_its_own_cell(tmp_path: Path, fresh_db_url: str) -> None:
    """Adding a model hands the queue its jobs alone; the other model's finished jobs stay untouched."""
    _plan(_config(tmp_path, fresh_db_url, ["a"]))
    _finish_all(fresh_db_url)
    kept = _jobs(fresh_db_url, "a")
    read, added = _plan(_config(tmp_path, fresh_db_url, ["a", "b"]))
    assert read == [len(kept)] and added == len(kept)
    assert _jobs(fresh_db_url, "a") == kept
    assert {row[2] for row in _jobs(fresh_db_url, "b")} == {"pending"}


def test_a_model_removed_sets_aside_only_its_jobs_and_they_come_back(
    tmp_path: Path, fresh_db_url: str
) -> None:
    """Removing a model sets aside its jobs (no job is made); adding it again brings them back, results kept."""
    _plan(_config(tmp_path, fresh_db_url, ["a", "b"]))
    _finish_all(fresh_db_url)
    a, b = _jobs(fresh_db_url, "a"), _jobs(fresh_db_url, "b")
    read, added = _plan(_config(tmp_path, fresh_db_url, ["a"]))
    assert read == [0] and added == 0
    assert _jobs(fresh_db_url, "a") == a
    assert {row[2] for row in _jobs(fresh_db_url, "b")} == {"aside:done"}
    read, added = _plan(_config(tmp_path, fresh_db_url, ["a", "b"]))
    assert read == [len(b)] and added == 0
    assert _jobs(fresh_db_url, "b") == b and _jobs(fresh_db_url, "a") == a


def test_a_model_whose_params_change_replans_its_cell_alone(tmp_path: Path, fresh_db_url: str) -> None:
    """New params give the model new job ids: its old jobs are set aside, the other model's stay as they were."""
    _plan(_config(tmp_path, fresh_db_url, ["a", "b"]))
    _finish_all(fresh_db_url)
    a, b = _jobs(fresh_db_url, "a"), _jobs(fresh_db_url, "b")
    read, added = _plan(_config(tmp_path, fresh_db_url, ["a", "b"], variants=[0, 7]))
    assert read == [len(b)] and added == len(b)
    assert _jobs(fresh_db_url, "a") == a
    statuses = sorted(row[2] for row in _jobs(fresh_db_url, "b"))
    assert statuses == ["aside:done"] * len(b) + ["pending"] * len(b)


def test_a_scenario_file_rewritten_replans_every_cell_of_it(tmp_path: Path) -> None:
    """More questions in the file: every model's cell of that scenario is planned again, and only the new
    questions' jobs are added."""
    url = f"sqlite:///{tmp_path / 'run.db'}"
    config = _config(tmp_path, url, ["a", "b"])
    _, first = _plan(config)
    make_question_set(tmp_path / "qs", n_tasks=5)
    read, added = _plan(_config(tmp_path, url, ["a", "b"]))
    assert len(read) == 1 and read[0] > first and added == read[0] - first
