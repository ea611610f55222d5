"""sparrow-decider, a third-party System One server with bundled weights, driven end to end by `knowwhen run`.

It is a wire peer, not an accuracy baseline (it is near chance on DecisionGym): what this proves is that a
real server that answers with its own model name, reports 0 tokens, adds fields of its own, uses the
vendor's confidence scale and serves one thread per request is recorded correctly, resumed and cached.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from knowwhen_runner.config import ScenarioSpec
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.results import MANIFEST_SCHEMA_VERSION
from knowwhen_runner.scenarios.states import planned_questions
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.serve.process import free_port
from tests.helpers import knowwhen, with_named_probabilities

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = 40  # the limit: whole tasks of the common states, at most this many questions
TASKS = 3


@pytest.fixture(scope="module")
def sparrow() -> Iterator[str]:
    """A sparrow-decider server on a free loopback port (its base URL)."""
    exe = shutil.which("sparrow-decider", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("sparrow-decider is not installed: install the dev extras")
    port = free_port()
    process = subprocess.Popen(
        [exe, "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, "sparrow-decider exited at start"
            assert time.monotonic() < deadline, "sparrow-decider did not answer within 60 s"
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def _config(tmp_path: Path, sparrow: str, server: ServerProcess) -> Path:
    limit = {"max_in_flight": 4}  # thread-per-request with a small backlog: a few at a time
    config: dict[str, Any] = {
        "name": "sparrow",
        "output": str(tmp_path / "out"),
        "models": [
            {
                "id": "sparrow",
                "model": "hosted_vllm/sparrow",
                "kind": "decision",
                "api_base": sparrow,
                "rate_limit": limit,
                # sparrow answers with its loaded model's name: the runner refuses such replies as another
                # model's until the config names it, as its message says
                "served_as": "sparrow-nano-general-v1.1",
            },
            {"id": "agent", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{server.base_url}/v1"},
        ],
        "modes": ["model"],
        "scenarios": [
            {
                "id": "common",
                "kind": "states",
                "path": str(ROOT / "scenarios/decisiongym/common"),
                "limit": QUESTIONS,
            },
            {
                "id": "l3",
                "kind": "episodes",
                "agent": "agent",
                "suite": "common",
                "split": "bench",
                "n": TASKS,
                "max_steps": 6,
                "modes": ["model", "shadow"],
            },
        ],
        "workers": {"concurrency": 8, "lease_seconds": 20},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _asked() -> int:
    """The questions the limit's sample asks (whole tasks, at most ``QUESTIONS``)."""
    common = ROOT / "scenarios/decisiongym/common"
    spec = ScenarioSpec(id="common", path=common, limit=QUESTIONS)
    return len(planned_questions(spec, load_question_set(common)).qhashes)


def _rows(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "out" / "common" / "answers_sparrow.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        return with_named_probabilities(path, [json.loads(line) for line in fh])


def _vendor(p_max: float, k: int) -> float:
    return min(1.0, max(0.0, (p_max - 1 / k) / (1 - 1 / k)))


def test_a_sweep_against_sparrow_records_the_cards_confidence_resumes_and_caches(
    sparrow: str, server: ServerProcess, tmp_path: Path
) -> None:
    """L2 and L3 against a real server: every answer valid, confidence = p(choice) while the server's own
    (vendor-scale) figure is kept beside it, 0 tokens accepted, and a rerun makes no model call."""
    cfg = _config(tmp_path, sparrow, server)
    first = knowwhen("run", str(cfg), "-q", timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    rows = _rows(tmp_path)
    assert len(rows) == _asked() and all(r["valid"] and r["error"] is None for r in rows)
    for r in rows:
        probs = r["probabilities"]
        assert r["confidence"] == pytest.approx(probs[r["answer"]])
        assert r["reported_confidence"] == pytest.approx(
            _vendor(max(probs.values()), len(probs)), abs=1e-4
        )  # sparrow rounds to 4 places
        assert r["input_tokens"] == 0
    # Near chance over 69 options: the card's confidence and the vendor's differ visibly.
    assert any(abs(r["confidence"] - r["reported_confidence"]) > 0.005 for r in rows)
    manifest = json.loads((tmp_path / "out" / "manifests" / "sparrow.cxs.json").read_text())
    assert manifest["schema_version"] == MANIFEST_SCHEMA_VERSION  # the card's confidence from version 2 on
    episodes = [c for c in manifest["closed_loop"] if c["scenario"] == "l3"]
    assert {c["mode"] for c in episodes} == {"model", "shadow"} and all(
        c["episodes"] == TASKS for c in episodes
    )
    again = knowwhen("run", str(cfg), "-q", timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 model calls, 0 requests" in " ".join(again.stdout.split())
    assert _rows(tmp_path) == rows


def test_a_killed_sweep_against_sparrow_resumes_and_answers_each_question_once(
    sparrow: str, server: ServerProcess, tmp_path: Path
) -> None:
    """kill -9 mid-run, then rerun: the sweep finishes, and no question was answered twice in the cache."""
    cfg = _config(tmp_path, sparrow, server)
    run = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    db = tmp_path / "out" / "knowwhen.db"
    deadline = time.monotonic() + 120

    while time.monotonic() < deadline and run.poll() is None:
        try:
            with sqlite3.connect(db, timeout=1) as conn:
                done = conn.execute("SELECT count(*) FROM kw_jobs WHERE status = 'done'").fetchone()[0]
        except sqlite3.Error:
            done = 0
        if done >= 10:
            break
        time.sleep(0.05)
    run.kill()
    run.wait()
    resumed = knowwhen("run", str(cfg), "-q", timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rows = _rows(tmp_path)
    assert len(rows) == _asked() and all(r["valid"] for r in rows)
    with sqlite3.connect(Path(os.environ["KNOWWHEN_CACHE_DIR"]) / "responses.db") as conn:
        keys = conn.execute("SELECT count(*), count(DISTINCT key) FROM kw_cache").fetchone()
    assert keys[0] == keys[1] > 0
