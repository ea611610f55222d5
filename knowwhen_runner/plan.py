"""Planning: a pure function from a config and its loaded scenarios to jobs.

The grid is models x modes x scenarios x items. Open loop (``states``, ``isolated``): a decision model
answers in mode ``model``, an LLM in mode ``llm``; ``gated`` needs no calls of its own (it is computed at
finalise time from both) and ``shadow`` exists only in the closed loop. Planning the same config again
yields the same job ids, so enqueuing them again adds nothing: ``run`` after a crash is the resume.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .config import ModelSpec, SweepConfig
from .jobs import Job, job_id
from .scenarios import Scenario

__all__ = ["Plan", "open_loop_mode", "plan"]


def open_loop_mode(model: ModelSpec) -> str:
    """The only mode in which a model answers open-loop questions itself."""
    return "model" if model.kind == "decision" else "llm"


@dataclass
class Plan:
    """Jobs and the item data they read."""

    jobs: list[Job]
    items: dict[tuple[str, str], dict[str, Any]]
    skipped: list[str] = field(default_factory=list)  # why a model x mode x scenario cell has no jobs

    def counts(self) -> Counter[tuple[str, str, str]]:
        return Counter((j.model_id, j.mode, j.scenario_id) for j in self.jobs)


def plan(config: SweepConfig, scenarios: dict[str, Scenario], fits: dict[str, Any] | None = None) -> Plan:
    """Expand the grid into jobs (pure: same inputs, same jobs, same order).

    ``fits`` holds thresholds fitted from finished jobs (closed loop: ``shadow`` episodes on a fit task
    set); jobs that need a fit not yet available are left out and planned again once it is.
    """
    jobs: list[Job] = []
    items: dict[tuple[str, str], dict[str, Any]] = {}
    skipped: list[str] = []
    for spec in config.scenarios:
        scenario = scenarios[spec.id]
        for item_id, payload in scenario.items.items():
            items[(scenario.id, item_id)] = payload
        for model in config.models:
            for mode in config.modes:
                if scenario.kind in ("states", "isolated"):
                    if mode != open_loop_mode(model):
                        if mode in ("model", "llm"):
                            skipped.append(
                                f"{model.id} x {mode} x {scenario.id}: a {model.kind} model "
                                f"answers open-loop questions in mode {open_loop_mode(model)!r}"
                            )
                        continue
                    jobs.extend(_question_jobs(model, mode, scenario))
    return Plan(jobs, items, skipped)


def _question_jobs(model: ModelSpec, mode: str, scenario: Scenario) -> list[Job]:
    payload = {"kind": "question"}
    return [
        Job(
            id=job_id(
                model_id=model.id,
                model=model.model,
                params=model.params,
                mode=mode,
                scenario_id=scenario.id,
                scenario_version=scenario.version,
                item=item_id,
            ),
            model_id=model.id,
            mode=mode,
            scenario_id=scenario.id,
            item=item_id,
            payload=payload,
        )
        for item_id in scenario.items
    ]
