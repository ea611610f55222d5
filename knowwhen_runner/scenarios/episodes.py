"""Scenario kind ``episodes``: DecisionGym task sets run closed loop (L3), one job per episode.

A task set is either a task list in the benchmark's ``tasks`` layout (as ``knowwhen gym tasks`` writes
it) or a suite + split + n named in the config. Items are the tasks as ``task_id``, ``suite`` (its JSON)
and ``seed``: enough for any worker to rebuild the task, and nothing it could not rebuild.
Evaluation seeds stay guarded here as in the generator, so a sweep cannot tune on them by accident.
A ``limit`` runs a seeded sample of the tasks spread over their kinds (``dataset.subset.stratified``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import ScenarioSpec
from ..dataset.rows import TaskRow, check_row
from ..dataset.subset import DEFAULT_SEED, SubsetRecord, stratified
from ..exceptions import ScenarioError
from ..gym import SPLITS, Suite, check_eval_allowed, get_suite, make_task, task_id_for, task_rows
from ..gym.splits import SPLIT_SIZE
from ..jsonio import file_sha256, find_jsonl, iter_jsonl
from .scenario import Scenario

__all__ = ["load_episodes", "task_item"]

_LIST_STEMS = ("decisiongym_tasks", "tasks")


def task_item(row: dict[str, Any], index: int) -> dict[str, Any]:
    """The JSON-able form of a task that an episode job reads."""
    return {"task_id": row["task_id"], "suite": row["suite"], "seed": int(row["seed"]), "index": index}


def _task_list_file(path: Path) -> Path:
    if path.is_file():
        return path
    for stem in _LIST_STEMS:
        found = find_jsonl(path, stem)
        if found is not None:
            return found
    raise ScenarioError(
        f"{path}: no task list here (expected a .jsonl[.gz] file or {_LIST_STEMS[0]}.jsonl.gz)"
    )


def _checked(row: dict[str, Any], path: Path, line: int) -> dict[str, Any]:
    """A task row whose id is the one its suite and seed give (else the list came from another generator)."""
    where = f"{path}:{line}"
    missing = [k for k in ("task_id", "suite", "seed") if k not in row]
    if missing:
        raise ScenarioError(f"{where}: a task row needs {', '.join(missing)}")
    check_row(TaskRow, path, line, row)
    suite = Suite.from_json(row["suite"])
    expected = task_id_for(suite, int(row["seed"]))
    if row["task_id"] != expected:
        raise ScenarioError(
            f"{where}: task id {row['task_id']!r} is not the one its suite and seed give ({expected!r}); "
            "the list was written by another generator"
        )
    return {**row, "suite": suite.to_json()}


def _rows_from_file(spec: ScenarioSpec, path: Path) -> list[dict[str, Any]]:
    rows = [_checked(row, path, line) for line, row in iter_jsonl(path)]
    rows = rows[: spec.n] if spec.n is not None else rows
    eval_start = SPLITS["eval"]
    if any(eval_start <= r["seed"] < eval_start + SPLIT_SIZE for r in rows):
        check_eval_allowed("eval", spec.allow_eval)
    return rows


def load_episodes(spec: ScenarioSpec) -> Scenario:
    """Load a task set; one item per task, keyed by task id, in list order."""
    files: dict[str, str] = {}
    if spec.path is not None:
        source = _task_list_file(spec.path)
        rows = _rows_from_file(spec, source)
        files[source.name] = file_sha256(source)
    else:
        assert spec.split is not None and spec.n is not None  # the config validator guarantees both
        suite = get_suite(spec.suite or "common")
        rows = task_rows(suite, spec.split, spec.n, start=spec.start, allow_eval=spec.allow_eval)
    items: dict[str, dict[str, Any]] = {}
    for index, row in enumerate(rows):
        if row["task_id"] in items:
            raise ScenarioError(f"scenario {spec.id!r}: task {row['task_id']} is listed twice")
        items[row["task_id"]] = task_item(row, index)
    if not items:
        raise ScenarioError(f"scenario {spec.id!r}: the task set is empty")
    subset = None
    if spec.limit is not None and spec.limit < len(items):  # a limit that covers every task is no subset
        items, subset = _sample(spec, spec.limit, items)
    return Scenario(
        id=spec.id, kind="episodes", version=spec.version, items=items, files=files, subset=subset
    )


def _sample(
    spec: ScenarioSpec, limit: int, items: dict[str, dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], SubsetRecord]:
    """``limit`` tasks drawn across task kinds (a task's kind comes from its suite and seed)."""
    seed = DEFAULT_SEED if spec.seed is None else spec.seed
    suites: dict[str, Suite] = {}
    kinds = {}
    for task_id, item in items.items():
        suite = suites.setdefault(item["suite"], Suite.from_json(item["suite"]))
        kinds[task_id] = make_task(suite, item["seed"]).kind
    drawn = set(stratified(kinds, limit, seed))
    kept = {t: item for t, item in items.items() if t in drawn}  # in list order, each its own index
    return kept, SubsetRecord(of=len(items), asked=len(kept), seed=seed, unit="tasks")
