"""Two ``run`` processes on one SQLite run share the work: every job recorded once, no lock errors."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import make_question_set, rated_lexical, read_answers, write_config

pytestmark = pytest.mark.slow


def test_two_runs_on_one_file_share_the_work(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """Both processes finish cleanly; each question is answered once and the server asked once per question."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=20)  # 90 questions
    models = rated_lexical(server.base_url, 1800, 4)
    cfg = write_config(
        tmp_path / "c.yaml",
        server.base_url,
        scenario,
        models=models,
        workers={"concurrency": 4, "batch_size": 8},
    )
    cmd = [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in err and "Traceback" not in err
    with sqlite3.connect(tmp_path / "out" / "knowwhen.db") as conn:
        statuses = dict(conn.execute("SELECT status, count(*) FROM kw_jobs GROUP BY status").fetchall())
        workers = conn.execute("SELECT jobs_done FROM kw_workers").fetchall()
    assert statuses == {"done": 90}
    assert sum(w[0] for w in workers) == 90  # recorded exactly once between them
    rows = read_answers(tmp_path / "out" / "qs" / "answers_lexical.jsonl.gz")
    assert len(rows) == 90 and len({r["qhash"] for r in rows}) == 90
    assert server.count() <= 90 + 4  # a call is repeated only if its lease is stolen mid-flight
