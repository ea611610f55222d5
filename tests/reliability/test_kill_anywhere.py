"""Kill anywhere: SIGKILL the runner at named and random points, resume, and get the uninterrupted result."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, write_config

pytestmark = pytest.mark.slow

MODELS = ("lexical", "lexical-llm")


def _models(base_url: str, rpm: int = 3000) -> list[dict]:
    limit = {"requests_per_minute": rpm, "max_in_flight": 4}
    return [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": base_url,
            "rate_limit": limit,
        },
        {
            "id": "lexical-llm",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": f"{base_url}/v1",
            "rate_limit": limit,
        },
    ]


def _answers(out: Path) -> dict[str, list[dict]]:
    return {m: read_answers(out / "qs" / f"answers_{m}.jsonl.gz") for m in MODELS}


# What legitimately differs between an interrupted and an uninterrupted run: times, and how answers were
# obtained (calls, cache hits, attempts), never what they were.
_RUN_DEPENDENT = (
    "latency",
    "created",
    "finalized",
    "work_",
    "cache_hits",
    "calls",
    "attempts",
    "retried",
    "retry_errors",
    "requests",
    "config_file",
    "config_sha256",
    "name",
)


def _scored(value):
    if isinstance(value, dict):
        return {k: _scored(v) for k, v in value.items() if not any(p in k for p in _RUN_DEPENDENT)}
    if isinstance(value, list):
        return [_scored(v) for v in value]
    return value


def _manifests(out: Path) -> dict[str, dict]:
    return {m: _scored(json.loads((out / "manifests" / f"{m}.cxs.json").read_text())) for m in MODELS}


def _job_rows(out: Path) -> Counter[str]:
    import sqlite3

    with sqlite3.connect(out / "knowwhen.db") as conn:
        return Counter(dict(conn.execute("SELECT status, count(*) FROM kw_jobs GROUP BY status").fetchall()))


@pytest.fixture
def reference(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    base = tmp_path_factory.mktemp("ref")
    scenario = make_question_set(base / "qs", n_tasks=16)  # 72 questions x 2 models
    cfg = write_config(base / "c.yaml", server.base_url, scenario, models=_models(server.base_url))
    own_cache = {"KNOWWHEN_CACHE_DIR": str(base / "cache")}  # else the killed runs replay it
    assert knowwhen("run", str(cfg), "-q", env=own_cache).returncode == 0
    return scenario, {
        "answers": _answers(base / "out"),
        "manifests": _manifests(base / "out"),
        "table": (base / "out" / "table.md").read_text(),
    }


def _assert_same(out: Path, expected: dict, tally: Counter[str]) -> None:
    got = _answers(out)
    lost = sum(len(expected["answers"][m]) - len(got[m]) for m in MODELS)
    tally["results lost"] += max(0, lost)
    assert got == expected["answers"]
    assert _job_rows(out) == Counter({"done": 144})
    assert _manifests(out) == expected["manifests"]
    assert (out / "table.md").read_text() == expected["table"]
    assert (out / "report.html").is_file()


@pytest.mark.parametrize("point", ["claim:2", "call:5", "record:3", "finalize:1"])
def test_kill_at_named_point_then_resume(
    server: ServerProcess, tmp_path: Path, reference: tuple[Path, dict], point: str, tally: Counter[str]
) -> None:
    """A kill during claim, a model call, a result write or finalise loses and duplicates nothing."""
    scenario, expected = reference
    cfg = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=_models(server.base_url))
    killed = knowwhen("run", str(cfg), "-q", env={"KNOWWHEN_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    tally["kills survived"] += 1
    resumed = knowwhen("run", str(cfg), "-q")
    assert resumed.returncode == 0, resumed.stderr
    _assert_same(tmp_path / "out", expected, tally)


def test_twenty_random_kills_then_resume(
    server: ServerProcess, tmp_path: Path, reference: tuple[Path, dict], tally: Counter[str]
) -> None:
    """Twenty SIGKILLs at random moments, each followed by a resume: the final answers equal the reference."""
    scenario, expected = reference
    rng = random.Random(20261130)
    cfg = write_config(
        tmp_path / "c.yaml",
        server.base_url,
        scenario,
        models=_models(server.base_url, rpm=300),
        workers={"concurrency": 4, "lease_seconds": 3},
    )
    kills = 0
    for _ in range(40):
        proc = subprocess.Popen(
            [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.3, 3.0))
        if proc.poll() is not None:
            continue  # it finished before the kill: nothing left to interrupt
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        if kills == 20:
            break
    tally["kills survived"] += kills
    assert kills >= 20 or _job_rows(tmp_path / "out").get("done") == 144
    final = knowwhen("run", str(cfg), "-q")
    assert final.returncode == 0, final.stderr
    _assert_same(tmp_path / "out", expected, tally)
