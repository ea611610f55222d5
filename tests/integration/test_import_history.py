"""An imported job is recorded in a real run database as it happened: claimed once per attempt its row
records, then done or failed for good with its error and kind; the run's other jobs are left as they were."""

from __future__ import annotations

from typing import Any

import anyio

from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import open_queue
from knowwhen_runner.results.episode_rows import EpisodeRow, EpisodeSpend
from knowwhen_runner.sweep.episode_import import _at_its_tau
from knowwhen_runner.sweep.import_history import EARLIER_ATTEMPT, Recorded, record_history


def _job(job_id: str, model: str = "dm", mode: str = "model", payload: dict[str, Any] | None = None) -> Job:
    return Job(job_id, model, mode, "s", f"item-{job_id}", payload or {"kind": "question"})  # type: ignore[arg-type]


async def _import_three(url: str) -> dict[str, Any]:
    jobs = [_job("a"), _job("b"), _job("c"), _job("0-other")]  # "0-other" sorts first: a claim takes it first
    async with open_queue(url, "r") as queue:
        await queue.init_run("name: r\n", {})
        await queue.enqueue(jobs, {})
        recorded = await record_history(
            queue,
            [
                Recorded("a", "dm", 1, result={"answer": "x", "attempts": 1}),
                Recorded("b", "dm", 3, result={"answer": "y", "attempts": 3}),
                Recorded("c", "dm", 2, error="HTTP 400: bad request", kind="fatal"),
            ],
        )
        results = {r.job.id: r for r in await queue.results()}
        return {
            "recorded": recorded,
            "state": {jid: (r.status, r.job.attempts, r.error) for jid, r in results.items()},
            "c_attempts": await queue.attempt_errors("c"),
            "other_attempts": await queue.attempt_errors("0-other"),
        }


def test_each_job_is_claimed_as_often_as_its_row_says_and_others_are_untouched(fresh_db_url: str) -> None:
    """Done jobs keep their attempts, a failed one fails for good with its kind after its earlier attempt,
    and a pending job of the same model that the claims took is given back unclaimed (SQLite, PostgreSQL)."""
    got = anyio.run(_import_three, fresh_db_url)
    assert got["recorded"] == 3
    assert got["state"] == {
        "a": ("done", 1, None),
        "b": ("done", 3, None),
        "c": ("failed", 2, "HTTP 400: bad request"),
        "0-other": ("pending", 0, None),
    }
    kinds = [(e["kind"], e["error"]) for e in got["c_attempts"]]
    assert kinds == [("error", EARLIER_ATTEMPT), ("fatal", "HTTP 400: bad request")]
    assert got["other_attempts"] == []


def test_a_gated_episode_whose_fit_reached_no_tau_matches_a_job_without_one() -> None:
    """A fit that reached no τ plans its gated jobs without one: rows run without τ are theirs, rows run at
    a τ are not, and a gated job with a τ never takes a row without one."""
    spend = EpisodeSpend()
    row = EpisodeRow(
        scenario="s", task_id="t", mode="gated", model="dm", decision_model="dm", llm="agent", tau=None,
        success=True, budget_exhausted=False, coverage=0.0, cost_usd=spend, latency_ms=spend, steps=[],
    )  # fmt: skip
    without = _job("g", mode="gated", payload={"kind": "episode", "tau": None})
    at = _job("h", mode="gated", payload={"kind": "episode", "tau": 0.5})
    assert _at_its_tau(without, row) and not _at_its_tau(at, row)
    assert not _at_its_tau(without, row.model_copy(update={"tau": 0.5}))
    assert _at_its_tau(at, row.model_copy(update={"tau": 0.5}))
