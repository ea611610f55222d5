"""What status and the live view say each model waits for: its rate, its in-flight cap, a hold, or nothing."""

from __future__ import annotations

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.queue.pace import model_pace


def _config() -> SweepConfig:
    models = [
        {"id": m, "model": f"hosted_vllm/{m}", "kind": "decision", "api_base": "http://127.0.0.1:9",
         "rate_limit": {"requests_per_minute": 60, "max_in_flight": 4}}
        for m in ("a", "b")
    ]  # fmt: skip
    return SweepConfig.model_validate(
        {"name": "t", "output": "out", "models": models, "scenarios": [{"id": "s", "path": "qs"}]}
    )


def test_each_model_says_what_it_waits_for() -> None:
    """At 58 of its 60/min a model waits for its rate; with all of its 4 in flight at 20/min, for its cap;
    paused, for the pause; with nothing done lately and nothing running, for a back-off or an outage."""
    config = _config()
    at_rate = model_pace(config, "a", lately=(58, 60.0), running=1, open_jobs=100)
    assert at_rate is not None and at_rate.waits_for == "its rate" and round(at_rate.per_min or 0) == 58
    assert at_rate.describe() == "58/60/min, 1/4 in flight: its rate"
    capped = model_pace(config, "b", lately=(20, 60.0), running=4, open_jobs=100)
    assert capped is not None and capped.waits_for.startswith("its in-flight cap")
    paused = model_pace(config, "a", lately=(58, 60.0), running=0, open_jobs=100, held="paused")
    assert paused is not None and paused.waits_for == "paused"
    stuck = model_pace(config, "b", lately=None, running=0, open_jobs=100)
    assert stuck is not None and stuck.per_min is None and stuck.waits_for.startswith("a back-off")
    assert model_pace(config, "b", lately=(3, 60.0), running=0, open_jobs=0).waits_for == "nothing (done)"  # type: ignore[union-attr]
    assert model_pace(config, "gone", lately=None, running=0, open_jobs=0) is None
