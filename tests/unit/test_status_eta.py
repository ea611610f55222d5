"""status's per-model ETA: each model at the pace of its own jobs done lately, fleet-wide."""

from __future__ import annotations

import pytest

from knowwhen_runner.stored.status import _add_eta


def _row(pending: int, running: int = 0) -> dict[str, int]:
    return {"done": 10, "pending": pending, "running": running}


def test_each_model_goes_at_its_own_pace() -> None:
    """A fast decision model and a slow LLM in one run: each ETA is its own, not a share of the total."""
    rows = {"fast": _row(1000), "slow": _row(30, 2), "idle": _row(5), "finished": _row(0), "paused": _row(9)}
    lately = {"fast": (600, 60.0), "slow": (6, 60.0), "idle": (1, 1.0), "paused": (50, 30.0)}
    _add_eta(rows, lately, held={"paused"})
    assert rows["fast"]["eta_s"] == pytest.approx(100.0)  # 10 jobs/s
    assert rows["slow"]["eta_s"] == pytest.approx(320.0)  # 0.1 jobs/s for 32 jobs
    assert rows["idle"]["eta_s"] is None  # one job lately: no pace yet
    assert rows["finished"]["eta_s"] == 0.0
    assert rows["paused"]["eta_s"] is None
