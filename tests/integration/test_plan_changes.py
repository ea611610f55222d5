"""A run is what its config says now: jobs of an earlier version of the config are set aside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen

pytestmark = pytest.mark.slow


def _config(folder: Path, base: str, **episodes: Any) -> Path:
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base},
        {"id": "agent", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base}/v1"},
    ]
    scenario = {"id": "eps", "kind": "episodes", "suite": "common", "split": "fit", **episodes}
    config = {
        "name": "plans",
        "output": str(folder / "out"),
        "models": models,
        "modes": ["llm", "model"],
        "scenarios": [scenario],
        "workers": {"concurrency": 8, "lease_seconds": 10},
    }
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _episodes_per_cell(out: Path) -> dict[tuple[str, str], int]:
    cells = {}
    for model in ("lexical", "agent"):
        doc = json.loads((out / "manifests" / f"{model}.cxs.json").read_text())
        for cell in doc["closed_loop"]:
            cells[(model, cell["mode"])] = cell["episodes"] + cell["failed"]
    return cells


@pytest.mark.journey("run.stale_jobs", "status.stale_jobs")
def test_changing_an_episode_set_and_back_scores_only_the_current_plan(
    server: ServerProcess, tmp_path: Path
) -> None:
    """n: 2 -> n: 3 with other max_steps -> n: 2 again: 2 episodes per cell, the old ones back, no calls."""
    first = knowwhen("run", str(_config(tmp_path, server.base_url, n=2)), "-q")
    assert first.returncode == 0, first.stderr
    assert _episodes_per_cell(tmp_path / "out") == {("lexical", "model"): 2, ("agent", "llm"): 2}
    changed = knowwhen("run", str(_config(tmp_path, server.base_url, n=3, max_steps=12)), "-q")
    assert changed.returncode == 0, changed.stderr
    assert (
        "set aside: 4 jobs of an earlier version of the config (kept, not worked, not finalised; they come "
        "back if the config does)"
    ) in " ".join(changed.stdout.split())
    assert _episodes_per_cell(tmp_path / "out") == {("lexical", "model"): 3, ("agent", "llm"): 3}
    calls = server.count()
    back = knowwhen("run", str(_config(tmp_path, server.base_url, n=2)), "-q")
    assert back.returncode == 0, back.stderr
    assert server.count() == calls  # the first plan's episodes came back with their results
    assert _episodes_per_cell(tmp_path / "out") == {("lexical", "model"): 2, ("agent", "llm"): 2}
    status = knowwhen("status", str(tmp_path / "out"))
    assert status.returncode == 0, status.stderr
    assert "6 jobs of an earlier version of the config set aside (kept, not worked, not in the results)" in (
        " ".join(status.stdout.split())
    )


def test_plan_only_sets_aside_a_dropped_mode_and_the_next_run_works_only_the_plan(
    server: ServerProcess, tmp_path: Path
) -> None:
    """run --plan-only of a config without a mode sets its jobs aside; the next run finalises without them."""
    path = _config(tmp_path, server.base_url, n=2)
    assert knowwhen("run", str(path), "-q").returncode == 0
    doc = yaml.safe_load(path.read_text())
    doc["modes"] = ["llm"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    planned = knowwhen("run", str(path), "-q", "--plan-only")
    assert planned.returncode == 0, planned.stderr
    assert "set aside: 2 jobs" in planned.stdout
    again = knowwhen("run", str(path), "-q")
    assert again.returncode == 0, again.stderr
    assert _episodes_per_cell(tmp_path / "out") == {("agent", "llm"): 2}
    assert "set aside: 2 jobs" in again.stdout
