"""Finalising a run: answers files in the benchmark's layout and an accuracy table.

Idempotent: it reads only the queue's recorded results and rewrites the same files (atomically). For each
``states`` scenario it writes ``<output>/<scenario>/`` as a question-set folder of its own — the
questions, answer key and corpus copied beside one ``answers_<model>.jsonl.gz`` per model — so the
benchmark's scoring code and ``knowwhen score`` read it unchanged.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from .answers import failed_row
from .config import ScenarioSpec, SweepConfig
from .dataset import load_answers, load_question_set
from .jsonio import atomic_write_bytes, find_jsonl, write_jsonl
from .queue import Queue
from .scoring import score_l2

__all__ = ["finalize_run", "scenario_folder"]


def scenario_folder(config: SweepConfig, scenario_id: str) -> Path:
    return config.output / scenario_id


def _copy_question_files(spec: ScenarioSpec, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    stem = "questions" if spec.variant in (None, "main") else f"questions_{spec.variant}"
    for name in (stem, "occurrences"):
        src = find_jsonl(spec.path, name)
        if src is not None:
            target = dest / src.name
            if not target.exists() or target.stat().st_size != src.stat().st_size:
                atomic_write_bytes(target, src.read_bytes())
    if (spec.path / "corpus.json").is_file():
        shutil.copyfile(spec.path / "corpus.json", dest / "corpus.json")


def _public_row(row: dict[str, Any], variant: str | None) -> dict[str, Any]:
    out = dict(row)
    if variant is not None:
        out["variant"] = variant
    return out


async def finalize_run(config: SweepConfig, queue: Queue) -> dict[str, Any]:
    """Write answers files and ``table.md``; returns the scores it tabulated."""
    rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for job, status, result, error in await queue.results():
        if job.payload.get("kind") != "question":
            continue
        if status == "done" and result is not None:
            rows[(job.scenario_id, job.model_id)].append(result)
        elif status == "failed":
            rows[(job.scenario_id, job.model_id)].append(
                failed_row(
                    model_id=job.model_id, qhash=job.item, error=error or "failed", attempts=job.attempts
                )
            )
    scores: dict[str, dict[str, Any]] = {}
    for spec in config.scenarios:
        if spec.kind != "states":
            continue
        dest = scenario_folder(config, spec.id)
        _copy_question_files(spec, dest)
        for model in config.models:
            model_rows = sorted(rows.get((spec.id, model.id), []), key=lambda r: r["qhash"])
            if not model_rows:
                continue
            write_jsonl(
                dest / f"answers_{model.id}.jsonl.gz", (_public_row(r, spec.variant) for r in model_rows)
            )
        scores[spec.id] = _score_folder(spec, dest)
    _write_table(config, scores)
    return scores


def _score_folder(spec: ScenarioSpec, folder: Path) -> dict[str, Any]:
    stem = "questions" if spec.variant in (None, "main") else f"questions_{spec.variant}"
    qset = load_question_set(folder, questions_stem=stem)
    table = load_answers(folder, qset.questions)
    variant = spec.variant or "main"
    return {model: score_l2(answers, qset) for (model, var), answers in table.items() if var == variant}


def _write_table(config: SweepConfig, scores: dict[str, dict[str, Any]]) -> None:
    scenario_ids = [s.id for s in config.scenarios if s.id in scores]
    lines = [
        f"# {config.name}: accuracy (%)",
        "",
        "Per task, then mean over the eligible tasks (AgentDecisionBench rule).",
        "",
        "| model | " + " | ".join(scenario_ids) + " |",
        "|---|" + "---:|" * len(scenario_ids),
    ]
    for model in config.models:
        cells = []
        for sc in scenario_ids:
            result = scores[sc].get(model.id)
            cells.append("–" if result is None else f"{result.accuracy:.1f}")
        if any(c != "–" for c in cells):
            lines.append(f"| {model.id} | " + " | ".join(cells) + " |")
    atomic_write_bytes(config.output / "table.md", ("\n".join(lines) + "\n").encode())
