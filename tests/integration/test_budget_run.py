"""A spent budget ends `run` with exit 4 and a sentence; nothing is failed or lost, and raising the
budget and running again finishes the run without repeating a call."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow


def _counts(config: Path) -> dict[str, int]:
    (db,) = list((config.parent / "out").rglob("*.db"))
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM kw_jobs GROUP BY status").fetchall())


@pytest.mark.journey("budget.spent")
def test_budget_parks_jobs_and_raising_it_resumes(server: ServerProcess, tmp_path: Path) -> None:
    """A $0.02 budget at $0.001 a call buys about 20 answers of 45 (exit 4, the rest pending, none failed);
    at $1 the rerun answers the rest, each question called once in all."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions
    models = [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": server.base_url,
            "pricing": {"per_request": 0.001},
        }
    ]
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models, budget={"usd": 0.02})
    first = knowwhen("run", str(config), "-q")
    said = " ".join(first.stdout.split())
    assert first.returncode == 4, first.stdout + first.stderr
    assert "budget is spent ($0.0200 of $0.02)" in said and "bought 20 model calls" in said
    assert "25 jobs wait. Raise budget in the config and run again to continue" in said
    counts = _counts(config)
    assert "failed" not in counts and counts["done"] == 20 and counts["pending"] == 25
    assert server.count() == 20
    status = knowwhen("status", str(tmp_path / "out"))
    assert "budget run: $0.0200 spent on 20 calls" in " ".join(status.stdout.split()), status.stdout

    text = yaml.safe_load(config.read_text())
    text["budget"] = {"usd": 1.0}
    config.write_text(yaml.safe_dump(text, sort_keys=False))
    second = knowwhen("run", str(config), "-q")
    assert second.returncode == 0, second.stdout + second.stderr
    assert _counts(config) == {"done": 45}
    assert server.count() == 45  # nothing asked twice
