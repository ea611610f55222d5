"""Episodes in the config and the task-set loader: references checked at load, tasks rebuilt anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from knowwhen_runner.config import TauFit, parse_config
from knowwhen_runner.exceptions import ConfigError, ScenarioError
from knowwhen_runner.gym import EvalSeedError, get_suite, task_rows
from knowwhen_runner.gym.splits import write_task_list
from knowwhen_runner.scenarios import load_scenario

_MODELS = [
    {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision"},
    {"id": "agent", "model": "openai/agent-sim", "kind": "llm"},
]


def _parse(tmp_path: Path, scenarios: list[dict[str, Any]], models: list[dict[str, Any]] = _MODELS) -> Any:
    data = {"name": "t", "output": "out", "models": models, "scenarios": scenarios}
    return parse_config(yaml.safe_dump(data, sort_keys=False), base=tmp_path, source="c.yaml")


def _episodes(**fields: Any) -> dict[str, Any]:
    return {"id": "ev", "kind": "episodes", "suite": "common", "split": "fit", "n": 2, **fields}


def test_a_fitted_tau_and_a_fixed_tau_both_parse(tmp_path: Path) -> None:
    """`tau: 0.9` is a number, `tau: {fit, target}` a fit reference with a default minimum support."""
    fit = {"id": "fit", "kind": "episodes", "suite": "common", "split": "fit", "n": 2, "modes": []}
    config = _parse(tmp_path, [fit, _episodes(tau={"fit": "fit", "target": "llm"}, split="bench")])
    tau = config.scenarios[1].tau
    assert isinstance(tau, TauFit) and tau.target == "llm" and tau.min_support == 10
    assert _parse(tmp_path, [_episodes(tau=0.9)]).scenarios[0].tau == 0.9
    assert config.agent_of(config.scenarios[1]).id == "agent"


@pytest.mark.parametrize(
    ("scenarios", "models", "message"),
    [
        (
            [_episodes(agent="prior")],
            _MODELS,
            "scenarios.0.agent: 'prior' is not the id of an llm-kind model",
        ),
        (
            [_episodes(tau={"fit": "nope", "target": 0.9})],
            _MODELS,
            "tau.fit: 'nope' is not the id of another",
        ),
        ([_episodes(tau={"fit": "ev", "target": 0.9})], _MODELS, "tau.fit: 'ev' is not the id of another"),
        (
            [_episodes()],
            [*_MODELS, {"id": "llm2", "model": "openai/lexical-llm", "kind": "llm"}],
            "needs its agent LLM named (the config has 2 llm-kind models)",
        ),
        ([{"id": "ev", "kind": "episodes"}], _MODELS, "needs a path (a task list) or split and n"),
        ([{"id": "s", "path": ".", "tau": 0.5}], _MODELS, "tau: only episodes scenarios take this field"),
        ([_episodes(tau={"fit": "x", "target": 1.5})], _MODELS, "less than or equal to 1"),
    ],
)
def test_bad_episode_configs_fail_with_a_message_naming_the_field(
    tmp_path: Path, scenarios: list[dict[str, Any]], models: list[dict[str, Any]], message: str
) -> None:
    """Unknown agent, unknown or self fit reference, ambiguous agent, no tasks, misplaced field, bad target."""
    with pytest.raises(ConfigError, match=r"c\.yaml:\d+: ") as err:
        _parse(tmp_path, scenarios, models)
    assert message in str(err.value)


def test_tasks_from_a_suite_split_are_items_a_worker_can_rebuild(tmp_path: Path) -> None:
    """suite + split + n: items are task id, suite JSON and seed, in seed order."""
    spec = _parse(tmp_path, [_episodes(n=3, start=5)]).scenarios[0]
    scenario = load_scenario(spec)
    rows = task_rows(get_suite("common"), "fit", 3, start=5)
    assert list(scenario.items) == [r["task_id"] for r in rows]
    first = scenario.items[rows[0]["task_id"]]
    assert first == {
        "task_id": rows[0]["task_id"],
        "suite": rows[0]["suite"],
        "seed": rows[0]["seed"],
        "index": 0,
    }


def test_a_task_list_file_loads_and_a_foreign_task_id_is_refused(tmp_path: Path) -> None:
    """A list written by `knowwhen gym tasks` loads (first n); a row whose id its suite and seed contradict fails."""
    rows = task_rows(get_suite("hard"), "fit", 4)
    write_task_list(tmp_path / "tasks.jsonl.gz", rows)
    spec = _parse(tmp_path, [{"id": "ev", "kind": "episodes", "path": "tasks.jsonl.gz", "n": 3}]).scenarios[0]
    scenario = load_scenario(spec)
    assert list(scenario.items) == [r["task_id"] for r in rows[:3]]
    assert "tasks.jsonl.gz" in scenario.files
    write_task_list(tmp_path / "bad.jsonl", [{**rows[0], "seed": rows[0]["seed"] + 1}])
    bad = _parse(tmp_path, [{"id": "ev", "kind": "episodes", "path": "bad.jsonl"}]).scenarios[0]
    with pytest.raises(ScenarioError, match="is not the one its suite and seed give"):
        load_scenario(bad)


def test_evaluation_seeds_need_an_explicit_opt_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The eval split (from the config or inside a task list) is refused unless allow_eval is set."""
    monkeypatch.delenv("KNOWWHEN_EVAL_RUNS", raising=False)
    with pytest.raises(EvalSeedError):
        load_scenario(_parse(tmp_path, [_episodes(split="eval")]).scenarios[0])
    assert load_scenario(_parse(tmp_path, [_episodes(split="eval", allow_eval=True)]).scenarios[0]).items
    write_task_list(tmp_path / "ev.jsonl", task_rows(get_suite("common"), "eval", 2, allow_eval=True))
    with pytest.raises(EvalSeedError):
        load_scenario(_parse(tmp_path, [{"id": "ev", "kind": "episodes", "path": "ev.jsonl"}]).scenarios[0])
