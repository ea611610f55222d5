"""Opt-in: the small sweep against a live OpenAI-compatible server (llama-cpp-python or any other).

Skipped unless ``KNOWWHEN_LIVE_LLM_URL`` is set to the server's base URL ending in /v1; the model name
is ``KNOWWHEN_LIVE_LLM_MODEL`` (default: the alias the cassettes were recorded with). See
tests/fixtures/llama_cpp/README.md for a llama-cpp-python server command.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.sweep import RunRequest, run_sweep

from .llama_cases import MODEL, sweep_config

LIVE_URL = os.environ.get("KNOWWHEN_LIVE_LLM_URL", "")
LIVE_MODEL = os.environ.get("KNOWWHEN_LIVE_LLM_MODEL", MODEL)

pytestmark = [
    pytest.mark.skipif(not LIVE_URL, reason="set KNOWWHEN_LIVE_LLM_URL (and KNOWWHEN_LIVE_LLM_MODEL)"),
    pytest.mark.slow,
]


def test_small_sweep_against_a_live_server(server: ServerProcess, tmp_path: Path) -> None:
    """The sweep of 10 questions and 2 episodes finishes every job against the live LLM server."""
    config = tmp_path / "sweep.yaml"
    settings = sweep_config(LIVE_URL.rstrip("/"), server.base_url, tmp_path / "out", model=LIVE_MODEL)
    config.write_text(yaml.safe_dump(settings))
    summary = run_sweep(RunRequest(config, finalize=False, progress=False))
    assert summary.counts == {"done": summary.planned}, summary.counts
