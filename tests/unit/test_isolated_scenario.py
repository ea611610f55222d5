"""The isolated (L1) scenario loader: BFCL v4 and When2Call files become tool-choice questions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from knowwhen_runner.config import ScenarioSpec, parse_config
from knowwhen_runner.exceptions import ConfigError, ScenarioError
from knowwhen_runner.plan.grid import plan
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.scenarios.isolated import tool_label

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "isolated"


def _spec(path: Path = FIXTURE, **kw: object) -> ScenarioSpec:
    return ScenarioSpec.model_validate({"id": "l1", "kind": "isolated", "path": str(path), **kw})


def test_items_keyed_by_upstream_ids() -> None:
    """Every BFCL item is keyed by its id and every When2Call item by its uuid."""
    sc = load_scenario(_spec())
    assert len(sc.items) == 18
    assert "simple_python_0" in sc.items and "live_irrelevance_1-0-1" in sc.items
    assert "0b1f5c2e-0000-4000-8000-000000000003" in sc.items
    assert sc.kind == "isolated"


def test_bfcl_question_has_function_options_and_none() -> None:
    """A BFCL item offers its functions (as provider-safe labels) plus none; gold is the ground truth."""
    item = load_scenario(_spec()).items["multiple_0"]
    assert item["options"] == ["get_weather", "currency_convert", "math_factorial", "none"]
    assert item["gold"] == ["currency_convert"]
    assert item["source"] == "bfcl:multiple" and item["category"] == "multiple"
    assert item["dp"] == "tool_select"
    assert item["descriptions"][1].startswith("[currency.convert] Convert an amount")
    assert item["state"].startswith("TASK: Convert 100 euros to dollars.\nHISTORY:\n(none)")


def test_irrelevance_gold_is_none() -> None:
    """Irrelevance items need no possible-answer file: the right choice is to call no tool."""
    items = load_scenario(_spec()).items
    assert items["irrelevance_0"]["gold"] == ["none"]
    assert items["live_irrelevance_0-0-0"]["gold"] == ["none"]


def test_system_message_goes_to_history() -> None:
    """The last user message is the task; earlier messages (a system prompt) are the history."""
    state = load_scenario(_spec()).items["live_simple_0-0-0"]["state"]
    assert state.startswith(
        "TASK: Book me two nights in Porto.\nHISTORY:\n- system: You are a travel assistant."
    )


def test_when2call_categories_map_to_options() -> None:
    """tool_call -> the target tool, request_for_info -> ask_user, cannot_answer -> none."""
    items = load_scenario(_spec()).items
    call = items["0b1f5c2e-0000-4000-8000-000000000001"]
    assert call["options"] == ["get_weather", "book_hotel", "ask_user", "none"]
    assert call["gold"] == ["get_weather"]
    assert call["source"] == "when2call:mcq"
    assert items["0b1f5c2e-0000-4000-8000-000000000002"]["gold"] == ["ask_user"]
    assert items["0b1f5c2e-0000-4000-8000-000000000003"]["gold"] == ["none"]
    assert items["0b1f5c2e-0000-4000-8000-000000000003"]["options"] == ["ask_user", "none"]
    assert items["0b1f5c2e-0000-4000-8000-000000000004"]["gold"] == ["currency_convert"]


def test_exclude_and_caps() -> None:
    """The exclusion list drops its ids; caps keep the first N per source; 0 drops a source."""
    sc = load_scenario(_spec(exclude=str(FIXTURE / "dev_items.txt")))
    assert "simple_python_2" not in sc.items and len(sc.items) == 16
    assert "dev_items.txt" in sc.files
    capped = load_scenario(_spec(caps={"simple_python": 1, "when2call": 0}))
    assert [i for i in capped.items if i.startswith("simple_python")] == ["simple_python_0"]
    assert not any(i.startswith("0b1f") for i in capped.items)


def test_files_are_hashed_for_provenance() -> None:
    """Every file read is recorded with its sha256."""
    files = load_scenario(_spec()).files
    assert "bfcl/BFCL_v4_simple_python.json" in files
    assert "bfcl/possible_answer/BFCL_v4_simple_python.json" in files
    assert "when2call/when2call_test_mcq.jsonl" in files
    assert all(len(h) == 64 for h in files.values())


def test_missing_possible_answer_is_a_clear_error(tmp_path: Path) -> None:
    """A relevance category without its possible-answer file names the missing file."""
    shutil.copytree(FIXTURE, tmp_path / "l1")
    (tmp_path / "l1" / "bfcl" / "possible_answer" / "BFCL_v4_multiple.json").unlink()
    with pytest.raises(ScenarioError, match=r"possible_answer/BFCL_v4_multiple\.json"):
        load_scenario(_spec(tmp_path / "l1"))


def test_gold_outside_the_functions_is_an_error(tmp_path: Path) -> None:
    """A ground truth naming a function the item does not offer is refused, not scored wrong forever."""
    shutil.copytree(FIXTURE, tmp_path / "l1")
    answers = tmp_path / "l1" / "bfcl" / "possible_answer" / "BFCL_v4_simple_python.json"
    rows = [json.loads(line) for line in answers.read_text().splitlines()]
    rows[0]["ground_truth"] = [{"no_such_function": {}}]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ScenarioError, match="no_such_function"):
        load_scenario(_spec(tmp_path / "l1"))


def test_tool_label_is_provider_safe() -> None:
    """Dots and spaces become underscores; labels are at most 64 characters."""
    assert tool_label("math.factorial") == "math_factorial"
    assert tool_label("a b/c") == "a_b_c"
    assert len(tool_label("x" * 100)) == 64


def test_plan_asks_decision_models_and_llms(tmp_path: Path) -> None:
    """An isolated scenario plans one question job per item for each model in its own mode."""
    text = f"""
name: t
output: out
models:
  - {{id: dm, model: hosted_vllm/dm, kind: decision}}
  - {{id: llm, model: openai/llm, kind: llm}}
scenarios:
  - {{id: l1, kind: isolated, path: {FIXTURE}, exclude: {FIXTURE / "dev_items.txt"}}}
"""
    config = parse_config(text, base=tmp_path, source="c.yaml")
    scenario = load_scenario(config.scenarios[0])
    the_plan = plan(config, {"l1": scenario})
    assert the_plan.counts() == {("dm", "model", "l1"): 16, ("llm", "llm", "l1"): 16}
    assert all(j.payload == {"kind": "question"} for j in the_plan.jobs)


def test_isolated_only_fields_are_refused_elsewhere(tmp_path: Path) -> None:
    """exclude and caps belong to isolated scenarios; a missing exclude file is named at load."""
    base = "name: t\noutput: out\nmodels: [{id: dm, model: hosted_vllm/dm, kind: decision}]\n"
    with pytest.raises(ConfigError, match="exclude: only isolated scenarios"):
        parse_config(
            base + f"scenarios: [{{id: s, path: {FIXTURE}, exclude: {FIXTURE / 'dev_items.txt'}}}]\n",
            base=tmp_path,
            source="c.yaml",
        )
    with pytest.raises(ConfigError, match=r"c.yaml:4: scenarios.0.exclude: .* is not a file"):
        parse_config(
            base + f"scenarios: [{{id: s, kind: isolated, path: {FIXTURE}, exclude: nope.txt}}]\n",
            base=tmp_path,
            source="c.yaml",
        )
    with pytest.raises(ConfigError, match="caps"):
        parse_config(
            base + f"scenarios: [{{id: s, kind: isolated, path: {FIXTURE}, caps: {{bogus: 3}}}}]\n",
            base=tmp_path,
            source="c.yaml",
        )
