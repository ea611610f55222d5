"""The cost forecast of ``knowwhen plan``: per model, scenario and level, with a low–high range.

Open-loop questions (L1/L2) are priced from their request size (characters / 4 input tokens) and the
output a call gives (none for a decision model, a tool call for an LLM). Closed-loop episodes (L3) are
priced from the run's finished episodes of the same scenario and mode when there are any (their mean,
and their cheapest and dearest as the range), else from a stated per-step assumption. A model without
a price is named with the config line that would price it, and everything else is still summed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..config import ModelSpec, SweepConfig
from ..jobs import Job, job_cost
from ..provider import token_prices
from ..provider.prices import batch_token_prices

__all__ = ["CostLine", "Forecast", "Unpriced", "forecast"]

_LEVELS = {"isolated": "L1", "states": "L2", "episodes": "L3"}
_IN_RANGE = (0.75, 1.25)  # input tokens: characters / 4 is a rough count
_LLM_OUT = (20, 60)  # output tokens of one tool call: the usual and a verbose one
# L3 with no finished episode to learn from: steps per episode and tokens per call (low, mid, high).
EPISODE_STEPS = (4, 8, 16)
LLM_STEP_TOKENS = (800, 1500, 3000)  # the agent's prompt grows with the episode's history
DECISION_STEP_TOKENS = (300, 600, 1200)


@dataclass(frozen=True, slots=True)
class CostLine:
    """The forecast of one cell: its calls still to make and their cost (None: a model has no price)."""

    model: str
    scenario: str
    level: str
    mode: str
    jobs: int
    usd: float | None
    low: float | None
    high: float | None
    basis: str


@dataclass(frozen=True, slots=True)
class Unpriced:
    """A model the forecast could not price, and the config line that would price it."""

    model: str
    config_line: str


@dataclass(frozen=True)
class Forecast:
    """The whole forecast: lines, the sum over priced ones with its range, and what it leaves out."""

    lines: list[CostLine]
    usd: float
    low: float
    high: float
    unpriced: list[Unpriced] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)


def _price(model: ModelSpec, tokens_in: float, tokens_out: float, *, batch: bool = False) -> float | None:
    """USD of one call; ``batch``: at the model's Batch API price when it sends its questions in batches."""
    batched = batch_token_prices(model) if batch and model.batches() else None
    price = batched[0] if batched is not None else token_prices(model)
    if price is None:
        return None
    extra = model.pricing.per_request if model.pricing is not None else 0.0
    return tokens_in * price[0] + tokens_out * price[1] + extra


def _question_cost(model: ModelSpec, tokens: int, batch: bool) -> tuple[float, float, float] | None:
    out = (0, 0) if model.kind == "decision" else _LLM_OUT
    low = _price(model, tokens * _IN_RANGE[0], out[0], batch=batch)
    mid = _price(model, tokens, out[0], batch=batch)
    high = _price(model, tokens * _IN_RANGE[1], out[1], batch=batch)
    if low is None or mid is None or high is None:
        return None
    return low, mid, high


def _episode_assumed(decision: ModelSpec | None, agent: ModelSpec) -> tuple[float, float, float] | None:
    costs = []
    for i in range(3):
        llm = _price(agent, LLM_STEP_TOKENS[i], _LLM_OUT[min(i, 1)])
        dec = 0.0 if decision is None else _price(decision, DECISION_STEP_TOKENS[i], 0)
        if llm is None or dec is None:
            return None
        costs.append(EPISODE_STEPS[i] * (llm + dec))
    return costs[0], costs[1], costs[2]


def _observed(finished: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], list[float]]:
    """Cost of each finished episode, by (scenario, mode, decision model)."""
    seen: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for result in finished:
        if result.get("kind") != "episode":
            continue
        seen[(result["scenario"], result["mode"], result["decision_model"])].append(job_cost(result))
    return seen


def forecast(
    config: SweepConfig,
    todo: list[Job],
    question_tokens: dict[str, int],
    finished: Iterable[dict[str, Any]],
    waiting: list[str],
    *,
    batch: bool = False,
) -> Forecast:
    """Forecast the cost of ``todo`` (jobs not done; ``question_tokens``: job id -> input tokens of the
    call it still has to make, cache hits left out), from ``finished`` results where it can.

    ``batch``: price the questions of models with ``batch`` at their Batch API price (episodes never go
    through a batch)."""
    models = {m.id: m for m in config.models}
    specs = {s.id: s for s in config.scenarios}
    observed = _observed(finished)
    cells: dict[tuple[str, str, str], list[Job]] = defaultdict(list)
    for job in todo:
        cells[(job.model_id, job.scenario_id, job.mode)].append(job)
    lines: list[CostLine] = []
    unpriced: set[str] = set()
    for (model_id, scenario_id, mode), jobs in sorted(cells.items()):
        spec = specs[scenario_id]
        level = _LEVELS.get(spec.kind, "L2")
        low = mid = high = 0.0
        priced = True
        if spec.kind != "episodes":
            basis = "request size"
            for job in jobs:
                tokens = question_tokens.get(job.id)
                if tokens is None:
                    continue  # answered from the cache
                got = _question_cost(models[model_id], tokens, batch)
                if got is None:
                    priced = False
                    unpriced.add(model_id)
                    break
                low, mid, high = low + got[0], mid + got[1], high + got[2]
        else:
            agent = models[spec.agent] if spec.agent else models[model_id]
            seen = observed.get((scenario_id, mode, model_id))
            if seen:
                each: tuple[float, float, float] | None = (min(seen), sum(seen) / len(seen), max(seen))
                basis = f"{len(seen)} finished episodes"
            else:
                decision = None if mode == "llm" else models[model_id]
                each = _episode_assumed(decision, agent)
                basis = "assumed steps"
                if each is None:
                    unpriced.update(
                        m.id for m in (decision, agent) if m is not None and token_prices(m) is None
                    )
            if each is None:
                priced = False
            else:
                n = len(jobs)
                low, mid, high = n * each[0], n * each[1], n * each[2]
        if priced:
            lines.append(CostLine(model_id, scenario_id, level, mode, len(jobs), mid, low, high, basis))
        else:
            lines.append(
                CostLine(model_id, scenario_id, level, mode, len(jobs), None, None, None, "no price")
            )
    known = [line for line in lines if line.usd is not None]
    caveats = list(waiting)
    bases = {line.basis for line in lines}
    if "request size" in bases:
        caveats.append(
            "questions: input tokens are the request's characters / 4 (range ±25%); an LLM answers with "
            f"{_LLM_OUT[0]}–{_LLM_OUT[1]} output tokens, a decision model with none"
        )
    if any(b.endswith("finished episodes") for b in bases):
        caveats.append("episodes with finished ones in their cell: their mean cost, cheapest to dearest")
    if "assumed steps" in bases:
        caveats.append(
            f"episodes with no finished one yet: assumed {EPISODE_STEPS[0]}–{EPISODE_STEPS[2]} steps "
            f"(mid {EPISODE_STEPS[1]}), each an agent call of {LLM_STEP_TOKENS[0]}–{LLM_STEP_TOKENS[2]} "
            f"input tokens plus a decision call of {DECISION_STEP_TOKENS[0]}–{DECISION_STEP_TOKENS[2]}; "
            "run the shadow episodes first (or rerun `plan` mid-run) for a forecast from real ones"
        )
    missing = [
        Unpriced(m, f"models: - id: {m} … pricing: {{input_per_million: <USD>, output_per_million: <USD>}}")
        for m in sorted(unpriced)
    ]
    if missing:
        caveats.append(
            f"{len(missing)} model(s) have no price ({', '.join(u.model for u in missing)}): "
            "their calls are not in the total; give each a `pricing:` line"
        )
    return Forecast(
        lines,
        sum(line.usd or 0.0 for line in known),
        sum(line.low or 0.0 for line in known),
        sum(line.high or 0.0 for line in known),
        missing,
        caveats,
    )
