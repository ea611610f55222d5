"""``knowwhen run`` reads its config file once: the fleet hands the loaded config to the sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner import config as config_module
from knowwhen_runner.sweep import RunRequest, fleet, run_fleet, sweep
from tests.helpers import make_question_set, write_config


def test_run_fleet_loads_the_config_once_and_plans_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan-only run on a private database parses the file once and still puts the whole plan in the queue."""
    loads: list[str] = []

    def counted(path: Any) -> Any:
        loads.append(str(path))
        return config_module.load_config(path)

    monkeypatch.setattr(fleet, "load_config", counted)
    monkeypatch.setattr(sweep, "load_config", counted)
    cfg = write_config(
        tmp_path / "c.yaml", "http://127.0.0.1:9", make_question_set(tmp_path / "qs", n_tasks=2)
    )
    summary = run_fleet(RunRequest(cfg, plan_only=True, progress=False))
    assert loads == [str(cfg)]
    assert summary.planned > 0 and summary.counts.get("pending") == summary.planned
