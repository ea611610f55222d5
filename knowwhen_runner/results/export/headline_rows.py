"""The run's headline numbers as the dataset's ``leaderboard`` rows (``leaderboard/headline_numbers.jsonl.gz``).

L1 and L2 numbers are scored from the exported files themselves by the benchmark's rules (``score_l1``,
``score_l2``: a failed job counts as wrong, as in ``knowwhen score``), with task sets and metrics named so
that ``knowwhen score --leaderboard`` recomputes each row; L3 success comes from the run's manifests. A row
over a subset (a scenario's ``limit``) says so in ``paper_display``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...config import SweepConfig
from ...dataset.features import LEADERBOARD_COLUMNS, typed_row
from ...dataset.files import load_answers, read_isolated_answers
from ...dataset.score_folder import load_variant
from ...dataset.scoring import compile_key, score_l1, score_l2
from ...dataset.subset import SubsetRecord, read_subset
from ...jsonio import write_jsonl
from ..manifest import load_manifest, manifest_path

__all__ = ["headline_rows", "write_headline_numbers"]

HEADLINE_PATH = Path("leaderboard") / "headline_numbers.jsonl.gz"


def _row(
    config: SweepConfig,
    model: str,
    level: str,
    task_set: str,
    metric: str,
    value: float,
    subset: SubsetRecord | None = None,
) -> dict[str, Any]:
    shown = f"run {config.name}" + ("" if subset is None else f" (a subset: {subset.sentence()})")
    row = {
        "model": model,
        "model_name": config.model(model).model,
        "level": level,
        "task_set": task_set,
        "metric": metric,
        "value": f"{value:.1f}",
        "value_num": round(value, 4),
        "paper_display": shown,
    }
    return typed_row(row, LEADERBOARD_COLUMNS)


def _l1_rows(config: SweepConfig, out: Path) -> Iterator[dict[str, Any]]:
    path = out / "isolated" / "answers.jsonl.gz"
    if not path.is_file():
        return
    subset = read_subset(path.parent)
    for model, rows in read_isolated_answers(path).items():
        score = score_l1(rows)
        yield _row(config, model, "L1", "isolated", "pooled", score.pooled, subset)
        if score.bfcl_tool_choice is not None:
            yield _row(config, model, "L1", "isolated", "bfcl_tool_choice", score.bfcl_tool_choice, subset)


def _l2_rows(config: SweepConfig, out: Path, sets: dict[str, str]) -> Iterator[dict[str, Any]]:
    done = set()
    for spec in config.scenarios:
        if spec.id not in sets or (sets[spec.id], spec.variant or "main") in done:
            continue
        folder, variant = sets[spec.id], spec.variant or "main"
        done.add((folder, variant))
        qset = load_variant(out / folder, variant)
        key = compile_key(qset)
        task_set = folder if variant == "main" else f"{folder} {variant}"
        subset = read_subset(out / folder)
        for (model, _v), answers in sorted(
            load_answers(out / folder, qset.questions, variant=variant).items()
        ):
            score = score_l2(answers, key)
            yield _row(config, model, "L2", task_set, "accuracy", score.accuracy, subset)
            if score.must_ask is not None:
                yield _row(config, model, "L2", task_set, "must_ask", score.must_ask, subset)


def _l3_rows(config: SweepConfig, out: Path) -> Iterator[dict[str, Any]]:
    for model in config.models:
        path = manifest_path(config.output, model.id)
        for cell in load_manifest(path).closed_loop if path.is_file() else []:
            rate = cell.success_rate if cell.success_rate is not None else cell.card_success_rate
            if rate is None:
                continue
            metric = f"success ({cell.mode}{'' if cell.tau is None else f', τ {cell.tau:.4g}'})"
            subset = read_subset(out / "episodes" / cell.scenario)
            yield _row(config, model.id, "L3", cell.scenario, metric, 100.0 * rate, subset)


def headline_rows(config: SweepConfig, out: Path, sets: dict[str, str]) -> list[dict[str, Any]]:
    """Every headline number of the run: L1 pooled and BFCL tool choice, L2 accuracy and must-ask per
    question set and variant, L3 success per scenario, mode and τ."""
    return [*_l1_rows(config, out), *_l2_rows(config, out, sets), *_l3_rows(config, out)]


def write_headline_numbers(config: SweepConfig, out: Path, sets: dict[str, str]) -> Path:
    path = out / HEADLINE_PATH
    write_jsonl(path, headline_rows(config, out, sets))
    return path
