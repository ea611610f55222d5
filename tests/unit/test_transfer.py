"""A τ chosen on one scenario and applied to another: its promise shown beside what it achieves there."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import open_queue
from knowwhen_runner.results.cells import closed_loop_cell
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.results.manifest import load_manifest, manifest_path
from tests.golden.builders import META
from tests.helpers import make_question_set
from tests.unit.test_compare_deferral import _row


def _two_sets_run(tmp: Path) -> Path:
    """A decision model calibrated on ``fit`` and confidently wrong a third of the time on ``shift``."""
    sets = {name: make_question_set(tmp / name, n_tasks=60) for name in ("fit", "shift")}
    config = SweepConfig.model_validate(
        {
            "name": "transfer",
            "output": str(tmp / "out"),
            "models": [
                {"id": "dm", "model": "hosted_vllm/dm", "kind": "decision"},
                {"id": "llm", "model": "openai/llm", "kind": "llm"},
            ],
            "modes": ["model"],
            "gate": {"llm": "llm", "target": 0.9, "risk": 0.1, "delta": 0.1},
            "scenarios": [{"id": name, "kind": "states", "path": str(path)} for name, path in sets.items()],
        }
    )
    rng = random.Random(11)
    results: list[tuple[Job, dict[str, Any]]] = []
    for name, path in sets.items():
        qset = load_question_set(path)
        for i, occ in enumerate(qset.occurrences):
            conf = rng.uniform(0.5, 1.0)
            right = rng.random() < (conf if name == "fit" else 0.66)
            for model, ok, c in (("dm", right, conf), ("llm", rng.random() < 0.9, 0.9)):
                job = Job(f"{name}-{model}-{i}", model, "model", name, occ.qhash, {"kind": "question"})
                results.append((job, _row(model, occ, qset, ok, c)))

    async def go() -> None:
        queue = open_queue("memory://", "transfer")
        await queue.init_run("name: transfer\n", META)
        await queue.enqueue([job for job, _ in results], {})
        await queue.claim("w", len(results), 60.0)
        await queue.complete("w", [(job.id, r) for job, r in results])
        await finalize_run(config, queue)

    anyio.run(go)
    return config.output


def test_a_guaranteed_tau_applied_to_a_shifted_set_shows_its_error_there(tmp_path: Path) -> None:
    """The τ Learn-then-Test chose on the calibrated set keeps its promise there and is shown broken on the
    shifted set (Wilson interval wholly above the risk); the tables and report carry both rows."""
    out = _two_sets_run(tmp_path)
    manifest = load_manifest(manifest_path(out, "dm"))
    fit, shift = manifest.cell("fit"), manifest.cell("shift")
    assert fit is not None and shift is not None and fit.deferral and shift.deferral
    promise = fit.deferral.guarantee
    assert promise is not None and promise.threshold is not None and promise.error <= 0.1
    moved = next(t for t in shift.deferral.transfers if t.source == "fit")
    assert moved.tau == promise.threshold and moved.promise == "guarantee" and moved.promised_error == 0.1
    assert moved.error is not None and moved.low is not None and moved.low > 0.1 and moved.broken
    assert moved.low <= moved.error <= moved.high
    table = (out / "tables" / "transfer.md").read_text()
    assert "broken here" in table and "err ≤ 0.1 w.p. ≥ 0.9 on fit" in table
    assert "τ applied beyond its fit set" in (out / "report.html").read_text()


def test_a_fitted_closed_loop_tau_states_its_target_and_the_error_it_achieved() -> None:
    """A gated episode cell whose τ was fitted on another task set records that τ's target error (or, chosen
    by Learn-then-Test, its risk) beside the error among the decisions it delegated, with a Wilson
    interval; a fixed τ records none."""
    fit = {"scenario": "fitset", "target_accuracy": 0.95, "tau": 0.8}
    decisions = [{"decided_by": "model", "model_correct": i % 10 != 0} for i in range(200)]
    decisions += [{"decided_by": "model", "model_correct": None}, {"decided_by": "llm", "llm_correct": True}]
    result = {"task_id": "t0", "success": True, "steps": 3, "decisions": decisions, "fit": fit}
    cell = closed_loop_cell("eval", "gated", 0.8, [result], 0)
    moved = cell.deferral.transfer if cell.deferral else None
    assert moved is not None and (moved.source, moved.promise, moved.n, moved.errors) == (
        "fitset",
        "fitted",
        200,
        20,
    )
    assert abs(moved.promised_error - 0.05) < 1e-12 and moved.broken and moved.low > 0.05
    unfitted = closed_loop_cell("eval", "gated", 0.8, [{**result, "fit": None}], 0).deferral
    assert unfitted is not None and unfitted.transfer is None  # its calibration stays
    guaranteed = {**fit, "risk": 0.15, "delta": 0.2}
    cell = closed_loop_cell("eval", "gated", 0.8, [{**result, "fit": guaranteed}], 0)
    kept = cell.deferral.transfer if cell.deferral else None
    assert kept is not None and (kept.promise, kept.promised_error, kept.delta, kept.broken) == (
        "guarantee",
        0.15,
        0.2,
        False,
    )
