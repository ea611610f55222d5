"""``knowwhen plan`` on a run under way: jobs per cell and how many are done, counted from the grid as it is
made and the run's done jobs by id, against the database's own count of the same run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import yaml

from knowwhen_runner.config import load_config
from knowwhen_runner.queue import Failure, open_queue
from knowwhen_runner.sweep import plan_report
from knowwhen_runner.sweep.stages import Stages

ROOT = Path(__file__).resolve().parents[2]


def _config_file(tmp_path: Path, url: str) -> Path:
    """The quickstart's models over its common states (modes llm and model), in a file of this test's."""
    doc = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    doc["db"] = url
    doc["output"] = str(tmp_path / "out")
    doc["cache"] = {"policy": "off"}
    doc["modes"] = ["llm", "model"]
    doc["scenarios"] = [
        {**s, "path": str((ROOT / "configs" / s["path"]).resolve())}
        for s in doc["scenarios"]
        if s["id"] == "common"
    ]
    doc.pop("gate", None)
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_dry_run_counts_what_is_done_and_what_is_left(tmp_path: Path, fresh_db_url: str) -> None:
    """With jobs done, running and failed, each cell's ``done`` is the database's count of its done jobs,
    ``new_jobs`` is every job not done, and the jobs planned are the run's."""
    path = _config_file(tmp_path, fresh_db_url)
    config = load_config(path)

    async def go() -> tuple[Counter[tuple[str, str, str]], int]:
        async with open_queue(fresh_db_url, config.name) as queue:
            await queue.init_run(path.read_text(), {})
            info = await queue.run_info()
            assert info is not None
            await Stages(config, queue, info["meta"], cache=None, work=False).plan(None)
            done = await queue.claim("w", 120, 60.0)
            await queue.complete("w", [(j.id, {"answer": "x", "valid": True}) for j in done])
            failed = await queue.claim("w", 7, 60.0)
            await queue.fail("w", [Failure(j.id, "boom", final=True) for j in failed])
            await queue.claim("w", 5, 60.0)  # running
            rows = await queue.counts()
            by_cell = Counter({(r.model_id, r.mode, r.scenario_id): r.n for r in rows if r.status == "done"})
            return by_cell, sum(r.n for r in rows)

    expected, planned = anyio.run(go)
    report = plan_report(path)
    assert report.jobs == planned and sum(expected.values()) == 120
    assert {(c["model"], c["mode"], c["scenario"]): c["done"] for c in report.cells if c["done"]} == {
        k: n for k, n in expected.items() if n
    }
    assert report.new_jobs == planned - 120  # failed and running jobs are still to do
    assert sum(c["jobs"] for c in report.cells) == planned
