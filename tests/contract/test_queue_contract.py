"""One contract for every queue backend: memory, SQLite and PostgreSQL behave the same."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import Failure, Queue, open_queue
from tests.pg import temporary_database


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with temporary_database() as url:
        yield url


_counter = iter(range(1_000_000))


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def make_queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator:
    opened: list[Queue] = []

    def make(run: str = "r") -> Queue:
        if request.param == "memory":
            if opened:
                return opened[0]
            q = open_queue("memory://", run)
        elif request.param == "sqlite":
            q = open_queue(f"sqlite:///{tmp_path / 'q.db'}", run)
        else:
            url = request.getfixturevalue("pg_url")
            q = open_queue(url, f"{run}{next(_counter)}" if run == "r" else run)
        opened.append(q)
        return q

    yield make
    for q in opened:
        anyio.run(q.close)


def _jobs(n: int, model: str = "m") -> list[Job]:
    return [
        Job(id=f"{model}-{i:04d}", model_id=model, mode="model", scenario_id="s", item=f"q{i}")
        for i in range(n)
    ]


def run(fn, *args):
    return anyio.run(fn, *args)


def test_enqueue_is_idempotent(make_queue) -> None:
    """Enqueuing the same jobs twice adds them once (planning again is the resume)."""
    q = make_queue()
    assert run(q.enqueue, _jobs(5), {("s", "q0"): {"x": 1}}) == 5
    assert run(q.enqueue, _jobs(7), {("s", "q0"): {"x": 2}}) == 2
    assert run(q.items) == {("s", "q0"): {"x": 1}}


def test_claims_are_exclusive_and_batched(make_queue) -> None:
    """Two workers never hold the same job; a claim returns at most n jobs."""
    q = make_queue()
    run(q.enqueue, _jobs(10), {})
    a = run(q.claim, "a", 4, 30.0)
    b = run(q.claim, "b", 100, 30.0)
    assert len(a) == 4 and len(b) == 6
    assert not {j.id for j in a} & {j.id for j in b}
    assert run(q.claim, "c", 10, 30.0) == []
    assert all(j.attempts == 1 for j in a + b)


def test_claim_skips_excluded_models(make_queue) -> None:
    """A worker can leave a busy model's jobs for later."""
    q = make_queue()
    run(q.enqueue, _jobs(3, "m") + _jobs(3, "n"), {})
    got = run(q.claim, "a", 10, 30.0, frozenset({"m"}))
    assert {j.model_id for j in got} == {"n"}


def test_expired_lease_returns_job(make_queue) -> None:
    """A killed worker's jobs are claimable again once its lease expires, and not before."""
    q = make_queue()
    run(q.enqueue, _jobs(2), {})
    assert len(run(q.claim, "dead", 2, 0.5)) == 2
    assert run(q.claim, "live", 2, 30.0) == []
    time.sleep(0.7)
    again = run(q.claim, "live", 2, 30.0)
    assert len(again) == 2 and all(j.attempts == 2 for j in again)


def test_heartbeat_extends_lease(make_queue) -> None:
    """A heartbeat keeps a slow job's lease alive."""
    q = make_queue()
    run(q.enqueue, _jobs(1), {})
    run(q.claim, "a", 1, 0.6)
    time.sleep(0.3)
    assert run(q.heartbeat, "a", 5.0) == 1
    time.sleep(0.5)
    assert run(q.claim, "b", 1, 5.0) == []


def test_completion_is_idempotent(make_queue) -> None:
    """The first recorded result wins; a late duplicate from an expired lease is ignored."""
    q = make_queue()
    run(q.enqueue, _jobs(1), {})
    job = run(q.claim, "a", 1, 30.0)[0]
    assert run(q.complete, "a", [(job.id, {"answer": "first"})]) == 1
    assert run(q.complete, "b", [(job.id, {"answer": "second"})]) == 0
    results = run(q.results)
    assert [(r[1], r[2]) for r in results] == [("done", {"answer": "first"})]


def test_failures_keep_every_attempt(make_queue) -> None:
    """A retryable failure returns the job; a final one fails it; every attempt's error is kept."""
    q = make_queue()
    run(q.enqueue, _jobs(1), {})
    job = run(q.claim, "a", 1, 30.0)[0]
    run(q.fail, "a", [Failure(job.id, "HTTP 500", kind="retry")])
    job = run(q.claim, "a", 1, 30.0)[0]
    assert job.attempts == 2
    run(q.fail, "a", [Failure(job.id, "HTTP 400", kind="fatal", final=True)])
    assert run(q.claim, "a", 1, 30.0) == []
    errors = run(q.attempt_errors, job.id)
    assert [e["error"] for e in errors] == ["HTTP 500", "HTTP 400"]
    assert [e["attempt"] for e in errors] == [1, 2]
    assert run(q.requeue_failed) == 1
    assert len(run(q.claim, "a", 1, 30.0)) == 1


def test_release_returns_unstarted_jobs(make_queue) -> None:
    """Jobs released on Ctrl-C are pending again and their claim is not counted as an attempt."""
    q = make_queue()
    run(q.enqueue, _jobs(2), {})
    jobs = run(q.claim, "a", 2, 30.0)
    assert run(q.release, "a", [jobs[0].id]) == 1
    again = run(q.claim, "b", 2, 30.0)
    assert [j.id for j in again] == [jobs[0].id] and again[0].attempts == 1


def test_counts_by_model_mode_scenario_status(make_queue) -> None:
    """Counts group by model, mode, scenario and status."""
    q = make_queue()
    run(q.enqueue, _jobs(3, "m") + _jobs(1, "n"), {})
    job = run(q.claim, "a", 1, 30.0)[0]
    run(q.complete, "a", [(job.id, {})])
    got = {(c.model_id, c.status): c.n for c in run(q.counts)}
    assert got == {("m", "done"): 1, ("m", "pending"): 2, ("n", "pending"): 1}


def test_cache_roundtrip_and_overwrite(make_queue) -> None:
    """The cache returns what was put, and a refresh overwrites it."""
    q = make_queue()
    run(q.cache_put, [("k1", "m", {"a": 1}), ("k2", "m", {"a": 2})])
    run(q.cache_put, [("k1", "m", {"a": 3})])
    assert run(q.cache_get, ["k1", "k2", "k3"]) == {"k1": {"a": 3}, "k2": {"a": 2}}


def test_runs_are_isolated(make_queue, request) -> None:
    """Two runs in one database never see each other's jobs."""
    if "memory" in request.node.name:
        pytest.skip("the memory backend holds one run")
    a = make_queue("run-a")
    b = make_queue("run-b")
    run(a.enqueue, _jobs(2), {})
    assert run(b.claim, "w", 10, 30.0) == []
    assert len(run(a.claim, "w", 10, 30.0)) == 2
