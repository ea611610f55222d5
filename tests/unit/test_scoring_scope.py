"""A run that planned a subset of a question set (``limit``) is scored as that subset, and says so."""

from __future__ import annotations

from pathlib import Path

import anyio

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.dataset.scoring import compile_key, score_l2
from knowwhen_runner.queue import open_queue
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.results.manifest import load_manifest, manifest_path
from knowwhen_runner.scenarios.states import planned_questions
from tests.golden.builders import META, _question_results, small_config


def _limited(tmp: Path, limit: int) -> SweepConfig:
    config = small_config(tmp, episodes=False)
    spec = config.scenarios[0].model_copy(update={"limit": limit})
    return config.model_copy(update={"scenarios": [spec]})


def _finalise_planned(config: SweepConfig) -> set[str]:
    """Record the answers of the planned questions only (as a run with this limit does); finalise."""
    spec = config.scenarios[0]
    assert spec.path is not None and spec.limit is not None
    planned = set(planned_questions(spec, load_question_set(spec.path)).qhashes)

    async def go() -> None:
        queue = open_queue("memory://", config.name)
        await queue.init_run("name: small\n", META)
        results = [(j, r) for j, r in _question_results(config, fail=False) if j.item in planned and r]
        jobs = list({j.item + j.model_id: j for j, _ in results}.values())
        await queue.enqueue(jobs, {})
        await queue.claim("w", len(jobs), 60.0)
        await queue.complete("w", [(j.id, r) for j, r in results])
        await finalize_run(config, queue)

    anyio.run(go)
    return planned


def test_a_limited_run_is_scored_over_the_tasks_and_occurrences_it_planned(tmp_path: Path) -> None:
    """With limit: the per-task rule runs over the planned occurrences; unplanned ones are not counted wrong."""
    config = _limited(tmp_path, 8)
    planned = _finalise_planned(config)
    spec = config.scenarios[0]
    assert spec.path is not None
    qset = load_question_set(spec.path)
    cell = load_manifest(manifest_path(config.output, "llm")).open_loop[0]
    subset_key = compile_key(qset, planned=planned)
    answers = {q: a for q, a in _answers(config).items() if q in planned}
    assert cell.accuracy_pct == score_l2(answers, subset_key).accuracy
    assert cell.accuracy_pct > score_l2(answers, qset).accuracy  # the whole key counts the rest wrong
    assert cell.validity.n_unanswered == 0
    assert cell.scope is not None and cell.scope.subset
    occurrences = sum(1 for o in qset.occurrences if o.qhash in planned)
    tasks = len({o.task for o in qset.occurrences if o.qhash in planned})
    assert (cell.scope.occurrences, cell.scope.tasks) == (occurrences, tasks)
    assert (cell.scope.occurrences_total, cell.scope.tasks_total) == (len(qset.occurrences), 6)
    table = (config.output / "table.md").read_text()
    assert f"qs: a subset was scored, {occurrences} of {len(qset.occurrences)} occurrences" in table


def test_a_run_of_the_whole_set_is_scored_as_the_whole_set(tmp_path: Path) -> None:
    """A limit that covers every question scores the full set, and says it is not a subset."""
    config = _limited(tmp_path, 10_000)
    _finalise_planned(config)
    cell = load_manifest(manifest_path(config.output, "llm")).open_loop[0]
    assert cell.scope is not None and not cell.scope.subset
    assert cell.scope.occurrences == cell.scope.occurrences_total
    assert "subset" not in (config.output / "table.md").read_text()


def _answers(config: SweepConfig) -> dict[str, object]:
    from knowwhen_runner.dataset.files import load_answers

    folder = config.output / "qs"
    qset = load_question_set(folder)
    return dict(load_answers(folder, qset.questions)[("llm", "main")])
