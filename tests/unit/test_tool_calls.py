"""Tool calls as real servers need them: tool_choice is a model setting, and extra calls are kept."""

from __future__ import annotations

import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before litellm is imported)
from knowwhen_runner.config import ModelSpec
from knowwhen_runner.plan.grid import _question_jobs
from knowwhen_runner.provider.transport import llm_response
from knowwhen_runner.scenarios import Scenario
from knowwhen_runner.work.calls import question_call

ITEM = {"state": "TASK: x", "options": ["a", "b"], "descriptions": ["A.", None]}


def _llm(**fields: object) -> ModelSpec:
    return ModelSpec.model_validate({"id": "l", "model": "openai/x", "kind": "llm", **fields})


def test_tool_choice_is_the_models_setting_and_part_of_identity_only_when_changed() -> None:
    """The body sends the model's tool_choice; "required" keeps job ids as they were, "auto" changes them."""
    default, auto = _llm(), _llm(tool_choice="auto")
    assert question_call(default, ITEM).body["tool_choice"] == "required"
    assert question_call(auto, ITEM).body["tool_choice"] == "auto"
    assert question_call(default, ITEM).key != question_call(auto, ITEM).key  # cache keys differ
    assert default.identity_params() == default.params == {}
    scenario = Scenario(id="s", kind="states", version="1", items={"q": ITEM})
    ids = {m.tool_choice: next(_question_jobs(m, "llm", scenario)).id for m in (default, auto)}
    assert ids["required"] != ids["auto"]
    assert ids["required"] == next(_question_jobs(_llm(params={}), "llm", scenario)).id


def test_every_tool_call_of_a_reply_is_kept_the_first_acted_on() -> None:
    """A reply with three tool calls answers with the first and keeps the other two, in order."""
    import litellm

    reply = litellm.ModelResponse(
        choices=[
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
                        for i, n in enumerate(["b", "a", "b"])
                    ],
                }
            }
        ]
    )
    model = _llm()
    out = llm_response(model, reply)
    assert out["choice"] == "b"
    assert [c["name"] for c in out["extra_tool_calls"]] == ["a", "b"]
    single = litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": "hi"}}])
    assert "extra_tool_calls" not in llm_response(model, single)
