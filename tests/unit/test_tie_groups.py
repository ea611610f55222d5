"""Rankings with tie groups: models a paired bootstrap over tasks cannot tell apart share a rank range."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import open_queue
from knowwhen_runner.results.compare import load_run_manifests
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.results.ranking import rank_models, tie_groups
from tests.golden.builders import META, finished_queue, small_config
from tests.helpers import make_question_set
from tests.unit.test_compare_deferral import _row


@st.composite
def _relations(draw: st.DrawFn) -> tuple[list[str], set[frozenset[str]]]:
    n = draw(st.integers(1, 9))
    order = [f"m{i}" for i in range(n)]
    pairs = [frozenset((a, b)) for i, a in enumerate(order) for b in order[i + 1 :]]
    return order, set(draw(st.lists(st.sampled_from(pairs), unique=True))) if pairs else set()


@settings(max_examples=300, deadline=None)
@given(_relations())
def test_tie_groups_never_split_a_tied_pair_and_split_everywhere_else(
    case: tuple[list[str], set[frozenset[str]]],
) -> None:
    """Two models whose paired interval holds 0 always share a group; groups are contiguous runs of the
    order, and a boundary falls between every two neighbours no tied pair straddles."""
    order, tied = case
    groups = tie_groups(order, lambda a, b: frozenset((a, b)) in tied)
    for pair in tied:
        a, b = sorted(pair)
        assert groups[a] == groups[b]
    for i, model in enumerate(order):
        first, last = groups[model]
        assert first <= i + 1 <= last
        assert all(groups[order[k - 1]] == (first, last) for k in range(first, last + 1))
    for k in range(1, len(order)):
        straddled = any(
            frozenset((order[i], order[j])) in tied for i in range(k) for j in range(k, len(order))
        )
        assert straddled == (groups[order[k - 1]] == groups[order[k]])


def _three_models_run(tmp: Path) -> Path:
    """An LLM right 95% of the time and two decision models with the same 60% of answers bar two."""
    qs = make_question_set(tmp / "qs", n_tasks=60)
    config = SweepConfig.model_validate(
        {
            "name": "ties",
            "output": str(tmp / "out"),
            "models": [
                {"id": "dm", "model": "hosted_vllm/dm", "kind": "decision"},
                {"id": "dm2", "model": "hosted_vllm/dm2", "kind": "decision"},
                {"id": "llm", "model": "openai/llm", "kind": "llm"},
            ],
            "modes": ["model"],
            "scenarios": [{"id": "qs", "kind": "states", "path": str(qs)}],
        }
    )
    qset = load_question_set(qs)
    rng = random.Random(3)
    results: list[tuple[Job, dict[str, Any]]] = []
    for i, occ in enumerate(qset.occurrences):
        right = rng.random() < 0.6
        outcomes = {"dm": right, "dm2": right if i > 1 else not right, "llm": rng.random() < 0.95}
        for model, ok in outcomes.items():
            job = Job(f"{model}-{i}", model, "model", "qs", occ.qhash, {"kind": "question"})
            results.append((job, _row(model, occ, qset, ok, 0.8)))

    async def go() -> None:
        queue = open_queue("memory://", "ties")
        await queue.init_run("name: ties\n", META)
        await queue.enqueue([job for job, _ in results], {})
        await queue.claim("w", len(results), 60.0)
        await queue.complete("w", [(job.id, r) for job, r in results])
        await finalize_run(config, queue)

    anyio.run(go)
    return config.output


def test_two_models_that_cannot_be_told_apart_share_a_rank_range_in_the_tables(tmp_path: Path) -> None:
    """Two decision models differing on two questions of ~270 are ranked "2–3" in the comparison table and
    table.md, below an LLM that is clearly better (rank 1 alone); without the per-task outcomes the
    ranking keeps plain ranks."""
    out = _three_models_run(tmp_path)
    comparison = (out / "tables" / "comparison.md").read_text()
    rows = {
        line.split("|")[2].strip(): line.split("|")[1].strip()
        for line in comparison.splitlines()
        if line.startswith("| ") and "---" not in line
    }
    assert (rows["llm"], rows["dm"], rows["dm2"]) == ("1", "2–3", "2–3")
    assert "tie group" in comparison and "2–3" in (out / "table.md").read_text()
    plain = rank_models(list(load_run_manifests(out).values()))
    assert {plain.rank(m) for m in ("dm", "dm2")} <= {2, 3}


def test_episode_success_is_grouped_from_the_manifests_own_outcomes(tmp_path: Path) -> None:
    """Ranked by an episodes scenario, the groups come from each model's recorded outcomes per task and
    repeat: a model a few episodes apart from another shares its range, one far below stands alone."""
    config = small_config(tmp_path)

    async def go() -> None:
        await finalize_run(config, await finished_queue(config))

    anyio.run(go)
    dm = load_run_manifests(config.output)["dm"]
    cell = next(c for c in dm.closed_loop if c.mode == "model")
    rng = random.Random(9)
    base = {f"t{t:02d}": [rng.random() < 0.8 for _ in range(3)] for t in range(60)}
    near = {t: [not runs[0], *runs[1:]] if t == "t00" else runs for t, runs in base.items()}
    far = {t: [ok and rng.random() < 0.3 for ok in runs] for t, runs in base.items()}

    def variant(name: str, outcomes: dict[str, list[bool]]) -> Any:
        rate = sum(sum(v) for v in outcomes.values()) / sum(len(v) for v in outcomes.values())
        copied = cell.model_copy(update={"outcomes": outcomes, "success_rate": rate, "intervals": None})
        model = dm.model.model_copy(update={"id": name})
        return dm.model_copy(update={"model": model, "open_loop": [], "closed_loop": [copied]})

    ranking = rank_models([variant("a", base), variant("b", near), variant("c", far)], cell.scenario)
    assert {ranking.rank("a"), ranking.rank("b")} == {"1–2"} and ranking.rank("c") == 3
