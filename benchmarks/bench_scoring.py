"""Time scoring at the common states' real size: 39 models x 3,939 questions, 5,314 occurrences, 200 tasks.

Not a test. Writes a synthetic question set in the benchmark layout (gzipped) to a temporary folder, then
times each stage: loading the key, reading every answer file, scoring every model, and gating every model
over one LLM. Run: ``python benchmarks/bench_scoring.py [--models 39] [--questions 3939]``.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from knowwhen_runner.dataset.files import load_answers, load_question_set
from knowwhen_runner.dataset.scoring import compile_key, gated_open_loop, score_l2
from knowwhen_runner.jsonio import write_jsonl

TOOLS = [f"tool_{i:02d}" for i in range(69)]


def _write_dataset(folder: Path, n_models: int, n_questions: int, n_tasks: int, seed: int) -> None:
    rng = random.Random(seed)
    qhashes = [f"{i:064x}" for i in range(n_questions)]
    write_jsonl(
        folder / "questions.jsonl.gz",
        (
            {"qhash": q, "state": f"TASK: t\nHISTORY:\nCURRENT OBSERVATION: {q}", "options": TOOLS}
            for q in qhashes
        ),
    )
    n_occurrences = n_questions * 5314 // 3939
    occurrences = []
    for i in range(n_occurrences):
        gold = rng.choice(TOOLS)
        acceptable = [gold, "tool_00"] if rng.random() < 0.2 else [gold]
        occurrences.append(
            {
                "task": f"task_{i % n_tasks:03d}",
                "source": "bench",
                "step": i // n_tasks,
                "qhash": qhashes[i % n_questions],
                "gold": gold,
                "gold_aux": {"acceptable_tools": acceptable},
                "stratum": "on_plan" if rng.random() < 0.8 else "after_off_plan",
            }
        )
    write_jsonl(folder / "occurrences.jsonl.gz", occurrences)
    (folder / "corpus.json").write_text(
        '{"eligible_tasks": [' + ", ".join(f'"task_{t:03d}"' for t in range(n_tasks)) + "]}"
    )
    for m in range(n_models):
        rows = (
            {
                "model": f"model_{m:02d}",
                "qhash": q,
                "answer": rng.choice(TOOLS),
                "confidence": rng.random(),
                "valid": True,
                "error": None if rng.random() > 0.01 else "timeout",
                "attempts": 1,
                "requests": 1,
                "cost_usd": 0.0,
                "latency_ms": 20.0,
                "wall_ms": 21.0,
            }
            for q in qhashes
        )
        write_jsonl(folder / f"answers_model_{m:02d}.jsonl.gz", rows)


def _timed(label: str, started: float) -> float:
    now = time.perf_counter()
    print(f"{label:<34} {now - started:7.3f} s")
    return now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=int, default=39)
    parser.add_argument("--questions", type=int, default=3939)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        _write_dataset(folder, args.models, args.questions, args.tasks, args.seed)
        t = _timed("write synthetic dataset", t)
        start = t
        qset = load_question_set(folder)
        key = compile_key(qset)
        t = _timed(f"load key ({len(key.qhashes)} occurrences)", t)
        table = load_answers(folder, qset.questions)
        n_rows = sum(len(v) for v in table.values())
        t = _timed(f"read {n_rows} answer rows", t)
        scores = {model: score_l2(answers, key) for (model, _), answers in table.items()}
        t = _timed(f"score {len(scores)} models", t)
        print(f"{'load + read + score':<34} {t - start:7.3f} s")
        llm = table[("model_00", "main")]
        for (_, _), answers in table.items():
            gated_open_loop(answers, llm, key, target=0.99)
        _timed(f"gate {len(table)} models over one LLM", t)
        best = max(scores.items(), key=lambda item: item[1].accuracy)
        print(f"best synthetic model: {best[0]} at {best[1].accuracy:.1f}% (chance is about 1.7%)")


if __name__ == "__main__":
    main()
