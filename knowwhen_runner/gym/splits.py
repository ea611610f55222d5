"""Task lists in the benchmark's `tasks` layout, by split, with the evaluation seeds kept under guard.

Each split owns a range of one million seeds. Training and threshold-fit tasks are free to generate;
evaluation seeds need an explicit opt-in (`allow_eval=True`, `--allow-eval`, or `KNOWWHEN_EVAL_RUNS=1`),
so nobody tunes on them by accident. `bench` is the range the bundled question sets come from.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..exceptions import KnowwhenError, ScenarioError
from ..jsonio import write_jsonl
from .suite import Suite
from .tasks import Task, make_task, task_id_for

__all__ = [
    "EVAL_ENV",
    "SPLITS",
    "SPLIT_SIZE",
    "EvalSeedError",
    "check_eval_allowed",
    "split_seeds",
    "split_tasks",
    "task_rows",
    "write_task_list",
]

SPLIT_SIZE = 1_000_000
#: First seed of each split.
SPLITS: dict[str, int] = {"train": 0, "fit": 1_000_000, "bench": 2_000_000, "eval": 9_000_000}
_USED_FOR = {
    "train": "training",
    "fit": "threshold fit (shadow runs)",
    "bench": "recorded question sets",
    "eval": "evaluation",
}
EVAL_ENV = "KNOWWHEN_EVAL_RUNS"


class EvalSeedError(KnowwhenError):
    """Evaluation seeds were requested without opting in."""


def check_eval_allowed(split: str, allow_eval: bool = False) -> None:
    """Raise `EvalSeedError` for the eval split unless the caller or the environment opted in."""
    if split == "eval" and not (allow_eval or os.environ.get(EVAL_ENV) == "1"):
        raise EvalSeedError(
            f"the eval split's seeds are reserved for final evaluation: pass --allow-eval or set {EVAL_ENV}=1."
        )


def split_seeds(split: str, n: int, *, start: int = 0, allow_eval: bool = False) -> list[int]:
    """Seeds `start .. start+n-1` of a split (offsets inside its range)."""
    if split not in SPLITS:
        raise ScenarioError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
    if n < 0 or start < 0 or start + n > SPLIT_SIZE:
        raise ScenarioError(f"a split holds {SPLIT_SIZE} seeds; start + n must stay within it")
    check_eval_allowed(split, allow_eval)
    return [SPLITS[split] + start + i for i in range(n)]


def split_tasks(suite: Suite, split: str, n: int, *, start: int = 0, allow_eval: bool = False) -> list[Task]:
    return [make_task(suite, seed) for seed in split_seeds(split, n, start=start, allow_eval=allow_eval)]


def task_rows(
    suite: Suite, split: str, n: int, *, start: int = 0, set_name: str | None = None, allow_eval: bool = False
) -> list[dict[str, Any]]:
    """Rows like the benchmark's `tasks` config: set, task_id, seed, index, suite (JSON), used_for, config."""
    name = set_name or f"{suite.name}_{split}"
    suite_json = suite.to_json()
    return [
        {
            "set": name,
            "task_id": task_id_for(suite, seed),
            "seed": seed,
            "index": index,
            "suite": suite_json,
            "used_for": _USED_FOR[split],
            "config": f"decisiongym suite={suite.name} split={split} start={start} n={n}",
        }
        for index, seed in enumerate(split_seeds(split, n, start=start, allow_eval=allow_eval))
    ]


def write_task_list(path: Path, rows: list[dict[str, Any]]) -> int:
    """Write task rows as JSONL (gzipped for a `.gz` name), byte-identical for the same rows."""
    return write_jsonl(Path(path), rows)
