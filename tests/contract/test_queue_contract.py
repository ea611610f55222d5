"""One contract for the queue on both engines: SQLite and PostgreSQL behave the same."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import create_engine, inspect, text

from knowwhen_runner.exceptions import SchemaVersionError
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import ClaimQuota, Failure, Queue, open_queue
from knowwhen_runner.queue.schema import SCHEMA_VERSION
from tests.pg import temporary_database


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with temporary_database() as url:
        yield url


_counter = iter(range(1_000_000))


@pytest.fixture(params=["sqlite", "postgresql"])
def make_queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator:
    opened: list[Queue] = []

    def make(run: str = "r") -> Queue:
        if request.param == "sqlite":
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


def test_a_failure_sent_again_is_one_attempt(make_queue) -> None:
    """A failure whose reply was lost (the database went away after the commit) is sent again: the
    attempt is kept once, and the job stays where the first one left it."""
    q = make_queue()
    run(q.enqueue, _jobs(1), {})
    job = run(q.claim, "a", 1, 30.0)[0]
    failure = Failure(job.id, "HTTP 500", kind="retry")
    assert run(q.fail, "a", [failure]) == 1
    assert run(q.fail, "a", [failure]) == 0
    assert [(e["attempt"], e["error"]) for e in run(q.attempt_errors, job.id)] == [(1, "HTTP 500")]
    again = run(q.claim, "b", 1, 30.0)[0]
    run(q.fail, "b", [Failure(job.id, "HTTP 502", kind="retry")])
    assert [(e["attempt"], e["error"]) for e in run(q.attempt_errors, job.id)] == [
        (1, "HTTP 500"),
        (2, "HTTP 502"),
    ]
    assert again.attempts == 2


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


def test_record_writes_results_and_failures_together(make_queue) -> None:
    """One batch: results and failures land together; a job already done is not redone."""
    q = make_queue()
    run(q.enqueue, _jobs(4), {})
    jobs = run(q.claim, "a", 4, 30.0)
    run(q.complete, "a", [(jobs[0].id, {"answer": "early"})])
    response = {"text": 'café "quoted" ✓', "p": [0.1, 1e-300, 2.5], "none": None}
    recorded = run(
        q.record,
        "a",
        [(jobs[0].id, {"answer": "late"}), (jobs[1].id, response), (jobs[2].id, {"answer": 2})],
        [Failure(jobs[3].id, "HTTP 500", kind="retry")],
    )
    assert recorded == 3  # two results and the failure; the late duplicate is ignored
    by_id = {r[0].id: (r[1], r[2]) for r in run(q.results)}
    assert by_id[jobs[0].id] == ("done", {"answer": "early"})
    assert by_id[jobs[1].id] == ("done", response)
    assert by_id[jobs[3].id][0] == "pending"
    assert [e["error"] for e in run(q.attempt_errors, jobs[3].id)] == ["HTTP 500"]
    assert run(q.record, "a", [], []) == 0


def test_a_rerun_records_its_config_and_keeps_the_meta(make_queue) -> None:
    """init_run again: the newest config text (what joining workers read), the first meta, merged updates."""
    q = make_queue()
    first = run(q.init_run, "models: [a]", {"created": "first", "plans": {}})
    again = run(q.init_run, "models: [a, b]", {"created": "second"})
    assert again["config_text"] == "models: [a, b]" and again["meta"]["created"] == "first"
    assert first["name"] == again["name"]
    merged = run(q.update_meta, {"plans": {"s": {"jobs": 3}}})
    assert merged == {"created": "first", "plans": {"s": {"jobs": 3}}}
    assert run(q.run_info)["meta"] == merged


def test_runs_are_isolated(make_queue) -> None:
    """Two runs in one database never see each other's jobs."""
    a = make_queue("run-a")
    b = make_queue("run-b")
    run(a.enqueue, _jobs(2), {})
    assert run(b.claim, "w", 10, 30.0) == []
    assert len(run(a.claim, "w", 10, 30.0)) == 2


def _sql_url(q: Queue) -> str:
    return q.url  # type: ignore[attr-defined]


def _planned_sql_run(make_queue, n_jobs: int) -> tuple[Queue, str, Any]:
    """A run of ``n_jobs`` jobs in an SQL backend: its queue, its URL and an engine on its database."""
    q = make_queue()
    url = _sql_url(q)
    run(q.init_run, "name: r", {})
    run(q.enqueue, _jobs(n_jobs), {})
    return q, url, create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


@pytest.mark.parametrize(("written", "word"), [(99, "newer"), (1, "older")])
def test_database_of_another_schema_version_is_refused(make_queue, written, word) -> None:
    """A database whose kw_meta says another schema version is refused in one line that says what to do."""
    q = make_queue()
    url = _sql_url(q)
    run(q.run_info)  # creates the schema
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    version = text("UPDATE kw_meta SET value = :v WHERE key = 'schema_version'")
    try:
        with engine.begin() as conn:
            conn.execute(version, {"v": str(written)})
        with pytest.raises(SchemaVersionError) as caught:
            run(open_queue(url, "other").run_info)
        message = str(caught.value)
        assert "\n" not in message and word in message and f"version {written}" in message
        assert ("upgrade" if word == "newer" else "another --db") in message
    finally:
        with engine.begin() as conn:
            conn.execute(version, {"v": str(SCHEMA_VERSION)})
        engine.dispose()


def test_failure_after_a_lost_lease_leaves_the_job_to_its_new_holder(make_queue) -> None:
    """A worker whose lease expired cannot fail a job another worker now holds; its attempt is still kept."""
    q = make_queue()
    run(q.enqueue, _jobs(1), {})
    job = run(q.claim, "slow", 1, 0.4)[0]
    time.sleep(0.6)
    assert [j.id for j in run(q.claim, "live", 1, 30.0)] == [job.id]
    assert run(q.fail, "slow", [Failure(job.id, "HTTP 500", kind="retry")]) == 0
    assert run(q.claim, "third", 1, 30.0) == []  # still leased by "live"
    assert run(q.complete, "live", [(job.id, {"answer": "x"})]) == 1
    assert [e["error"] for e in run(q.attempt_errors, job.id)] == ["HTTP 500"]


def test_finalize_marker_is_taken_once_when_finished(make_queue) -> None:
    """Only a finished run can be taken for finalising, by one process; new or re-queued jobs clear it."""
    q = make_queue()
    run(q.init_run, "name: r", {})
    run(q.enqueue, _jobs(1), {})
    assert not run(q.take_finalize, "a")  # a job is still pending
    job = run(q.claim, "a", 1, 30.0)[0]
    run(q.fail, "a", [Failure(job.id, "HTTP 400", kind="fatal", final=True)])
    assert run(q.take_finalize, "a") and not run(q.take_finalize, "b")
    assert run(q.run_info)["finalized_by"] == "a"
    run(q.release_finalize, "b")  # not b's to release
    assert not run(q.take_finalize, "b")
    run(q.release_finalize, "a")
    assert run(q.take_finalize, "b")
    run(q.requeue_failed)
    assert run(q.run_info)["finalized_at"] is None
    job = run(q.claim, "a", 1, 30.0)[0]
    run(q.complete, "a", [(job.id, {})])
    assert run(q.take_finalize, "c")
    run(q.enqueue, _jobs(2), {})
    assert run(q.run_info)["finalized_at"] is None and not run(q.take_finalize, "c")


def _ids(jobs: list[Job]) -> set[str]:
    return {j.id for j in jobs}


def _plan(q: Queue, jobs: list[Job]) -> int:
    """Enqueue ``jobs`` as the run's whole current plan."""
    return run(lambda: q.enqueue(jobs, {}, whole_plan=_ids(jobs)))


def _by_status(q: Queue) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in run(q.counts):
        out[c.status] = out.get(c.status, 0) + c.n
    return out


def test_a_whole_plan_sets_aside_the_jobs_it_no_longer_holds(make_queue) -> None:
    """Jobs outside the current plan are kept but never claimed, completed, returned or waited for."""
    q = make_queue()
    run(q.init_run, "name: r", {})
    run(q.enqueue, _jobs(4), {})
    claimed = run(q.claim, "w", 2, 30.0)  # m-0000 and m-0001
    run(q.complete, "w", [(claimed[0].id, {"answer": "old"})])
    now = _jobs(5)[2:]
    assert _plan(q, now) == 1
    assert _by_status(q) == {"set_aside": 2, "pending": 3}
    assert {j.id for j, *_ in run(q.results)} == _ids(now)
    assert run(q.complete, "w", [(claimed[1].id, {"answer": "late"})]) == 0  # its lease went with it
    taken = run(q.claim, "w", 10, 30.0)
    assert _ids(taken) == _ids(now)
    run(q.complete, "w", [(j.id, {}) for j in taken])
    assert run(q.take_finalize, "w")  # the set-aside pending job does not hold the run open


def test_a_plan_that_holds_set_aside_jobs_again_brings_them_back_with_their_results(make_queue) -> None:
    """Changing the config back makes its set-aside jobs live again: done ones keep their result, no rework."""
    q = make_queue()
    run(q.init_run, "name: r", {})
    jobs = _jobs(3)
    run(q.enqueue, jobs, {})
    first, second = run(q.claim, "w", 2, 30.0)
    run(q.complete, "w", [(first.id, {"answer": "kept"})])
    _plan(q, jobs[2:])
    assert run(q.take_finalize, "w") is False  # m-0002 is pending
    assert _plan(q, jobs) == 0
    assert _by_status(q) == {"done": 1, "pending": 2}
    done = {j.id: r for j, status, r, _e in run(q.results) if status == "done"}
    assert done == {first.id: {"answer": "kept"}}
    assert _ids(run(q.claim, "w2", 10, 30.0)) == {second.id, jobs[2].id}


def test_a_run_whose_open_jobs_are_all_screened_out_is_finished_until_they_are_released(make_queue) -> None:
    """Pending jobs of a model a screen held back leave the run finished; releasing the model reopens it."""
    q = make_queue()
    run(q.init_run, "name: r", {})
    run(q.enqueue, [*_jobs(1), *_jobs(2, model="out")], {})
    run(q.holding.set_control, "out", "screened", "screened out after 3 tasks")
    assert not run(q.take_finalize, "a")  # m's job is pending, and m is not held back
    job = run(q.claim_each, "a", [ClaimQuota(frozenset({"m"}), 5)], 30.0)[0]
    run(q.complete, "a", [(job.id, {})])
    assert run(q.take_finalize, "a")  # only the screened-out model's jobs are open
    assert run(q.holding.clear_controls, "screened") == 1
    assert run(q.run_info)["finalized_at"] is None and not run(q.take_finalize, "b")


def test_setting_jobs_aside_clears_the_finalize_marker(make_queue) -> None:
    """A finalised run whose plan shrinks is finalised again, without the jobs set aside."""
    q = make_queue()
    run(q.init_run, "name: r", {})
    run(q.enqueue, _jobs(2), {})
    run(q.complete, "w", [(j.id, {}) for j in run(q.claim, "w", 2, 30.0)])
    assert run(q.take_finalize, "w")
    _plan(q, _jobs(1))
    assert run(q.run_info)["finalized_at"] is None and run(q.take_finalize, "w")
    _plan(q, _jobs(1))  # the same plan again changes nothing
    assert run(q.run_info)["finalized_at"] is not None


def test_a_database_of_the_previous_schema_version_is_upgraded_in_place(make_queue) -> None:
    """A version-2 run database (before jobs could be set aside) opens as the current version, jobs kept."""
    q, url, engine = _planned_sql_run(make_queue, 2)
    version = text("SELECT value FROM kw_meta WHERE key = 'schema_version'")
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE kw_meta SET value = '2' WHERE key = 'schema_version'"))
        again = open_queue(url, q.run)
        try:
            assert len(run(again.results)) == 2
        finally:
            run(again.close)
        with engine.begin() as conn:
            assert conn.execute(version).scalar() == str(SCHEMA_VERSION)
    finally:
        engine.dispose()


def test_a_version_7_database_gains_the_claim_key_in_place(make_queue) -> None:
    """A run database of version 7 (jobs without ``claim_key``, no index of done jobs by time) is upgraded
    on open to this version: its jobs are kept and claimed, a claim sent again finds them, and the index
    is there."""
    q, url, engine = _planned_sql_run(make_queue, 2)
    try:
        with engine.begin() as conn:
            _as_version_9(conn)
            conn.execute(text("ALTER TABLE kw_jobs DROP COLUMN claim_key"))
            conn.execute(text("DROP INDEX kw_jobs_done_at"))
            conn.execute(text("UPDATE kw_meta SET value = '7' WHERE key = 'schema_version'"))
        again = open_queue(url, q.run)
        try:
            quota = [ClaimQuota(frozenset({"m"}), 5)]
            first = anyio.run(lambda: again.claim_each("w", quota, 30.0, key="k"))
            assert len(first) == 2
            assert anyio.run(lambda: again.claim_each("w", quota, 30.0, key="k")) == first
        finally:
            run(again.close)
        with engine.begin() as conn:
            version = conn.execute(text("SELECT value FROM kw_meta WHERE key = 'schema_version'")).scalar()
            assert version == str(SCHEMA_VERSION)
            assert "kw_jobs_done_at" in {i["name"] for i in inspect(conn).get_indexes("kw_jobs")}
    finally:
        engine.dispose()


def test_jobs_are_claimed_by_their_drawn_place_before_the_others(make_queue) -> None:
    """Jobs with a drawn place (a screen's order) are claimed lowest place first, whatever their ids, and
    before the jobs without one; per-model claims follow the same order."""
    q = make_queue()
    run(q.init_run, "name: r", {})
    drawn = [
        Job(f"d{i}", "m", "model", "s", f"d{i}", {"kind": "question"}, draw=place)
        for i, place in enumerate((-1, -3, -2))
    ]
    run(q.enqueue, [*_jobs(2), *drawn], {})
    first = anyio.run(lambda: q.claim_each("w", [ClaimQuota(frozenset({"m"}), 2)], 30.0))
    assert {j.id for j in first} == {"d1", "d2"}
    assert [j.id for j in anyio.run(lambda: q.claim("w", 1, 30.0))] == ["d0"]
    assert {j.id for j in anyio.run(lambda: q.claim("w", 5, 30.0))} == {"m-0000", "m-0001"}


def _as_version_9(conn) -> None:
    """Take ``kw_jobs`` back to version 9: no ``draw``, pending indexes by id alone."""
    conn.execute(text("DROP INDEX kw_jobs_pending"))
    conn.execute(text("DROP INDEX kw_jobs_pending_model"))
    conn.execute(text("ALTER TABLE kw_jobs DROP COLUMN draw"))
    conn.execute(text("CREATE INDEX kw_jobs_pending ON kw_jobs (run, id) WHERE status = 'pending'"))
    conn.execute(
        text("CREATE INDEX kw_jobs_pending_model ON kw_jobs (run, model_id, id) WHERE status = 'pending'")
    )
    conn.execute(text("UPDATE kw_meta SET value = '9' WHERE key = 'schema_version'"))


def test_a_version_9_database_gains_the_claim_order_in_place(make_queue) -> None:
    """A run database of version 9 (jobs without ``draw``) is upgraded on open: its jobs are kept, claimed
    in id order as before, and jobs enqueued after it with a drawn place are claimed first."""
    q, url, engine = _planned_sql_run(make_queue, 3)
    try:
        with engine.begin() as conn:
            _as_version_9(conn)
        again = open_queue(url, q.run)
        try:
            drawn = [
                Job(f"z{i}", "m", "model", "s", f"zi{i}", {"kind": "question"}, draw=-2 + i) for i in (1, 0)
            ]
            run(again.enqueue, drawn, {})
            claimed = anyio.run(lambda: again.claim("w", 2, 30.0))
            assert {j.id for j in claimed} == {"z0", "z1"}
        finally:
            run(again.close)
        with engine.begin() as conn:
            assert conn.execute(
                text("SELECT value FROM kw_meta WHERE key = 'schema_version'")
            ).scalar() == str(SCHEMA_VERSION)
            pending = {i["name"]: i["column_names"] for i in inspect(conn).get_indexes("kw_jobs")}
            assert pending["kw_jobs_pending_model"] == ["run", "model_id", "draw", "id"]
    finally:
        engine.dispose()


def test_a_version_10_database_keeps_only_leased_jobs_in_the_owner_index(make_queue) -> None:
    """A run database of version 10 (every job in the lease-owner index, NULL or not) is upgraded on open:
    the index then holds the leased jobs alone, and claims, heartbeats and completions work as before."""
    q, url, engine = _planned_sql_run(make_queue, 3)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP INDEX kw_jobs_owner"))
            conn.execute(text("CREATE INDEX kw_jobs_owner ON kw_jobs (lease_owner)"))
            conn.execute(text("UPDATE kw_meta SET value = '10' WHERE key = 'schema_version'"))
        again = open_queue(url, q.run)
        try:
            claimed = run(again.claim, "w", 2, 30.0)
            assert run(again.heartbeat, "w", 30.0) == 2
            assert run(again.complete, "w", [(claimed[0].id, {"answer": "a"})]) == 1
            assert run(again.heartbeat, "w", 30.0) == 1
        finally:
            run(again.close)
        with engine.begin() as conn:
            version = conn.execute(text("SELECT value FROM kw_meta WHERE key = 'schema_version'")).scalar()
            assert version == str(SCHEMA_VERSION)
            if engine.dialect.name == "sqlite":
                sql = "SELECT sql FROM sqlite_master WHERE name = 'kw_jobs_owner'"
            else:
                sql = "SELECT indexdef FROM pg_indexes WHERE indexname = 'kw_jobs_owner'"
            assert "lease_owner IS NOT NULL" in conn.execute(text(sql)).scalar()
    finally:
        engine.dispose()


def test_workers_report_jobs_and_heartbeat_age(make_queue) -> None:
    """The worker registry counts recorded jobs per worker and says how long ago each was heard from."""
    q = make_queue()
    run(q.enqueue, _jobs(3), {})
    run(q.register_worker, "w1")
    jobs = run(q.claim, "w1", 3, 30.0)
    run(q.complete, "w1", [(j.id, {}) for j in jobs] + [(jobs[0].id, {})])
    run(q.stop_worker, "w1")
    (row,) = run(q.workers)
    assert row["id"] == "w1" and row["jobs_done"] == 3 and row["stopped_at"] is not None
    assert 0.0 <= row["heartbeat_age_s"] < 5.0


def test_concurrent_claimers_never_share_a_job(make_queue) -> None:
    """Four claimers on their own connections, racing: each job is leased once, no claim exceeds its batch."""
    first = make_queue()
    run(first.enqueue, _jobs(200), {})
    queues = [first, *(open_queue(first.url, first.run) for _ in range(3))]  # type: ignore[attr-defined]
    taken: list[list[str]] = [[] for _ in queues]

    async def drain(i: int) -> None:
        while batch := await queues[i].claim(f"w{i}", 7, 30.0):
            assert len(batch) <= 7
            taken[i].extend(j.id for j in batch)

    async def race() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(len(queues)):
                tg.start_soon(drain, i)
        for extra in queues[1:]:
            await extra.close()

    run(race)
    every = [job for ids in taken for job in ids]
    assert len(every) == 200 and len(set(every)) == 200
    assert sum(1 for ids in taken if ids) >= 2


def test_batched_claims_of_racing_processes_record_each_job_once_and_recover_a_killed_ones_batch(
    make_queue,
) -> None:
    """Claimers on their own connections take per-model batches (``claim_each``) and record them in bulk
    while racing; one is killed holding a batch (never records, stops beating): its batch goes back, the
    others finish it, every job is leased to one live claimer at a time and recorded once, and the killed
    one's late record of its batch changes nothing."""
    first = make_queue()
    models = ("a", "b", "c")
    run(first.enqueue, [j for m in models for j in _jobs(40, m)], {})
    queues = [first, *(open_queue(first.url, first.run) for _ in range(3))]  # type: ignore[attr-defined]
    quotas = [ClaimQuota(frozenset({m}), 3) for m in models]
    for i in range(4):
        run(queues[i].register_worker, f"racer{i}")
    killed = run(queues[3].claim_each, "racer3", quotas, 600.0)
    assert len(killed) == 9
    recorded: list[list[str]] = [[] for _ in queues]

    async def drain(i: int) -> None:
        q = queues[i]
        while True:
            await q.heartbeat(f"racer{i}", 600.0)  # a live claimer is heard from between its batches
            batch = await q.claim_each(f"racer{i}", quotas, 600.0)
            if not batch:  # nothing pending: the killed claimer's batch comes back once it is stale
                await q.requeue_expired(stale_after_s=2.0)
                if not await q.counts(open_only=True):
                    return
                await anyio.sleep(0.1)
                continue
            assert len(batch) <= 9 and all(sum(j.model_id == m for j in batch) <= 3 for m in models)
            assert await q.record(f"racer{i}", [(j.id, {"by": i}) for j in batch], []) == len(batch)
            recorded[i].extend(j.id for j in batch)

    async def race() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(drain, i)

    try:
        run(race)
        late = run(queues[3].record, "racer3", [(j.id, {"by": 3}) for j in killed], [])
    finally:
        for extra in queues[1:]:
            run(extra.close)
    every = [job for ids in recorded for job in ids]
    assert len(every) == 120 and len(set(every)) == 120
    assert {j.id for j in killed} <= set(every) and late == 0
    results = {job.id: result for job, status, result, _e in run(first.results) if status == "done"}
    assert len(results) == 120 and all(results[j]["by"] != 3 for j in results)
    assert sum(w["jobs_done"] for w in run(first.workers)) == 120


def test_postgresql_leases_use_the_server_clock(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL a worker whose clock runs an hour ahead cannot take live leases from the others (SQLite
    is one machine's file: its processes share one clock)."""
    q = open_queue(pg_url, f"clock{next(_counter)}")
    try:
        run(q.enqueue, _jobs(1), {})
        assert len(run(q.claim, "a", 1, 30.0)) == 1
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 3600)
        assert run(q.claim, "skewed", 1, 30.0) == []
        assert run(q.requeue_expired) == 0
    finally:
        run(q.close)


def test_processes_opening_a_new_sqlite_file_together_all_get_in(tmp_path: Path) -> None:
    """Several connections opening a fresh SQLite file at once (run --processes N) never see 'locked'."""

    async def open_together(url: str) -> None:
        queues = [open_queue(url, "r") for _ in range(3)]
        async with anyio.create_task_group() as tg:
            for q in queues:
                tg.start_soon(q.run_info)
        for q in queues:
            await q.close()

    for i in range(20):
        run(open_together, f"sqlite:///{tmp_path / f'fresh{i}.db'}")


def test_model_controls_hold_back_a_model_until_cleared(make_queue) -> None:
    """A quarantined or paused model is listed with its first reason until its state is cleared, per run."""
    q = make_queue()

    async def go() -> None:
        await q.init_run("c", {})
        assert await q.holding.controls() == []
        assert await q.holding.set_control("m", "quarantined", "HTTP 401: check KEY") is True
        assert await q.holding.set_control("m", "quarantined", "again") is False
        assert await q.holding.set_control("m", "paused", "paused by hand") is True
        held = await q.holding.controls()
        assert {(c.model_id, c.state, c.reason) for c in held} == {
            ("m", "quarantined", "HTTP 401: check KEY"),
            ("m", "paused", "paused by hand"),
        }
        assert await q.holding.clear_controls("quarantined") == 1
        assert [(c.model_id, c.state) for c in await q.holding.controls()] == [("m", "paused")]
        assert await q.holding.clear_controls("paused", "other") == 0
        assert await q.holding.clear_controls("paused", "m") == 1
        assert await q.holding.controls() == []

    run(go)


def test_a_set_aside_row_keeps_the_last_cause_and_holds_no_worker_back(make_queue) -> None:
    """A model set aside is one row whose cause the last process to set it aside wrote; a worker reading
    the run's controls holds back the quarantined model, never the set-aside one (each process probes it)."""
    from knowwhen_runner.config import WorkerSettings
    from knowwhen_runner.work.holds import Holds

    q = make_queue()

    async def go() -> None:
        await q.init_run("c", {})
        assert await q.holding.set_control("m", "set_aside", "14 of 14 failed", replace=True) is True
        assert await q.holding.set_control("m", "set_aside", "20 of 20 failed", replace=True) is False
        assert await q.holding.set_control("k", "quarantined", "HTTP 401: check KEY") is True
        assert {(c.model_id, c.state, c.reason) for c in await q.holding.controls()} == {
            ("m", "set_aside", "20 of 20 failed"),
            ("k", "quarantined", "HTTP 401: check KEY"),
        }
        holds = Holds(q.holding, {}, WorkerSettings(), None)
        await holds.refresh(now=True)
        assert holds.models() == {"k": "HTTP 401: check KEY"}
        assert await q.holding.clear_controls("set_aside", "m") == 1
        assert [(c.model_id, c.state) for c in await q.holding.controls()] == [("k", "quarantined")]

    run(go)


def test_budget_reserves_all_or_nothing_and_settles_the_actual_cost(make_queue) -> None:
    """A reservation that would pass any scope's cap reserves nothing; settling swaps it for the real cost."""
    from knowwhen_runner.queue import BudgetAsk

    q = make_queue()

    async def go() -> None:
        await q.init_run("c", {})
        asks = [BudgetAsk("run", 0.4, 100, cap_usd=1.0), BudgetAsk("model:m", 0.4, 100, cap_tokens=250)]
        assert await q.holding.budget_reserve(asks) is None
        assert await q.holding.budget_reserve(asks) is None
        assert await q.holding.budget_reserve(asks) == "model:m"  # tokens 300 > 250 (the run's $1.2 too)
        tallies = {t.scope: t for t in await q.holding.budget_tallies()}
        assert tallies["run"].reserved_usd == pytest.approx(0.8) and tallies["run"].spent_usd == 0
        await q.holding.budget_settle(asks, 0.5, 120)
        tallies = {t.scope: t for t in await q.holding.budget_tallies()}
        assert tallies["run"].reserved_usd == pytest.approx(0.4) and tallies["run"].spent_usd == 0.5
        assert tallies["model:m"].spent_tokens == 120 and tallies["model:m"].calls == 1
        await q.holding.budget_forget_reservations()
        tallies = {t.scope: t for t in await q.holding.budget_tallies()}
        assert tallies["run"].reserved_usd == 0 and tallies["run"].spent_usd == 0.5

    run(go)


def test_done_lately_counts_each_models_recent_jobs(make_queue) -> None:
    """Per model: the jobs done within the window and the age of the first of them (status's ETA pace)."""
    q = make_queue()
    run(q.enqueue, _jobs(6), {})
    claimed = run(q.claim, "w", 6, 30.0)
    run(q.complete, "w", [(j.id, {"ok": True}) for j in claimed[:4]])
    time.sleep(0.2)
    lately = run(q.done_lately, 60.0)
    assert sum(n for n, _ in lately.values()) == 4
    assert all(0.15 <= age < 30 for _, age in lately.values())
    assert run(q.done_lately, 0.05) == {}  # none within the last 50 ms


def _answered(q: Queue) -> None:
    """Three models answer four questions of scenario s (confidence 0.1 * i + model number; none for b's
    first, a word for c's), one of t; model c fails one question, an episode records a cost in parts, a set-aside job keeps its answer."""

    async def go() -> None:
        jobs = [
            Job(f"{m}-{i}", m, "model", "s", f"q{i}", {"kind": "question"})
            for m in ("a", "b", "c")
            for i in range(4)
        ]
        jobs += [
            Job("a-t0", "a", "model", "t", "q0", {"kind": "question"}),
            Job("ep-1", "a", "gated", "e", "task1", {"kind": "episode"}),
            Job("old", "a", "model", "s", "q9", {"kind": "question"}),
        ]
        await q.enqueue(jobs, {})
        claimed = await q.claim("w", 100, 30.0)
        results = []
        for job in claimed:
            if job.payload["kind"] == "episode":
                results.append((job.id, {"kind": "episode", "cost_usd": {"decision": 0.25, "llm": 1.0}}))
            elif job.id != "c-3":
                m, i = job.model_id, int(job.item[1:])
                conf: float | str | None = round(0.1 * i + 0.01 * "abc".index(m), 2)
                conf = {"b-0": None, "c-0": "high"}.get(job.id, conf)
                results.append((job.id, {"answer": f"tool{i % 2}", "confidence": conf, "cost_usd": 0.5,
                                         "probabilities": {"tool0": 0.5}}))  # fmt: skip
        await q.complete("w", results)
        await q.fail("w", [Failure("c-3", "boom", final=True)])
        await q.enqueue([], {}, whole_plan={j.id for j in jobs} - {"old"})

    run(go)


def test_answers_page_filter_and_count_the_done_question_jobs(make_queue) -> None:
    """Answers list only done question jobs of the plan, filtered, ordered and paged, with the matched total."""
    from knowwhen_runner.queue import AnswerQuery

    q = make_queue()
    _answered(q)
    every = run(q.answers, AnswerQuery())
    assert every.total == len(every.rows) == 12  # 3 x 4 + t's, minus the failure; no episode, none aside
    assert [(r.scenario_id, r.model_id, r.item) for r in every.rows[:2]] == [
        ("s", "a", "q0"),
        ("s", "a", "q1"),
    ]
    assert (
        every.rows[1].answer == "tool1" and every.rows[1].confidence == 0.1 and every.rows[1].result is None
    )
    page = run(q.answers, AnswerQuery(scenarios=frozenset({"s"}), limit=3, offset=4))
    assert page.total == 11 and [(r.model_id, r.item) for r in page.rows] == [
        ("b", "q0"),
        ("b", "q1"),
        ("b", "q2"),
    ]
    assert page.rows[0].confidence is None
    one = run(q.answers, AnswerQuery(models=frozenset({"b", "c"}), items=frozenset({"q1"})))
    assert [(r.model_id, r.item) for r in one.rows] == [("b", "q1"), ("c", "q1")] and one.total == 2
    sure = run(q.answers, AnswerQuery(min_confidence=0.2, max_confidence=0.3, order="confidence"))
    assert [(r.model_id, r.confidence) for r in sure.rows] == [
        ("a", 0.3),
        ("c", 0.22),
        ("b", 0.21),
        ("a", 0.2),
    ]
    worded = run(q.answers, AnswerQuery(models=frozenset({"c"}), min_confidence=0.0))
    assert [r.item for r in worded.rows] == ["q1", "q2"]  # a confidence that is no number is none
    assert [r.confidence for r in every.rows if r.model_id == "c"] == [None, 0.12, 0.22]
    ranked = run(q.answers, AnswerQuery(models=frozenset({"b"}), order="confidence", limit=2, offset=2))
    assert [r.item for r in ranked.rows] == ["q1", "q0"] and ranked.total == 4  # no confidence comes last
    whole = run(q.answers, AnswerQuery(items=frozenset({"q2"}), models=frozenset({"c"}), with_result=True))
    assert whole.rows[0].result == {"answer": "tool0", "confidence": 0.22, "cost_usd": 0.5,
                                    "probabilities": {"tool0": 0.5}}  # fmt: skip
    assert run(q.answers, AnswerQuery(models=frozenset())).rows == []
    past = run(q.answers, AnswerQuery(scenarios=frozenset({"s"}), limit=5, offset=20))
    assert past.rows == [] and past.total == 11


def test_spend_sums_each_models_recorded_cost(make_queue) -> None:
    """Spend adds up cost_usd of every done job of the plan per model, an episode's parts included."""
    q = make_queue()
    _answered(q)
    spend = run(q.spend)
    assert spend == pytest.approx({"a": 5 * 0.5 + 1.25, "b": 2.0, "c": 1.5})


def test_results_of_named_scenarios_only(make_queue) -> None:
    """Results can be read for some scenarios only: every job of the plan in them, none elsewhere."""
    q = make_queue()
    _answered(q)
    every = run(q.results)
    assert [r.job.id for r in run(q.results, {"e", "t"})] == ["a-t0", "ep-1"]
    assert len(run(q.results, {"s"})) == len(every) - 2 and run(q.results, set()) == []
    assert run(q.results, {"e"})[0].result == {"kind": "episode", "cost_usd": {"decision": 0.25, "llm": 1.0}}


def test_claim_each_takes_up_to_each_quota_in_one_claim(make_queue) -> None:
    """A claim with quotas takes at most each group's n of its own models' jobs, in id order, none of a
    model no quota names, and a short group takes what it has."""
    q = make_queue()
    run(q.enqueue, _jobs(10, "fast") + _jobs(10, "slow") + _jobs(3, "a") + _jobs(3, "b") + _jobs(5, "x"), {})
    quotas = [
        ClaimQuota(frozenset({"fast"}), 6),
        ClaimQuota(frozenset({"slow"}), 1),
        ClaimQuota(frozenset({"a", "b"}), 10),
    ]
    got = run(q.claim_each, "w", quotas, 30.0)
    by_model = Counter(j.model_id for j in got)
    assert by_model == {"fast": 6, "slow": 1, "a": 3, "b": 3}
    assert sorted(j.id for j in got if j.model_id == "fast") == [f"fast-{i:04d}" for i in range(6)]
    assert all(j.attempts == 1 for j in got)
    again = run(q.claim_each, "v", quotas, 30.0)
    assert Counter(j.model_id for j in again) == {"fast": 4, "slow": 1}
    assert not {j.id for j in got} & {j.id for j in again}
    assert run(q.claim_each, "v", [ClaimQuota(frozenset({"fast"}), 0)], 30.0) == []


def test_a_claim_sent_again_returns_the_jobs_it_leased(make_queue) -> None:
    """A claim whose reply was lost is sent again under its key: the same jobs come back, with the same
    attempt, and no more are leased; a claim under a new key takes the next ones."""
    q = make_queue()
    run(q.enqueue, _jobs(6, "m"), {})
    quota = [ClaimQuota(frozenset({"m"}), 2)]
    first = anyio.run(lambda: q.claim_each("w", quota, 30.0, key="k1"))
    again = anyio.run(lambda: q.claim_each("w", quota, 30.0, key="k1"))
    assert (
        [(j.id, j.attempts) for j in again]
        == [(j.id, j.attempts) for j in first]
        == [
            ("m-0000", 1),
            ("m-0001", 1),
        ]
    )
    counts = {c.status: c.n for c in run(q.counts)}
    assert counts == {"running": 2, "pending": 4}
    other = anyio.run(lambda: q.claim_each("w", quota, 30.0, key="k2"))
    assert [j.id for j in other] == ["m-0002", "m-0003"]
    run(q.complete, "w", [("m-0000", {})])
    later = anyio.run(lambda: q.claim_each("w", quota, 30.0, key="k1"))
    assert [j.id for j in later] == ["m-0001"]  # what it leased and the worker still holds


def test_claim_each_takes_back_expired_leases(make_queue) -> None:
    """A job whose lease expired (its worker was killed) is claimed again by quota, its attempt counted."""
    q = make_queue()
    run(q.enqueue, _jobs(2, "slow"), {})
    first = run(q.claim_each, "dead", [ClaimQuota(frozenset({"slow"}), 2)], 0.2)
    assert len(first) == 2
    assert run(q.claim_each, "w", [ClaimQuota(frozenset({"slow"}), 2)], 30.0) == []
    time.sleep(0.5)
    again = run(q.claim_each, "w", [ClaimQuota(frozenset({"slow"}), 5)], 30.0)
    assert sorted(j.id for j in again) == sorted(j.id for j in first)
    assert all(j.attempts == 2 for j in again)


def test_a_stale_workers_jobs_go_back_while_a_live_workers_stay(make_queue) -> None:
    """Two workers hold jobs under long leases; one stops beating: ``requeue_expired(stale_after_s)``
    returns its jobs to pending and leaves the beating worker's alone."""
    q = make_queue()
    run(q.enqueue, _jobs(4), {})
    run(q.register_worker, "gone")
    run(q.register_worker, "live")
    assert len(run(q.claim, "gone", 2, 600.0)) == 2
    assert len(run(q.claim, "live", 2, 600.0)) == 2
    assert run(q.requeue_expired, 60.0) == 0  # both beat just now
    time.sleep(1.2)
    run(q.heartbeat, "live", 600.0)
    assert run(q.requeue_expired) == 0  # without a staleness bound only leases count
    assert run(q.requeue_expired, 1.0) == 2
    statuses = {job.id: status for job, status, _r, _e in run(q.results)}
    assert sorted(statuses.values()) == ["pending", "pending", "running", "running"]
    again = run(q.claim, "other", 4, 600.0)
    assert len(again) == 2


def test_results_of_one_status_only(make_queue) -> None:
    """Results read for one status return exactly the plan's jobs in it (in id order), set-aside ones never."""
    q = make_queue()
    _answered(q)
    every = run(q.results)
    for status in ("done", "failed", "pending"):
        only = anyio.run(lambda s=status: q.results(status=s))
        assert [r.job.id for r in only] == [r.job.id for r in every if r.status == status]
    assert [r.job.id for r in anyio.run(lambda: q.results(status="failed"))] == ["c-3"]
    assert anyio.run(lambda: q.results({"t"}, status="done"))[0].job.id == "a-t0"


def test_job_ids_by_cell_and_results_read_by_key_are_those_of_the_plan(make_queue) -> None:
    """The plan's job ids by (scenario, model) in id order, and the results of any of them read by key,
    are exactly what ``results`` returns of them; a set-aside job is in neither, an unknown id is left out."""
    q = make_queue()
    _answered(q)
    every = run(q.results)
    cells: dict[tuple[str, str], list[str]] = {}
    for r in every:
        cells.setdefault((r.job.scenario_id, r.job.model_id), []).append(r.job.id)
    assert run(q.job_ids) == cells and len(cells) > 2
    some = sorted(i for ids in cells.values() for i in ids[::2])
    assert run(q.results_of, [*reversed(some), "no-such-job"]) == [r for r in every if r.job.id in some]
    _plan(q, [r.job for r in every[1:]])
    assert every[0].job.id not in {i for ids in run(q.job_ids).values() for i in ids}
    assert run(q.results_of, [every[0].job.id]) == []


def test_model_tallies_count_each_models_jobs_and_sum_what_they_recorded(make_queue) -> None:
    """Tallies give each model its plan's jobs per status, the cost its results recorded (an episode's
    parts summed), its calls and its cache hits; a set-aside job counts as set aside only."""
    q = make_queue()
    _answered(q)
    run(q.enqueue, [Job("d-0", "d", "model", "s", "q0", {"kind": "question"}), *_jobs(2, "d")], {})
    (job,) = [j for j in run(q.claim, "w", 10, 30.0) if j.id == "d-0"]
    run(q.complete, "w", [(job.id, {"answer": "x", "cost_usd": 0, "cache_hit": True})])
    tallies = run(q.model_tallies)
    assert sorted(tallies) == ["a", "b", "c", "d"]
    a, c, d = tallies["a"], tallies["c"], tallies["d"]
    assert a.statuses == {"done": 6, "set_aside": 1} and a.cost_usd == pytest.approx(5 * 0.5 + 1.25)
    assert (a.calls, a.cache_hits) == (6, 0)
    assert c.statuses == {"done": 3, "failed": 1} and c.cost_usd == pytest.approx(1.5)
    assert d.statuses.get("done") == 1 and sum(d.statuses.values()) == 3
    assert (d.calls, d.cache_hits, d.cost_usd) == (0, 1, 0.0)


def test_model_tallies_split_each_models_jobs_by_scenario_as_the_full_counts_do(
    make_queue, monkeypatch
) -> None:
    """Each model's jobs per scenario and status in its tally are exactly the full counts' (set-aside ones
    under ``set_aside``), when its done jobs are summed and again when they are read from the kept sums."""
    from knowwhen_runner.queue import tallies

    monkeypatch.setattr(tallies, "_KEEP_FROM", 0)
    monkeypatch.setattr(tallies, "_SETTLED_S", 0.0)  # every done job is in the kept sums at once
    q = make_queue()
    _answered(q)
    run(q.enqueue, _jobs(3, "d"), {})
    run(q.claim, "w", 1, 30.0)
    expected: dict[str, dict[str, dict[str, int]]] = {}
    for c in run(q.counts):
        cell = expected.setdefault(c.model_id, {}).setdefault(c.scenario_id, {})
        cell[c.status] = cell.get(c.status, 0) + c.n
    assert len(expected["a"]) == 3 and expected["a"]["s"]["done"] == 4
    for _ in range(2):
        assert {m: t.scenarios for m, t in run(q.model_tallies).items()} == expected


def test_open_counts_and_status_totals_agree_with_the_full_counts(make_queue) -> None:
    """Counts of open jobs only are exactly the pending and running groups of the full counts, and the
    totals per status add the full counts up (set-aside jobs under ``set_aside``)."""
    q = make_queue()
    _answered(q)
    run(q.enqueue, _jobs(4, "d"), {})
    run(q.claim, "w", 1, 30.0)
    full = run(q.counts)
    assert anyio.run(lambda: q.counts(open_only=True)) == [
        c for c in full if c.status in ("pending", "running")
    ]
    totals = Counter[str]()
    for c in full:
        totals[c.status] += c.n
    assert run(q.status_totals) == dict(sorted(totals.items()))
    assert run(q.status_totals) == {"done": 13, "failed": 1, "pending": 3, "running": 1, "set_aside": 1}


def _tallies_from_results(q: Queue) -> dict:
    """What ``model_tallies`` must say, from every result read whole (and the set-aside count per model)."""
    from knowwhen_runner.queue.tallies import tallies_of

    expected = tallies_of((r.job.model_id, r.status, r.result) for r in run(q.results))
    for c in run(q.counts):
        if c.status == "set_aside":
            expected.setdefault(c.model_id, type(next(iter(expected.values())))(c.model_id)).add(
                "aside:done", c.n, 0.0, 0, 0
            )
    return {m: (t.statuses, round(t.cost_usd, 9), t.calls, t.cache_hits) for m, t in sorted(expected.items())}


def _said(q: Queue) -> dict:
    return {
        m: (t.statuses, round(t.cost_usd, 9), t.calls, t.cache_hits) for m, t in run(q.model_tallies).items()
    }


@pytest.mark.parametrize("refresh", ["kept", "added_to"])
def test_model_tallies_stay_exact_across_kept_sums_new_results_and_a_set_aside(
    make_queue, monkeypatch, refresh
) -> None:
    """Tallies of jobs done long ago (kept and summed once), then of jobs done since (added live, or to
    the kept sums when they are renewed at once), then after a plan sets a done job aside and brings it
    back, always equal what every result read whole says."""
    from knowwhen_runner.queue import tallies

    monkeypatch.setattr(tallies, "_KEEP_FROM", 0)  # kept however few: the sums are what is tested
    if refresh == "added_to":
        monkeypatch.setattr(tallies, "_SETTLED_S", 0.0)
        monkeypatch.setattr(tallies, "_REFRESH_S", 0.0)
    q = make_queue()
    _answered(q)
    # the first answers were done an hour ago: kept sums hold them
    engine = create_engine(q.url.replace("postgresql://", "postgresql+psycopg://"))  # type: ignore[attr-defined]
    with engine.begin() as conn:
        conn.execute(text("UPDATE kw_jobs SET updated_at = updated_at - 3600 WHERE status = 'done'"))
    engine.dispose()
    assert _said(q) == _tallies_from_results(q)
    run(q.enqueue, _jobs(3, "a"), {})
    claimed = run(q.claim, "w", 10, 30.0)
    run(q.complete, "w", [(j.id, {"cost_usd": 0.25, "cache_hit": j.id.endswith("1")}) for j in claimed])
    assert _said(q) == _tallies_from_results(q)
    every = {r.job.id for r in run(q.results)} | {"old"}
    anyio.run(lambda: q.enqueue([], {}, whole_plan=every - {"a-0", "b-1"}))
    assert _said(q)["a"][0].get("set_aside") == 1 and _said(q) == _tallies_from_results(q)
    anyio.run(lambda: q.enqueue([], {}, whole_plan=every))
    assert "set_aside" not in _said(q)["a"][0] and _said(q) == _tallies_from_results(q)


def test_items_of_open_jobs_are_those_of_the_pending_running_and_failed_ones(make_queue) -> None:
    """Items read through the open jobs are exactly the items some pending, running or failed job of the
    run names (of one scenario when asked); a done job's item alone is not read."""
    q = make_queue()
    jobs = [
        Job(f"j{i}", "m", "model", "s" if i < 4 else "t", f"q{i}", {"kind": "question"}) for i in range(6)
    ]
    items = {(j.scenario_id, j.item): {"n": i} for i, j in enumerate(jobs)} | {("s", "unused"): {"n": 9}}
    run(q.enqueue, jobs, items)
    claimed = {j.id: j for j in run(q.claim, "w", 4, 30.0)}  # j0..j3: j0 done, j1 failed, j2-j3 running
    run(q.complete, "w", [("j0", {"answer": "x"})])
    run(q.fail, "w", [Failure("j1", "boom", final=True)])
    assert set(claimed) == {"j0", "j1", "j2", "j3"}
    open_items = anyio.run(lambda: q.items(of_open_jobs=True))
    assert open_items == {k: v for k, v in items.items() if k not in {("s", "q0"), ("s", "unused")}}
    assert anyio.run(lambda: q.items("t", of_open_jobs=True)) == {
        ("t", "q4"): {"n": 4},
        ("t", "q5"): {"n": 5},
    }
    assert run(q.items) == items
