"""A finished run in a real SQLite run database, made without a server: the real planner's jobs over a
synthetic AgentDecisionBench folder, answered by hand, then finalised by the real finaliser.

It holds what an export must carry whatever the values: a decision model ``dm`` with probabilities and one
job failed for good (its file does not sort first), an LLM ``agent`` whose rows have no confidence or
probabilities at all (its file sorts first), the common states and the shift in every variant (main,
nosurf, nodist), an isolated (L1) scenario, and closed-loop episodes in every mode, with repeats and a τ
fitted on the shadow episodes of a fit set (planned in two stages, as ``run`` plans them). Every
eleventh job of each stage fails its first attempt and is answered at its second; some answers retried
within their attempt. Episodes hold
what their files must type whatever the values: arguments as objects and as a bare string, a turn with
no call, a decision model's unusable answer. Deterministic and a few seconds.
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
from knowwhen_runner.plan import plan
from knowwhen_runner.queue import Failure, open_queue
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.stored import run_meta
from knowwhen_runner.sweep.fits import compute_fits
from tests.benchdata import make_dataset

L1 = Path(__file__).resolve().parent / "fixtures" / "isolated"
VARIANTS = {"shift": "main", "shift-nosurf": "nosurf", "shift-nodist": "nodist"}
MODELS = [
    {"id": "agent", "model": "openai/agent", "kind": "llm", "api_base": "http://127.0.0.1:9/v1"},
    {"id": "dm", "model": "hosted_vllm/dm", "kind": "decision", "api_base": "http://127.0.0.1:9"},
]
FAILED_ERROR = "HTTP 400: bad request"
EPISODES = {"agent": "agent", "suite": "common"}
EPISODE_SCENARIOS = [
    {"id": "eps-fit", "kind": "episodes", **EPISODES, "split": "fit", "n": 3, "modes": []},
    {
        "id": "eps",
        "kind": "episodes",
        **EPISODES,
        "split": "bench",
        "n": 2,
        "repeats": 2,
        "modes": ["llm", "model", "gated"],
        "tau": {"fit": "eps-fit", "target": 0.6, "min_support": 3},
    },
]
"""A fit set of three tasks whose shadow episodes fit τ, and two tasks twice each in llm, model and gated."""


def state_scenarios(dataset: Path) -> list[dict[str, Any]]:
    """The common states and the shift in every variant, as config scenarios."""
    return [
        {"id": "common", "path": str(dataset / "common_states")},
        *({"id": sc, "path": str(dataset / "shift"), "variant": v} for sc, v in VARIANTS.items()),
    ]


def write_run_config(
    path: Path, dataset: Path, *, name: str, episodes: bool = True, limits: dict[str, int] | None = None
) -> Path:
    """A config of the two models over the states, the L1 fixture and (``episodes``) two DecisionGym tasks;
    ``limits``: a ``limit`` per scenario id (a seeded sample of it)."""
    l1 = {"id": "l1", "kind": "isolated", "path": str(L1), "params": "required"}  # both question kinds
    scenarios = [*state_scenarios(dataset), l1]
    if episodes:
        scenarios += EPISODE_SCENARIOS
    scenarios = [
        {**sc, "limit": (limits or {})[sc["id"]]} if sc["id"] in (limits or {}) else sc for sc in scenarios
    ]
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
        top = 0.7 if len(item["options"]) > 1 else 1.0  # an argument question may have one option
        rest = (1.0 - top) / max(1, len(item["options"]) - 1)
        probs = {o: (top if o == choice else rest) for o in item["options"]}
        response = {"choice": choice, "confidence": 0.4, "probabilities": probs, "cost_usd": 0.0}
    else:
        response = {"choice": choice, "confidence": None, "probabilities": None, "cost_usd": 0.002}
    response |= {"latency_ms": float(10 + i % 13), "input_tokens": 100, "output_tokens": 3}
    return answer_row(
        model_id=job.model_id,
        qhash=job.item,
        item=item,
        response=response,
        attempts=job.attempts,
        requests=1,
        wall_ms=float(12 + i % 5),
        cache_hit=i % 9 == 0,
        errors=["HTTP 503: busy"] if i % 11 == 5 else None,
    )


def _decision(job: Job, i: int, step: int) -> dict[str, Any]:
    """One decision: the model's confidence cycles through four levels and is mostly right when high."""
    conf = round(0.35 + 0.2 * ((i + step) % 4), 2)
    correct = conf >= 0.55 or (i + step) % 5 == 0
    unusable = job.mode != "llm" and (i + step) % 7 == 3  # an answer with no confidence: a fallback
    tau = job.payload.get("tau")
    by_model = job.mode == "model" or (job.mode == "gated" and not unusable and conf >= tau)
    choice = None if job.mode == "llm" else ("get_orders" if correct else "cancel_order")
    tool = choice if by_model else ("get_orders" if (i + step) % 3 else "find_customer_by_email")
    return {
        "step": step,
        "decided_by": "model" if by_model and not unusable else "llm",
        "tool": tool,
        "model_choice": choice,
        "model_confidence": None if job.mode == "llm" or unusable else conf,
        "model_reported_confidence": None,
        "llm_choice": None if by_model and not unusable else tool,
        "acceptable": ["get_orders"],
        "model_correct": None if choice is None else correct,
        "llm_correct": None if by_model and not unusable else tool == "get_orders",
        "fallback": unusable and job.mode in ("model", "gated"),
        "error": "invalid answer: no confidence" if unusable else None,
        "stratum": "on_plan" if step == 0 else "after_off_plan",
    }


def _call(step: int, tool: str | None, i: int) -> dict[str, Any]:
    if tool is None:
        return {"step": step, "tool": None, "arguments": None, "observation": None, "text": "Anything else?"}
    arguments: Any = {"customer_id": f"C-{i}", "limit": step} if step % 2 == 0 else "customer C-7"
    return {"step": step, "tool": tool, "arguments": arguments, "observation": f"result {i}.{step}"}


def _episode_result(job: Job, i: int) -> dict[str, Any]:
    """A recorded episode in the closed loop's own format (``episode._result``), varied by ``i``."""
    decisions = [_decision(job, i, step) for step in range(2 + i % 2)]
    if i % 4 == 1:  # the agent wrote text instead of a call at the last step
        decisions[-1].update(tool=None, llm_choice=None, llm_correct=False, decided_by="llm")
    by_model = [d for d in decisions if d["decided_by"] == "model"]
    decider = job.payload.get("decision_model")
    return {
        "kind": "episode",
        "scenario": job.scenario_id,
        "task_id": job.item,
        "mode": job.mode,
        "decision_model": job.model_id,
        "llm": job.payload["agent"],
        "tau": job.payload.get("tau"),
        "success": i % 3 != 0,
        "steps": len(decisions),
        "max_steps": job.payload["max_steps"],
        "budget_exhausted": i % 5 == 0,
        "decisions": decisions,
        "coverage": len(by_model) / len(decisions),
        "llm_calls": len(decisions),
        "llm_calls_saved": len(by_model),
        "decision_calls": len(decisions) if decider else 0,
        "fallbacks": sum(d["fallback"] for d in decisions),
        "cost_usd": {"decision": 0.0001 * len(decisions) if decider else 0.0, "llm": 0.0021 * (1 + i % 3)},
        "latency_ms": {"decision": 30.0 + i if decider else 0.0, "llm": 700.0 + 13.0 * i},
        "cache_hits": i % 2,
        "extra_tool_calls": 1 if i % 6 == 2 else 0,
        "extra_calls": [],
        "fit": job.payload.get("fit"),
        "repeat": int(job.payload.get("repeat") or 0),
        "seed": job.payload.get("seed"),
        "trajectory": [_call(d["step"], d["tool"], i) for d in decisions],
        "reply": "Your order is on its way." if i % 3 != 0 else None,
    }


def _answer(job: Job, i: int, items: dict[tuple[str, str], Any], golds: dict[str, str]) -> dict[str, Any]:
    item = items[(job.scenario_id, job.item)]
    gold = item["gold"][0] if job.scenario_id == "l1" and item.get("gold") else golds.get(job.item)
    return _question_result(job, item, gold, i)


async def _claimed(queue: Any, n: int) -> list[Job]:
    """Claim the stage's jobs; every eleventh fails its first attempt (not for good) and is claimed again."""
    claimed = sorted(
        await queue.claim("w", n, 600.0), key=lambda j: (j.scenario_id, j.model_id, j.item, j.id)
    )
    again = [job.id for i, job in enumerate(claimed) if i % 11 == 0]
    await queue.fail("w", [Failure(job_id, "HTTP 503: busy", "retry") for job_id in again])
    second = {job.id: job for job in await queue.claim("w", len(again), 600.0)}
    assert set(second) == set(again) and all(job.attempts == 2 for job in second.values())
    return [second.get(job.id, job) for job in claimed]


async def _fill(config_path: Path, text: str, golds: dict[str, str]) -> None:
    """Plan, answer every job, fit τ from the shadow episodes, plan the gated stage, answer it, finalise."""
    config = load_config(config_path)
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    async with open_queue(config.db_url, config.name) as queue:
        await queue.init_run(text, run_meta(config_path, text))
        fits: dict[str, Any] = {}
        failed: set[str] = set()
        for stage in range(2):
            the_plan = plan(config, scenarios, fits)
            await queue.enqueue(the_plan.jobs, the_plan.items, whole_plan=the_plan.job_ids())
            claimed = await _claimed(queue, len(the_plan.jobs))
            results, failures = [], []
            for i, job in enumerate(claimed):
                if job.payload.get("kind") == "episode":
                    results.append((job.id, _episode_result(job, i + 100 * stage)))
                elif job.model_id == "dm" and job.scenario_id in {"common", "shift-nosurf", "l1"} - failed:
                    failed.add(job.scenario_id)  # one job of each failed for good
                    failures.append(Failure(job.id, FAILED_ERROR, "fatal", True))
                else:
                    results.append((job.id, _answer(job, i, the_plan.items, golds)))
            await queue.complete("w", results)
            await queue.fail("w", failures)
            fits = await compute_fits(config, queue)
        assert fits and all(f["tau"] is not None for f in fits.values()), fits
        await finalize_run(config, queue)


def make_run(root: Path, limits: dict[str, int] | None = None) -> tuple[Path, Path]:
    """The dataset folder and the finalised run folder (``root/run``) of the export tests; ``limits``: a
    ``limit`` per scenario id."""
    dataset = make_dataset(root / "ds", n_common=45, n_shift=30)
    config_path = write_run_config(root / "run.yaml", dataset, name="run", limits=limits)
    anyio.run(_fill, config_path, config_path.read_text(), _golds(dataset))
    return dataset, root / "run"
