"""Per-model rate limits hold at the server, from the very first request."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, rated_lexical, write_config

pytestmark = pytest.mark.slow


def test_requests_per_minute_hold_in_every_window(server: ServerProcess, tmp_path: Path) -> None:
    """At 600 requests/min no one-second window sees more than 10 (+1) requests, even while litellm loads."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=8)  # 36 questions
    models = rated_lexical(server.base_url, 600, 16)
    cfg = write_config(
        tmp_path / "c.yaml", server.base_url, scenario, models=models, workers={"concurrency": 16}
    )
    done = knowwhen("run", str(cfg), "-q", "--no-finalize")
    assert done.returncode == 0, done.stderr
    stamps = sorted(r[0] for r in server.stats()["records"])
    assert len(stamps) == 36
    worst = max(sum(1 for t in stamps if start <= t < start + 1.0) for start in stamps)
    assert worst <= 11, f"{worst} requests in one second"
    span = stamps[-1] - stamps[0]
    assert span >= 35 * 0.1 * 0.9  # evenly spaced, not bunched then idle
