"""The viewer ranks and highlights models as the report does: by the last finalise's ranking, pinned
models marked, and by id before any finalise."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import anyio

from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.view import RunData
from knowwhen_runner.view.live import live_view
from knowwhen_runner.view.questions import QuestionFilter, question_page
from tests.crowd import crowd_config, crowd_queue

PINNED = "weak-04"


def test_the_live_view_lists_models_in_the_reports_order_with_ranks_and_pins(tmp_path: Path) -> None:
    """Before finalising: models by id, no ranks. After: the comparison table's order and ranks (each inside
    the table's tie group), the pinned model marked and named, the question filter's model list in the same
    order."""
    config = crowd_config(tmp_path, report={"highlight": [PINNED]}, pairs=6)

    async def go() -> tuple[dict, dict, dict]:  # type: ignore[type-arg]
        queue = await crowd_queue(config)
        data = RunData(queue, output=config.output, given_config=config)
        before = await live_view(data)
        await finalize_run(config, queue)
        return before, await live_view(data), await question_page(data, QuestionFilter())

    before, after, questions = anyio.run(go)
    ids = sorted(m.id for m in config.models)
    assert [m["model"] for m in before["models"]] == ids and before["ranked_by"] is None
    assert all(m["rank"] is None for m in before["models"])
    table = list(csv.DictReader(io.StringIO((config.output / "tables" / "comparison.csv").read_text())))
    assert [m["model"] for m in after["models"]] == [r["model"] for r in table]
    # The viewer keeps plain ranks; each lies inside the table's rank, a place or a tie group's range.
    places = [[int(x) for x in r["rank"].split("–")] for r in table]
    assert all(p[0] <= m["rank"] <= p[-1] for m, p in zip(after["models"], places, strict=True))
    assert after["ranked_by"] == "common"
    pins = {m["model"]: (m["pinned"], m["named"]) for m in after["models"]}
    assert pins[PINNED] == (True, True) and sum(p for p, _ in pins.values()) == 1
    assert questions["options"]["model"] == [r["model"] for r in table]
