"""CXS manifests: committed schemas, validation, and numbers that are the scoring module's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.dataset.answer_rows import ANSWER_FIELDS, answer_row, failed_row, file_row
from knowwhen_runner.dataset.files import load_answers, load_question_set
from knowwhen_runner.dataset.metrics import gated_at
from knowwhen_runner.dataset.scoring import gated_open_loop, occurrence_correct, score_l2, task_weights
from knowwhen_runner.exceptions import ScenarioError
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.results.manifest import (
    MANIFEST_SCHEMA_VERSION,
    CurvePoint,
    CxsManifest,
    load_manifest,
    manifest_path,
)
from knowwhen_runner.results.selective_cells import GATE_THRESHOLDS, _thin
from knowwhen_runner.schemas import SCHEMAS, schema_documents
from tests.golden.builders import finished_queue, small_config

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"


def _finalize(config: SweepConfig) -> dict[str, CxsManifest]:
    async def go() -> None:
        await finalize_run(config, await finished_queue(config))

    anyio.run(go)
    return {m.id: load_manifest(manifest_path(config.output, m.id)) for m in config.models}


@pytest.fixture
def run(tmp_path: Path) -> tuple[SweepConfig, dict[str, CxsManifest]]:
    config = small_config(tmp_path)
    return config, _finalize(config)


def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text())


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_committed_schema_matches_its_model(name: str) -> None:
    """Each schemas/*.schema.json equals what its pydantic model generates (regenerate: python -m knowwhen_runner.schemas)."""
    assert _schema(name) == schema_documents()[name]


def test_written_manifests_validate_against_the_committed_schema(run: tuple[SweepConfig, Any]) -> None:
    """Every manifest file a finalise writes is valid under schemas/cxs-manifest.schema.json."""
    config, _ = run
    schema = _schema("cxs-manifest.schema.json")
    for model in config.models:
        doc = json.loads(manifest_path(config.output, model.id).read_text())
        jsonschema.Draft202012Validator(schema).validate(doc)
        assert doc["schema_version"] == MANIFEST_SCHEMA_VERSION == 8
        assert doc["screen"] is None  # the run was not screened


def test_schema_rejects_a_manifest_with_a_missing_field(run: tuple[SweepConfig, Any]) -> None:
    """The committed schema is strict: a manifest without its open-loop accuracy does not validate."""
    config, _ = run
    doc = json.loads(manifest_path(config.output, "dm").read_text())
    del doc["open_loop"][0]["accuracy_pct"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, _schema("cxs-manifest.schema.json"))


def test_answer_rows_validate_against_the_committed_schema(run: tuple[SweepConfig, Any]) -> None:
    """A recorded answer and a failed job become file rows with every AnswerRow key, valid under the schema,
    and every row of a finalised answers file has exactly those keys."""
    config, _ = run
    schema = _schema("answer-row.schema.json")
    item = {"options": ["a", "b"]}
    made = answer_row(
        model_id="m",
        qhash="q",
        item=item,
        response={"choice": "a", "probabilities": {"a": 0.75, "b": 0.25}},
        attempts=1,
        requests=1,
        wall_ms=1.0,
        cache_hit=False,
    )
    failed = failed_row(model_id="m", qhash="q", error="boom", attempts=3)
    assert set(made) == set(failed)
    for row in (made, failed):
        public = file_row(row, variant="nosurf", options=item["options"])
        assert tuple(public) == ANSWER_FIELDS and public["variant"] == "nosurf"
        jsonschema.validate(public, schema)
    assert file_row(made, variant=None, options=["b", "a"])["probabilities"] == [0.25, 0.75]
    from tests.helpers import read_answers

    rows = read_answers(config.output / "qs" / "answers_dm.jsonl.gz", drop_timing=False)
    assert len(rows) == 27
    for row in rows:
        assert tuple(row) == ANSWER_FIELDS
        jsonschema.validate(row, schema)


def test_open_loop_numbers_are_the_scoring_modules(run: tuple[SweepConfig, dict[str, CxsManifest]]) -> None:
    """Accuracy, calibration, fit and gated points equal scoring/metrics on the written answers files."""
    config, manifests = run
    folder = config.output / "qs"
    qset = load_question_set(folder)
    table = load_answers(folder, qset.questions)
    dm, llm = table[("dm", "main")], table[("llm", "main")]
    report = gated_open_loop(dm, llm, qset, target=0.9)
    cell = manifests["dm"].cell("qs")
    assert (
        cell is not None and cell.gate is not None and cell.fit is not None and cell.calibration is not None
    )
    assert cell.accuracy_pct == score_l2(dm, qset).accuracy
    llm_cell = manifests["llm"].open_loop[0]
    # the LLM's cell has a job that failed for good: no score, the card's number kept beside it
    assert (llm_cell.failed, llm_cell.accuracy_pct, llm_cell.must_ask_pct, llm_cell.intervals) == (
        1,
        None,
        None,
        None,
    )
    assert all(s.accuracy_pct is None for s in llm_cell.strata.values())
    assert llm_cell.card_accuracy_pct == score_l2(llm, qset).accuracy
    assert (cell.calibration.ece, cell.calibration.brier, cell.curve and cell.curve.aurc) == (
        report.ece,
        report.brier,
        report.aurc,
    )
    assert report.fit is not None and report.at_fit is not None
    assert (cell.fit.threshold, cell.fit.coverage, cell.fit.support) == (
        report.fit.threshold,
        report.fit.coverage,
        report.fit.support,
    )
    assert cell.gate.at_fit is not None and cell.gate.at_fit.accuracy == report.at_fit.accuracy
    assert (cell.gate.llm_accuracy, cell.gate.model_accuracy) == (report.llm_accuracy, report.model_accuracy)
    conf = [
        float(dm[q].confidence or 0) if q in dm and dm[q].valid else 0.0
        for q in (o.qhash for o in qset.occurrences)
    ]
    mk, lk = occurrence_correct(dm, qset), occurrence_correct(llm, qset)
    for tau, point in zip(GATE_THRESHOLDS, cell.gate.at_thresholds, strict=True):
        expected = gated_at(conf, mk, lk, tau, task_weights(qset))
        assert (point.coverage, point.accuracy) == (expected.coverage, pytest.approx(expected.accuracy))


def test_validity_counts_invalid_and_failed_answers(run: tuple[SweepConfig, dict[str, CxsManifest]]) -> None:
    """An invalid answer (the model's) and a job failed for good (the LLM's), each counted once, tallies kept."""
    _, manifests = run
    dm, llm = manifests["dm"], manifests["llm"]
    v = dm.open_loop[0].validity
    assert (v.n_rows, v.valid_rate, v.invalid_rate, v.failed_rate) == (27, 26 / 27, 1 / 27, 0.0)
    w = llm.open_loop[0].validity
    assert (w.n_rows, w.valid_rate, w.invalid_rate, w.failed_rate) == (27, 26 / 27, 0.0, 1 / 27)
    assert dm.jobs.failed == 1 and dm.jobs.failure_kinds == {"fatal": 1}  # an episode
    assert dm.jobs.retry_errors == 1 and dm.jobs.total == 27 + 8  # 27 questions, 7 episodes and 1 failed one
    assert llm.jobs.failed == 1 and llm.open_loop[0].failed == 1
    assert dm.totals.decisions == 27 and dm.totals.cost.n_priced == 27
    assert llm.totals.cost.n_priced == 26  # the failed row has no price


def test_operations_are_summed_from_the_rows(run: tuple[SweepConfig, dict[str, CxsManifest]]) -> None:
    """Cost per 1,000 decisions, tokens, cache hits and calls come from the answer rows as recorded."""
    _, manifests = run
    cell = manifests["llm"].open_loop[0]  # 26 answered, 1 failed for good (no call on record)
    assert cell.cost.total_usd == pytest.approx(26 * 0.003)
    assert cell.cost.per_1k_decisions_usd == pytest.approx(3.0)
    assert (cell.tokens.input, cell.tokens.output, cell.cache_hits, cell.calls) == (26 * 120, 26 * 12, 4, 22)
    assert cell.latency.p50_ms == pytest.approx(200 + 3 * 12.5)
    assert cell.calibration is None and cell.gate is None  # an LLM has no confidence to gate on


def test_closed_loop_cells_from_episode_results(run: tuple[SweepConfig, dict[str, CxsManifest]]) -> None:
    """Success, coverage, model accuracy, saved calls, fallbacks and cost per mode and τ; a failed episode is a failure."""
    _, manifests = run
    cells = {(c.mode, c.tau): c for c in manifests["dm"].closed_loop}
    assert list(cells) == [("model", None), ("gated", 0.8)]
    model, gated = cells[("model", None)], cells[("gated", 0.8)]
    assert (model.episodes, model.success_rate, model.coverage) == (4, 0.75, 1.0)
    assert model.model_accuracy == pytest.approx(6 / 9) and model.model_steps == 10
    assert (gated.episodes, gated.failed, gated.success_rate, gated.card_success_rate) == (3, 1, None, 0.75)
    assert (gated.coverage, gated.model_accuracy, gated.fallbacks, gated.llm_calls_saved) == (
        5 / 9,
        0.8,
        1,
        5,
    )
    assert gated.cost_per_episode_usd == pytest.approx(0.021) and gated.cost_split_usd[
        "llm"
    ] == pytest.approx(0.06)
    assert gated.fit == {"target": 0.9, "tau": 0.8}
    assert (gated.shadow_accuracy, gated.llm_accuracy) == (0.75, 0.75)  # on the 4 decisions the LLM took
    (llm,) = manifests["llm"].closed_loop  # mode llm episodes belong to the LLM's manifest
    assert (llm.mode, llm.success_rate, llm.coverage, llm.model_accuracy) == ("llm", 0.75, 0.0, None)


def test_target_llm_fits_to_the_llms_own_accuracy(tmp_path: Path) -> None:
    """gate.target 'llm': the fit's target is the LLM's L2 accuracy on the scenario, and says so."""
    config = small_config(tmp_path, gate={"llm": "llm", "target": "llm"}, episodes=False)
    cell = _finalize(config)["dm"].open_loop[0]
    assert cell.fit is not None and cell.fit.target_source == "llm"
    llm = _finalize(config)["llm"].open_loop[0]  # one of its jobs failed: the card's accuracy is the target
    assert llm.card_accuracy_pct is not None
    assert cell.fit.target == pytest.approx(llm.card_accuracy_pct / 100)


def test_without_a_gate_the_fit_uses_the_default_target(tmp_path: Path) -> None:
    """No gate in the config: no gated section, and τ is fitted for 0.99, marked as the default."""
    config = small_config(tmp_path, episodes=False).model_copy(update={"gate": None})
    cell = _finalize(config)["dm"].open_loop[0]
    assert cell.gate is None and cell.fit is not None
    assert (cell.fit.target, cell.fit.target_source) == (0.99, "default")


def test_thinning_keeps_both_ends_and_caps_the_points() -> None:
    """A 5,000-point curve is stored as about 200 points, from the first to the last."""
    points = [
        CurvePoint(threshold=1 - i / 5000, coverage=(i + 1) / 5000, accuracy=0.9, support=i + 1)
        for i in range(5000)
    ]
    kept, thinned = _thin(points)
    assert thinned and kept[0] == points[0] and kept[-1] == points[-1] and 150 < len(kept) <= 202
    assert _thin(points[:50]) == (points[:50], False)


def test_a_version_1_manifest_still_loads(tmp_path: Path) -> None:
    """Manifests written before open-loop cells had a scope are read as they were (no scope)."""
    golden = Path(__file__).resolve().parent.parent / "golden" / "small" / "dm.cxs.json"
    doc = json.loads(golden.read_text())
    doc["schema_version"] = 1
    for cell in doc["open_loop"]:
        del cell["scope"]
    old = tmp_path / "old.cxs.json"
    old.write_text(json.dumps(doc))
    manifest = load_manifest(old)
    assert manifest.schema_version == 1 and manifest.open_loop[0].scope is None


def test_load_manifest_names_a_bad_file(tmp_path: Path) -> None:
    """A file that is not a manifest is one ScenarioError naming it, not a traceback."""
    bad = tmp_path / "x.cxs.json"
    bad.write_text('{"schema_version": 2}')
    with pytest.raises(ScenarioError, match=r"x\.cxs\.json"):
        load_manifest(bad)


def test_provenance_records_config_versions_and_files(
    run: tuple[SweepConfig, dict[str, CxsManifest]],
) -> None:
    """The run section carries the config file and hash, versions, times; scenarios carry file hashes."""
    _, manifests = run
    m = manifests["dm"]
    assert (m.run.config_file, m.run.config_sha256, m.run.created) == (
        "small.yaml",
        "0" * 64,
        "2026-01-02T03:04:05Z",
    )
    assert {"knowwhen-runner", "litellm"} <= set(m.run.packages) and m.run.finalized_at.endswith("Z")
    qs = m.scenarios[0]
    assert set(qs.files) == {"questions.jsonl.gz", "occurrences.jsonl.gz", "corpus.json"}
    assert all(len(h) == 64 for h in qs.files.values())
    assert m.model.model == "hosted_vllm/dm" and "api_key" not in m.model_dump_json()
