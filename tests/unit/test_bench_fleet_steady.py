"""The processes benchmark's steady phase (benchmarks/bench_fleet.py) on a busy machine: a run that passes
both of its marks between two polls has shown no steady phase, and says so instead of dividing by zero."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from benchmarks.bench_fleet import sample_steady_cpu


def test_a_run_seen_only_after_both_marks_has_no_steady_phase(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE kw_jobs (id INTEGER PRIMARY KEY, status TEXT)")
        conn.executemany("INSERT INTO kw_jobs (status) VALUES ('done')", [()] * 200)
    # Every job already recorded at the first poll, the process still exiting at the second.
    still_exiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        steady = sample_steady_cpu(still_exiting, f"sqlite:///{db}", 200, os.getpid())
    finally:
        still_exiting.kill()
        still_exiting.wait()
    assert steady is None
