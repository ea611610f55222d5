"""Argument questions (``dp: tool_params``): one per argument of a BFCL item's gold call, asked through the
tool-choice seam, scored and written in the card's isolated_answers fields, without touching tool choice."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from knowwhen_runner.config import ModelSpec, ScenarioSpec
from knowwhen_runner.dataset.files import QUESTION_TEXT, IsolatedAnswer
from knowwhen_runner.dataset.scoring import score_l1
from knowwhen_runner.plan.grid import _question_jobs  # the open-loop jobs of one model and scenario
from knowwhen_runner.provider.bodies import decision_body, llm_body
from knowwhen_runner.provider.cache_keys import cache_key
from knowwhen_runner.results.isolated import isolated_row
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.scenarios.isolated_params import OMIT, normalise_value

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "isolated"
MODEL = ModelSpec(id="m", model="hosted_vllm/m", kind="decision", api_base="http://127.0.0.1:9")


def _items(**kw: Any) -> dict[str, dict[str, Any]]:
    return load_scenario(ScenarioSpec(id="l1", kind="isolated", path=FIXTURE, **kw)).items


def test_one_question_per_required_argument_of_the_gold_call() -> None:
    """params: required adds <item>/param/<name> for each argument BFCL requires; tool choice stays."""
    items = _items(params="required")
    kinds = Counter(i["dp"] for i in items.values())
    assert kinds == {"tool_select": 18, "tool_params": 19}
    assert {k for k in items if k.startswith("simple_python_0/")} == {
        "simple_python_0/param/base",
        "simple_python_0/param/height",
    }
    q = items["simple_python_0/param/base"]
    assert (q["param"], q["item"], q["source"], q["category"]) == (
        "base",
        "simple_python_0",
        "bfcl:simple_python",
        "simple_python",
    )
    assert q["options"] == ["4", "6"] and q["gold"] == ["6"]  # the call's values: base 6, height 4
    assert "'base'" in q["question"] and "geometry.triangle_area" in q["question"]
    assert q["state"] == items["simple_python_0"]["state"]
    assert not any(
        k.startswith(("irrelevance", "live_irrelevance", "0b1f")) and "/param/" in k for k in items
    )


def test_all_also_asks_optional_arguments_with_an_omit_option(tmp_path: Path) -> None:
    """An argument BFCL lets be left out ("" accepted) is asked only under params: all, where leaving it
    out is one of the right options."""
    data = tmp_path / "l1"
    shutil.copytree(FIXTURE, data)
    answers = data / "bfcl" / "possible_answer" / "BFCL_v4_simple_python.json"
    lines = answers.read_text().splitlines()
    lines[0] = json.dumps(
        {
            "id": "simple_python_0",
            "ground_truth": [{"geometry.triangle_area": {"base": [6], "height": [4], "unit": ["cm", ""]}}],
        }
    )
    answers.write_text("\n".join(lines) + "\n")
    spec = {"id": "l1", "kind": "isolated", "path": str(data)}
    assert (
        "simple_python_0/param/unit"
        not in load_scenario(ScenarioSpec.model_validate({**spec, "params": "required"})).items
    )
    q = load_scenario(ScenarioSpec.model_validate({**spec, "params": "all"})).items[
        "simple_python_0/param/unit"
    ]
    assert q["options"] == ["4", "6", "cm", OMIT] and q["gold"] == ["cm", OMIT]
    assert q["names"][OMIT] == ""


def test_off_by_default_and_only_for_isolated_scenarios() -> None:
    """Without params no argument question is asked; params on a states scenario is refused by name."""
    assert not any("/param/" in k for k in _items())
    with pytest.raises(ValidationError, match="params: only isolated scenarios take this field"):
        ScenarioSpec.model_validate({"id": "s", "path": ".", "params": "all"})


def test_tool_choice_jobs_and_requests_do_not_change_when_arguments_are_asked() -> None:
    """Turning params on adds jobs; every tool-choice job keeps its id and its request (cache key)."""
    off = load_scenario(ScenarioSpec(id="l1", kind="isolated", path=FIXTURE))
    on = load_scenario(ScenarioSpec(id="l1", kind="isolated", path=FIXTURE, params="required"))
    ids_off = {j.item: j.id for j in _question_jobs(MODEL, "model", off)}
    ids_on = {j.item: j.id for j in _question_jobs(MODEL, "model", on)}
    assert len(ids_on) == len(ids_off) + 19
    assert all(ids_on[item] == ident for item, ident in ids_off.items())
    for item_id in off.items:
        before = decision_body(off.items[item_id])
        assert before == decision_body(on.items[item_id])
        assert before["questions"]["next_tool"]["instructions"] == QUESTION_TEXT
        assert cache_key(MODEL, "decision", before) == cache_key(
            MODEL, "decision", decision_body(on.items[item_id])
        )


def test_an_argument_question_goes_through_the_same_seam() -> None:
    """A decision model gets a choice question over the values; an LLM gets them as tools; both ask it."""
    q = _items(params="required")["multiple_0/param/src"]
    body = decision_body(q)["questions"]["next_tool"]
    assert body["type"] == "choice" and set(body["criteria"]) == set(q["options"])
    assert body["instructions"] == q["question"]
    chat = llm_body(q)
    assert chat["messages"][-1]["content"].endswith(q["question"])
    assert [t["function"]["name"] for t in chat["tools"]] == q["options"]


@pytest.mark.parametrize(
    ("value", "bfcl", "exact"),
    [
        ("New York, NY", "newyorkny", "New York, NY"),
        (5.0, "5", "5"),
        (2.5, "2.5", "2.5"),
        ([1, 2], "[1, 2]", "[1, 2]"),
        ({"b": 1, "a": "X"}, '{"a": "X", "b": 1}', '{"a": "X", "b": 1}'),
    ],
)
def test_values_are_normalised_by_the_chosen_rule(value: Any, bfcl: str, exact: str) -> None:
    """bfcl: strings lower-cased without spaces and ,./-_*^ (BFCL's checker); exact: the JSON text."""
    assert normalise_value(value, "bfcl") == bfcl
    assert normalise_value(value, "exact") == exact


def test_an_argument_row_writes_the_param_and_normalised_values() -> None:
    """The row carries dp tool_params, the argument, the chosen value and the accepted ones, normalised."""
    items = _items(params="required")
    q = items["multiple_0/param/src"]
    right = q["gold"][0]
    row = {"qhash": "multiple_0/param/src", "answer": right, "valid": True, "error": None, "confidence": 0.7}
    out = isolated_row(MODEL, row, q)
    assert (out["id"], out["dp"], out["param"]) == ("multiple_0/param/src", "tool_params", "src")
    assert out["correct"] and out["pred"] == q["names"][right] and out["gold"] == [q["names"][right]]
    wrong = next(o for o in q["options"] if o not in q["gold"])
    assert not isolated_row(MODEL, {**row, "answer": wrong}, q)["correct"]
    choice = isolated_row(
        MODEL, {**row, "qhash": "multiple_0", "answer": "currency_convert"}, items["multiple_0"]
    )
    assert choice["param"] is None and choice["dp"] == "tool_select"


def test_l1_score_splits_pooled_tool_choice_and_arguments() -> None:
    """Pooled is over every row; tool choice over tool_select rows; arguments over tool_params rows."""
    rows = [
        IsolatedAnswer("a", "bfcl:multiple", "tool_select", True, 0.9, None),
        IsolatedAnswer("b", "when2call:mcq", "tool_select", False, 0.9, None),
        IsolatedAnswer("a/param/x", "bfcl:multiple", "tool_params", True, 0.9, None),
        IsolatedAnswer("a/param/y", "bfcl:multiple", "tool_params", True, 0.9, None),
    ]
    score = score_l1(rows)
    assert score.pooled == 75.0 and score.tool_choice == 50.0 and score.bfcl_tool_choice == 100.0
    assert score.arguments == 100.0 and (score.n_tool_choice, score.n_arguments) == (2, 2)


def test_the_development_list_leaves_out_items_with_their_arguments(tmp_path: Path) -> None:
    """The paper configs' exclude file is read as given: an item listed takes its argument questions with
    it; an argument question can be listed alone; comments and blank lines are ignored."""
    listed = tmp_path / "l1-development-items.txt"
    committed = Path(__file__).resolve().parents[2] / "configs" / "paper" / "l1-development-items.txt"
    listed.write_text(committed.read_text() + "\nmultiple_0\nsimple_python_0/param/base  # one argument\n")
    before = _items(params="required")
    after = _items(params="required", exclude=listed)
    gone = set(before) - set(after)
    assert gone == {"multiple_0", "multiple_0/param/amount", "multiple_0/param/dst", "multiple_0/param/src",
                    "simple_python_0/param/base"}  # fmt: skip
    assert _items(params="required", exclude=committed) == before  # the committed list names none
