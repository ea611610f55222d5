"""Fitting τ from shadow episodes: the data it uses, the target, its support, and when it is made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from knowwhen_runner.config import SweepConfig, parse_config
from knowwhen_runner.plan.grid import FitRequest, fit_requests, plan
from knowwhen_runner.queue import Failure, open_queue
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.sweep.fits import compute_fits, fit_from_results


def _decision(conf: float | None, model_ok: bool | None, llm_ok: bool) -> dict[str, Any]:
    return {
        "model_confidence": conf,
        "model_correct": model_ok,
        "llm_choice": "some_tool",
        "llm_correct": llm_ok,
    }


def _request(target: float | str, min_support: int = 1) -> FitRequest:
    return FitRequest("k", "fit", "prior", "agent", target, min_support)


# conf 0.9 x4 all right, 0.6 x4 half right, 0.3 x2 wrong, one unanswered; the LLM is right on 9 of 11
_RESULTS = [
    {
        "decisions": [_decision(0.9, True, True)] * 4
        + [_decision(0.6, True, True), _decision(0.6, False, True)]
    },
    {"decisions": [_decision(0.6, True, True), _decision(0.6, False, False), _decision(0.3, False, True)]},
    {"decisions": [_decision(0.3, False, False), _decision(None, None, True)]},
]


def test_a_numeric_target_gives_the_lowest_tau_reaching_it_with_its_support() -> None:
    """Target 0.75: τ = 0.6 covers 8 answered choices at 6/8; the unanswered one is left out and counted."""
    fit = fit_from_results(_request(0.75), _RESULTS)
    assert (fit["tau"], fit["support"], fit["accuracy"], fit["reachable"]) == (0.6, 8, 0.75, True)
    assert fit["coverage"] == pytest.approx(0.8)
    assert (fit["decisions"], fit["unanswered"], fit["episodes"]) == (10, 1, 3)
    assert fit["decision_point"] == "tool_select"


def test_target_llm_is_the_agents_own_accuracy_on_the_same_states() -> None:
    """Target llm: the LLM was right on 9 of 11 choices, so τ must reach 0.818 (only 0.9 does)."""
    fit = fit_from_results(_request("llm"), _RESULTS)
    assert fit["llm_accuracy"] == pytest.approx(9 / 11)
    assert fit["target_accuracy"] == pytest.approx(9 / 11)
    assert (fit["tau"], fit["support"]) == (0.9, 4)


def test_too_little_support_leaves_the_target_unreachable() -> None:
    """With min_support above the confident set, no τ qualifies: τ is None and nothing is delegated."""
    fit = fit_from_results(_request(0.99, min_support=5), _RESULTS)
    assert (fit["tau"], fit["reachable"], fit["support"], fit["coverage"]) == (None, False, 0, 0.0)


def _config(tmp_path: Path) -> SweepConfig:
    data = {
        "name": "t",
        "output": "out",
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision"},
            {"id": "agent", "model": "openai/agent-sim", "kind": "llm"},
        ],
        "modes": ["gated"],
        "scenarios": [
            {"id": "fit", "kind": "episodes", "suite": "common", "split": "fit", "n": 2, "modes": []},
            {
                "id": "ev",
                "kind": "episodes",
                "suite": "common",
                "split": "bench",
                "n": 2,
                "tau": {"fit": "fit", "target": 0.75, "min_support": 1},
            },
        ],
    }
    return parse_config(yaml.safe_dump(data), base=tmp_path, source="c.yaml")


def test_the_fit_is_made_once_every_shadow_episode_is_done(tmp_path: Path) -> None:
    """No fit while a shadow episode is pending or failed; once all are done, one fit from all of them."""
    config = _config(tmp_path)
    scenarios = {s.id: load_scenario(s) for s in config.scenarios}
    first = plan(config, scenarios)
    assert {j.mode for j in first.jobs} == {"shadow"}

    async def go() -> tuple[dict[str, Any], ...]:
        queue = open_queue("memory://", "t")
        await queue.enqueue(first.jobs, first.items)
        before = await compute_fits(config, queue)
        jobs = await queue.claim("w", 10, 60.0)
        await queue.complete("w", [(jobs[0].id, {"decisions": [_decision(0.8, True, True)]})])
        partial = await compute_fits(config, queue)
        await queue.fail("w", [Failure(jobs[1].id, "boom", kind="fatal", final=True)])
        with_failed = await compute_fits(config, queue)
        await queue.requeue_failed()
        again = await queue.claim("w", 10, 60.0)
        await queue.complete("w", [(again[0].id, {"decisions": [_decision(0.9, True, True)]})])
        return before, partial, with_failed, await compute_fits(config, queue)

    before, partial, with_failed, after = anyio.run(go)
    key = fit_requests(config)[0].key
    assert before == {} and partial == {} and with_failed == {}
    assert after[key]["tau"] == 0.8 and after[key]["failed_episodes"] == 0 and after[key]["episodes"] == 2
    gated = [j for j in plan(config, scenarios, after).jobs if j.mode == "gated"]
    assert len(gated) == 2 and all(j.payload["tau"] == 0.8 for j in gated)


def test_a_risk_chooses_tau_by_learn_then_test_and_says_when_none_is_valid() -> None:
    """With a risk, τ is Learn-then-Test's: 60 right answers at 0.9 and a coin flip at 0.5 give τ = 0.51 at
    risk 0.1, the lowest τ of the grid above the coin flips; with ten decisions nothing can be shown, so no τ
    is chosen."""
    many = [
        {
            "decisions": [_decision(0.9, True, True)] * 60
            + [_decision(0.5, i % 2 == 0, True) for i in range(40)]
        }
    ]
    request = FitRequest("k", "fit", "prior", "agent", 0.9, 1, 0.1, 0.1)
    fit = fit_from_results(request, many)
    assert (fit["tau"], fit["reachable"], fit["support"], fit["accuracy"]) == (0.51, True, 60, 1.0)
    assert fit["risk"] == 0.1 and fit["delta"] == 0.1 and 0.9 in fit["valid"] and 0.5 not in fit["valid"]
    assert "learn-then-test" in fit["method"]
    few = fit_from_results(request, _RESULTS)
    assert (few["tau"], few["reachable"], few["valid"]) == (None, False, [])


def test_a_risk_gets_its_own_fit_and_leaves_the_ids_of_fits_without_one_alone(tmp_path: Path) -> None:
    """A τ fit with a risk is a request of its own (its key says so); one without keeps the key it had."""
    doc = {
        "name": "r",
        "output": str(tmp_path / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision"},
            {"id": "agent", "model": "openai/agent-sim", "kind": "llm"},
        ],
        "modes": ["gated"],
        "scenarios": [
            {"id": "fit", "kind": "episodes", "suite": "common", "split": "fit", "n": 2, "modes": []},
            {
                "id": "a",
                "kind": "episodes",
                "suite": "common",
                "split": "bench",
                "n": 2,
                "tau": {"fit": "fit", "target": 0.9},
            },
            {
                "id": "b",
                "kind": "episodes",
                "suite": "common",
                "split": "bench",
                "n": 2,
                "tau": {"fit": "fit", "target": 0.9, "risk": 0.05, "delta": 0.2},
            },
        ],
    }
    keys = [r.key for r in fit_requests(SweepConfig.model_validate(doc))]
    assert keys == [
        "fit/prior/agent/target=0.9/min_support=10",
        "fit/prior/agent/target=0.9/min_support=10/risk=0.05/delta=0.2",
    ]
