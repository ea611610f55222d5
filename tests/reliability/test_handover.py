"""Preemption is cheap: a SIGTERMed worker hands its jobs back at once; a vanished one's are taken back
as soon as its heartbeat is stale, not after its whole lease.

Real ``knowwhen worker`` processes on a run planned into a throwaway PostgreSQL database (on the shared
server, which is never restarted here), against the real local model server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from knowwhen_runner.exceptions import EXIT_REQUEUE
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, rated_lexical, write_config
from tests.pg import temporary_database

pytestmark = pytest.mark.postgres

QUESTIONS = 72  # make_question_set(n_tasks=16)


def _plan(tmp_path: Path, server: ServerProcess, url: str, lease_s: float) -> None:
    scenario = make_question_set(tmp_path / "qs", n_tasks=16)
    models = rated_lexical(server.base_url, 240, 4)
    cfg = write_config(
        tmp_path / "c.yaml", server.base_url, scenario, models=models,
        workers={"concurrency": 4, "batch_size": 8, "lease_seconds": lease_s},
    )  # fmt: skip
    planned = knowwhen("run", str(cfg), "--db", url, "--plan-only", "-q")
    assert planned.returncode == 0, planned.stderr


def _worker(url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "worker", "--quiet", "--no-finalize"],
        env={**os.environ, "KNOWWHEN_DB": url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _held_by(url: str, pid: int) -> int:
    """Jobs leased (running) by the worker process ``pid``."""
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        row = conn.execute(
            "SELECT count(*) FROM kw_jobs WHERE status = 'running' AND lease_owner LIKE %s", (f"%:{pid}:%",)
        ).fetchone()
    return int(row[0]) if row else 0


def _statuses(url: str) -> dict[str, int]:
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM kw_jobs GROUP BY status").fetchall())


def _wait_until_working(server: ServerProcess, proc: subprocess.Popen[str], url: str) -> None:
    deadline = time.monotonic() + 120
    while (server.count() < 10 or not _held_by(url, proc.pid)) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.05)


@pytest.mark.journey("signal.handover", "worker.interrupted")
def test_sigterm_hands_the_jobs_back_and_exits_for_requeue(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """SIGTERM mid-run: the worker exits within the grace period with the requeue exit code, holds no
    job afterwards, no traceback; a second worker then finishes the run with nothing failed."""
    with temporary_database() as url:
        _plan(tmp_path, server, url, lease_s=300)
        first = _worker(url)
        _wait_until_working(server, first, url)
        first.send_signal(signal.SIGTERM)
        asked = time.monotonic()
        out, err = first.communicate(timeout=60)
        took = time.monotonic() - asked
        tally["sigterm hand-overs"] += 1
        assert first.returncode == EXIT_REQUEUE, err
        assert took < 30  # within Slurm's KillWait; generous, the machine may be busy
        assert "Traceback" not in err
        assert f"exit code {EXIT_REQUEUE} (may be requeued)" in err and "SIGTERM — handing over" in err
        assert "interrupted: its unfinished jobs are back in the queue for the other workers" in out
        assert _held_by(url, first.pid) == 0  # nothing left to a 300 s lease
        assert "running" not in _statuses(url)
        second = _worker(url)
        _out, err = second.communicate(timeout=300)
        assert second.returncode == 0, err
        status = _statuses(url)
    assert status == {"done": QUESTIONS}
    tally["results lost"] += QUESTIONS - status.get("done", 0)


def test_a_killed_workers_jobs_are_taken_back_once_its_heartbeat_is_stale(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """kill -9 of a worker holding jobs under a 600 s lease: another worker takes them back after the
    stale heartbeat and finishes the run (long before the lease could have expired), nothing failed."""
    with temporary_database() as url:
        _plan(tmp_path, server, url, lease_s=600)
        victim = _worker(url)
        _wait_until_working(server, victim, url)
        victim.kill()
        victim.communicate(timeout=30)
        held = _held_by(url, victim.pid)
        assert held > 0  # it died holding leased jobs
        tally["kills survived"] += 1
        started = time.monotonic()
        other = _worker(url)
        _out, err = other.communicate(timeout=300)
        assert other.returncode == 0, err
        assert time.monotonic() - started < 600  # only the heartbeat rule can have freed them
        assert _held_by(url, victim.pid) == 0
        status = _statuses(url)
    assert status == {"done": QUESTIONS}
    tally["stale workers taken over"] += 1
    tally["results lost"] += QUESTIONS - status.get("done", 0)
