"""A small finished run, made by hand in the in-memory queue: answers of a decision model and an LLM on a
question set, and closed-loop episode results in the episode format. Deterministic, so its finalised
outputs can be pinned as golden files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.dataset.answer_rows import answer_row
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import Failure, Queue, open_queue
from knowwhen_runner.scenarios.states import question_item
from tests.helpers import make_question_set

WRONG = "cancel_subscription"
META = {
    "config_file": "small.yaml",
    "config_sha256": "0" * 64,
    "job_id_version": 1,
    "knowwhen_runner": "0.1.0",
    "created": "2026-01-02T03:04:05Z",
}


def small_config(tmp: Path, *, gate: dict[str, Any] | None = None, episodes: bool = True) -> SweepConfig:
    """Config of the small run: decision model ``dm``, LLM ``llm``, states ``qs`` (+ episodes ``eps``)."""
    qs = make_question_set(tmp / "qs", n_tasks=6)
    scenarios: list[dict[str, Any]] = [{"id": "qs", "kind": "states", "path": str(qs)}]
    if episodes:
        tasks = tmp / "tasks.jsonl"
        tasks.write_text("")
        scenarios.append({"id": "eps", "kind": "episodes", "path": str(tasks)})
    return SweepConfig.model_validate(
        {
            "name": "small",
            "output": str(tmp / "out"),
            "models": [
                {"id": "dm", "model": "hosted_vllm/dm", "kind": "decision"},
                {"id": "llm", "model": "openai/llm", "kind": "llm"},
            ],
            "modes": ["model", "llm", "gated"],
            "scenarios": scenarios,
            "gate": {"llm": "llm", "target": 0.9, "risk": 0.2} if gate is None else gate,
        }
    )


def _dm_response(i: int, gold: str) -> dict[str, Any]:
    """Confidence cycles through ten levels; the confident half is mostly right, the rest mostly wrong."""
    conf = round(0.3 + 0.07 * (i % 10), 2)
    right = (conf >= 0.6 and i % 9 != 4) or i % 7 == 0
    choice = "no_such_tool" if i == 11 else (gold if right else WRONG)
    return {"choice": choice, "confidence": conf, "probabilities": None}


def _llm_response(i: int, gold: str) -> dict[str, Any]:
    return {"choice": WRONG if i % 6 == 5 else gold, "confidence": None, "probabilities": None}


def _question_results(config: SweepConfig, fail: bool = True) -> list[tuple[Job, dict[str, Any] | None]]:
    spec = config.scenarios[0]
    assert spec.path is not None
    qset = load_question_set(spec.path)
    out: list[tuple[Job, dict[str, Any] | None]] = []
    for i, occ in enumerate(qset.occurrences):
        item = question_item(qset.questions[occ.qhash])
        for model, mode, respond in (("dm", "model", _dm_response), ("llm", "llm", _llm_response)):
            job = Job(f"{model}-{i:03d}", model, mode, spec.id, occ.qhash, {"kind": "question"})
            if fail and model == "llm" and i == 17:
                out.append((job, None))  # fails for good: the LLM's cell shows no score
                continue
            response = {
                **respond(i, occ.gold),
                "cost_usd": 0.0002 if model == "dm" else 0.003,
                "latency_ms": float(10 + i) if model == "dm" else float(200 + 3 * i),
                "input_tokens": 120,
                "output_tokens": 0 if model == "dm" else 12,
            }
            row = answer_row(
                model_id=model,
                qhash=occ.qhash,
                item=item,
                response=response,
                attempts=1,
                requests=1,
                wall_ms=float(12 + i),
                cache_hit=i % 8 == 0,
                errors=["timeout"] if i == 3 else None,
            )
            out.append((job, row))
    return out


def decision(
    step: int, by: str, *, correct: bool | None = True, fallback: bool = False, llm_correct: bool = True
) -> dict[str, Any]:
    """One decision of an episode result (``correct``: the model's choice, recorded whoever decided)."""
    return {
        "step": step,
        "decided_by": by,
        "tool": "get_orders",
        "model_choice": "get_orders",
        "model_confidence": 0.9 if by == "model" else 0.4,
        "llm_choice": "get_orders" if by == "llm" else None,
        "acceptable": ["get_orders"],
        "model_correct": correct,
        "llm_correct": llm_correct if by == "llm" else None,
        "fallback": fallback,
        "error": None,
    }


def episode(
    task: str, mode: str, tau: float | None, success: bool, decisions: list[dict[str, Any]]
) -> dict[str, Any]:
    """An episode result in the format the closed loop records."""
    by_model = [d for d in decisions if d["decided_by"] == "model"]
    judged = [d["model_correct"] for d in by_model if d["model_correct"] is not None]
    llm_calls = len(decisions)  # the LLM still writes the arguments of every call
    return {
        "kind": "episode",
        "task_id": task,
        "mode": mode,
        "decision_model": "llm" if mode == "llm" else "dm",
        "llm": "llm",
        "tau": tau,
        "success": success,
        "steps": len(decisions),
        "budget_exhausted": not success,
        "decisions": decisions,
        "coverage": len(by_model) / len(decisions) if decisions else 0.0,
        "model_accuracy": sum(judged) / len(judged) if judged else None,
        "llm_calls": llm_calls,
        "llm_calls_saved": len(by_model),
        "decision_calls": 0 if mode == "llm" else len(decisions),
        "fallbacks": sum(d["fallback"] for d in decisions),
        "cost_usd": {"decision": 0.0 if mode == "llm" else 0.001, "llm": 0.02},
        "latency_ms": {"decision": 0.0 if mode == "llm" else 40.0, "llm": 900.0 + 10 * len(decisions)},
        "cache_hits": 1 if task.endswith("1") else 0,
        "fit": {"target": 0.9, "tau": tau} if mode == "gated" else None,
    }


def _episode_results(fail: bool = True) -> list[tuple[Job, dict[str, Any] | None]]:
    m, llm = "model", "llm"
    cells: list[tuple[str, str, float | None, list[tuple[bool, list[dict[str, Any]]]]]] = [
        ("dm", m, None, [
            (True, [decision(0, m), decision(1, m), decision(2, m)]),
            (True, [decision(0, m), decision(1, m, correct=False), decision(2, m)]),
            (False, [decision(0, m, correct=False), decision(1, m, correct=False)]),
            (True, [decision(0, m), decision(1, m, correct=None)]),
        ]),
        ("dm", "gated", 0.8, [
            (True, [decision(0, m), decision(1, llm), decision(2, m)]),
            (True, [decision(0, llm), decision(1, llm, fallback=True, correct=False), decision(2, m)]),
            (True, [decision(0, m), decision(1, m, correct=False), decision(2, llm, llm_correct=False)]),
        ]),
        ("llm", llm, None, [
            (True, [decision(0, llm), decision(1, llm)]),
            (True, [decision(0, llm), decision(1, llm), decision(2, llm)]),
            (True, [decision(0, llm)]),
            (False, [decision(0, llm), decision(1, llm)]),
        ]),
    ]  # fmt: skip
    out: list[tuple[Job, dict[str, Any] | None]] = []
    for model, mode, tau, runs in cells:
        payload = {"kind": "episode", "decision_model": model, "tau": tau}
        for t, (success, decisions) in enumerate(runs):
            task = f"task-{t + 1}"
            job = Job(f"ep-{mode}-{t}", model, mode, "eps", task, payload)
            out.append((job, episode(task, mode, tau, success, decisions)))
        if fail and mode == "gated":  # one gated episode that failed for good
            out.append((Job(f"ep-{mode}-9", model, mode, "eps", "task-9", payload), None))
    return out


async def finished_queue(config: SweepConfig, *, fail: bool = True, url: str = "memory://") -> Queue:
    """A queue (in memory unless ``url`` names a database) holding the small run, every job recorded
    (with ``fail``, one LLM question and one gated episode failed for good: their cells show no score)."""
    queue = open_queue(url, config.name)
    await queue.init_run("name: small\n", META)
    results = _question_results(config, fail)
    if any(s.kind == "episodes" for s in config.scenarios):
        results += _episode_results(fail)
    await queue.enqueue([job for job, _ in results], {})
    claimed = await queue.claim("w", len(results), 60.0)
    assert len(claimed) == len(results)
    await queue.complete("w", [(job.id, r) for job, r in results if r is not None])
    await queue.fail(
        "w", [Failure(job.id, "HTTP 400: bad request", "fatal", True) for job, r in results if r is None]
    )
    return queue
