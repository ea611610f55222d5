"""Recording question sets in the benchmark's layout from canonical and perturbed trajectories.

Per task: the canonical trajectory, plus perturbed ones that take one wrong step (a distractor tool or an
unneeded question to the customer) and then follow the plan again. Every state before a decision becomes
an occurrence; identical states share one question (one qhash). Same inputs give byte-identical files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..dataset.files import QUESTION_TEXT, compute_qhash
from ..jsonio import atomic_write_bytes, file_sha256, write_jsonl
from .answer_key import AFTER_OFF_PLAN, StateKey, canonical_plan, key_for_env
from .env import GymEnv, Step
from .render import render_state
from .suite import sub_rng
from .tasks import Task
from .tools import ASK, DISTRACTOR, ToolSpec, shift_map, suite_tools

__all__ = ["GYM_VERSION", "RecordSummary", "Trajectory", "record_tasks", "trajectories"]

GYM_VERSION = "decisiongym-1"
_PROVENANCE = "decisiongym canonical plan (answer_key v1)"
_TEXT_PARAMS = {"message", "note", "summary", "reason", "question", "outcome", "instructions"}


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One recorded run of a task: its source name, the calls made, and the key at each recorded step."""

    source: str
    history: tuple[Step, ...]
    keys: tuple[tuple[int, StateKey], ...]


@dataclass(slots=True)
class RecordSummary:
    folder: Path
    tasks: int = 0
    questions: int = 0
    occurrences: int = 0
    must_ask: int = 0
    files: dict[str, str] = field(default_factory=dict)


def _fill(param: str, env: GymEnv) -> Any:
    """A plausible argument value for a distractor call, from what the agent could have seen."""
    task, c = env.task, env.task.customer
    values: dict[str, Any] = {
        "email": c.email,
        "name": c.name,
        "zip": c.zip,
        "phone": c.phone,
        "customer_id": c.id,
        "order_id": task.order_id,
        "amount": task.order.total_cents / 100,
        "points": 100,
        "address": task.new_address or task.order.address,
        "speed": "standard",
    }
    if param in values:
        return values[param]
    if param in _TEXT_PARAMS:
        return f"Customer request: {task.request[:60]}"
    return f"{param.split('_')[0].upper()}-{task.seed % 10000:04d}"


def _wrong_call(env: GymEnv, key: StateKey, k: int) -> tuple[str, dict[str, Any]]:
    """A call that is not acceptable here: a distractor, or (sometimes) an unneeded question."""
    rng = sub_rng(env.task.seed, f"perturb:{k}:call")
    ask = next(t.name for t in env.task.tools if t.role == ASK)
    if ask not in key.acceptable and rng.random() < 0.3:
        return ask, {"question": "Before I continue, can you confirm the order number?"}
    distractors: list[ToolSpec] = [t for t in env.task.tools if t.role == DISTRACTOR]
    spec = rng.choice(distractors)
    return spec.name, {p: _fill(p, env) for p in spec.params}


def _run(
    task: Task, source: str, prefix: Sequence[Step], wrong: tuple[str, dict[str, Any]] | None
) -> Trajectory:
    """Replay `prefix`, optionally make the wrong call, then follow the plan to the end."""
    env = GymEnv(task)
    for step in prefix:
        env.execute(step.tool, step.arguments)
    keys: list[tuple[int, StateKey]] = []
    stratum = "on_plan"
    if wrong is not None:
        env.execute(*wrong)
        stratum = AFTER_OFF_PLAN
    while not env.done and len(env.history) < 30:
        key = key_for_env(env, stratum=stratum)
        keys.append((len(env.history), key))
        env.execute(key.gold, key.gold_arguments)
    return Trajectory(source, tuple(env.history), tuple(keys))


def trajectories(task: Task, perturbations: int = 1) -> list[Trajectory]:
    """The canonical trajectory and `perturbations` perturbed ones (only their off-plan part is new)."""
    canon = canonical_plan(task)
    runs = [_run(task, "canonical", [], None)]
    for k in range(1, perturbations + 1):
        at = sub_rng(task.seed, f"perturb:{k}:at").randrange(len(canon))
        env = GymEnv(task)
        for step in canon[:at]:
            env.execute(step.tool, step.arguments)
        wrong = _wrong_call(env, key_for_env(env), k)
        runs.append(_run(task, f"perturb-{k}", canon[:at], wrong))
    return runs


def _question(state: str, tools: Sequence[ToolSpec]) -> tuple[str, dict[str, Any]]:
    options = [t.name for t in tools]
    descriptions = [t.description for t in tools]
    qhash = compute_qhash(state, options, descriptions, QUESTION_TEXT)
    return qhash, {"qhash": qhash, "state": state, "options": options, "descriptions": descriptions}


def _occurrence(task: Task, source: str, step: int, qhash: str, key: StateKey) -> dict[str, Any]:
    return {
        "task": task.task_id,
        "source": source,
        "step": step,
        "qhash": qhash,
        "gold": key.gold,
        "gold_aux": {
            "acceptable_tools": list(key.acceptable),
            "acceptable_tools_unfiltered": list(key.unfiltered),
        },
        "gold_status": "ok",
        "dp": "tool_select",
        "stratum": key.stratum,
        "label_provenance": _PROVENANCE,
    }


def _variant_rows(task: Task, history: Sequence[Step], qhash: str) -> dict[str, dict[str, Any]]:
    """The nosurf (original names) and nodist (core tools only) re-renderings of one shift state."""
    names = shift_map(task.suite)
    back = {shifted: original for original, shifted in names.items()}
    original_history = [Step(back.get(s.tool, s.tool), s.arguments, s.observation) for s in history]
    nosurf_tools = suite_tools(task.suite, original_names=True)
    _, nosurf = _question(render_state(task, original_history), nosurf_tools)
    nosurf.update(qhash=qhash, map={t.name: names[t.name] for t in nosurf_tools})
    _, nodist = _question(render_state(task, history), suite_tools(task.suite, distractors=False))
    nodist["qhash"] = qhash
    return {"nosurf": nosurf, "nodist": nodist}


def record_tasks(
    tasks: Sequence[Task],
    folder: Path,
    *,
    perturbations: int = 1,
    variants: bool = False,
    meta: dict[str, Any] | None = None,
) -> RecordSummary:
    """Write questions, occurrences and corpus.json (and the shift re-renderings when `variants`)."""
    questions: dict[str, dict[str, Any]] = {}
    extra: dict[str, dict[str, dict[str, Any]]] = {"nosurf": {}, "nodist": {}}
    occurrences: list[dict[str, Any]] = []
    for task in tasks:
        for run in trajectories(task, perturbations):
            for step, key in run.keys:
                history = run.history[:step]
                qhash, row = _question(render_state(task, history), task.tools)
                questions.setdefault(qhash, row)
                if variants and qhash not in extra["nosurf"]:
                    for name, vrow in _variant_rows(task, history, qhash).items():
                        extra[name][qhash] = vrow
                occurrences.append(_occurrence(task, run.source, step, qhash, key))
    return _write(folder, tasks, questions, extra if variants else {}, occurrences, meta or {})


def _sorted(rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [rows[q] for q in sorted(rows)]


def _write(
    folder: Path,
    tasks: Sequence[Task],
    questions: dict[str, dict[str, Any]],
    extra: dict[str, dict[str, dict[str, Any]]],
    occurrences: list[dict[str, Any]],
    meta: dict[str, Any],
) -> RecordSummary:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    summary = RecordSummary(folder, len(tasks), len(questions), len(occurrences))
    write_jsonl(folder / "questions.jsonl.gz", _sorted(questions))
    write_jsonl(folder / "occurrences.jsonl.gz", occurrences)
    for name, rows in extra.items():
        write_jsonl(folder / f"questions_{name}.jsonl.gz", _sorted(rows))
    if extra:
        _write_json(folder / "variants.json", _variants_doc())
    names = ["questions.jsonl.gz", "occurrences.jsonl.gz", *(f"questions_{n}.jsonl.gz" for n in extra)]
    summary.files = {n: file_sha256(folder / n) for n in names}
    ask_names = {t.name for task in tasks for t in task.tools if t.role == ASK}
    summary.must_ask = sum(
        1 for o in occurrences if len(o["gold_aux"]["acceptable_tools"]) == 1 and o["gold"] in ask_names
    )
    corpus = {
        "eligible_tasks": [t.task_id for t in tasks],
        "files": summary.files,
        "generator": GYM_VERSION,
        "question": QUESTION_TEXT,
        "counts": {"tasks": len(tasks), "questions": len(questions), "occurrences": len(occurrences)},
        "suite": tasks[0].suite.to_dict() if tasks else {},
        "seeds": [t.seed for t in tasks],
        **meta,
    }
    _write_json(folder / "corpus.json", corpus)
    return summary


def _variants_doc() -> dict[str, Any]:
    return {
        "main": {
            "file": "questions.jsonl.gz",
            "description": "shifted tool names, with the added distractors",
        },
        "nosurf": {
            "file": "questions_nosurf.jsonl.gz",
            "description": "the same states with the original tool names; map each answer through `map` "
            "(original name -> shifted name) before scoring",
        },
        "nodist": {
            "file": "questions_nodist.jsonl.gz",
            "description": "the same states with only the core tools as options (no added distractors)",
        },
        "join": "every variant row has the qhash of its main question, so occurrences.jsonl.gz applies to all",
    }


def _write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode())
