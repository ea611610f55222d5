"""The typed shapes of a job: its kind read back from every queue, and one total cost for both kinds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from knowwhen_runner.jobs import JOB_KINDS, EpisodeCost, Job, job_cost
from knowwhen_runner.queue import Queue, open_queue
from tests.pg import temporary_database


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with temporary_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Queue]:
    if request.param == "sqlite":
        q = open_queue(f"sqlite:///{tmp_path / 'q.db'}", "r")
    else:
        q = open_queue(request.getfixturevalue("pg_url"), f"shapes{id(request)}")
    yield q
    anyio.run(q.close)


def _jobs() -> list[Job]:
    return [
        Job("q1", "a", "model", "s", "q1", {"kind": "question"}),
        Job("e1", "a", "gated", "e", "t1", {"kind": "episode", "agent": "llm", "tau": 0.5}),
        Job("x1", "a", "model", "s", "q2", {}),
    ]


def test_kind_is_the_payload_kind_and_nothing_else() -> None:
    """``Job.kind`` names a question or an episode, and is None for a payload without a known kind."""
    kinds = [job.kind for job in _jobs()]
    assert kinds == ["question", "episode", None]
    assert Job("y", "a", "model", "s", "q", {"kind": "states"}).kind is None
    assert JOB_KINDS == ("question", "episode")


def test_a_job_read_back_from_the_queue_keeps_its_kind(queue: Queue) -> None:
    """Claimed and reported jobs come back from every backend with the kind they were enqueued with."""

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        await queue.enqueue(_jobs(), {})
        claimed = {j.id: j.kind for j in await queue.claim("w", 10, 30.0)}
        reported = {r.job.id: r.job.kind for r in await queue.results()}
        return claimed, reported

    claimed, reported = anyio.run(go)
    assert claimed == reported == {"q1": "question", "e1": "episode", "x1": None}


def test_job_cost_totals_a_question_and_an_episode() -> None:
    """A question's total is its cost_usd, an episode's is its split summed; missing costs count as 0."""
    split = EpisodeCost(decision=0.25, llm=1.5)
    assert job_cost({"cost_usd": 0.125}) == 0.125
    assert job_cost({"cost_usd": split}) == 1.75
    assert job_cost({"cost_usd": None}) == 0.0
    assert job_cost({}) == 0.0
    assert job_cost(None) == 0.0
    assert job_cost({"cost_usd": {"decision": 0.5, "llm": None}}) == 0.5


def test_job_cost_agrees_with_what_every_queue_reports_as_spend(queue: Queue) -> None:
    """The per-model spend each backend computes (SQL on SQLite and PostgreSQL) is job_cost summed."""
    results = {
        "q1": {"cost_usd": 0.1},
        "e1": {"kind": "episode", "cost_usd": EpisodeCost(decision=0.02, llm=0.3)},
        "x1": {"cost_usd": None},
    }

    async def go() -> dict[str, float]:
        await queue.enqueue(_jobs(), {})
        await queue.claim("w", 10, 30.0)
        await queue.complete("w", list(results.items()))
        return await queue.spend()

    spent = anyio.run(go)
    assert spent == {"a": pytest.approx(sum(job_cost(r) for r in results.values()))}
    assert spent["a"] == pytest.approx(0.42)
