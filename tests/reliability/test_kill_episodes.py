"""Kill anywhere, closed loop: episodes (shadow fit, then gated at the fitted τ) survive SIGKILL at every point."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen

pytestmark = pytest.mark.slow

_TIMING = ("latency_ms", "cache_hits", "spent_usd", "wall_ms")


def _config(path: Path, base_url: str) -> Path:
    config = {
        "name": "l3",
        "output": str(path.parent / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": base_url},
            {"id": "agent-sim", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base_url}/v1"},
        ],
        "modes": ["llm", "model", "gated", "shadow"],
        "scenarios": [
            {
                "id": "fit",
                "kind": "episodes",
                "agent": "agent-sim",
                "suite": "common",
                "split": "fit",
                "n": 4,
                "modes": [],
            },
            {
                "id": "eval",
                "kind": "episodes",
                "agent": "agent-sim",
                "suite": "common",
                "split": "bench",
                "n": 4,
                "tau": {"fit": "fit", "target": "llm", "min_support": 1},
            },
        ],
        "workers": {"concurrency": 4, "lease_seconds": 5},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _episodes(out: Path) -> dict[str, dict]:
    import sqlite3

    with sqlite3.connect(out / "knowwhen.db") as conn:
        rows = conn.execute("SELECT id, status, result FROM kw_jobs ORDER BY id").fetchall()
    got = {}
    for job_id, status, result in rows:
        assert status == "done", (job_id, status)
        data = json.loads(result)
        for name in _TIMING:
            data.pop(name, None)
        data["latency_ms"] = None
        got[job_id] = data
    return got


@pytest.fixture(scope="module")
def reference(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    serve.reset()
    cfg = _config(tmp_path_factory.mktemp("l3ref") / "c.yaml", serve.base_url)
    done = knowwhen("run", str(cfg), "-q", env={"KNOWWHEN_CACHE_DIR": str(cfg.parent / "cache")})
    assert done.returncode == 0, done.stderr
    return _episodes(cfg.parent / "out")


@pytest.mark.parametrize("point", ["claim:2", "call:3", "record:2", "finalize:1"])
def test_kill_during_episodes_then_resume(
    server: ServerProcess, tmp_path: Path, reference: dict[str, dict], point: str, tally: Counter[str]
) -> None:
    """Episode logs after a kill and a resume equal the uninterrupted run's, with no job lost or doubled."""
    cfg = _config(tmp_path / "c.yaml", server.base_url)
    killed = knowwhen("run", str(cfg), "-q", env={"KNOWWHEN_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    tally["kills survived"] += 1
    resumed = knowwhen("run", str(cfg), "-q")
    assert resumed.returncode == 0, resumed.stderr
    got = _episodes(tmp_path / "out")
    tally["results lost"] += max(0, len(reference) - len(got))
    assert got.keys() == reference.keys()
    assert got == reference
