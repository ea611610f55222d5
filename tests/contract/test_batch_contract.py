"""The provider-batch rows behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

import time

from knowwhen_runner.jobs import Job
from tests.contract.test_queue_contract import run


def _question_jobs(n: int) -> list[Job]:
    return [
        Job(
            id=f"m-{i:04d}",
            model_id="m",
            mode="llm",
            scenario_id="s",
            item=f"q{i}",
            payload={"kind": "question"},
        )
        for i in range(n)
    ]


def test_parked_jobs_are_never_claimed_and_come_back_with_take(make_queue) -> None:
    """Jobs opened into a batch stay out of every claim, even past their lease, until the batch is taken."""
    q = make_queue()
    run(q.init_run, "cfg", {})
    run(q.enqueue, _question_jobs(4), {})
    claimed = run(q.claim, "w1", 3, 0.05)
    parked = run(q.batching.batch_open, "w1", "b1", "m", [j.id for j in claimed], 30.0)
    assert parked == 3

    time.sleep(0.1)  # the worker's lease would have expired
    assert [j.id for j in run(q.claim, "w2", 10, 30.0)] == ["m-0003"]
    taken = run(q.batching.batch_take, "w2", "b1", 30.0)
    assert [j.id for j in taken] == [j.id for j in claimed]
    assert run(q.complete, "w2", [(taken[0].id, {"ok": 1})]) == 1
    assert run(q.release, "w2", [j.id for j in taken[1:]]) == 2
    assert run(q.batching.batch_take, "w3", "b1", 30.0) == []


def test_a_batch_is_leased_to_one_poller_until_its_lease_expires(make_queue) -> None:
    """One process polls a batch; another gets it only when the first stops renewing its lease."""
    q = make_queue()
    run(q.init_run, "cfg", {})
    run(q.enqueue, _question_jobs(2), {})
    claimed = run(q.claim, "w1", 2, 30.0)
    run(q.batching.batch_open, "w1", "b1", "m", [j.id for j in claimed], 0.2)
    assert run(q.batching.batch_lease, "w2", 30.0, frozenset({"m"})) == []
    assert [b.key for b in run(q.batching.batch_lease, "w1", 0.2, frozenset({"m"}))] == ["b1"]
    assert run(q.batching.batch_lease, "w2", 30.0, frozenset({"other"})) == []

    time.sleep(0.3)
    (got,) = run(q.batching.batch_lease, "w2", 30.0, frozenset({"m"}))
    assert (got.key, got.status, got.owner, got.job_ids) == ("b1", "submitting", "w2", ("m-0000", "m-0001"))


def test_batch_notes_are_kept_and_closed_batches_are_not_leased(make_queue) -> None:
    """Provider id, status, counts and error are stored; a finished batch is listed but never polled again."""
    q = make_queue()
    run(q.init_run, "cfg", {})
    run(q.enqueue, _question_jobs(1), {})
    claimed = run(q.claim, "w1", 1, 30.0)
    run(q.batching.batch_open, "w1", "b1", "m", [claimed[0].id], 30.0)
    run(lambda: q.batching.batch_note("b1", status="submitted", provider_id="batch_x"))
    assert run(q.batching.batch_lease, "w1", 30.0, frozenset({"m"}))[0].provider_id == "batch_x"
    run(
        lambda: q.batching.batch_note(
            "b1", status="expired", counts={"answered": 0, "returned": 1}, error="expired"
        )
    )
    assert run(q.batching.batch_lease, "w1", 30.0, frozenset({"m"})) == []
    (rec,) = run(q.batching.batches)
    assert (rec.status, rec.provider_id, rec.counts, rec.error) == (
        "expired",
        "batch_x",
        {"answered": 0, "returned": 1},
        "expired",
    )
