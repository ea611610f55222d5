"""Each job's tally columns (``cost_usd``, ``called``, ``cache_hit`` of ``kw_jobs``) hold what its result
says (``tally_values``), whichever statement wrote the result, and each model's tally summed from them is
the one ``tallies_of`` computes from every result read whole; a version-11 database (no such columns)
gains them from its results on open, with the same tallies. SQLite (one statement per batch, and a
statement per row where that SQLite has no ``UPDATE ... FROM``) and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from sqlalchemy import Connection, create_engine, text

from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import Failure, Queue, open_queue
from knowwhen_runner.queue import engine as sql_engine
from knowwhen_runner.queue.schema import SCHEMA_VERSION
from knowwhen_runner.queue.tallies import kept_key, tallies_of, tally_values
from tests.pg import temporary_database

RESULTS: dict[str, dict[str, Any]] = {
    "a-0": {"answer": "x", "cost_usd": 0.5},
    "a-1": {"answer": "x", "cost_usd": 0.25, "cache_hit": True},
    "a-2": {"answer": "x", "cost_usd": 2},  # a whole number
    "a-3": {"answer": "x"},  # no cost recorded
    "b-0": {"kind": "episode", "cost_usd": {"decision": 0.25, "llm": 1.0, "note": "n/a"}},
    "b-1": {  # an episode that made some calls and found the others in the cache
        "kind": "episode",
        "cost_usd": {"decision": 0.0, "llm": 0.125},
        "spent_usd": {"decision": 0.0, "llm": 0.0625},
        "cache_hit": False,
    },
    "b-2": {},  # an empty result: no call
    "c-0": {"answer": "y", "cost_usd": 0.75, "cache_hit": 1},
    "c-1": {"answer": "y", "cost_usd": 0.5},  # set aside after it is done
}
FAILED = "c-2"
OPEN = ("c-3", "c-4")


@pytest.fixture(params=["sqlite-batch", "sqlite-rows", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "postgresql":
        with temporary_database() as found:
            yield found
        return
    if request.param == "sqlite-rows":  # the statement per row of an SQLite without UPDATE ... FROM
        monkeypatch.setattr(sql_engine, "_SQLITE_BULK", False)
    # "sqlite-batch" on an SQLite without UPDATE ... FROM or JSON functions writes row by row too
    yield f"sqlite:///{tmp_path / 'q.db'}"


def run(fn: Any, *args: Any) -> Any:
    return anyio.run(fn, *args)


def _recorded(q: Queue) -> None:
    """The jobs of ``RESULTS`` done with their results (two batches), one failed, two left open and one
    done job set aside by a later plan."""
    jobs = [Job(i, i[0], "model", "s" if i[-1] in "01" else "t", f"q{i}") for i in [*RESULTS, FAILED, *OPEN]]
    run(q.enqueue, jobs, {})
    run(q.claim, "w", len(RESULTS) + 1, 30.0)
    done = list(RESULTS.items())
    run(q.record, "w", done[:4], [])
    run(q.record, "w", done[4:], [Failure(FAILED, "boom", final=True)])
    anyio.run(lambda: q.enqueue([], {}, whole_plan={j.id for j in jobs} - {"c-1"}))


def _engine(url: str) -> Any:
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


def _columns(url: str, run_name: str) -> dict[str, tuple[Any, ...]]:
    """Each job's (result, cost, called, cache hit) as stored."""
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            rows = conn.execute(
                text("SELECT id, result, cost_usd, called, cache_hit FROM kw_jobs WHERE run = :r"),
                {"r": run_name},
            ).all()
    finally:
        engine.dispose()
    return {r[0]: (orjson.loads(r[1]) if r[1] else None, float(r[2]), int(r[3]), int(r[4])) for r in rows}


def assert_columns_hold_tally_values(url: str, run_name: str) -> None:
    """Every job's columns are ``tally_values`` of its stored result (nothing without one)."""
    stored = _columns(url, run_name)
    assert stored
    for job_id, (result, *written) in stored.items():
        cost, called, hit = tally_values(result)
        assert written == [pytest.approx(cost), called, hit], (job_id, result)


def expected_tallies(q: Queue) -> dict[str, tuple[Any, ...]]:
    """Each model's tally from its results read whole (``tallies_of``), set-aside jobs counted apart."""
    expected = tallies_of((r.job.model_id, r.status, r.result, r.job.scenario_id) for r in run(q.results))
    for c in run(q.counts):
        if c.status == "set_aside":
            expected[c.model_id].add("aside:done", c.n, 0.0, 0, 0, c.scenario_id)
    return _shown(expected)


def _shown(tallies: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {
        m: (t.statuses, round(t.cost_usd, 9), t.calls, t.cache_hits, t.scenarios)
        for m, t in sorted(tallies.items())
    }


def said_tallies(q: Queue) -> dict[str, tuple[Any, ...]]:
    return _shown(run(q.model_tallies))


def as_version_11(conn: Connection) -> None:
    """Take a run database back to schema version 11: no tally columns, no tally index."""
    conn.execute(text("DROP INDEX kw_jobs_tally"))
    for column in ("cost_usd", "called", "cache_hit"):
        conn.execute(text(f"ALTER TABLE kw_jobs DROP COLUMN {column}"))
    conn.execute(text("UPDATE kw_meta SET value = '11' WHERE key = 'schema_version'"))


def test_every_result_is_written_with_its_tally_values_and_tallies_sum_them(url: str) -> None:
    """Spend (a number, a whole number, none, an episode's parts, a cache hit's nothing), an empty result, a failure,
    open jobs and a set-aside done job: each row's columns follow its result, each model's tally its
    results read whole (set-aside jobs counted, nothing else of theirs)."""
    q = open_queue(url, "r")
    try:
        _recorded(q)
        assert_columns_hold_tally_values(url, "r")
        said = said_tallies(q)
        assert said == expected_tallies(q)
        # what was spent: a cache hit nothing, an episode what its calls made now cost
        assert said["a"][1:4] == (2.5, 3, 1) and said["b"][1:4] == (1.3125, 2, 0)
        assert said["c"][0] == {"done": 1, "failed": 1, "pending": 2, "set_aside": 1}
        assert said["c"][1:4] == (0.0, 0, 1)
        assert run(q.spend) == pytest.approx({"a": 2.5, "b": 1.3125, "c": 0.0})
    finally:
        run(q.close)


def test_a_version_11_database_gains_its_tally_values_from_its_results(url: str) -> None:
    """A version-11 run database is upgraded on open: its columns are computed from its results once, its
    tallies are the same as before, and sums kept by the earlier release are forgotten (summed again)."""
    q = open_queue(url, "r")
    try:
        _recorded(q)
        before = expected_tallies(q)
    finally:
        run(q.close)
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            as_version_11(conn)
            kept = {"upto": 0.0, "models": {"a": [99, 99.0, 99, 99]}, "scenarios": {}}
            conn.execute(
                text("INSERT INTO kw_meta (key, value) VALUES (:k, :v)"),
                {"k": kept_key("r"), "v": orjson.dumps(kept).decode()},
            )
        again = open_queue(url, "r")
        try:
            assert said_tallies(again) == before
        finally:
            run(again.close)
        with engine.begin() as conn:
            version = conn.execute(text("SELECT value FROM kw_meta WHERE key = 'schema_version'")).scalar()
        assert version == str(SCHEMA_VERSION)
    finally:
        engine.dispose()
    assert_columns_hold_tally_values(url, "r")
