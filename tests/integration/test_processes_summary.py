"""`run --processes N` sums up every process's work, as the run's database counts it, not its own alone."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow


def test_the_summary_of_two_processes_counts_both(server: ServerProcess, tmp_path: Path) -> None:
    """Both processes answer some of the 90 jobs; the summary says 90 answered, as the queue holds, and
    the cost of both processes' calls (priced per request) is what the server answered."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions, two models: 90 jobs
    limit = {"max_in_flight": 2}
    price = {"per_request": 0.001}
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": server.base_url,
         "rate_limit": limit, "pricing": price},
        {"id": "lexical-llm", "model": "openai/lexical-llm", "kind": "llm", "api_base": f"{server.base_url}/v1",
         "rate_limit": limit, "pricing": price},
    ]  # fmt: skip
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    done = knowwhen("run", str(config), "-q", "--no-probe", "--processes", "2", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    (db,) = list((tmp_path / "out").rglob("*.db"))
    with sqlite3.connect(db) as conn:
        queue_done = conn.execute("SELECT count(*) FROM kw_jobs WHERE status = 'done'").fetchone()[0]
        per_worker = [n for (n,) in conn.execute("SELECT jobs_done FROM kw_workers")]
    assert queue_done == 90
    assert len([n for n in per_worker if n > 0]) == 2, per_worker  # both processes worked
    said = " ".join(done.stdout.split())
    answered = re.search(
        r"its 2 processes answered (\d+) jobs, made (\d+) model calls and took (\d+) answers from the cache",
        said,
    )
    assert answered, said
    assert [int(g) for g in answered.groups()] == [90, 90, 0]
    cost = re.search(r"cost \$([0-9.]+)", said)
    assert cost and float(cost.group(1)) == pytest.approx(0.001 * server.count(status=200), abs=5e-5)
