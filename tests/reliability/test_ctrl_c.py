"""Ctrl-C stops a run within a few seconds, loses nothing, and the next run resumes."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, rated_lexical, read_answers, write_config

pytestmark = pytest.mark.slow


@pytest.mark.journey("signal.stopping", "run.interrupted")
def test_ctrl_c_stops_quickly_and_resume_completes(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """SIGINT mid-run: exit within seconds with code 130, saying to rerun, every finished call recorded, no
    job left leased; the same command, run again, finishes the run."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=16)  # 72 questions
    models = rated_lexical(server.base_url, 600, 4)
    cfg = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while server.count() < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    asked = time.monotonic()
    out, err = proc.communicate(timeout=30)
    stopped_in = time.monotonic() - asked
    tally["kills survived"] += 1
    assert proc.returncode == 130, err
    assert stopped_in < 10.0  # "within a few seconds"; generous, the machine may be busy
    assert "Traceback" not in err
    assert "stopping — finishing the calls in flight (Ctrl-C again to cancel them); rerun to resume" in err
    assert "interrupted: run the same command again to resume" in out
    calls = server.count()
    with sqlite3.connect(tmp_path / "out" / "knowwhen.db") as conn:
        status = dict(conn.execute("SELECT status, count(*) FROM kw_jobs GROUP BY status").fetchall())
    assert "running" not in status  # unstarted jobs were released, not left to a lease
    assert status.get("done", 0) >= calls - 4  # every answered call was recorded (up to those in flight)
    again = knowwhen("run", str(cfg), "-q")
    assert again.returncode == 0, again.stderr
    rows = read_answers(tmp_path / "out" / "qs" / "answers_lexical.jsonl.gz")
    assert len(rows) == 72
    assert server.count() <= 72 + 4
