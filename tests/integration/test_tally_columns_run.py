"""Each model's tally after real runs (``knowwhen run`` against the local model server, SQLite and
PostgreSQL) is the one its results say: questions priced per request, some failing for good, episodes
whose spend is recorded in parts, cache hits (a second run of the same questions and tasks, spending
nothing) and jobs set
aside by a smaller plan. Every job's tally columns hold its result's values, and a copy taken back to
schema version 11 gives the same tallies once upgraded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from knowwhen_runner.queue import open_queue
from knowwhen_runner.serve import ServerProcess
from tests.contract.test_tally_columns import (
    _engine,
    as_version_11,
    assert_columns_hold_tally_values,
    expected_tallies,
    said_tallies,
)
from tests.helpers import knowwhen, make_question_set
from tests.pg import temporary_database

pytestmark = pytest.mark.slow

FAULT = {"fault": "500", "model": "lexical-llm", "probability": 1.0}
"""Every request to the LLM fails: with one attempt each, its jobs that are not cache hits fail for good."""


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgresql":
        with temporary_database() as url:
            yield url
    else:
        yield f"sqlite:///{tmp_path / 'runs.db'}"


def _config(
    folder: Path, name: str, base: str, db: str, questions: Path, tasks: int, *more: dict[str, Any]
) -> Path:
    price = {"per_request": 0.001}
    config = {
        "name": name,
        "output": str(folder / name),
        "db": db,
        "models": [
            {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base},
            {"id": "lexical-llm", "model": "openai/lexical-llm", "kind": "llm", "api_base": f"{base}/v1",
             "pricing": price},
            {"id": "agent", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base}/v1", "pricing": price},
        ],
        "modes": ["llm", "model"],
        "scenarios": [
            {"id": "qs", "path": str(questions)},
            {"id": "l3", "kind": "episodes", "agent": "agent", "suite": "common", "split": "fit", "n": tasks},
            *more,
        ],
        "workers": {"concurrency": 4, "max_attempts": 1, "set_aside_error_rate": None},
    }  # fmt: skip
    path = folder / f"{name}-{tasks}-{len(more)}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _run(config: Path) -> None:
    done = knowwhen("run", str(config), "-q", "--no-probe", "--no-finalize", "--replace-config")
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: some jobs failed for good


def _tallies(db: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what ``model_tallies`` says, what the results say) of run ``name``."""
    q = open_queue(db, name)
    try:
        return said_tallies(q), expected_tallies(q)
    finally:
        anyio.run(q.close)


def test_tallies_after_real_runs_are_what_their_results_say(
    server: ServerProcess, tmp_path: Path, db: str
) -> None:
    few, more = make_question_set(tmp_path / "few", 3), make_question_set(tmp_path / "more", 5)
    _run(_config(tmp_path, "first", server.base_url, db, few, 2))
    first, _expected = _tallies(db, "first")
    assert first["lexical"][1] > 0, first  # its episodes' agent calls, priced: a spend in parts
    # The same questions and tasks again, and more: the first ones are cache hits, the new ones calls.
    _run(_config(tmp_path, "second", server.base_url, db, more, 3))
    # A smaller plan sets the extra ones aside; a new scenario's new questions fail for the LLM.
    server.set_faults([FAULT])
    most = {"id": "qs2", "path": str(make_question_set(tmp_path / "most", 7))}
    _run(_config(tmp_path, "second", server.base_url, db, few, 2, most))
    said, expected = _tallies(db, "second")
    assert said == expected
    statuses = {s for t in said.values() for s in t[0]}
    assert {"done", "failed", "set_aside"} <= statuses, said
    assert said["lexical-llm"][0]["failed"] > 0 and said["lexical-llm"][3] > 0, said  # failures, hits
    assert said["agent"][2] > 0 and said["agent"][3] > 0, said  # calls and cache hits
    assert said["lexical"][1] == 0.0, said  # the same episodes again: every call a cache hit, nothing spent
    for name in ("first", "second"):
        assert_columns_hold_tally_values(db, name)
    engine = _engine(db)
    try:
        with engine.begin() as conn:
            as_version_11(conn)
    finally:
        engine.dispose()
    assert _tallies(db, "second") == (said, expected)
    assert _tallies(db, "first")[0] == _tallies(db, "first")[1]
    for name in ("first", "second"):
        assert_columns_hold_tally_values(db, name)
