"""``repeats: N`` on an episodes scenario: N episodes per task, each with its seed in its identity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from knowwhen_runner.config import SweepConfig, parse_config
from knowwhen_runner.exceptions import ConfigError
from knowwhen_runner.plan.grid import plan
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.serve.agent_sim import AgentSim


def _config(tmp_path: Path, **episodes: Any) -> SweepConfig:
    data: dict[str, Any] = {
        "name": "t",
        "output": "out",
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision"},
            {"id": "agent", "model": "openai/agent-sim", "kind": "llm"},
        ],
        "modes": ["llm", "model"],
        "scenarios": [
            {"id": "ev", "kind": "episodes", "suite": "common", "split": "bench", "n": 4, **episodes}
        ],
    }
    return parse_config(yaml.safe_dump(data), base=tmp_path, source="c.yaml")


def _jobs(config: SweepConfig) -> list[Any]:
    return plan(config, {s.id: load_scenario(s) for s in config.scenarios}, None).jobs


def test_repeats_one_or_absent_plans_exactly_todays_jobs(tmp_path: Path) -> None:
    """A scenario without repeats and one with ``repeats: 1`` have the same job ids and payloads."""
    plain, once = _jobs(_config(tmp_path)), _jobs(_config(tmp_path, repeats=1))
    assert [(j.id, j.payload) for j in plain] == [(j.id, j.payload) for j in once]
    assert all("seed" not in j.payload for j in plain)


def test_repeats_add_seeded_episodes_and_keep_the_first(tmp_path: Path) -> None:
    """``repeats: 3``: three jobs per task and mode; repeat 0 keeps today's id, repeats 1 and 2 carry seeds."""
    plain, thrice = _jobs(_config(tmp_path)), _jobs(_config(tmp_path, repeats=3))
    assert len(thrice) == 3 * len(plain) and len({j.id for j in thrice}) == len(thrice)
    assert {j.id for j in plain} <= {j.id for j in thrice}
    extra = [j for j in thrice if j.id not in {p.id for p in plain}]
    assert sorted({(j.payload["repeat"], j.payload["seed"]) for j in extra}) == [(1, 1), (2, 2)]


def test_repeats_belong_to_episodes_scenarios_only(tmp_path: Path) -> None:
    """A states scenario with repeats is a config error naming the field."""
    data = {
        "name": "t",
        "output": "out",
        "models": [{"id": "prior", "model": "hosted_vllm/prior", "kind": "decision"}],
        "scenarios": [{"id": "qs", "kind": "states", "path": ".", "repeats": 2}],
    }
    with pytest.raises(ConfigError, match="repeats"):
        parse_config(yaml.safe_dump(data), base=tmp_path, source="c.yaml")


def test_the_agent_simulator_varies_with_the_request_seed() -> None:
    """Without a seed the simulator answers as before; seeds change which of its choices go wrong."""
    sim = AgentSim(error_rate=0.5)
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {}}}
        for n in ("find_customer", "get_orders", "lookup_customer_v2")
    ]
    messages = [{"role": "user", "content": "Please cancel order #1234 for jane@example.com"}]
    plain = sim.complete(messages, tools, "required")
    assert sim.complete(messages, tools, "required", seed=None) == plain
    picks = {
        str(sim.complete(messages, tools, "required", seed=s)["tool_calls"][0]["function"])
        for s in range(1, 30)
    }
    assert len(picks) > 1
