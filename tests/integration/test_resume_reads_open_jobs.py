"""A resume follows the work left: it reads the open jobs only, and an unchanged re-plan writes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow  # each test runs knowwhen twice (litellm is imported once)

_GARBAGE = "{not json: a resume that read this result would fail"
_OPEN = 3


def _rows(url: str, sql: str, **params: object) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            found = conn.execute(text(sql), params)
            return [tuple(r) for r in found] if found.returns_rows else []
    finally:
        engine.dispose()


def test_a_resume_with_most_jobs_done_reads_and_calls_only_the_open_ones(
    server: ServerProcess, tmp_path: Path, fresh_db_url: str
) -> None:
    """Every done job's stored result is made unreadable: the resume still works (it never reads them),
    calls the model for the open jobs alone, and leaves the done ones as they were."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, db=fresh_db_url)
    planned = knowwhen("run", str(config), "-q", "--plan-only")
    assert planned.returncode == 0, planned.stderr
    (total,) = _rows(fresh_db_url, "SELECT count(*) FROM kw_jobs")[0]
    _rows(
        fresh_db_url,
        "UPDATE kw_jobs SET status = 'done', result = :g WHERE id NOT IN "
        f"(SELECT id FROM kw_jobs ORDER BY id LIMIT {_OPEN})",
        g=_GARBAGE,
    )
    server.reset_stats()
    resumed = knowwhen("run", str(config), "-q", "--no-finalize")
    assert resumed.returncode == 0, resumed.stderr
    assert total > 4 * _OPEN and server.count() == _OPEN
    kept = _rows(fresh_db_url, "SELECT count(*) FROM kw_jobs WHERE result = :g", g=_GARBAGE)
    assert kept == [(total - _OPEN,)]
    assert _rows(fresh_db_url, "SELECT count(*) FROM kw_jobs WHERE status <> 'done'") == [(0,)]


def test_rerunning_an_unchanged_config_writes_no_job_or_item(server: ServerProcess, tmp_path: Path) -> None:
    """The second plan of the same config is a stamp comparison: the run's jobs and items stay byte for
    byte what they were (no row rewritten, none added) and the scenario is not read again."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)
    url = f"sqlite:///{tmp_path / 'run.db'}"
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, db=url)
    assert knowwhen("run", str(config), "-q", "--plan-only").returncode == 0
    dump = "SELECT * FROM kw_jobs ORDER BY id", "SELECT * FROM kw_items ORDER BY scenario, item"
    before = [_rows(url, sql) for sql in dump]
    questions = scenario / "questions.jsonl.gz"
    st = questions.stat()  # garbage of the same size and time: planning again would fail on it
    questions.write_bytes(b"\0" * st.st_size)
    os.utime(questions, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = knowwhen("run", str(config), "-q", "--plan-only")
    assert again.returncode == 0, again.stderr
    assert "(0 new)" in again.stdout
    assert [_rows(url, sql) for sql in dump] == before and len(before[0]) > 0
