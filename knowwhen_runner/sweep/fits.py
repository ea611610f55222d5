"""Thresholds fitted during a run, from the run's own finished jobs.

A closed-loop scenario may ask for its gating threshold to be fitted on ``shadow`` episodes of a
separate fit task set; the planner holds back the ``gated`` episodes until the fit exists. Fits are
recomputed from recorded results each time (pure and idempotent), so nothing extra needs to be stored.

A fit is per decision point (the tool choice, the only one DecisionGym asks) and per decision model: at
every state of the shadow episodes the decision model answered with a confidence, and the answer key of
that state says whether it was right. τ is the lowest confidence whose covered answers reach the target
accuracy (``metrics.fit_threshold``); the target ``llm`` is the agent LLM's own accuracy on those states.
With a ``risk``, τ is instead the lowest one Learn-then-Test shows to err at most that often among what it
delegates, with probability at least 1 − ``delta`` (``risk_control.learn_then_test``); none valid: no τ.
"""

from __future__ import annotations

from typing import Any

from ..config import SweepConfig
from ..plan.grid import FitRequest, fit_requests
from ..queue import Queue

__all__ = ["DECISION_POINT", "compute_fits", "fit_from_results"]

DECISION_POINT = "tool_select"


async def compute_fits(config: SweepConfig, queue: Queue) -> dict[str, Any]:
    """Fits available now, keyed by what the planner asks for; empty when no scenario needs one.

    A fit is made once every shadow episode of its fit set is done; while one has failed, the fit waits
    (``run --retry-failed`` re-runs it) and the gated episodes stay unplanned.
    """
    requests = fit_requests(config)
    if not requests:
        return {}
    results = await queue.results({r.scenario for r in requests})  # the fit sets' jobs only
    fits: dict[str, Any] = {}
    for request in requests:
        n_tasks = len(await queue.items(request.scenario))
        rows = [
            (status, result)
            for job, status, result, _error in results
            if job.mode == "shadow"
            and job.scenario_id == request.scenario
            and job.model_id == request.decision_model
            and job.payload.get("agent") == request.agent
        ]
        # Every shadow episode must be done: fitting around failed ones would fix a threshold on part of
        # the data and keep it, since gated jobs are identified by the fit they use, not its value.
        # Failed shadows hold the gated episodes back until `run --retry-failed` completes them.
        if len(rows) < n_tasks or any(status != "done" for status, _ in rows):
            continue
        done = [result for status, result in rows if status == "done" and result is not None]
        fits[request.key] = fit_from_results(request, done, failed=len(rows) - len(done))
    return fits


def fit_from_results(
    request: FitRequest, results: list[dict[str, Any]], *, failed: int = 0
) -> dict[str, Any]:
    """The fit record of one request from its shadow episodes' results (pure)."""
    answered = [
        d
        for r in results
        for d in r["decisions"]
        if d.get("model_correct") is not None and _number(d.get("model_confidence"))
    ]
    llm_judged = [d for r in results for d in r["decisions"] if d.get("llm_choice") is not None]
    llm_accuracy = (
        sum(bool(d.get("llm_correct")) for d in llm_judged) / len(llm_judged) if llm_judged else None
    )
    target = llm_accuracy if request.target == "llm" else float(request.target)
    record: dict[str, Any] = {
        "key": request.key,
        "scenario": request.scenario,
        "decision_model": request.decision_model,
        "llm": request.agent,
        "decision_point": DECISION_POINT,
        "target": request.target,
        "target_accuracy": target,
        "llm_accuracy": llm_accuracy,
        "min_support": request.min_support,
        "episodes": len(results),
        "failed_episodes": failed,
        "decisions": len(answered),
        "unanswered": sum(len(r["decisions"]) for r in results) - len(answered),
        "tau": None,
        "reachable": False,
        "coverage": 0.0,
        "accuracy": None,
        "support": 0,
    }
    if request.risk is not None:
        record |= {"risk": request.risk, "delta": request.delta}
        if answered:
            record.update(_guaranteed(answered, request.risk, request.delta))
        return record
    if target is None or not answered:
        return record
    record.update(_fitted(answered, target, request.min_support))
    return record


def _guaranteed(answered: list[dict[str, Any]], risk: float, delta: float) -> dict[str, Any]:
    """τ chosen by Learn-then-Test on the answered decisions (none valid: τ None, nothing delegated)."""
    from ..dataset.risk_control import LTT_METHOD, learn_then_test  # start-up: numpy loads when a τ is fitted

    found = learn_then_test(
        [float(d["model_confidence"]) for d in answered],
        [bool(d["model_correct"]) for d in answered],
        risk,
        delta,
    )
    return {
        "method": LTT_METHOD,
        "valid": found.valid,
        "tau": found.threshold,
        "reachable": found.threshold is not None,
        "coverage": found.coverage,
        "accuracy": None if found.error is None else 1.0 - found.error,
        "support": found.support,
    }


def _fitted(answered: list[dict[str, Any]], target: float, min_support: int) -> dict[str, Any]:
    """τ fitted to the answered decisions, and what it gives (the fit record's last fields)."""
    from ..dataset.metrics import fit_threshold  # start-up: numpy loads when a threshold is fitted

    fit = fit_threshold(
        [float(d["model_confidence"]) for d in answered],
        [bool(d["model_correct"]) for d in answered],
        target,
        min_support=min_support,
    )
    return {
        "tau": fit.threshold,
        "reachable": fit.reachable,
        "coverage": fit.coverage,
        "accuracy": fit.accuracy,
        "support": fit.support,
    }


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
