"""`knowwhen compare` gives paired intervals on a gate's APGR and CPT between two runs (shared tasks)."""

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
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import open_queue
from knowwhen_runner.results import compare_runs
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.results.manifest import load_manifest, manifest_path
from knowwhen_runner.scenarios.states import question_item
from tests.golden.builders import META, WRONG
from tests.helpers import make_question_set

N_TASKS = 66


def _row(model: str, occ: Any, qset: Any, right: bool, confidence: float) -> dict[str, Any]:
    response = {"choice": occ.gold if right else WRONG, "confidence": confidence}
    return answer_row(
        model_id=model,
        qhash=occ.qhash,
        item=question_item(qset.questions[occ.qhash]),
        response={**response, "probabilities": None, "cost_usd": 0.0, "latency_ms": 1.0},
        attempts=1,
        requests=1,
        wall_ms=1.0,
        cache_hit=False,
    )


def _gated_run(tmp: Path, name: str, qs: Path, informative: bool) -> Path:
    """A run whose decision model is gated over an LLM; its confidence tracks its correctness or not."""
    config = SweepConfig.model_validate(
        {
            "name": name,
            "output": str(tmp / name),
            "models": [
                {"id": "dm", "model": "hosted_vllm/dm", "kind": "decision"},
                {"id": "llm", "model": "openai/llm", "kind": "llm"},
            ],
            "modes": ["model"],
            "gate": {"llm": "llm", "target": 0.9},
            "scenarios": [{"id": "qs", "kind": "states", "path": str(qs)}],
        }
    )
    qset = load_question_set(qs)
    rng = random.Random(5)  # the same outcomes in every run: only the confidences differ
    noise = random.Random(name)
    results: list[tuple[Job, dict[str, Any]]] = []
    for i, occ in enumerate(qset.occurrences):
        dm_right, llm_right = rng.random() < 0.6, rng.random() < 0.9
        conf = (0.55 + 0.4 * dm_right + 0.04 * rng.random()) if informative else 0.5 + 0.45 * noise.random()
        results.append(
            (
                Job(f"d-{i}", "dm", "model", "qs", occ.qhash, {"kind": "question"}),
                _row("dm", occ, qset, dm_right, conf),
            )
        )
        results.append(
            (
                Job(f"l-{i}", "llm", "model", "qs", occ.qhash, {"kind": "question"}),
                _row("llm", occ, qset, llm_right, 0.9),
            )
        )

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
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("deferral")
    qs = make_question_set(tmp / "qs", n_tasks=N_TASKS)
    return {
        "good": _gated_run(tmp, "good", qs, True),
        "again": _gated_run(tmp, "again", qs, True),
        "blind": _gated_run(tmp, "blind", qs, False),
    }


def _pair(report: dict[str, Any], metric: str) -> dict[str, Any]:
    return next(r for r in report["deferral"] if r["metric"] == metric)


def test_a_gate_that_lost_its_ranking_shows_a_lower_apgr_with_an_interval_below_zero(
    runs: dict[str, Path],
) -> None:
    """Confidences that no longer track correctness lose APGR (interval below 0) and need more LLM calls
    for 80 % of the gap (interval above 0); the figures at each end are the manifests' own."""
    report = compare_runs(runs["good"], runs["blind"])
    apgr, cpt80 = _pair(report, "apgr"), _pair(report, "cpt80")
    good = load_manifest(manifest_path(runs["good"], "dm")).cell("qs").deferral
    blind = load_manifest(manifest_path(runs["blind"], "dm")).cell("qs").deferral
    assert (apgr["a"], apgr["b"]) == pytest.approx((good.apgr, blind.apgr), abs=1e-12)
    assert cpt80["a"] == pytest.approx(good.cpt80, abs=1e-12) and cpt80["b"] == pytest.approx(
        blind.cpt80, abs=1e-12
    )
    assert apgr["high"] < 0 and apgr["p_value"] < 0.05 and apgr["n"] == N_TASKS
    assert cpt80["low"] > 0
    assert report["regressions"] == 0  # the scorecard's intervals carry no verdict


def test_the_same_gate_twice_differs_by_nothing(runs: dict[str, Path], tmp_path: Path) -> None:
    """Two runs with the same answers: every difference and its interval is 0, and the command prints them."""
    report = compare_runs(runs["good"], runs["again"])
    for metric in ("apgr", "cpt50", "cpt80"):
        pair = _pair(report, metric)
        assert pair["difference"] == 0.0 and pair["low"] == 0.0 == pair["high"]
    out = tmp_path / "out.txt"
    with out.open("w") as handle:
        assert run_compare(runs["good"], runs["blind"], console=Console(file=handle, width=200)) == 0
    text = out.read_text()
    assert "deferral (B − A" in text and "APGR" in text and "CPT80" in text
