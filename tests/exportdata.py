"""A finished run in a real SQLite run database, made without a server: the real planner's jobs over a
synthetic AgentDecisionBench folder, answered by hand, then finalised by the real finaliser.

It holds what an export must carry whatever the values: a decision model ``dm`` with probabilities and one
job failed for good (its file does not sort first), an LLM ``agent`` whose rows have no confidence or
probabilities at all (its file sorts first), the common states and the shift in every variant (main,
nosurf, nodist), an isolated (L1) scenario, and closed-loop episodes. Deterministic and a few seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import yaml

from knowwhen_runner.config import load_config
from knowwhen_runner.dataset.answer_rows import answer_row
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import Failure, open_queue
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.run.stored import run_meta
from knowwhen_runner.run.sweep import load_and_plan
from tests.benchdata import make_dataset
from tests.golden.builders import decision, episode

L1 = Path(__file__).resolve().parent / "fixtures" / "isolated"
VARIANTS = {"shift": "main", "shift-nosurf": "nosurf", "shift-nodist": "nodist"}
MODELS = [
    {"id": "agent", "model": "openai/agent", "kind": "llm", "api_base": "http://127.0.0.1:9/v1"},
    {"id": "dm", "model": "hosted_vllm/dm", "kind": "decision", "api_base": "http://127.0.0.1:9"},
]
FAILED_ERROR = "HTTP 400: bad request"


def state_scenarios(dataset: Path) -> list[dict[str, Any]]:
    """The common states and the shift in every variant, as config scenarios."""
    return [
        {"id": "common", "path": str(dataset / "common_states")},
        *({"id": sc, "path": str(dataset / "shift"), "variant": v} for sc, v in VARIANTS.items()),
    ]


def write_run_config(path: Path, dataset: Path, *, name: str, episodes: bool = True) -> Path:
    """A config of the two models over the states, the L1 fixture and (``episodes``) two DecisionGym tasks."""
    scenarios = [*state_scenarios(dataset), {"id": "l1", "kind": "isolated", "path": str(L1)}]
    if episodes:
        scenarios.append(
            {"id": "eps", "kind": "episodes", "agent": "agent", "suite": "common", "split": "bench", "n": 2}
        )
    config = {
        "name": name,
        "output": str(path.parent / name),
        "modes": ["model", "llm"],
        "models": MODELS,
        "scenarios": scenarios,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _golds(dataset: Path) -> dict[str, str]:
    return {
        o.qhash: o.gold
        for sub in ("common_states", "shift")
        for o in load_question_set(dataset / sub).occurrences
    }


def _choice(item: dict[str, Any], gold: str | None, i: int) -> str:
    options = item["options"]
    named = {shifted: original for original, shifted in (item.get("map") or {}).items()}
    right = named.get(gold, gold) if gold else None
    if right in options and i % 4:
        return str(right)
    return str(options[(i * 7) % len(options)])


def _question_result(job: Job, item: dict[str, Any], gold: str | None, i: int) -> dict[str, Any]:
    choice = _choice(item, gold, i)
    if job.model_id == "dm":
        rest = (1.0 - 0.7) / (len(item["options"]) - 1)
        probs = {o: (0.7 if o == choice else rest) for o in item["options"]}
        response = {"choice": choice, "confidence": 0.4, "probabilities": probs, "cost_usd": 0.0}
    else:
        response = {"choice": choice, "confidence": None, "probabilities": None, "cost_usd": 0.002}
    response |= {"latency_ms": float(10 + i % 13), "input_tokens": 100, "output_tokens": 3}
    return answer_row(
        model_id=job.model_id,
        qhash=job.item,
        item=item,
        response=response,
        attempts=2 if i % 11 == 0 else 1,
        requests=1,
        wall_ms=float(12 + i % 5),
        cache_hit=i % 9 == 0,
        errors=["HTTP 503: busy"] if i % 11 == 0 else None,
    )


def _episode_result(job: Job, i: int) -> dict[str, Any]:
    by = "llm" if job.mode == "llm" else "model"
    result = episode(
        job.item, job.mode, None, i % 3 != 0, [decision(0, by), decision(1, by, correct=i % 2 == 0)]
    )
    return {**result, "decision_model": None if job.mode == "llm" else "dm", "llm": "agent"}


async def _fill(config_path: Path, text: str, golds: dict[str, str]) -> None:
    config = load_config(config_path)
    _scenarios, plan = load_and_plan(config)
    async with open_queue(config.db_url, config.name) as queue:
        await queue.init_run(text, run_meta(config_path, text))
        await queue.enqueue(plan.jobs, plan.items)
        claimed = await queue.claim("w", len(plan.jobs), 600.0)
        results, failures, failed = [], [], set()
        for i, job in enumerate(sorted(claimed, key=lambda j: (j.scenario_id, j.model_id, j.item))):
            if job.payload.get("kind") == "episode":
                results.append((job.id, _episode_result(job, i)))
            elif job.model_id == "dm" and job.scenario_id in {"common", "shift-nosurf"} - failed:
                failed.add(job.scenario_id)  # one job of each failed for good
                failures.append(Failure(job.id, FAILED_ERROR, "fatal", True))
            else:
                item = plan.items[(job.scenario_id, job.item)]
                gold = (
                    item["gold"][0] if job.scenario_id == "l1" and item.get("gold") else golds.get(job.item)
                )
                results.append((job.id, _question_result(job, item, gold, i)))
        await queue.complete("w", results)
        await queue.fail("w", failures)
        await finalize_run(config, queue)


def make_run(root: Path) -> tuple[Path, Path]:
    """The dataset folder and the finalised run folder (``root/run``) of the export tests."""
    dataset = make_dataset(root / "ds", n_common=45, n_shift=30)
    config_path = write_run_config(root / "run.yaml", dataset, name="run")
    anyio.run(_fill, config_path, config_path.read_text(), _golds(dataset))
    return dataset, root / "run"
