"""Many workers on one run: real worker processes, the real local server and a real PostgreSQL database."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import ProgrammingError

from knowwhen_runner.queue import open_queue
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, write_config
from tests.pg import temporary_database

pytestmark = pytest.mark.slow

MODELS = ("lexical", "lexical-llm")


@pytest.fixture
def pg() -> Iterator[str]:
    with temporary_database() as url:
        yield url


@pytest.fixture(scope="module")
def questions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_question_set(tmp_path_factory.mktemp("fleet") / "qs", n_tasks=20)  # 90 questions


@pytest.fixture(scope="module")
def reference(serve: ServerProcess, questions: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Answers of a single process on its own SQLite file: what every fleet must reproduce."""
    serve.reset()
    folder = tmp_path_factory.mktemp("reference")
    config = write_config(folder / "c.yaml", serve.base_url, questions)
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stderr
    return {m: read_answers(folder / "out" / "qs" / f"answers_{m}.jsonl.gz") for m in MODELS}


def _answers(output: Path) -> dict:
    return {m: read_answers(output / "qs" / f"answers_{m}.jsonl.gz") for m in MODELS}


def _rated(base_url: str, rpm: int) -> list[dict[str, Any]]:
    rate = {"requests_per_minute": rpm}
    return [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": base_url,
            "rate_limit": rate,
        },
        {
            "id": "lexical-llm",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": f"{base_url}/v1",
            "rate_limit": rate,
        },
    ]


def _db(url: str, run: str = "t") -> dict[str, Any]:
    """Jobs and workers of a run, read through the queue."""

    async def read() -> dict[str, Any]:
        queue = open_queue(url, run)
        try:
            return {"results": await queue.results(), "workers": await queue.workers()}
        finally:
            await queue.close()

    return anyio.run(read)


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


@pytest.mark.postgres
def test_four_processes_do_every_job_exactly_once(
    reference: dict, server: ServerProcess, pg: str, questions: Path, tmp_path: Path
) -> None:
    """run --processes 4 on PostgreSQL: each of 180 jobs is answered once, as one process would; all four
    processes join, share the rate-limited models and stop. The four start claiming together (the planner
    waits for the workers it spawned), so each gets a share of the models' pace: at least a quarter of an
    even one, which a process that alone worked the first seconds (while the others still imported
    litellm) would deny the others."""
    config = write_config(
        tmp_path / "c.yaml",
        server.base_url,
        questions,
        models=_rated(server.base_url, 900),  # ~12 s of work: every process joins in
        workers={"concurrency": 8, "lease_seconds": 10, "batch_size": 4},
    )
    done = knowwhen("run", str(config), "-q", "--processes", "4", "--db", pg)
    assert done.returncode == 0, done.stderr
    assert server.count() == 180 and server.count(status=200) == 180
    db = _db(pg)
    assert [status for _job, status, _r, _e in db["results"]] == ["done"] * 180
    assert all(job.attempts == 1 for job, *_ in db["results"])
    workers = db["workers"]
    assert len(workers) == 4 and all(w["stopped_at"] for w in workers)
    assert sum(w["jobs_done"] for w in workers) == 180
    assert min(w["jobs_done"] for w in workers) >= 180 // 4 // 4, [w["jobs_done"] for w in workers]
    assert _answers(tmp_path / "out") == reference


@pytest.mark.postgres
def test_a_killed_workers_jobs_are_finished_by_the_others(
    reference: dict, server: ServerProcess, pg: str, questions: Path, tmp_path: Path
) -> None:
    """kill -9 one of three joined workers: its leased jobs come back after the lease and the others finish them."""
    config = write_config(
        tmp_path / "c.yaml",
        server.base_url,
        questions,
        models=_rated(server.base_url, 1200),
        workers={"concurrency": 4, "lease_seconds": 10, "batch_size": 4},
    )
    # No pre-flight probe: a job whose question it answered is a cache hit, recorded within milliseconds,
    # possibly between reading the victim's leases and killing it (leases are what this test is about).
    # Each answer takes half a second, so the main process alone would need about 20 s: on a loaded
    # machine the workers, fresh interpreters, may take that long to start, and must find work left. The
    # lease (10 s) is long enough that a live worker's heartbeat renews it under load, so only the
    # killed worker's jobs are asked twice.
    server.set_faults([{"fault": "slow", "delay_s": 0.5}])
    main = _spawn("run", str(config), "-q", "--db", pg, "--no-probe")
    workers = [_spawn("worker", "--db", pg, "--run", "t", "-q", "--wait", "60") for _ in range(3)]
    victim = workers[0]
    _wait_for_leases(pg, victim.pid)
    # Frozen first, then read: what it holds at the kill, with the expiries its last heartbeat wrote (a
    # job read as held while it ran could otherwise be finished by the victim before the kill lands).
    victim.send_signal(signal.SIGSTOP)
    time.sleep(0.5)  # a statement it sent before it froze is committed or rolled back by then
    held = _leases(pg, victim.pid)  # job id -> lease expiry (database clock)
    victim.send_signal(signal.SIGKILL)
    assert held, "the frozen worker held no job"
    for proc in [main, *workers[1:]]:
        assert proc.wait(timeout=180) == 0, proc.stderr.read().decode() if proc.stderr else ""
    victim.wait()
    jobs = {r[0]: r[1:] for r in _sql(pg, "SELECT id, status, attempts, updated_at FROM kw_jobs")}
    assert len(jobs) == 180 and {status for status, _a, _u in jobs.values()} == {"done"}
    for job_id, lease_expires in held.items():
        _status, attempts, finished_at = jobs[job_id]
        assert attempts >= 2 and finished_at >= lease_expires  # leased again only once the lease ran out
    assert server.count() <= 180 + len(held)  # only calls in flight at the kill may repeat
    assert _answers(tmp_path / "out") == reference
    status = knowwhen("status", str(tmp_path / "out"), "--db", pg, "--run", "t")
    assert status.returncode == 0, status.stderr
    assert "jobs/s" in status.stdout and status.stdout.count("stopped") == 3  # not the killed one


def _wait_for_leases(pg: str, pid: int, timeout: float = 120.0) -> dict[str, float]:
    """The jobs a worker process holds and their lease expiries, once it holds some mid-run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            (done,) = _sql(pg, "SELECT count(*) FROM kw_jobs WHERE status = 'done'")
        except ProgrammingError:
            continue  # the run's tables are not created yet
        held = _leases(pg, pid)
        if done[0] >= 20 and held:
            return held
    raise AssertionError("the worker never held a job mid-run")


def _leases(pg: str, pid: int) -> dict[str, float]:
    """The running jobs a worker process holds, with their lease expiries."""
    held = _sql(
        pg,
        "SELECT j.id, j.lease_expires FROM kw_jobs j JOIN kw_workers w ON j.lease_owner = w.id "
        f"WHERE j.status = 'running' AND w.pid = {pid}",
    )
    return {job_id: expires for job_id, expires in held}


def _sql(pg: str, query: str) -> list[Any]:
    engine = create_engine(pg)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(query)).fetchall())
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_requests_per_minute_hold_across_four_processes(
    server: ServerProcess, pg: str, tmp_path: Path
) -> None:
    """240 requests/min over 4 processes: no 10 s window at the server sees more than 41, and the rate is reached."""
    qs = make_question_set(tmp_path / "qs", n_tasks=23)  # 103 questions
    server.set_rpm_limits({"lexical": 240})  # the server refuses the 241st request of any minute
    models = _rated(server.base_url, 240)[:1]
    config = write_config(
        tmp_path / "c.yaml", server.base_url, qs, models=models, workers={"concurrency": 8, "batch_size": 4}
    )
    # No pre-flight probe: its request would come seconds before the fleet starts and stretch the span the
    # rate is measured over (the rate limits are what this test is about).
    done = knowwhen("run", str(config), "-q", "--processes", "4", "--db", pg, "--no-probe")
    assert done.returncode == 0, done.stderr
    times = sorted(r[0] for r in server.stats()["records"] if r[1] == "lexical")
    assert len(times) == 103 and server.count(status=429) == 0
    busiest = max(sum(1 for t in times if start <= t < start + 10) for start in times)
    assert busiest <= 240 // 6 + 1
    per_minute = (len(times) - 1) / (times[-1] - times[0]) * 60
    assert per_minute >= 0.9 * 240
    assert sum(1 for w in _db(pg)["workers"] if w["jobs_done"]) >= 2


@pytest.mark.postgres
def test_a_second_run_on_the_same_database_is_answered_from_the_shared_cache(
    reference: dict, server: ServerProcess, pg: str, questions: Path, tmp_path: Path
) -> None:
    """A run under a fresh name on the same PostgreSQL, by two processes, makes zero model calls."""
    first = write_config(tmp_path / "a" / "c.yaml", server.base_url, questions, name="a")
    assert knowwhen("run", str(first), "-q", "--db", pg).returncode == 0
    calls = server.count()
    assert calls == 180
    second = write_config(tmp_path / "b" / "c.yaml", server.base_url, questions, name="b")
    done = knowwhen("run", str(second), "-q", "--db", pg, "--processes", "2")
    assert done.returncode == 0, done.stderr
    assert server.count() == calls
    assert _answers(tmp_path / "b" / "out") == reference


def test_processes_share_a_sqlite_file(
    reference: dict, server: ServerProcess, questions: Path, tmp_path: Path
) -> None:
    """run --processes 2 on the default SQLite file: each job once, the single process's answers."""
    config = write_config(
        tmp_path / "c.yaml", server.base_url, questions, models=_rated(server.base_url, 1200)
    )
    done = knowwhen("run", str(config), "-q", "--processes", "2")
    assert done.returncode == 0, done.stderr
    assert server.count() == 180
    assert _answers(tmp_path / "out") == reference


def test_a_worker_joining_after_the_config_grew_works_the_new_model(
    server: ServerProcess, questions: Path, tmp_path: Path
) -> None:
    """A model added to the config, rerun with --processes 2: the joining worker reads the new config."""
    lexical = {
        "id": "lexical",
        "model": "hosted_vllm/lexical",
        "kind": "decision",
        "api_base": server.base_url,
    }
    config = write_config(tmp_path / "c.yaml", server.base_url, questions, models=[lexical])
    first = knowwhen("run", str(config), "-q", "--no-finalize")
    assert first.returncode == 0, first.stderr
    llm = {
        "id": "lexical-llm",
        "model": "openai/lexical-llm",
        "kind": "llm",
        "api_base": f"{server.base_url}/v1",
    }
    small = {"concurrency": 2, "batch_size": 2, "lease_seconds": 10}  # so that both processes get jobs
    write_config(tmp_path / "c.yaml", server.base_url, questions, models=[lexical, llm], workers=small)
    # Slow answers, so the first process cannot finish the 90 jobs before the joining one has started
    # (about 20 s of work at concurrency 2: a joining process may take several seconds to import on a busy machine).
    server.set_faults([{"fault": "slow", "delay_s": 0.4}])
    grown = knowwhen("run", str(config), "-q", "--processes", "2")
    server.clear_faults()
    assert grown.returncode == 0, grown.stderr
    assert "queue: done 180" in grown.stdout, grown.stdout
    with create_engine(f"sqlite:///{tmp_path / 'out' / 'knowwhen.db'}").connect() as conn:
        done = [r[0] for r in conn.execute(text("SELECT jobs_done FROM kw_workers ORDER BY started_at"))]
    assert len(done) == 3 and done[0] == 90 and all(n > 0 for n in done[1:]), done
