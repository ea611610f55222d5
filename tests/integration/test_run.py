"""The spine end to end: a sweep against the real local server and a real SQLite file."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, with_named_probabilities, write_config

pytestmark = pytest.mark.slow


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions


def test_run_writes_answers_and_table_and_rerun_makes_no_calls(
    server: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """A finished config answers every question once; running it again makes zero model calls."""
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    first = knowwhen("run", str(config), "-q")
    assert first.returncode == 0, first.stderr
    calls = server.count()
    assert calls == 90  # 45 questions x 2 models, each asked once
    out = tmp_path / "out"
    for model in ("lexical", "lexical-llm"):
        path = out / "qs" / f"answers_{model}.jsonl.gz"
        rows = with_named_probabilities(path, read_answers(path, drop_timing=False))
        assert len(rows) == 45 and len({r["qhash"] for r in rows}) == 45
        assert all(
            r["valid"] and r["answer"] in r["probabilities"] if r["probabilities"] else r["valid"]
            for r in rows
        )
    assert "| lexical |" in (out / "table.md").read_text()
    second = knowwhen("run", str(config), "-q")
    assert second.returncode == 0, second.stderr
    assert server.count() == calls


def test_cache_is_shared_by_identical_questions_across_scenarios(
    server: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """Two scenarios with the same questions cost one call per distinct request."""
    config = write_config(
        tmp_path / "c.yaml",
        server.base_url,
        scenario,
        scenarios=[{"id": "a", "path": str(scenario)}, {"id": "b", "path": str(scenario)}],
        models=[
            {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": server.base_url}
        ],
    )
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stderr
    assert server.count() == 45


def test_kill_9_then_resume_gives_the_uninterrupted_answers(
    server: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """kill -9 mid-run, run again: same answers as an uninterrupted run, each job once, no finished call repeated."""
    slow = {"requests_per_minute": 900, "max_in_flight": 2}
    models = [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": server.base_url,
            "rate_limit": slow,
        }
    ]
    ref_cfg = write_config(tmp_path / "ref" / "c.yaml", server.base_url, scenario, models=models)
    own_cache = {"KNOWWHEN_CACHE_DIR": str(tmp_path / "ref" / "cache")}  # else the killed run replays it
    assert knowwhen("run", str(ref_cfg), "-q", env=own_cache).returncode == 0
    reference = read_answers(tmp_path / "ref" / "out" / "qs" / "answers_lexical.jsonl.gz")

    cfg = write_config(tmp_path / "killed" / "c.yaml", server.base_url, scenario, models=models)
    server.reset_stats()
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while server.count() < 15 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = server.count()
    assert 0 < before < 45, "the kill should land mid-run"
    resumed = knowwhen("run", str(cfg), "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert read_answers(tmp_path / "killed" / "out" / "qs" / "answers_lexical.jsonl.gz") == reference
    # calls that had completed were replayed from the cache; at most the ones in flight at the kill repeat
    assert server.count() <= 45 + 2


def test_rate_limited_server_is_waited_for_not_hammered(
    server: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """429 with Retry-After: 1 for a while: every job finishes, the runner waits as asked and sends few requests."""
    server.set_faults([{"fault": "429", "count": 6, "retry_after": 1}])
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": server.base_url}
    ]
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    started = time.monotonic()
    done = knowwhen("run", str(config), "-q")
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    rows = read_answers(tmp_path / "out" / "qs" / "answers_lexical.jsonl.gz")
    assert len(rows) == 45 and all(r["valid"] for r in rows)
    assert server.count(status=429) == 6
    assert server.count(status=200) == 45
    assert elapsed >= 1.0  # it paused for the Retry-After
    assert server.count() <= 45 + 6 + 8  # no hammering: at most one extra request per caller in flight
