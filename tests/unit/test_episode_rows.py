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
    assert len(dm) == 8 and len(llm) == 4  # the builder's model+gated and llm cells
    failed = [r for r in dm if r["error"] is not None]  # the builder's episode job that failed for good
    assert len(failed) == 1 and failed[0]["steps"] == [] and not failed[0]["success"]
    assert failed[0]["error_kind"] is not None and failed[0]["attempts"] >= 1
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


def test_a_row_gives_back_every_closed_loop_figure_of_its_result() -> None:
    """episode_result(episode_row(r)) makes the same closed-loop cell as the recorded results themselves:
    repeats, costs, latencies, call counts, fallbacks and both accuracies survive the file."""
    from knowwhen_runner.results.cells import closed_loop_cell
    from knowwhen_runner.results.episode_rows import episode_result, read_episode_row

    results = []
    for i, (success, calls) in enumerate([(True, 2), (False, 3), (True, 1), (False, 2)]):
        result, _item = _played(2000000 + i % 2, [("list_orders", {"customer_id": f"C-{i}"})] * calls)
        result["decisions"][0].update(decided_by="model", llm_choice=None, llm_correct=None, fallback=i == 1)
        result |= {"success": success, "repeat": i // 2, "seed": i // 2 or None, "llm_calls": calls,
                   "decision_calls": calls, "cache_hits": i, "extra_tool_calls": i % 2, "steps": calls,
                   "cost_usd": {"decision": 0.001 * i, "llm": 0.01 + i}, "latency_ms": {"decision": 3.0, "llm": 9.5 * i},
                   "llm_calls_saved": 1, "fallbacks": int(i == 1)}  # fmt: skip
        results.append(result)
    fit = {"tau": 0.4, "episodes": 3}
    again = [
        episode_result(read_episode_row(episode_row("dm", r).model_dump(mode="json")), fit) for r in results
    ]
    assert again[1]["trajectory"][0]["arguments"] == {"customer_id": "C-1"}
    before = closed_loop_cell("eps", "shadow", None, [{**r, "fit": fit} for r in results], 0)
    after = closed_loop_cell("eps", "shadow", None, again, 0)
    assert after.model_dump() == before.model_dump()
    assert after.repeats == 2 and after.fallbacks == 1 and after.cost_total_usd > 0


def test_rows_of_schema_1_are_read_with_their_arguments_as_json_text() -> None:
    """An episodes file written by schema 1 (arguments as they were, costs keyed freely) still reads: its
    arguments become JSON text, its costs the {decision, llm} pair."""
    from knowwhen_runner.results.episode_rows import read_episode_row

    result, _item = _played(2000000, [("list_orders", {"customer_id": "C-1"})])
    old = episode_row("dm", result).model_dump(mode="json")
    old |= {"schema_version": 1, "cost_usd": {"llm": 0.5}}
    old["steps"][0]["arguments"] = {"customer_id": "C-1"}
    for name in (
        "repeat",
        "seed",
        "llm_calls",
        "decision_calls",
        "cache_hits",
        "extra_tool_calls",
        "latency_ms",
    ):
        del old[name]
    row = read_episode_row(old)
    assert row.schema_version == EPISODE_ROW_SCHEMA_VERSION == 4
    assert json.loads(row.steps[0].arguments or "") == {"customer_id": "C-1"}
    assert (row.cost_usd.decision, row.cost_usd.llm) == (0.0, 0.5)


def test_a_broken_episode_line_is_named_by_file_line_and_field(tmp_path: Path) -> None:
    """score (and import) on an episodes file with a bad line stop with one sentence naming the file, the
    line and the field, and score an intact file's cells."""
    import pytest

    from knowwhen_runner.exceptions import ScenarioError
    from knowwhen_runner.jsonio import write_jsonl
    from knowwhen_runner.results.episode_scores import score_episodes

    result, _item = _played(2000000, [("list_orders", {"customer_id": "C-1"})])
    good = episode_row("dm", result).model_dump(mode="json")
    broken = {**good, "steps": [{**good["steps"][0], "decided_by": None}]}
    write_jsonl(tmp_path / "episodes_dm.jsonl.gz", [good])
    assert [c["episodes"] for c in score_episodes(tmp_path)["cells"]] == [1]
    write_jsonl(tmp_path / "episodes_dm.jsonl.gz", [good, broken])
    with pytest.raises(
        ScenarioError, match=r"episodes_dm\.jsonl\.gz:2: not an episode row \(steps\.0\.decided_by: "
    ):
        score_episodes(tmp_path)
