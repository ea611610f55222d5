"""``knowwhen cache``: what the run's cache holds, and clearing it by model."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow


def test_cache_stats_and_clear(server: ServerProcess, tmp_path: Path) -> None:
    """One entry per distinct call and model; clearing one model leaves the other's entries."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)  # 18 questions
    cfg = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    assert knowwhen("run", str(cfg), "-q", "--no-finalize").returncode == 0
    out = tmp_path / "out"
    stats = knowwhen("cache", "stats", str(out))
    assert stats.returncode == 0, stats.stderr
    assert "hosted_vllm/lexical: 18" in stats.stdout and "openai/lexical-llm: 18" in stats.stdout
    cleared = knowwhen("cache", "clear", str(out), "--model", "hosted_vllm/lexical")
    assert cleared.returncode == 0 and "18 cached responses left" in cleared.stdout
    refused = knowwhen("cache", "clear", str(out))
    assert refused.returncode == 2 and "--model" in refused.stderr
