"""The closed loop's deferral scorecard: decision points of shadow episodes, and episodes as router points."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from knowwhen_runner.dataset.deferral import oracle_accuracy, router_figures
from knowwhen_runner.results.cells import closed_loop_cell, episode_deferral
from knowwhen_runner.results.manifest import ClosedLoopCell


def _decision(rng: np.random.Generator, mode: str, tau: float | None) -> dict[str, Any]:
    conf = float(rng.uniform())
    model_ok = bool(rng.uniform() < conf)
    by_model = mode == "model" or (mode == "gated" and tau is not None and conf >= tau)
    return {
        "decided_by": "model" if by_model else "llm",
        "model_confidence": conf,
        "model_correct": model_ok,
        "llm_correct": None if by_model else bool(rng.uniform() < 0.8),
        "error": None,
    }


def _episode(task: str, repeat: int, success: bool, decisions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "task_id": task,
        "repeat": repeat,
        "success": success,
        "decisions": decisions,
        "llm": "agent",
        "cost_usd": {"decision": 0.0, "llm": 0.0},
    }


def _cell(mode: str, tau: float | None, wins: list[list[bool]], seed: int, steps: int = 4) -> ClosedLoopCell:
    """A cell whose task t's repeat r succeeds as wins[t][r] (decisions drawn from ``seed``)."""
    rng = np.random.default_rng(seed)
    results = [
        _episode(f"t{t}", r, ok, [_decision(rng, mode, tau) for _ in range(steps)])
        for t, runs in enumerate(wins)
        for r, ok in enumerate(runs)
    ]
    return closed_loop_cell("s", mode, tau, results, 0)


@pytest.mark.parametrize("seed", range(20))
def test_the_oracle_dominates_every_gate_over_shadow_decision_points(seed: int) -> None:
    """On the decision points of shadow episodes the oracle's accuracy is at least the gate's at every share."""
    rng = np.random.default_rng(seed)
    wins = [[bool(rng.uniform() < 0.6)] for _ in range(30)]
    shadow = _cell("shadow", None, wins, seed)
    d = shadow.deferral.decisions if shadow.deferral else None
    assert d is not None and d.n == 30 * 4 and d.llm == "agent"
    conf_ok = [(p.llm_share, p.accuracy) for p in d.curve]
    top = d.model_accuracy + np.minimum([s for s, _ in conf_ok], d.oracle_gain)
    assert all(a <= o + 1e-12 for (_, a), o in zip(conf_ok, top, strict=True))
    assert d.calibration.small_sample and shadow.deferral.calibration == d.calibration


def test_a_gated_cell_has_its_calibration_and_says_why_it_has_no_decision_scorecard() -> None:
    """A gated cell's decisions the model took have no LLM pick: no per-decision scorecard, and the reason."""
    gated = _cell("gated", 0.5, [[True]] * 10, 3)
    model = _cell("model", None, [[True]] * 10, 3)
    for cell in (gated, model):
        assert cell.deferral is not None and cell.deferral.decisions is None
        assert cell.deferral.calibration is not None and "decisions" in cell.deferral.missing
    llm = _cell("llm", None, [[True]] * 10, 3)
    assert llm.deferral is None


def _router_cells(
    weak: list[bool], strong: list[bool], gated: list[tuple[float, list[bool]]]
) -> ClosedLoopCell:
    """The shadow cell after ``episode_deferral`` over a model cell, a shadow cell and gated cells."""
    cells = [_cell("model", None, [[w] for w in weak], 1), _cell("shadow", None, [[s] for s in strong], 2)]
    for tau, wins in gated:
        cells.append(_cell("gated", tau, [[w] for w in wins], 3))
    return next(c for c in episode_deferral(cells) if c.mode == "shadow")


def test_episode_router_figures_are_0_for_the_model_alone_and_1_for_the_oracle() -> None:
    """A flat line at the model alone recovers none of the gap; a router on the whole-episode oracle all of it."""
    weak = [True] * 4 + [False] * 6  # 0.4; the LLM alone succeeds on 4 of the 6 the model fails: gain 0.4
    strong = [True] * 4 + [True] * 4 + [False] * 2
    shadow = _router_cells(weak, strong, [])
    e = shadow.deferral.episodes if shadow.deferral else None
    assert e is not None and (e.n, e.model_success, e.llm_success) == (10, 0.4, 0.8)
    assert e.oracle_gain == pytest.approx(0.4)
    assert router_figures([0.0, 1.0], [0.4, 0.4], 0.4, 0.8, 0.4).apgr == 0.0
    knee = list(oracle_accuracy(weak, strong, [0.0, 0.4, 1.0]))
    on_oracle = router_figures([0.0, 0.4, 1.0], knee, 0.4, 0.8, 0.4)
    assert on_oracle.apgr_oracle == pytest.approx(1.0, abs=1e-12)
    assert e.apgr == pytest.approx(0.5) and e.apgr_oracle is not None and e.apgr_oracle < 1.0


def test_a_gate_above_the_whole_episode_oracle_is_named_and_one_below_is_not() -> None:
    """A gated cell beating the oracle at its share is listed in above_oracle; one under it is left alone."""
    weak = [True] * 2 + [False] * 8
    strong = [True] * 2 + [True] * 2 + [False] * 6  # gain 0.2: the oracle tops out at 0.4
    high = [True] * 9 + [False]  # 0.9 at whatever share: above 0.4
    low = [True] * 2 + [False] * 8  # 0.2: never above the oracle
    shadow = _router_cells(weak, strong, [(0.3, high), (0.7, low)])
    e = shadow.deferral.episodes if shadow.deferral else None
    assert e is not None and e.above_oracle == [0.3]
    assert e.points[0].tau is None and e.points[-1].llm_share == 1.0
    assert e.aiq_basis == "llm_calls" and e.aiq is not None  # every episode cost $0: the share axis


def test_repeats_score_the_router_points_by_pass_k_too() -> None:
    """With two repeats every point also has pass^2, the share of tasks whose both repeats succeeded."""
    cells = [
        _cell("model", None, [[True, False], [True, True], [False, False]], 1),
        _cell("shadow", None, [[True, True], [True, True], [True, False]], 2),
        _cell("gated", 0.5, [[True, True], [False, True], [True, True]], 3),
    ]
    shadow = next(c for c in episode_deferral(cells) if c.mode == "shadow")
    pk = shadow.deferral.episodes.pass_k if shadow.deferral and shadow.deferral.episodes else None
    assert pk is not None and pk.k == 2
    assert pk.success == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert (pk.model_success, pk.llm_success) == pytest.approx((1 / 3, 2 / 3))


def test_a_scenario_without_model_alone_episodes_says_so() -> None:
    """Without model-alone episodes there is no weak end: the shadow cell names the missing scorecard."""
    shadow = next(c for c in episode_deferral([_cell("shadow", None, [[True]] * 5, 2)]) if c.mode == "shadow")
    assert shadow.deferral is not None and shadow.deferral.episodes is None
    assert "model-alone" in shadow.deferral.missing["episodes"]
