"""The planner's closed-loop expansion: one job per episode, identities, and gating on a fitted τ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from knowwhen_runner.config import SweepConfig, parse_config
from knowwhen_runner.plan.grid import fit_requests, plan
from knowwhen_runner.scenarios import Scenario, load_scenario
from knowwhen_runner.sweep import plan_report


def _config(tmp_path: Path, **overrides: Any) -> SweepConfig:
    data: dict[str, Any] = {
        "name": "t",
        "output": "out",
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision"},
            {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision"},
            {"id": "agent", "model": "openai/agent-sim", "kind": "llm"},
        ],
        "modes": ["llm", "model", "gated", "shadow"],
        "scenarios": [
            {"id": "fit", "kind": "episodes", "suite": "common", "split": "fit", "n": 3, "modes": []},
            {
                "id": "ev",
                "kind": "episodes",
                "suite": "common",
                "split": "bench",
                "n": 4,
                "tau": {"fit": "fit", "target": "llm"},
            },
        ],
    }
    data.update(overrides)
    return parse_config(yaml.safe_dump(data), base=tmp_path, source="c.yaml")


def _scenarios(config: SweepConfig) -> dict[str, Scenario]:
    return {s.id: load_scenario(s) for s in config.scenarios}


def _cells(jobs: list[Any]) -> dict[tuple[str, str, str], int]:
    out: dict[tuple[str, str, str], int] = {}
    for job in jobs:
        key = (job.scenario_id, job.model_id, job.mode)
        out[key] = out.get(key, 0) + 1
    return out


def test_episodes_expand_to_one_job_per_task_per_cell_and_gated_waits_for_its_fit(tmp_path: Path) -> None:
    """Without fits: llm once per task (under the agent's id), model/shadow per decision model, no gated."""
    config = _config(tmp_path)
    the_plan = plan(config, _scenarios(config), None)
    assert _cells(the_plan.jobs) == {
        ("ev", "agent", "llm"): 4,
        ("ev", "prior", "model"): 4,
        ("ev", "lexical", "model"): 4,
        ("ev", "prior", "shadow"): 4,
        ("ev", "lexical", "shadow"): 4,
        ("fit", "prior", "shadow"): 3,
        ("fit", "lexical", "shadow"): 3,
    }
    assert any("waits for the τ fit on fit" in note for note in the_plan.skipped)
    llm_job = next(j for j in the_plan.jobs if j.mode == "llm")
    assert llm_job.payload == {
        "kind": "episode",
        "agent": "agent",
        "decision_model": None,
        "max_steps": 15,
        "tau": None,
        "fit": None,
    }
    assert len({j.id for j in the_plan.jobs}) == len(the_plan.jobs)


def test_a_fit_releases_the_gated_episodes_with_the_numeric_tau_in_their_payload(tmp_path: Path) -> None:
    """Once ``fits`` holds a decision model's fit, its gated episodes appear, carrying τ and the fit record."""
    config = _config(tmp_path)
    scenarios = _scenarios(config)
    request = next(r for r in fit_requests(config) if r.decision_model == "prior")
    fits = {request.key: {"tau": 0.42, "support": 12, "key": request.key}}
    gated = [j for j in plan(config, scenarios, fits).jobs if j.mode == "gated"]
    assert [(j.model_id, j.scenario_id) for j in gated] == [("prior", "ev")] * 4
    assert all(j.payload["tau"] == 0.42 and j.payload["fit"]["support"] == 12 for j in gated)
    # The fitted number is not part of the identity: another fit value keeps the same job ids.
    refit = plan(config, scenarios, {request.key: {"tau": 0.9, "key": request.key}}).jobs
    assert {j.id for j in gated} == {j.id for j in refit if j.mode == "gated"}


def test_planning_is_pure_and_ids_follow_what_decides_an_episode(tmp_path: Path) -> None:
    """Same config, same ids; the agent changes every id; a fixed τ changes only the gated ids."""
    base = _config(tmp_path)
    ids = [j.id for j in plan(base, _scenarios(base)).jobs]
    assert ids == [j.id for j in plan(base, _scenarios(base)).jobs]

    models = [
        {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision"},
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision"},
        {"id": "agent", "model": "openai/lexical-llm", "kind": "llm"},
    ]
    other_agent = _config(tmp_path, models=models)
    assert not set(ids) & {j.id for j in plan(other_agent, _scenarios(other_agent)).jobs}

    def fixed(tau: float) -> dict[str, str]:
        scenario = {"id": "ev", "kind": "episodes", "suite": "common", "split": "bench", "n": 2, "tau": tau}
        config = _config(tmp_path, scenarios=[scenario])
        return {f"{j.mode}:{j.model_id}:{j.item}": j.id for j in plan(config, _scenarios(config)).jobs}

    low, high = fixed(0.5), fixed(0.9)
    assert set(low) == set(high)
    changed = {k for k in low if low[k] != high[k]}
    assert changed and all(k.startswith("gated:") for k in changed)


def test_the_fit_sets_own_shadow_episodes_are_the_ones_the_fit_uses(tmp_path: Path) -> None:
    """A fit set that also runs shadow itself plans each shadow episode once (same identity, no duplicate)."""
    scenarios = [
        {"id": "fit", "kind": "episodes", "suite": "common", "split": "fit", "n": 3, "modes": ["shadow"]},
        {
            "id": "ev",
            "kind": "episodes",
            "suite": "common",
            "split": "bench",
            "n": 2,
            "tau": {"fit": "fit", "target": 0.9},
        },
    ]
    config = _config(tmp_path, scenarios=scenarios, modes=["llm"])
    cells = _cells(plan(config, _scenarios(config)).jobs)
    assert cells == {
        ("fit", "prior", "shadow"): 3,
        ("fit", "lexical", "shadow"): 3,
        ("ev", "agent", "llm"): 2,
    }


def test_gated_without_tau_is_skipped_with_a_reason(tmp_path: Path) -> None:
    """An episodes scenario with mode gated but no tau plans no gated jobs and says why."""
    scenario = {"id": "ev", "kind": "episodes", "suite": "common", "split": "bench", "n": 2}
    config = _config(tmp_path, scenarios=[scenario], modes=["gated"])
    the_plan = plan(config, _scenarios(config))
    assert the_plan.jobs == []
    assert any("no tau" in note for note in the_plan.skipped)


def test_the_dry_run_counts_episodes_without_guessing_their_calls(tmp_path: Path) -> None:
    """`knowwhen plan` on episodes lists their cells, leaves their calls out of the call count, and
    forecasts them as L3 lines from a stated per-step assumption (no episode has finished yet)."""
    config = _config(tmp_path)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)))
    report = plan_report(path)
    assert report.jobs == report.new_jobs == 26 and report.calls_to_make == 0
    assert any(n.startswith("26 episodes to run") for n in report.skipped)
    lines = report.forecast.lines
    assert sum(line.jobs for line in lines) == 26
    assert {line.level for line in lines} == {"L3"}
    assert all(line.basis in ("assumed steps", "no price") for line in lines)
    assert any("assumed" in c and "steps" in c for c in report.forecast.caveats)


def test_the_forecast_prices_episodes_from_finished_ones_of_their_cell(tmp_path: Path) -> None:
    """L3 cells with finished episodes are forecast at their mean cost (cheapest to dearest as the range);
    cells without any fall back to the stated per-step assumption, priced for priced models."""
    from knowwhen_runner.sweep.forecast import forecast

    price = {"input_per_million": 1.0, "output_per_million": 4.0}
    models = [
        {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "pricing": price},
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "pricing": price},
        {"id": "agent", "model": "openai/agent-sim", "kind": "llm", "pricing": price},
    ]
    config = _config(tmp_path, models=models)
    the_plan = plan(config, _scenarios(config))
    finished = [
        {"kind": "episode", "scenario": "fit", "mode": "shadow", "decision_model": "prior", "cost_usd": cost}
        for cost in ({"decision": 0.001, "llm": 0.009}, {"decision": 0.002, "llm": 0.018}, {"llm": 0.03})
    ]
    fc = forecast(config, the_plan.jobs, {}, finished, [])  # e.g. a rerun with a new repeat
    lines = {(line.scenario, line.mode, line.model): line for line in fc.lines}
    seen = lines[("fit", "shadow", "prior")]
    n = seen.jobs
    assert seen.basis == "3 finished episodes" and seen.level == "L3"
    assert seen.usd == pytest.approx(n * 0.02) and seen.low == pytest.approx(n * 0.01)
    assert seen.high == pytest.approx(n * 0.03)
    assumed = lines[("fit", "shadow", "lexical")]
    assert assumed.basis == "assumed steps" and 0 < (assumed.low or 0) < (assumed.usd or 0) < (
        assumed.high or 0
    )
    assert not fc.unpriced and fc.low <= fc.usd <= fc.high
