"""Budgets in-process: a spent cap leaves jobs pending (never failed), and the overshoot past the cap is
bounded by the calls in flight, at several prices per call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from knowwhen_runner.config import ModelSpec, load_config
from knowwhen_runner.provider import MockTransport, Secrets
from knowwhen_runner.queue import open_queue
from knowwhen_runner.sweep import work_queue
from knowwhen_runner.sweep.sweep import load_and_plan
from tests.helpers import make_question_set, write_config

_CONCURRENCY = 32
_CAP = 0.10


def _answer(model: ModelSpec, _kind: str, body: dict[str, Any], cost: float) -> Any:
    async def later() -> dict[str, Any]:
        await anyio.sleep(0.01)  # calls overlap, as they do against a provider
        (question,) = body["questions"].values()
        return {
            "choice": next(iter(question["criteria"])),
            "confidence": 0.9,
            "cost_usd": cost,
            "input_tokens": 100,
            "output_tokens": 0,
        }

    return later()


@pytest.mark.parametrize("price", [0.0004, 0.003, 0.02])
def test_overshoot_is_bounded_by_the_calls_in_flight(tmp_path: Path, price: float) -> None:
    """With 32 calls in flight each costing twice its reservation, spending stops within 32 calls' cost of
    the cap; every job is done or pending, none failed, and the spent scope is reported."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=40)  # 180 questions
    models = [
        {
            "id": "m",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": "http://127.0.0.1:9",
            "pricing": {"per_request": price},
            "rate_limit": {"max_in_flight": _CONCURRENCY},
        }
    ]
    path = write_config(
        tmp_path / "c.yaml",
        "http://127.0.0.1:9",
        scenario,
        models=models,
        budget={"usd": _CAP},
        workers={"concurrency": _CONCURRENCY, "batch_size": 64},
    )
    config = load_config(path)
    _scenarios, the_plan = load_and_plan(config)
    actual = 2 * price
    transport = MockTransport(lambda m, k, b: _answer(m, k, b, actual))

    async def go() -> tuple[Any, dict[str, int], float]:
        async with open_queue("memory://", config.name) as queue:
            await queue.init_run("", {})
            await queue.enqueue(the_plan.jobs, the_plan.items)
            stats, _ = await work_queue(
                config, queue, Secrets(config.models), the_plan.items, progress=False, transport=transport
            )
            counts: dict[str, int] = {}
            for c in await queue.counts():
                counts[c.status] = counts.get(c.status, 0) + c.n
            spent = {t.scope: t for t in await queue.holding.budget_tallies()}["run"]
            assert spent.reserved_usd == pytest.approx(0.0, abs=1e-9)  # every reservation settled
            return stats, counts, spent.spent_usd

    stats, counts, spent = anyio.run(go)
    assert set(counts) <= {"done", "pending"} and counts.get("done", 0) + counts.get("pending", 0) == 180
    assert "run" in stats.over_budget and stats.failed == 0
    assert spent == pytest.approx(stats.done * actual)
    assert spent <= _CAP + _CONCURRENCY * actual + 1e-9  # the bound: the calls in flight
    assert spent > _CAP - actual  # and the cap was used, not abandoned early
    print(f"price ${price}: spent ${spent:.4f} of ${_CAP} (overshoot ${max(0.0, spent - _CAP):.4f})")
