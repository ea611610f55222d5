"""Budget overshoot at 32 calls in flight: how far past its cap a run spends, in-process (no server).

Each call reserves its expected cost and settles its actual one; the actual cost is the reservation
times a factor (1: the guess was right; 2 and 5: calls cost more than expected). Prints, per price and
factor, the spend, the overshoot and the bound (the calls in flight times one call's actual cost).
Run from the repository root: ``python -m benchmarks.bench_budget``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio

from knowwhen_runner.config import load_config
from knowwhen_runner.provider import MockTransport, Secrets
from knowwhen_runner.queue import open_queue
from knowwhen_runner.sweep import work_queue
from knowwhen_runner.sweep.sweep import load_and_plan
from tests.helpers import make_question_set, write_config

IN_FLIGHT = 32
CAP = 1.0


async def _answer(body: dict[str, Any], cost: float) -> dict[str, Any]:
    await anyio.sleep(0.005)
    (question,) = body["questions"].values()
    return {"choice": next(iter(question["criteria"])), "confidence": 0.9, "cost_usd": cost}


def measure(folder: Path, price: float, factor: float) -> tuple[float, int]:
    """Spend and calls made under a $1 cap at ``price`` reserved and ``price * factor`` charged a call."""
    models = [
        {
            "id": "m",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": "http://127.0.0.1:9",
            "pricing": {"per_request": price},
            "rate_limit": {"max_in_flight": IN_FLIGHT},
        }
    ]
    path = write_config(
        folder / "c.yaml",
        "http://127.0.0.1:9",
        make_question_set(folder / "qs", n_tasks=120),  # 540 questions
        models=models,
        budget={"usd": CAP},
        workers={"concurrency": IN_FLIGHT, "batch_size": 64},
    )
    config = load_config(path)
    _scenarios, the_plan = load_and_plan(config)
    transport = MockTransport(lambda _m, _k, body: _answer(body, price * factor))

    async def go() -> tuple[float, int]:
        async with open_queue("memory://", config.name) as queue:
            await queue.init_run("", {})
            await queue.enqueue(the_plan.jobs, the_plan.items)
            stats, _ = await work_queue(
                config, queue, Secrets(config.models), the_plan.items, progress=False, transport=transport
            )
            (tally,) = [t for t in await queue.holding.budget_tallies() if t.scope == "run"]
            return tally.spent_usd, stats.calls

    return anyio.run(go)


def main() -> None:
    print(f"cap ${CAP:g}, {IN_FLIGHT} calls in flight")
    print(f"{'price':>8} {'factor':>6} {'calls':>6} {'spent':>9} {'overshoot':>10} {'bound':>8}")
    for price in (0.002, 0.01, 0.05):
        for factor in (1.0, 2.0, 5.0):
            with tempfile.TemporaryDirectory() as tmp:
                spent, calls = measure(Path(tmp), price, factor)
            bound = IN_FLIGHT * price * factor
            over = max(0.0, spent - CAP)
            print(f"{price:>8g} {factor:>6g} {calls:>6} {spent:>9.4f} {over:>10.4f} {bound:>8.4f}")


if __name__ == "__main__":
    main()
