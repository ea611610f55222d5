"""A synthetic AgentDecisionBench folder for tests: the dataset's layout, file names and fields, any size.

``make_dataset(root)`` writes, by default with the dataset card's counts, ``models.jsonl.gz``, the common
states (3,939 questions, 69 options, 200 eligible tasks), DecisionGym-Shift (1,093 questions with 129
options and the ``nosurf`` / ``nodist`` re-renderings, 100 tasks), published-style answers of each model
(``answers_<id>.jsonl.gz``, shift variants as ``answers_<id>_<variant>``), ``isolated/answers.jsonl.gz``
on the L1 fixture's items, and the ``tasks`` list (2,200 rows in the card's sets, 200 of them
``shift_l3``). States are synthetic; qhashes are computed as the dataset computes them.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from knowwhen_runner.dataset.files import compute_qhash
from knowwhen_runner.gym import SUITES, task_rows

CARD = {"common_states": 3939, "shift": 1093, "common_tasks": 200, "shift_tasks": 100, "shift_l3": 200}
_CORE = ["ask_user", "find_customer", "get_orders", "cancel_order", "refund_order", "ship_order"]
_CORE += ["update_address", "expedite_order", "reply_to_customer"]
_SHIFTED = {name: f"{name}_v2" for name in _CORE} | {"ask_user": "request_clarification"}
_ORIGINAL = {shifted: name for name, shifted in _SHIFTED.items()}
_TASK_SETS = [
    ("stage1_eval", "common", "eval", 0, 500),
    ("stage2_eval", "common", "eval", 500, 500),
    ("shift_l2_sources", "shift", "bench", 0, 100),
    ("shift_l3", "shift", "eval", 0, 200),
    ("hard_e7", "hard", "eval", 0, 200),
    ("hard_e7b", "hard", "eval", 200, 200),
    ("hard_e7c", "hard", "eval", 400, 200),
    ("hard_e7e", "hard", "eval", 600, 100),
    ("hard_e7f", "hard", "eval", 700, 200),
]
DEFAULT_MODELS = {"e12": "ours", "jev": "off-the-shelf", "sl4b": "off-the-shelf", "gemini": "LLM"}
_L1_ITEMS = [
    "simple_python_0",
    "simple_python_1",
    "multiple_0",
    "multiple_1",
    "live_simple_0-0-0",
    "live_multiple_0-0-0",
    "irrelevance_0",
    "live_irrelevance_0-0-0",
    "0b1f5c2e-0000-4000-8000-000000000001",
    "0b1f5c2e-0000-4000-8000-000000000002",
]


def _write(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)


def _options(core: Sequence[str], n_distractors: int) -> tuple[list[str], list[str]]:
    names = [*core, *(f"tool_{k:03d}" for k in range(n_distractors))]
    return names, [f"Does {name.replace('_', ' ')}." for name in names]


def _question_set(
    folder: Path, n_questions: int, n_tasks: int, names: list[str], descs: list[str], rng: random.Random
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Questions and an answer key: every question occurs once, some twice (in another task)."""
    questions, occurrences = [], []
    for i in range(n_questions):
        state = f"TASK: request {i}\nHISTORY:\n(none)\nCURRENT OBSERVATION: step {i % 7}"
        questions.append(
            {
                "qhash": compute_qhash(state, names, descs),
                "state": state,
                "options": names,
                "descriptions": descs,
            }
        )
    picks = [(q, i % n_tasks) for i, q in enumerate(questions)]
    picks += [
        (questions[rng.randrange(n_questions)], rng.randrange(n_tasks)) for _ in range(n_questions // 3)
    ]
    for step, (q, t) in enumerate(picks):
        gold = names[rng.randrange(len(_CORE))]
        ok = [gold] if gold == names[0] or rng.random() < 0.6 else [gold, names[1]]
        occurrences.append(
            {
                "task": f"T{t:03d}",
                "source": "synthetic",
                "step": step,
                "qhash": q["qhash"],
                "gold": gold,
                "gold_aux": {"acceptable_tools": ok, "acceptable_tools_unfiltered": ok},
                "gold_status": "ok",
                "dp": "tool_select",
                "stratum": "on_plan" if rng.random() < 0.8 else "after_off_plan",
                "label_provenance": "plan",
            }
        )
    folder.mkdir(parents=True, exist_ok=True)
    _write(folder / "questions.jsonl.gz", questions)
    _write(folder / "occurrences.jsonl.gz", occurrences)
    corpus = {"eligible_tasks": [f"T{t:03d}" for t in range(n_tasks)], "files": {}}
    (folder / "corpus.json").write_text(json.dumps(corpus))
    return questions, occurrences


def _answers(
    model: str, questions: list[dict[str, Any]], gold: dict[str, str], rng: random.Random, variant: str | None
) -> list[dict[str, Any]]:
    """Published-style answers: mostly the gold tool, some wrong, a few errors and invalid answers."""
    rows = []
    for q in sorted(questions, key=lambda q: q["qhash"]):
        roll = rng.random()
        answer = gold[q["qhash"]] if roll < 0.7 else q["options"][rng.randrange(len(q["options"]))]
        row = {"model": model, "qhash": q["qhash"], "answer": answer, "confidence": round(rng.random(), 4)}
        row |= {
            "valid": roll < 0.97,
            "error": "timeout" if roll > 0.99 else None,
            "attempts": 1,
            "requests": 1,
        }
        row |= {"cost_usd": 0.0, "latency_ms": round(5 + 20 * rng.random(), 3), "wall_ms": 30.0}
        rows.append(({"variant": variant} if variant else {}) | row)
    return rows


def _shift_variants(folder: Path, questions: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """nosurf: the original tool names with a map to the shifted ones; nodist: no added distractors.

    Both keep the main qhashes, as the dataset's re-renderings do.
    """
    nosurf, nodist = [], []
    for q in questions:
        names = [_ORIGINAL.get(n, n) for n in q["options"]]
        nosurf.append({**q, "options": names, "map": {_ORIGINAL[v]: v for v in _SHIFTED.values()}})
        keep = [i for i, n in enumerate(q["options"]) if not n.startswith("tool_")]
        options = [q["options"][i] for i in keep]
        nodist.append({**q, "options": options, "descriptions": [q["descriptions"][i] for i in keep]})
    _write(folder / "questions_nosurf.jsonl.gz", nosurf)
    _write(folder / "questions_nodist.jsonl.gz", nodist)
    (folder / "variants.json").write_text(
        json.dumps({"nosurf": "original names", "nodist": "no distractors"})
    )
    return {"main": questions, "nosurf": nosurf, "nodist": nodist}


def _isolated(models: dict[str, str], rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for rank, model in enumerate(models):
        for item in [*_L1_ITEMS, "simple_python_0/param/base", "multiple_0/param/amount"]:
            base = item.split("/")[0].split("-")[0]
            source = "when2call:mcq" if item.startswith("0b1f") else f"bfcl:{base.rsplit('_', 1)[0]}"
            correct = rng.random() < 0.9 - 0.15 * rank  # models differ
            rows.append(
                {
                    "model": model,
                    "id": item,
                    "source": source,
                    "dp": "tool_params" if "/param/" in item else "tool_select",
                }
                | {
                    "category": source.split(":")[1],
                    "param": item.split("/")[-1] if "/param/" in item else None,
                }
                | {
                    "pred": "x" if correct else "y",
                    "gold": ["x"],
                    "correct": correct,
                    "conf": 0.9,
                    "error": None,
                }
                | {"refusal": False, "cost_usd": 0.0, "latency_ms": 9.0, "request_questions": 1}
                | {"input_tokens": 100, "output_tokens": 0, "model_id": model}
            )
    return rows


def _tasks() -> list[dict[str, Any]]:
    rows = []
    for name, suite, split, start, n in _TASK_SETS:
        rows += task_rows(SUITES[suite], split, n, start=start, set_name=name, allow_eval=True)
    return rows


def make_dataset(
    root: Path,
    *,
    n_common: int = CARD["common_states"],
    n_shift: int = CARD["shift"],
    models: dict[str, str] | None = None,
    seed: int = 0,
) -> Path:
    """Write a dataset folder under ``root`` (see the module docstring); returns ``root``."""
    rng = random.Random(seed)
    models = models if models is not None else DEFAULT_MODELS
    _write(
        root / "models.jsonl.gz",
        [{"model": m, "name": m.upper(), "kind": k, "levels": ["L1", "L2"]} for m, k in models.items()],
    )
    sets = {
        "common_states": (n_common, CARD["common_tasks"], _options(_CORE, 60)),
        "shift": (n_shift, CARD["shift_tasks"], _options([_SHIFTED[n] for n in _CORE], 120)),
    }
    for name, (n_q, n_t, (names, descs)) in sets.items():
        questions, occurrences = _question_set(root / name, n_q, min(n_t, n_q), names, descs, rng)
        gold = {o["qhash"]: o["gold"] for o in occurrences}
        variants = _shift_variants(root / name, questions) if name == "shift" else {None: questions}
        for model in models:
            for variant, qs in variants.items():
                suffix = f"_{variant}" if variant not in (None, "main") else ""
                said = {q: _ORIGINAL.get(g, g) for q, g in gold.items()} if variant == "nosurf" else gold
                rows = _answers(model, qs, said, rng, variant)
                _write(root / name / f"answers_{model}{suffix}.jsonl.gz", rows)
    _write(root / "isolated" / "answers.jsonl.gz", _isolated(models, rng))
    _write(root / "tasks" / "decisiongym_tasks.jsonl.gz", _tasks())
    return root
