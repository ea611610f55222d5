"""A resume that changes nothing works the queue as it stands; a changed config or scenario plans again."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from knowwhen_runner.config import load_config
from knowwhen_runner.plan.stamp import plan_stamp
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow


def _plans(out: Path) -> dict:
    with sqlite3.connect(out / "knowwhen.db") as conn:
        (meta,) = conn.execute("SELECT meta FROM kw_runs").fetchone()
    return json.loads(meta)["plans"]


def _scramble_keeping_size_and_mtime(path: Path) -> None:
    st = path.stat()
    path.write_bytes(b"\0" * st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_an_unchanged_run_is_not_planned_again_and_a_touched_scenario_is(
    server: ServerProcess, tmp_path: Path
) -> None:
    """The second run does not read the scenario (its bytes are garbage, unseen); touching the file does."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    first = knowwhen("run", str(config), "-q", "--no-finalize")
    assert first.returncode == 0, first.stderr
    assert len(_plans(tmp_path / "out")) == 1
    calls = server.count()

    questions = scenario / "questions.jsonl.gz"
    _scramble_keeping_size_and_mtime(questions)
    again = knowwhen("run", str(config), "-q", "--no-finalize")
    assert again.returncode == 0, again.stderr
    assert "jobs planned (0 new)" in again.stdout and server.count() == calls
    assert len(_plans(tmp_path / "out")) == 1

    os.utime(questions)  # now the file looks changed: the run reads it, and says what is wrong with it
    touched = knowwhen("run", str(config), "-q", "--no-finalize")
    assert touched.returncode == 2
    assert "questions.jsonl.gz" in touched.stderr and "Traceback" not in touched.stderr


def test_more_questions_are_planned_and_answered(server: ServerProcess, tmp_path: Path) -> None:
    """Rewriting the scenario with more tasks adds their jobs, and only theirs are called."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    assert knowwhen("run", str(config), "-q", "--no-finalize").returncode == 0
    before = server.count()
    make_question_set(tmp_path / "qs", n_tasks=6)
    grown = knowwhen("run", str(config), "-q", "--no-finalize")
    assert grown.returncode == 0, grown.stderr
    added = int(grown.stdout.split("jobs planned (")[1].split(" new")[0])
    assert added > 0 and server.count() - before == added
    assert len(_plans(tmp_path / "out")) == 2


def test_plan_only_enqueues_and_a_later_run_works_that_plan(server: ServerProcess, tmp_path: Path) -> None:
    """``run --plan-only`` makes no call and leaves the jobs pending; the next run answers them all."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=3)
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    planned = knowwhen("run", str(config), "-q", "--plan-only")
    assert planned.returncode == 0, planned.stderr
    assert server.count() == 0 and "queue: pending" in planned.stdout
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stderr
    assert "jobs planned (0 new)" in done.stdout and "queue: done" in done.stdout
    assert (tmp_path / "out" / "table.md").is_file()


def test_the_stamp_follows_what_a_plan_is_made_from(tmp_path: Path, monkeypatch) -> None:
    """Config (after ${VAR}), fitted thresholds, scenario files and the eval opt-in each change the stamp."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=2)
    path = write_config(tmp_path / "c.yaml", "${MODEL_BASE}", scenario)
    monkeypatch.setenv("MODEL_BASE", "http://127.0.0.1:9")
    base = plan_stamp(load_config(path), None)
    assert plan_stamp(load_config(path), None) == base
    assert plan_stamp(load_config(path), {"prior": {"tau": 0.5}}) != base
    monkeypatch.setenv("MODEL_BASE", "http://127.0.0.1:10")
    assert plan_stamp(load_config(path), None) != base
    monkeypatch.setenv("MODEL_BASE", "http://127.0.0.1:9")
    monkeypatch.setenv("KNOWWHEN_EVAL_RUNS", "1")
    assert plan_stamp(load_config(path), None) != base
    monkeypatch.delenv("KNOWWHEN_EVAL_RUNS")
    (scenario / "notes.txt").write_text("a new file in the folder")
    assert plan_stamp(load_config(path), None) != base
