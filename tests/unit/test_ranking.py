"""The leaderboard's order: best figure first, ties broken by the interval's lower bound, equal figures
and bounds sharing a rank, models without a figure last and unranked; rank_by picks the scenario."""

from __future__ import annotations

import anyio
import pytest

from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.results.manifest import ConfidenceInterval, CxsManifest, load_manifest, manifest_path
from knowwhen_runner.results.ranking import plot_focus, rank_models
from tests.golden.builders import finished_queue, small_config


@pytest.fixture(scope="module")
def dm(tmp_path_factory: pytest.TempPathFactory) -> list[CxsManifest]:
    """The small run's manifests (decision model ``dm``, LLM ``llm`` whose L2 cell has a failed job)."""
    config = small_config(tmp_path_factory.mktemp("ranking"))

    async def go() -> None:
        await finalize_run(config, await finished_queue(config))

    anyio.run(go)
    return [load_manifest(manifest_path(config.output, m)) for m in ("dm", "llm")]


def _variant(m: CxsManifest, model_id: str, accuracy: float, low: float, success: float = 0.5) -> CxsManifest:
    """``m`` under another id, with this L2 accuracy (and interval's lower bound) and L3 success."""
    cell = m.open_loop[0]
    assert cell.intervals is not None and cell.intervals.accuracy_pct is not None
    ci: ConfidenceInterval = cell.intervals.accuracy_pct.model_copy(update={"estimate": accuracy, "low": low})
    intervals = cell.intervals.model_copy(update={"accuracy_pct": ci})
    open_loop = [cell.model_copy(update={"accuracy_pct": accuracy, "intervals": intervals})]
    closed = [c.model_copy(update={"success_rate": success}) for c in m.closed_loop]
    model = m.model.model_copy(update={"id": model_id})
    return m.model_copy(update={"model": model, "open_loop": open_loop, "closed_loop": closed})


def test_ties_break_by_the_lower_bound_and_equal_ones_share_a_rank(dm: list[CxsManifest]) -> None:
    """80 [70] > 80 [60] = 80 [60] > 50; the LLM, whose cell has a failed job, comes last with no rank."""
    base, llm = dm
    manifests = [
        _variant(base, "c", 80.0, 60.0),
        _variant(base, "low", 50.0, 40.0),
        llm,
        _variant(base, "a", 80.0, 70.0),
        _variant(base, "b", 80.0, 60.0),
    ]
    ranking = rank_models(manifests)
    assert ranking.scenario == "qs"
    assert ranking.order == ["a", "c", "b", "low", "llm"]  # c before b: config order among equals
    assert [ranking.rank(m) for m in ranking.order] == [1, 2, 2, 4, None]


def test_rank_by_an_episodes_scenario_ranks_by_l3_success(dm: list[CxsManifest]) -> None:
    """rank_by: eps orders by task success in the model's own mode, whatever the L2 accuracy says."""
    base, _ = dm
    manifests = [_variant(base, "x", 90.0, 80.0, success=0.25), _variant(base, "y", 10.0, 5.0, success=0.75)]
    assert rank_models(manifests).order == ["x", "y"]
    assert rank_models(manifests, "eps").order == ["y", "x"]


def test_plot_focus_names_pins_and_llms_first_then_the_top(dm: list[CxsManifest]) -> None:
    """With room for three: the pinned model and the LLM, then the best; the rest are folded, in order."""
    base, llm = dm
    manifests = [_variant(base, f"m{k}", 90.0 - k, 80.0 - k) for k in range(6)] + [llm]
    ranking = rank_models(manifests)
    focus = plot_focus(manifests, ranking, highlight=["m4"], named=3)
    assert focus.named == ["m0", "m4", "llm"] and focus.others == ["m1", "m2", "m3", "m5"]
