"""The cost forecast of `plan`: priced models still summed beside an unpriced one, and the forecast range
holding the cost a run then records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.sweep import plan_report
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow

_PRICE = {"input_per_million": 2.0, "output_per_million": 8.0}


def test_unpriced_model_is_named_with_its_config_line_and_the_rest_is_summed(tmp_path: Path) -> None:
    """One model without a price no longer makes the estimate unknown: it is named, the priced one summed."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)
    models = [
        {
            "id": "priced",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": "http://127.0.0.1:9",
            "pricing": _PRICE,
        },
        {
            "id": "remote",
            "model": "openai/surely-unlisted-model",
            "kind": "llm",
            "api_base": "http://x.invalid/v1",
        },
    ]
    config = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", scenario, models=models)
    report = plan_report(config)
    fc = report.forecast
    assert report.est_cost_usd == fc.usd > 0
    assert [u.model for u in fc.unpriced] == ["remote"] and "pricing:" in fc.unpriced[0].config_line
    lines = {line.model: line for line in fc.lines}
    assert lines["remote"].usd is None and lines["priced"].level == "L2"
    assert lines["priced"].low is not None and lines["priced"].low <= fc.usd <= (lines["priced"].high or 0)
    assert any("no price (remote)" in c for c in fc.caveats)
    shown = knowwhen("plan", str(config))
    said = " ".join(shown.stdout.split())
    assert shown.returncode == 0 and "no price for remote" in said and "pricing:" in said


def test_forecast_range_holds_the_cost_the_run_records(server: ServerProcess, tmp_path: Path) -> None:
    """With prices on both models, the cost `run` records lies within the low–high range `plan` forecast."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=10)
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": server.base_url},
        {
            "id": "lexical-llm",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": f"{server.base_url}/v1",
        },
    ]
    for m in models:
        m["pricing"] = _PRICE
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    planned = knowwhen("plan", str(config), "--json")
    assert planned.returncode == 0, planned.stderr
    fc = json.loads(planned.stdout)["forecast"]
    assert not fc["unpriced"] and fc["usd"] > 0
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(knowwhen("status", str(tmp_path / "out"), "--json").stdout)
    by_line = {line["model"]: line for line in fc["lines"]}
    for model_id, row in status["models"].items():
        line = by_line[model_id]
        assert line["low"] <= row["cost_usd"] <= line["high"], (model_id, row["cost_usd"], line)
    actual = sum(row["cost_usd"] for row in status["models"].values())
    assert fc["low"] <= actual <= fc["high"], (actual, fc)
