"""Confidence intervals in CXS manifests (schema 3): what they estimate, how they were made, and that they
are reproducible."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.results import CxsManifest, load_manifest, manifest_path
from knowwhen_runner.results.cell_intervals import BOOTSTRAP_REPS, BOOTSTRAP_SEED, REFIT_REPS
from knowwhen_runner.results.finalize import finalize_run
from tests.golden.builders import finished_queue, small_config


def _finalize(config: SweepConfig, *, fail: bool = True) -> dict[str, CxsManifest]:
    async def go() -> None:
        await finalize_run(config, await finished_queue(config, fail=fail))

    anyio.run(go)
    return {m.id: load_manifest(manifest_path(config.output, m.id)) for m in config.models}


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CxsManifest]:
    """The small run with every job answered (a cell with failed jobs has no intervals: see below)."""
    return _finalize(small_config(tmp_path_factory.mktemp("ci")), fail=False)


def test_finalising_twice_gives_identical_intervals(tmp_path: Path) -> None:
    """Seeds are fixed: a second finalise of the same results writes the same intervals, bit for bit."""
    config = small_config(tmp_path)
    first = {m: json.loads(d.model_dump_json())["open_loop"] for m, d in _finalize(config).items()}
    again = _finalize(config)
    second = {m: json.loads(d.model_dump_json())["open_loop"] for m, d in again.items()}
    assert first == second
    assert again["dm"].open_loop[0].intervals is not None
    assert again["dm"].open_loop[0].intervals.tau is not None


def test_open_loop_intervals_surround_the_cells_own_figures(manifests: dict[str, CxsManifest]) -> None:
    """Each interval's estimate is the figure beside it (accuracy, τ, coverage, gated accuracy and its gain
    over the LLM, ECE, AURC)."""
    cell = manifests["dm"].open_loop[0]
    ci = cell.intervals
    assert ci is not None and cell.fit is not None and cell.gate is not None and cell.gate.at_fit
    assert cell.calibration is not None and cell.curve is not None
    pairs = [
        (ci.accuracy_pct, cell.accuracy_pct),
        (ci.tau, cell.fit.threshold),
        (ci.coverage_at_tau, cell.fit.coverage),
        (ci.gated_accuracy_at_tau, cell.gate.at_fit.accuracy),
        (ci.gain_at_tau, cell.gate.at_fit.accuracy - cell.gate.llm_accuracy),
        (ci.ece, cell.calibration.ece),
        (ci.aurc, cell.curve.aurc),
    ]
    for interval, figure in pairs:
        assert interval is not None and figure is not None
        assert interval.estimate == pytest.approx(figure, abs=1e-9)
        assert interval.low <= interval.estimate <= interval.high
        assert interval.seed == BOOTSTRAP_SEED and interval.level == 0.95
    assert ci.accuracy_pct is not None and ci.accuracy_pct.reps == BOOTSTRAP_REPS
    assert ci.accuracy_pct.method == "cluster bootstrap, percentile" and ci.accuracy_pct.n == cell.tasks
    assert ci.tau is not None and (ci.tau.reps, ci.tau.method) == (
        REFIT_REPS,
        "cluster bootstrap with refit, percentile",
    )


def test_an_llm_cell_has_accuracy_intervals_but_no_fit_intervals(manifests: dict[str, CxsManifest]) -> None:
    """Only decision models are fitted, so an LLM's cell carries accuracy intervals alone."""
    ci = manifests["llm"].open_loop[0].intervals
    assert ci is not None and ci.accuracy_pct is not None
    assert (ci.tau, ci.coverage_at_tau, ci.ece, ci.aurc) == (None, None, None, None)


def test_closed_loop_success_has_a_wilson_interval_without_repeats(manifests: dict[str, CxsManifest]) -> None:
    """One episode per task: L3 success gets a Wilson interval over the episodes."""
    gated = next(c for c in manifests["dm"].closed_loop if c.mode == "gated")
    assert gated.intervals is not None and gated.intervals.success_rate is not None
    ci = gated.intervals.success_rate
    assert (ci.method, ci.n) == ("wilson", gated.episodes)
    assert ci.estimate == pytest.approx(gated.success_rate)
    assert gated.repeats == 1 and not gated.pass_hat_k


def test_a_cell_with_failed_jobs_has_no_score_and_no_interval(tmp_path: Path) -> None:
    """Failed is not wrong: cells with jobs that failed for good withhold their figures and intervals,
    and keep the card's number (failed counted wrong) beside them."""
    manifests = _finalize(small_config(tmp_path))
    llm = manifests["llm"].open_loop[0]
    assert (llm.failed, llm.accuracy_pct, llm.intervals) == (1, None, None)
    assert llm.card_accuracy_pct is not None and 0 < llm.card_accuracy_pct < 100
    gated = next(c for c in manifests["dm"].closed_loop if c.mode == "gated")
    assert (gated.failed, gated.success_rate, gated.intervals) == (1, None, None)
    assert gated.card_success_rate == pytest.approx(3 / 4) and gated.outcomes["task-9"] == [False]


def test_a_version_2_manifest_still_loads(tmp_path: Path) -> None:
    """A manifest written before intervals and repeats (schema 2) loads, with no intervals."""
    golden = Path(__file__).resolve().parent.parent / "golden" / "small" / "dm.cxs.json"
    doc = json.loads(golden.read_text())
    doc["schema_version"] = 2
    for cell in doc["open_loop"] + doc["isolated"]:
        del cell["intervals"]
    for cell in doc["closed_loop"]:
        for name in ("intervals", "repeats", "outcomes", "per_task_success", "pass_hat_k"):
            del cell[name]
    old = tmp_path / "old.cxs.json"
    old.write_text(json.dumps(doc))
    manifest = load_manifest(old)
    assert manifest.schema_version == 2 and manifest.open_loop[0].intervals is None
    assert manifest.closed_loop[0].intervals is None and manifest.closed_loop[0].repeats == 1


def _without_intervals(m: CxsManifest) -> CxsManifest:
    return m.model_copy(
        update={
            "open_loop": [c.model_copy(update={"intervals": None}) for c in m.open_loop],
            "closed_loop": [c.model_copy(update={"intervals": None}) for c in m.closed_loop],
        }
    )


def test_the_plots_draw_the_intervals(manifests: dict[str, CxsManifest]) -> None:
    """The coverage plot's band and τ bars and the cost plot's error bars change the drawn images."""
    from knowwhen_runner.results.figures.plots import _cost_plot, _coverage_plot
    from knowwhen_runner.results.figures.svg import Chart
    from knowwhen_runner.results.ranking import plot_focus, rank_models

    def svg(chart: object) -> bytes:
        assert isinstance(chart, Chart)
        return chart.svg()

    cell = manifests["dm"].open_loop[0]
    ok = cell.model_copy(update={"validity": cell.validity.model_copy(update={"failed_rate": 0.0})})
    drawn = [manifests["dm"].model_copy(update={"open_loop": [ok]}), manifests["llm"]]
    bare = [_without_intervals(m) for m in drawn]
    assert ok.intervals is not None and len(ok.intervals.coverage_band) == 20
    focus = plot_focus(drawn, rank_models(drawn))
    assert svg(_coverage_plot(drawn, "qs", focus, Chart)) != svg(_coverage_plot(bare, "qs", focus, Chart))
    assert svg(_cost_plot(drawn, focus, Chart)) != svg(_cost_plot(bare, focus, Chart))
