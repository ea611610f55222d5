"""Repeated episodes end to end: ``repeats: N`` against the real local server, finalised into pass^k."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from knowwhen_runner.queue import open_queue
from knowwhen_runner.results import load_manifest
from knowwhen_runner.results.episode_scores import episode_cells
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.sweep import RunRequest, run_sweep
from tests.integration.test_episodes import _models, _tasks, _write

pytestmark = pytest.mark.slow


def _episodes(folder: Path) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        queue = open_queue(f"sqlite:///{folder / 'out' / 'knowwhen.db'}", "l3")
        try:
            return [r for _job, status, r, _ in await queue.results() if status == "done" and r]
        finally:
            await queue.close()

    return anyio.run(read)


def test_repeats_run_each_task_n_times_with_seeds_that_reach_the_agent(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Three repeats of 12 tasks: 36 seeded episodes, repeats that differ, pass^k and a bootstrap over tasks."""
    config = _write(tmp_path, _models(server.base_url), [_tasks("ev", "fit", 12, repeats=3)], ["llm"])
    summary = run_sweep(RunRequest(config, progress=False))
    assert summary.counts == {"done": 36}, summary.counts
    episodes = _episodes(tmp_path)
    assert sorted((r["repeat"], r["seed"]) for r in episodes) == sorted([(0, None), (1, 1), (2, 2)] * 12)
    paths: dict[str, set[tuple[str, ...]]] = {}
    for r in episodes:
        paths.setdefault(r["task_id"], set()).add(tuple(t["tool"] for t in r["trajectory"]))
    assert any(len(p) > 1 for p in paths.values()), "the seeds did not change any episode"
    cell = load_manifest(tmp_path / "out" / "manifests" / "agent.cxs.json").closed_loop[0]
    assert (cell.repeats, cell.episodes, len(cell.outcomes)) == (3, 36, 12)
    assert all(len(runs) == 3 for runs in cell.outcomes.values())
    assert set(cell.pass_hat_k) == {"1", "2", "3"}
    assert cell.pass_hat_k["1"] >= cell.pass_hat_k["2"] >= cell.pass_hat_k["3"]
    assert cell.success_rate is not None and abs(cell.pass_hat_k["1"] - cell.success_rate) < 1e-12
    assert set(cell.per_task_success) == set(cell.outcomes)
    ci = cell.intervals.success_rate if cell.intervals else None
    assert ci is not None and (ci.method, ci.n) == ("cluster bootstrap, percentile", 12)


def test_shadow_and_gated_episodes_get_the_closed_loop_deferral_scorecard(
    server: ServerProcess, tmp_path: Path
) -> None:
    """The prior alone, in shadow and gated at τ 0.5 over 6 tasks repeated twice: the shadow cell's decision
    points have the open-loop scorecard (its oracle above every gate), the episodes one with pass^2, and the
    episode files alone give the same scorecard as the manifest."""
    scenario = _tasks("ev", "fit", 6, repeats=2, tau=0.5)
    config = _write(tmp_path, _models(server.base_url, "prior"), [scenario], ["model", "shadow", "gated"])
    summary = run_sweep(RunRequest(config, progress=False))
    assert summary.counts == {"done": 36}, summary.counts
    cells = {c.mode: c for c in load_manifest(tmp_path / "out" / "manifests" / "prior.cxs.json").closed_loop}
    shadow = cells["shadow"].deferral
    assert shadow is not None and shadow.decisions is not None and shadow.episodes is not None
    steps = sum(1 for r in _episodes(tmp_path) if r["mode"] == "shadow" for _ in r["decisions"])
    d = shadow.decisions
    assert (d.n, d.llm) == (steps, "agent") and shadow.calibration == d.calibration
    assert all(p.accuracy <= d.model_accuracy + min(p.llm_share, d.oracle_gain) + 1e-12 for p in d.curve)
    e = shadow.episodes
    assert e.n == 12 and (e.model_success, e.llm_success) == (
        cells["model"].success_rate,
        cells["shadow"].success_rate,
    )
    assert [p.llm_share for p in e.points] == [0.0, 1.0 - (cells["gated"].coverage or 0.0), 1.0]
    assert e.pass_k is not None and e.pass_k.k == 2
    assert e.pass_k.success == [cells[m].pass_hat_k["2"] for m in ("model", "gated", "shadow")]
    gated = cells["gated"].deferral
    assert gated is not None and gated.calibration is not None and "decisions" in gated.missing
    from_files = episode_cells(tmp_path / "out" / "ev")
    assert from_files[("prior", "ev", "shadow", None)].deferral == shadow
