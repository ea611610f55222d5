"""A run database that goes away mid-run, or is away when a worker starts, is waited out: PostgreSQL
restarted or stopped, SQLite held locked.

Real ``knowwhen run`` processes against the real local model server; the PostgreSQL server restarted
is a private cluster of the test's own (never the shared one).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, rated_lexical, read_answers, write_config
from tests.private_pg import private_cluster

QUESTIONS = 72  # make_question_set(n_tasks=16)


def _config(tmp_path: Path, server: ServerProcess, rpm: int) -> Path:
    scenario = make_question_set(tmp_path / "qs", n_tasks=16)
    models = rated_lexical(server.base_url, rpm, 4)
    return write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)


def _start(cfg: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q", "--no-probe", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_calls(server: ServerProcess, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while server.count() < n and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before the database went away"


def _check_complete(tmp_path: Path, status: dict[str, int], attempts: list[Any]) -> None:
    """Every job done, none failed, each recorded once in the answers file."""
    assert status == {"done": QUESTIONS}
    assert not attempts, attempts  # no attempt failed: the outage never reached a job
    rows = read_answers(tmp_path / "out" / "qs" / "answers_lexical.jsonl.gz")
    assert len(rows) == QUESTIONS
    assert len({row["qhash"] for row in rows}) == QUESTIONS


def test_a_postgresql_restart_mid_run_is_waited_out(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """The private PostgreSQL cluster restarts (its own pg_ctl restart) mid-run: the run says the
    database is away, waits, and ends with exit 0, every job done once, nothing failed, no traceback."""
    cfg = _config(tmp_path, server, rpm=300)
    with private_cluster() as pg:
        proc = _start(cfg, "--db", pg.url)
        _wait_for_calls(server, 15, proc)
        pg.restart()
        tally["database outages waited out"] += 1
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        assert "the run database is unreachable" in err and "is back after" in err  # it met the outage
        with psycopg.connect(pg.url.replace("+psycopg", "")) as conn:
            status = dict(conn.execute("SELECT status, count(*) FROM kw_jobs GROUP BY status").fetchall())
            attempts = conn.execute("SELECT job_id, error FROM kw_attempts").fetchall()
    _check_complete(tmp_path, status, attempts)
    tally["results lost"] += QUESTIONS - status.get("done", 0)


def _wait_for_line(path: Path, line: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while line not in path.read_text() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, path.read_text()


def test_a_worker_started_while_postgresql_is_down_waits_for_it(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """A run planned into the private cluster; the cluster stops; ``knowwhen worker --db URL`` starts
    (as a Slurm array task would while the server restarts) and says it waits; the cluster starts again:
    the worker carries on and exits 0 with every job done once, and no traceback."""
    cfg = _config(tmp_path, server, rpm=6000)
    with private_cluster() as pg:
        planned = knowwhen("run", str(cfg), "-q", "--no-probe", "--plan-only", "--db", pg.url)
        assert planned.returncode == 0, planned.stderr
        pg.stop()
        err_file = tmp_path / "worker.err"
        with err_file.open("w") as err_out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "knowwhen_runner", "worker", "--db", pg.url, "-q"],
                stdout=subprocess.PIPE,
                stderr=err_out,
                text=True,
            )
            _wait_for_line(err_file, "the run database is unreachable", proc)
            time.sleep(1.0)  # still waiting, a while after it said so
            assert proc.poll() is None, err_file.read_text()
            pg.start()
            proc.communicate(timeout=120)
        err = err_file.read_text()
        tally["database outages waited out"] += 1
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        assert "up to 600 s (workers.max_db_outage_s)" in err and "is back after" in err
        with psycopg.connect(pg.url.replace("+psycopg", "")) as conn:
            status = dict(conn.execute("SELECT status, count(*) FROM kw_jobs GROUP BY status").fetchall())
            attempts = conn.execute("SELECT job_id, error FROM kw_attempts").fetchall()
    _check_complete(tmp_path, status, attempts)


_HOLD = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("COMMIT")
    """
)


def test_a_sqlite_database_held_locked_by_another_process_is_waited_out(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """Another process holds the run's SQLite file locked for 4 s mid-run: the run waits for it and
    ends with exit 0, every job done once, nothing failed, no traceback."""
    cfg = _config(tmp_path, server, rpm=300)
    proc = _start(cfg)
    _wait_for_calls(server, 15, proc)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path / "out" / "knowwhen.db"), "4"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    locked_at = server.count()
    holder.wait(timeout=60)
    tally["database outages waited out"] += 1
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert locked_at < QUESTIONS  # the lock was taken while the run still had calls to make
    with sqlite3.connect(tmp_path / "out" / "knowwhen.db") as conn:
        status = dict(conn.execute("SELECT status, count(*) FROM kw_jobs GROUP BY status").fetchall())
        attempts = conn.execute("SELECT job_id, error FROM kw_attempts").fetchall()
    _check_complete(tmp_path, status, attempts)
    tally["results lost"] += QUESTIONS - status.get("done", 0)
