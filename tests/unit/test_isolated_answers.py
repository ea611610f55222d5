"""Scoring one isolated answer row: what counts as correct, refused or unscorable."""

from __future__ import annotations

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.dataset.answer_rows import answer_row, failed_row
from knowwhen_runner.results.isolated import isolated_row

MODEL = ModelSpec(id="dm", model="hosted_vllm/dm", kind="decision")
ITEM = {
    "state": "TASK: convert 100 euros\nHISTORY:\n(none)\nCURRENT OBSERVATION: no tool has been called yet.",
    "options": ["currency_convert", "get_weather", "none"],
    "descriptions": ["Convert.", "Weather.", "No tool."],
    "gold": ["currency_convert"],
    "source": "bfcl:multiple",
    "category": "multiple",
    "dp": "tool_select",
}


def _row(choice: str | None) -> dict[str, object]:
    response = {"choice": choice, "confidence": 0.7 if choice else None}
    return answer_row(
        model_id="dm",
        qhash="multiple_0",
        item=ITEM,
        response=response,
        attempts=1,
        requests=1,
        wall_ms=1.0,
        cache_hit=False,
    )


def test_right_answer_any_case_is_correct() -> None:
    """An accepted option is correct; the row carries the item's source, gold and the model string."""
    row = isolated_row(MODEL, _row("currency_convert"), ITEM)
    assert row["correct"] is True and row["refusal"] is False
    assert (row["id"], row["source"], row["pred"], row["conf"]) == (
        "multiple_0",
        "bfcl:multiple",
        "currency_convert",
        0.7,
    )
    assert row["model_id"] == "hosted_vllm/dm"


def test_wrong_refused_and_failed_rows_are_wrong() -> None:
    """A wrong option, a refusal (answered without this question) and a failed call all count as wrong."""
    assert isolated_row(MODEL, _row("none"), ITEM)["correct"] is False
    refused = isolated_row(MODEL, _row(None), ITEM)
    assert refused["correct"] is False and refused["refusal"] is True
    failed = isolated_row(
        MODEL, failed_row(model_id="dm", qhash="multiple_0", error="timeout", attempts=5), ITEM
    )
    assert failed["correct"] is False and failed["refusal"] is False and failed["error"] == "timeout"


def test_unknown_item_is_unscorable_not_silently_right() -> None:
    """Without its item (gold) a row is wrong, and says why."""
    row = isolated_row(MODEL, _row("currency_convert"), None)
    assert row["correct"] is False and "not stored with the run" in row["error"]


def test_imported_row_keeps_its_verdict() -> None:
    """A published row that already says whether it is correct is kept as published."""
    published = {
        "id": "x/param/a",
        "qhash": "x/param/a",
        "correct": True,
        "pred": "1",
        "gold": ["1"],
        "model_id": "jev-1.13",
    }
    assert isolated_row(MODEL, published, None) == published
