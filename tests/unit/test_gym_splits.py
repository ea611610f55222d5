"""DecisionGym task lists: splits, the benchmark's `tasks` fields, and the guarded evaluation seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowwhen_runner.exceptions import KnowwhenError
from knowwhen_runner.gym import SPLITS, SUITES, EvalSeedError, Suite, make_task, task_rows
from knowwhen_runner.gym.splits import write_task_list
from knowwhen_runner.jsonio import iter_jsonl


def test_eval_seeds_need_an_explicit_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The eval split raises a one-sentence KnowwhenError unless allow_eval or KNOWWHEN_EVAL_RUNS=1."""
    monkeypatch.delenv("KNOWWHEN_EVAL_RUNS", raising=False)
    with pytest.raises(EvalSeedError) as info:
        task_rows(SUITES["common"], "eval", 3)
    assert isinstance(info.value, KnowwhenError) and str(info.value).count(". ") == 0
    assert len(task_rows(SUITES["common"], "eval", 3, allow_eval=True)) == 3
    monkeypatch.setenv("KNOWWHEN_EVAL_RUNS", "1")
    assert task_rows(SUITES["common"], "eval", 3)[0]["seed"] == SPLITS["eval"]


def test_task_rows_have_the_benchmark_fields() -> None:
    """Rows carry set, task_id, seed, index, suite (JSON), used_for and config, and rebuild their task."""
    rows = task_rows(SUITES["shift"], "fit", 4, start=10)
    assert [r["index"] for r in rows] == [0, 1, 2, 3]
    for row in rows:
        assert set(row) == {"set", "task_id", "seed", "index", "suite", "used_for", "config"}
        task = make_task(Suite.from_json(row["suite"]), row["seed"])
        assert task.task_id == row["task_id"]
    assert rows[0]["seed"] == SPLITS["fit"] + 10


def test_splits_do_not_overlap() -> None:
    """Train, fit, bench and eval seeds come from disjoint ranges."""
    seeds = {
        name: {r["seed"] for r in task_rows(SUITES["common"], name, 20, allow_eval=True)} for name in SPLITS
    }
    names = list(seeds)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not seeds[a] & seeds[b]


def test_task_list_file_is_deterministic(tmp_path: Path) -> None:
    """Writing the same task list twice gives byte-identical gzip files that read back."""
    for name in ("a.jsonl.gz", "b.jsonl.gz"):
        write_task_list(tmp_path / name, task_rows(SUITES["common"], "train", 25))
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    assert len(list(iter_jsonl(tmp_path / "a.jsonl.gz"))) == 25
