"""Every surface of a finalised run marks a model a screen stopped: the plots leave it out (and the report
says so), the ranking leaves it unranked, the viewer's leaderboard, questions and the report's drill-down
name its screening bounds, and ``knowwhen compare`` marks it and gives its paired tests no verdict."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from knowwhen_runner.cli.score_tables import run_compare
from knowwhen_runner.config import SweepConfig
from knowwhen_runner.results.compare import compare_runs
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.view import RunData
from knowwhen_runner.view.live import live_view
from knowwhen_runner.view.offline import drilldown_data
from knowwhen_runner.view.questions import QuestionFilter, question_detail, question_page
from tests.crowd import crowd_config, crowd_queue

STOPPED, KEPT = "weak-00", "strong-00"
BOUNDS = "screened out after 3/8 tasks (accuracy 0.0 to 30.0: screening bounds)"


def _screen(models: dict[str, tuple[float, float, int, str | None]]) -> dict[str, Any]:
    """A screen record as a screened run keeps it in its meta."""
    rows = {
        m: {"lower": lo, "upper": hi, "tasks": n, "decision": d, "decided_at": 1.0 if d else None}
        for m, (lo, hi, n, d) in models.items()
    }
    return {"scenario": "common", "alpha": 0.05, "alpha_each": 0.0125, "keep": {"top": 2}, "seed": 0,
            "tasks": 8, "models": rows}  # fmt: skip


def _finalised(tmp: Path) -> tuple[SweepConfig, dict[str, Any]]:
    """A run of five models whose first (pinned, so every plot would name it) the screen stopped after 3 tasks
    with 10 jobs left; finalised, and what the viewer serves of it."""
    config = crowd_config(tmp, report={"highlight": [STOPPED, KEPT]}, pairs=2)

    async def go() -> dict[str, Any]:
        queue = await crowd_queue(config, open_jobs=10)
        screen = {
            STOPPED: (0.0, 0.3, 3, "drop"),
            KEPT: (0.7, 0.95, 8, "keep"),
            "weak-01": (0.0, 0.6, 8, None),
        }
        await queue.update_meta({"screen": _screen(screen)})
        await queue.holding.set_control(STOPPED, "screened", "screened out after 3 tasks")
        await finalize_run(config, queue)
        data = RunData(queue, output=config.output, given_config=config)
        first = (await question_page(data, QuestionFilter(model=STOPPED)))["rows"][0]
        return {
            "live": await live_view(data),
            "page": await question_page(data, QuestionFilter()),
            "detail": await question_detail(data, "common", STOPPED, first["qhash"]),
            "kept": await question_detail(data, "common", KEPT, first["qhash"]),
            "drill": await drilldown_data(data, data.manifests(config)),
        }

    return config, anyio.run(go)


def test_every_surface_marks_the_screened_out_model(tmp_path: Path) -> None:
    config, seen = _finalised(tmp_path)
    out = config.output
    plots = {p.name: p.read_text() for p in (out / "plots").glob("*.svg")}
    assert plots and all(STOPPED not in text for text in plots.values())  # pinned, yet not drawn
    assert any(KEPT in text for text in plots.values())
    report = (out / "report.html").read_text()
    assert f"Not drawn: {STOPPED}, screened out" in report

    rows = {
        r["model"]: r for r in csv.DictReader(io.StringIO((out / "tables" / "comparison.csv").read_text()))
    }
    # no rank from a prefix of the order; the kept model's is a place or a tie group's range of places
    assert rows[STOPPED]["rank"] == "–" and rows[KEPT]["rank"].replace("–", "").isdigit()

    live = {m["model"]: m for m in seen["live"]["models"]}
    assert live[STOPPED]["rank"] is None and live[STOPPED]["screened_out"] == BOUNDS
    assert live[KEPT]["rank"] is not None and live[KEPT]["screened_out"] is None
    assert seen["live"]["models"][-1]["model"] == STOPPED  # listed after every ranked model

    assert seen["page"]["screened"] == {STOPPED: BOUNDS}
    assert seen["detail"]["screened"] == BOUNDS and seen["kept"]["screened"] is None
    assert seen["drill"]["questions"]["screened"] == {STOPPED: BOUNDS}


def test_compare_marks_a_model_screened_out_in_either_run_and_gives_its_tests_no_verdict(
    tmp_path: Path,
) -> None:
    config, _seen = _finalised(tmp_path / "a")
    full = crowd_config(tmp_path / "b", pairs=2)

    async def go() -> None:
        await finalize_run(full, await crowd_queue(full))

    anyio.run(go)
    report = compare_runs(config.output, full.output, fail_on="regression")
    assert report["models"][STOPPED]["screened_out"] == {"a": BOUNDS, "b": None}
    assert report["models"][KEPT]["screened_out"] == {"a": None, "b": None}
    stopped = [p for p in report["paired"] if p["model"] == STOPPED]
    assert stopped and all(p["screened_out"] and not p["regression"] for p in stopped)
    assert all(not p["screened_out"] for p in report["paired"] if p["model"] != STOPPED)
    console = Console(file=io.StringIO(), width=250)
    run_compare(config.output, full.output, console=console)
    said = console.file.getvalue()  # type: ignore[attr-defined]
    assert f"{STOPPED}: {BOUNDS} in run A" in said
    assert "screened out: no verdict" in said
