"""Episodes whose job failed for good survive an export and an import: a real run against the local model
server, whose agent LLM answers HTTP 500 to half its requests, ends with failed episode jobs in the fit
set and in every mode; exported, then imported into a fresh run with the server stopped, it finalises into
the same tables, failure counts and manifest numbers; `datasets` loads the failed rows and `knowwhen
score` counts them as the manifests do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from knowwhen_runner.jsonio import iter_jsonl
from knowwhen_runner.results.manifest import load_manifest
from knowwhen_runner.serve import start_server_process
from knowwhen_runner.sweep import finalize_config, import_dataset
from tests.helpers import knowwhen
from tests.roundtrip import assert_same_run, scored_with_manifest

pytestmark = pytest.mark.slow

MODELS = ("prior", "agent-sim")
FAULT = {"fault": "500", "model": "agent-sim", "probability": 0.5, "seed": 7}
"""Half the agent's requests fail: a call fails its attempt after three 500s, a job after two attempts."""


def _config(path: Path, base_url: str) -> Path:
    """The quickstart's models and closed loop, small: a fit set of 4 tasks, 3 tasks twice in every mode."""
    models = [
        {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": base_url},
        {"id": "agent-sim", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base_url}/v1"},
    ]
    episodes = {"kind": "episodes", "agent": "agent-sim", "suite": "common"}
    config = {
        "name": "run",
        "output": str(path.parent / "run"),
        "models": models,
        "modes": ["llm", "model", "gated", "shadow"],
        "scenarios": [
            {"id": "l3-fit", **episodes, "split": "fit", "n": 4, "modes": []},
            {"id": "l3", **episodes, "split": "bench", "n": 3, "repeats": 2, "tau": {"fit": "l3-fit", "target": "llm"}},
        ],
        "workers": {"max_attempts": 2, "set_aside_error_rate": None, "concurrency": 4},
        "cache": {"policy": "off"},
    }  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(run, export, re-imported run). The run and its export happen while its server runs; the import and
    the finalise after it is stopped, into a run of the same name whose config file has the same name."""
    root = tmp_path_factory.mktemp("failed-episodes")
    with start_server_process() as server:
        server.set_faults([FAULT])
        config = _config(root / "a" / "run.yaml", server.base_url)
        done = knowwhen("run", str(config), "-q", "--no-probe")
        assert done.returncode == 1, done.stdout + done.stderr  # 1: jobs failed for good
        address = server.base_url
    out = root / "exported"
    exported = knowwhen("export", str(root / "a" / "run"), "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    again = _config(root / "b" / "run.yaml", address)  # nothing answers there any more
    summary = import_dataset(out, config=again)
    assert summary.skipped == [], summary.skipped
    finalize_config(root / "b" / "run")
    return root / "a" / "run", out, root / "b" / "run"


def _rows(folder: Path) -> list[dict[str, Any]]:
    return [row for path in sorted(folder.glob("*/episodes_*.jsonl.gz")) for _l, row in iter_jsonl(path)]


def test_the_export_holds_every_episode_failed_ones_with_their_error(runs: tuple[Path, Path, Path]) -> None:
    """Every episode job of the run has one row in the export; a failed one has its error, its kind and
    the attempts its job took, and no steps."""
    run, out, _again = runs
    rows = _rows(out / "episodes")
    failed = [r for r in rows if r["error"] is not None]
    tally = {m: load_manifest(run / "manifests" / f"{m}.cxs.json").jobs for m in MODELS}
    assert len(rows) == sum(t.total for t in tally.values()) and len(failed) == sum(
        t.failed for t in tally.values()
    )
    assert failed and len(failed) < len(rows), (len(failed), len(rows))  # some failed, some finished
    assert all(r["steps"] == [] and not r["success"] and r["attempts"] == 2 for r in failed)
    assert {r["error_kind"] for r in failed} == {"retry"} and all("500" in r["error"] for r in failed)
    assert all(r["error_kind"] is None and r["steps"] for r in rows if r["error"] is None)
    assert rows == _rows(run)  # the run's own files hold the same rows


def test_import_with_the_server_stopped_gives_back_every_table_and_manifest_number(
    runs: tuple[Path, Path, Path],
) -> None:
    """Finalised after the import, the fresh run's tables are the run's byte for byte, and every number of
    its manifests (failed jobs, attempts, failed episodes per cell, the fit that never came) is equal."""
    run, _out, again = runs
    numbers = assert_same_run(run, again, list(MODELS))
    assert numbers > 100
    cells = [c for m in MODELS for c in load_manifest(again / "manifests" / f"{m}.cxs.json").closed_loop]
    assert sum(c.failed for c in cells) > 0
    assert all(c.success_rate is None and c.card_success_rate is not None for c in cells if c.failed)
    for model in MODELS:
        jobs = load_manifest(again / "manifests" / f"{model}.cxs.json").jobs
        assert jobs.failure_kinds == ({"retry": jobs.failed} if jobs.failed else {}), model


def test_datasets_loads_the_failed_episodes_with_typed_features(
    runs: tuple[Path, Path, Path], hf: Any
) -> None:
    """The card's episodes config loads every row offline, the failed ones with their error (a string
    column, null on finished episodes) and no steps."""
    _run, out, _again = runs
    ds = hf.load_dataset(str(out), "episodes", split="test")
    assert len(ds) == len(_rows(out / "episodes"))
    assert str(ds.features["error"].dtype) == str(ds.features["error_kind"].dtype) == "string"
    failed = [row for row in ds if row["error"] is not None]
    assert failed and all(row["steps"] == [] and row["error_kind"] == "retry" for row in failed)
    assert {row["error_kind"] for row in ds if row["error"] is None} == {None}


def test_score_on_the_episode_files_gives_the_manifests_closed_loop_numbers(
    runs: tuple[Path, Path, Path],
) -> None:
    """`knowwhen score` on the exported episodes gives every cell's finished and failed episodes, and the
    manifest's success rate where none failed or its card rate where some did."""
    run, out, _again = runs
    pairs = scored_with_manifest(out, ["l3", "l3-fit"], run, list(MODELS))
    assert any(c["failed"] for c, _cell in pairs)
    for c, cell in pairs:
        assert (c["episodes"], c["failed"], c["pass_hat_k"]) == (cell.episodes, cell.failed, cell.pass_hat_k)
        for mine, theirs in (
            (c["success_pct"], cell.success_rate),
            (c["card_success_pct"], cell.card_success_rate),
        ):
            assert mine == (None if theirs is None else pytest.approx(100 * theirs))


def test_leaderboard_l3_rows_of_cells_with_failed_episodes_are_recomputed(
    runs: tuple[Path, Path, Path],
) -> None:
    """`knowwhen score --leaderboard` recomputes every L3 row from the episode files, the rows of cells
    with failed episodes included (the card's rate, as the export writes them)."""
    run, out, _again = runs
    done = knowwhen("score", str(out), "--leaderboard", "--json")
    assert done.returncode == 0, done.stderr
    l3 = [r for r in json.loads(done.stdout)["rows"] if r["level"] == "L3"]
    assert l3 and all(r["status"] == "match" for r in l3), [r for r in l3 if r["status"] != "match"]
    cells = [c for m in MODELS for c in load_manifest(run / "manifests" / f"{m}.cxs.json").closed_loop]
    with_failed = {
        (c.scenario, f"success ({c.mode}{'' if c.tau is None else f', τ {c.tau:.4g}'})")
        for c in cells
        if c.failed
    }
    assert with_failed & {(r["task_set"], r["metric"]) for r in l3}
