"""Episode files: one line per episode with every step, its rebuilt state and the committed schema."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import anyio
import jsonschema

from knowwhen_runner.gym import GymEnv, get_suite, make_task, render_state
from knowwhen_runner.results import finalize_run
from knowwhen_runner.results.episode_rows import EPISODE_ROW_SCHEMA_VERSION, episode_row
from tests.golden.builders import finished_queue, small_config

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "episode-row.schema.json"


def _lines(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def test_finalise_writes_one_valid_line_per_episode_with_every_decision(tmp_path: Path) -> None:
    """Finalise writes episodes_<model>.jsonl.gz per episodes scenario; each line validates and keeps all steps."""
    config = small_config(tmp_path)

    async def go() -> None:
        await finalize_run(config, await finished_queue(config))

    anyio.run(go)
    schema = json.loads(SCHEMA.read_text())
    dm = _lines(config.output / "eps" / "episodes_dm.jsonl.gz")
    llm = _lines(config.output / "eps" / "episodes_llm.jsonl.gz")
    assert len(dm) == 7 and len(llm) == 4  # the builder's model+gated and llm cells
    for row in dm + llm:
        jsonschema.Draft202012Validator(schema).validate(row)
        assert row["schema_version"] == EPISODE_ROW_SCHEMA_VERSION
        assert [s["step"] for s in row["steps"]] == list(range(len(row["steps"])))
    gated = [r for r in dm if r["mode"] == "gated"]
    assert {s["decided_by"] for r in gated for s in r["steps"]} == {"model", "llm"}
    assert all(s["model_choice"] == "get_orders" for r in dm for s in r["steps"])


def _played(seed: int, calls: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    suite = get_suite("common")
    task = make_task(suite, seed)
    env, decisions, trajectory, states = GymEnv(task), [], [], []
    for n, (tool, args) in enumerate(calls):
        states.append(render_state(task, env.history))
        decisions.append(
            {"step": n, "decided_by": "llm", "tool": tool, "model_choice": tool, "model_confidence": 0.7,
             "llm_choice": tool, "acceptable": [tool], "fallback": False}
        )  # fmt: skip
        trajectory.append(
            {"step": n, "tool": tool, "arguments": args, "observation": env.execute(tool, args)}
        )
    result = {"task_id": task.task_id, "mode": "shadow", "decision_model": "dm", "llm": "llm", "tau": None,
              "success": False, "budget_exhausted": True, "coverage": 0.0, "decisions": decisions,
              "trajectory": trajectory, "scenario": "eps"}  # fmt: skip
    return result, {"suite": suite.to_json(), "seed": str(seed), "states": states}


def test_states_are_rebuilt_by_replay_and_stop_at_a_mismatch() -> None:
    """Each step's state is the one before its decision; once a recorded result differs, states are left out."""
    calls = [
        ("find_customer_by_email", {"email": "nobody@example.net"}),
        ("list_orders", {"customer_id": "C-1"}),
    ]
    calls.append(("list_orders", {"customer_id": "C-2"}))
    result, item = _played(2000000, calls)
    row = episode_row("dm", result, item)
    assert [s.state for s in row.steps] == item["states"]
    assert row.steps[1].observation == result["trajectory"][1]["observation"]
    assert row.steps[0].model_confidence == 0.7 and row.steps[0].tool == "find_customer_by_email"
    result["trajectory"][0]["observation"] = "something else"
    broken = episode_row("dm", result, item)
    assert broken.steps[0].state == item["states"][0]
    assert [s.state for s in broken.steps[1:]] == [None, None]
    assert all(s.state is None for s in episode_row("dm", result, None).steps)
