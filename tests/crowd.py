"""A finished run of 40 decision models and one LLM, made in the in-memory queue: 20 models near 85 %
and 20 near 8 % on one question set, answers drawn deterministically, so it finalises in seconds.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.dataset.answer_rows import answer_row
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import Queue, open_queue
from knowwhen_runner.scenarios.states import question_item
from tests.golden.builders import META, WRONG
from tests.helpers import make_question_set

STRONG = [f"strong-{k:02d}" for k in range(20)]
WEAK = [f"weak-{k:02d}" for k in range(20)]
LLM = "agent-llm"


def crowd_config(tmp: Path, report: dict[str, Any] | None = None, *, pairs: int = 20) -> SweepConfig:
    """2 × ``pairs`` decision models (weak and strong interleaved, so config order is not the ranking) and
    one LLM."""
    qs = make_question_set(tmp / "qs", n_tasks=8)
    interleaved = [m for pair in zip(WEAK[:pairs], STRONG[:pairs], strict=True) for m in pair]
    models = [{"id": m, "model": f"hosted_vllm/lexical@{m}", "kind": "decision"} for m in interleaved]
    models.append({"id": LLM, "model": "openai/agent-sim", "kind": "llm"})
    doc: dict[str, Any] = {
        "name": "crowd",
        "output": str(tmp / "out"),
        "models": models,
        "modes": ["model", "llm", "gated"],
        "scenarios": [{"id": "common", "kind": "states", "path": str(qs)}],
        "gate": {"llm": LLM, "target": 0.9},
    }
    if report is not None:
        doc["report"] = report
    return SweepConfig.model_validate(doc)


def _draw(model: str, i: int) -> float:
    """A fixed number in [0, 1) per model and question."""
    return int(hashlib.sha256(f"{model}/{i}".encode()).hexdigest()[:8], 16) / 2**32


def _response(model: str, i: int, gold: str) -> dict[str, Any]:
    k = int(model.rsplit("-", 1)[1])
    p = (0.78 + 0.007 * k) if model in STRONG else (0.05 + 0.003 * k)
    right = _draw(model, i) < p
    conf = 0.55 + 0.4 * _draw(model + "c", i) if right else 0.2 + 0.5 * _draw(model + "c", i)
    return {"choice": gold if right else WRONG, "confidence": round(conf, 3), "probabilities": None}


async def crowd_queue(config: SweepConfig, url: str = "memory://", open_jobs: int = 0) -> Queue:
    """A queue (in memory unless ``url`` says) holding every answer of the run's models, all recorded but
    the last ``open_jobs`` of the first model's, left pending."""
    spec = config.scenarios[0]
    assert spec.path is not None
    qset = load_question_set(spec.path)
    results = []
    for i, occ in enumerate(qset.occurrences):
        item = question_item(qset.questions[occ.qhash])
        for m in config.models:
            mode = "model" if m.kind == "decision" else "llm"
            if m.kind == "decision":
                reply = _response(m.id, i, occ.gold)
            else:
                reply = {
                    "choice": WRONG if i % 7 == 3 else occ.gold,
                    "confidence": None,
                    "probabilities": None,
                }
            is_llm = m.kind == "llm"
            response = {
                **reply,
                "cost_usd": 0.003 if is_llm else 0.0001 * (1 + int(m.id.rsplit("-", 1)[1])),
                "latency_ms": 200.0 + i if is_llm else 10.0 + int(m.id.rsplit("-", 1)[1]) + i % 3,
                "input_tokens": 100,
                "output_tokens": 0,
            }
            row = answer_row(
                model_id=m.id, qhash=occ.qhash, item=item, response=response, attempts=1, requests=1,
                wall_ms=10.0, cache_hit=False, errors=None,
            )  # fmt: skip
            results.append(
                (Job(f"{m.id}-{i:03d}", m.id, mode, spec.id, occ.qhash, {"kind": "question"}), row)
            )
    queue = open_queue(url, config.name)
    await queue.init_run("name: crowd\n", META)
    await queue.enqueue([job for job, _ in results], {})
    first = config.models[0].id
    kept = [r for r in results if r[0].model_id == first][len(results) // len(config.models) - open_jobs :]
    left = {job.id for job, _ in kept} if open_jobs else set()
    claimed = await queue.claim("w", len(results), 60.0)
    assert len(claimed) == len(results)
    await queue.release("w", sorted(left))
    await queue.complete("w", [(job.id, r) for job, r in results if job.id not in left])
    return queue
