"""`knowwhen compare` pairs what two runs share and flags a significant regression (``--fail-on``).

The runs are small synthetic ones, finalised from a memory queue like tests/golden/builders.py: one
decision model answering ~300 questions (66 tasks) with planted correctness, and repeated episodes.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from knowwhen_runner.cli.score_tables import run_compare
from knowwhen_runner.config import SweepConfig
from knowwhen_runner.dataset.answer_rows import answer_row
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.exceptions import KnowwhenError
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import open_queue
from knowwhen_runner.results import compare_runs
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.scenarios.states import question_item
from tests.golden.builders import META, WRONG, decision, episode
from tests.helpers import knowwhen, make_question_set

N_TASKS = 66  # 297 questions
EPISODE_TASKS, REPEATS = 60, 3


def _build_run(
    tmp: Path, name: str, qs: Path, correct: dict[str, bool], outcomes: dict[str, list[bool]]
) -> Path:
    """Finalise a run whose decision model answers each question right as ``correct`` says."""
    tasks = tmp / f"{name}-tasks.jsonl"
    tasks.write_text("")
    config = SweepConfig.model_validate(
        {
            "name": name,
            "output": str(tmp / name),
            "models": [
                {"id": "dm", "model": "hosted_vllm/dm", "kind": "decision"},
                {"id": "llm", "model": "openai/llm", "kind": "llm"},
            ],
            "modes": ["model"],
            "scenarios": [
                {"id": "qs", "kind": "states", "path": str(qs)},
                {"id": "eps", "kind": "episodes", "path": str(tasks)},
            ],
        }
    )
    qset = load_question_set(qs)
    results: list[tuple[Job, dict[str, Any]]] = []
    for i, occ in enumerate(qset.occurrences):
        right = correct[occ.qhash]
        response = {"choice": occ.gold if right else WRONG, "confidence": 0.9 if right else 0.6}
        row = answer_row(
            model_id="dm",
            qhash=occ.qhash,
            item=question_item(qset.questions[occ.qhash]),
            response={**response, "probabilities": None, "cost_usd": 0.0, "latency_ms": 1.0},
            attempts=1,
            requests=1,
            wall_ms=1.0,
            cache_hit=False,
        )
        results.append((Job(f"q-{i}", "dm", "model", "qs", occ.qhash, {"kind": "question"}), row))
    for task, runs in outcomes.items():
        for r, success in enumerate(runs):
            payload = {"kind": "episode", "decision_model": "dm", "tau": None, "repeat": r}
            result = {**episode(task, "model", None, success, [decision(0, "model")]), "repeat": r}
            results.append((Job(f"e-{task}-{r}", "dm", "model", "eps", task, payload), result))

    async def go() -> None:
        queue = open_queue("memory://", name)
        await queue.init_run(f"name: {name}\n", META)
        await queue.enqueue([job for job, _ in results], {})
        await queue.claim("w", len(results), 60.0)
        await queue.complete("w", [(job.id, r) for job, r in results])
        await finalize_run(config, queue)

    anyio.run(go)
    return config.output


@pytest.fixture(scope="module")
def qs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_question_set(tmp_path_factory.mktemp("qs") / "qs", n_tasks=N_TASKS)


def _baseline(qs: Path, seed: int) -> tuple[dict[str, bool], dict[str, list[bool]]]:
    rng = random.Random(seed)
    correct = {o.qhash: rng.random() < 0.85 for o in load_question_set(qs).occurrences}
    outcomes = {f"t{t:02d}": [rng.random() < 0.8 for _ in range(REPEATS)] for t in range(EPISODE_TASKS)}
    return correct, outcomes


def _regressed(correct: dict[str, bool], seed: int) -> dict[str, bool]:
    """Ten points worse: as many right answers as 10% of the questions turned wrong."""
    rng = random.Random(seed + 1000)
    right = [q for q, ok in correct.items() if ok]
    flipped = set(rng.sample(right, round(0.10 * len(correct))))
    return {q: ok and q not in flipped for q, ok in correct.items()}


def _null(correct: dict[str, bool], seed: int) -> dict[str, bool]:
    """No change in expectation: a fifth of the answers drawn again from the same 85% model."""
    rng = random.Random(seed + 2000)
    return {q: (rng.random() < 0.85) if rng.random() < 0.2 else ok for q, ok in correct.items()}


def _l2(report: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in report["paired"] if r["metric"] == "l2")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_planted_ten_point_regression_is_flagged_and_a_null_change_is_not(
    tmp_path: Path, qs: Path, seed: int
) -> None:
    """On ~300 questions, B ten points worse fails `--fail-on regression:l2`; B redrawn from A's model passes."""
    correct, outcomes = _baseline(qs, seed)
    a = _build_run(tmp_path, "a", qs, correct, outcomes)
    worse = _build_run(tmp_path, "worse", qs, _regressed(correct, seed), outcomes)
    same = _build_run(tmp_path, "same", qs, _null(correct, seed), outcomes)
    flagged = compare_runs(a, worse, fail_on="regression:l2")
    row = _l2(flagged)
    assert flagged["regressions"] == 1 and row["regression"]
    assert row["difference"] == pytest.approx(row["b"] - row["a"]) and row["high"] < 0 < row["a"]
    assert row["mcnemar"]["n"] == len(correct) and row["mcnemar"]["p_value"] < 0.05
    assert row["n"] == N_TASKS and row["method"] == "paired cluster bootstrap, percentile"
    calm = compare_runs(a, same, fail_on="regression")
    assert calm["regressions"] == 0 and not _l2(calm)["regression"]
    assert _l2(calm)["low"] <= 0.0 <= _l2(calm)["high"] or _l2(calm)["difference"] > 0


def test_l3_is_paired_by_task_and_repeat_and_fail_on_names_a_metric(tmp_path: Path, qs: Path) -> None:
    """An L3-only drop fails `--fail-on regression:l3` (exit 1) but not `regression:l2` (exit 0)."""
    correct, outcomes = _baseline(qs, 7)
    rng = random.Random(7)
    worse = {t: [ok and rng.random() < 0.6 for ok in runs] for t, runs in outcomes.items()}
    a = _build_run(tmp_path, "a", qs, correct, outcomes)
    b = _build_run(tmp_path, "b", qs, correct, worse)
    quiet = Console(file=open(tmp_path / "out.txt", "w"), width=200)  # noqa: SIM115
    assert run_compare(a, b, fail_on="regression:l3", console=quiet) == 1
    assert run_compare(a, b, fail_on="regression:l2", console=quiet) == 0
    assert run_compare(a, b, console=quiet) == 0
    quiet.file.close()
    l3 = next(r for r in compare_runs(a, b)["paired"] if r["metric"] == "l3")
    assert (l3["n"], l3["regression"]) == (EPISODE_TASKS, True)
    assert "paired tests" in (tmp_path / "out.txt").read_text()


def test_fail_on_refuses_an_unknown_spec(tmp_path: Path, qs: Path) -> None:
    """A mistyped --fail-on is one error line naming the option (exit 2), not a silent pass."""
    correct, outcomes = _baseline(qs, 3)
    a = _build_run(tmp_path, "a", qs, correct, outcomes)
    with pytest.raises(KnowwhenError, match="--fail-on"):
        compare_runs(a, a, fail_on="regresion:l2")
    done = knowwhen("compare", str(a), str(a), "--fail-on", "regression:l4")
    assert done.returncode == 2 and "--fail-on" in done.stderr and "Traceback" not in done.stderr
    assert knowwhen("compare", str(a), str(a), "--fail-on", "regression").returncode == 0


def test_at_80_columns_the_comparison_fits_and_names_every_figure(tmp_path: Path, qs: Path) -> None:
    """On an 80-column terminal no line of ``compare`` is wider, and each row's figures that left the
    paired table are named under it (the Δ stays in the table); at 200 columns the table is whole."""
    correct, outcomes = _baseline(qs, 5)
    a = _build_run(tmp_path, "a", qs, correct, outcomes)
    b = _build_run(tmp_path, "b", qs, _regressed(correct, 5), outcomes)
    said = {}
    for width in (80, 200):
        path = tmp_path / f"out{width}.txt"
        with path.open("w") as handle:
            run_compare(a, b, console=Console(file=handle, width=width))
        said[width] = path.read_text()
    narrow, wide = said[80].splitlines(), said[200].splitlines()
    assert max(len(line) for line in narrow) <= 80 < max(len(line) for line in wide)
    header = next(line for line in narrow if "Δ [low, high]" in line)
    assert "test" not in header.split("│")  # the least wanted column left ...
    l2 = _l2(compare_runs(a, b))
    assert f"test {l2['method']}" in " ".join(said[80].split())  # ... and is named under its row
    assert f"{l2['difference']:+.1f}" in header or f"{l2['difference']:+.1f}" in said[80]
