"""knowwhen import: published answers become a run's results, finalised into the same numbers as `knowwhen score`."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from knowwhen_runner.config import load_config
from knowwhen_runner.queue import open_queue
from knowwhen_runner.results.isolated import score_isolated
from knowwhen_runner.results.manifest import load_manifest
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.sweep.sweep import load_and_plan
from tests.benchdata import make_dataset
from tests.helpers import knowwhen

pytestmark = pytest.mark.slow

L1 = Path(__file__).resolve().parent.parent / "fixtures" / "isolated"
VARIANTS = {"shift": "main", "shift-nosurf": "nosurf", "shift-nodist": "nodist"}


def _config(path: Path, dataset: Path, models: list[dict[str, Any]], name: str) -> Path:
    config = {
        "name": name,
        "output": str(path.parent / name),
        "modes": ["model", "llm"],
        "models": models,
        "scenarios": [
            {"id": "l1", "kind": "isolated", "path": str(L1)},
            {"id": "common", "path": str(dataset / "common_states")},
            *({"id": sc, "path": str(dataset / "shift"), "variant": v} for sc, v in VARIANTS.items()),
        ],
        "workers": {"concurrency": 8, "lease_seconds": 10},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


E12 = {"id": "e12", "model": "hosted_vllm/e12", "kind": "decision", "api_base": "http://127.0.0.1:9"}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("ds") / "AgentDecisionBench", n_common=150, n_shift=90)


@pytest.fixture(scope="module")
def imported(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run made of the published answers alone: import, then the finalize it prints as the next step."""
    config = _config(tmp_path_factory.mktemp("run") / "c.yaml", dataset, [E12], "published")
    done = knowwhen("import", str(dataset), "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "joined the run as imported/<id>: gemini, jev, sl4b" in done.stdout
    step = " ".join(done.stdout.split()).split("next: ", 1)[1]
    assert step == f"knowwhen finalize {config.parent / 'published'}", step
    final = knowwhen(*step.split()[1:])
    assert final.returncode == 0, final.stderr
    return config.parent / "published"


def _score(folder: Path, variant: str) -> dict[str, Any]:
    done = knowwhen("score", str(folder), "--all", "--json", "--variant", variant)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["models"]


@pytest.mark.journey("import.next")
def test_manifests_for_every_published_model(imported: Path) -> None:
    """The config's model and the published ones absent from it all get a manifest; the LLM stays an LLM."""
    refs = {
        m: load_manifest(imported / "manifests" / f"{m}.cxs.json").model for m in ("e12", "jev", "gemini")
    }
    assert refs["e12"].model == "hosted_vllm/e12"
    assert (refs["jev"].model, refs["jev"].kind) == ("imported/jev", "decision")
    assert (refs["gemini"].model, refs["gemini"].kind) == ("imported/gemini", "llm")


def test_l2_table_equals_knowwhen_score(imported: Path, dataset: Path) -> None:
    """Every L2 cell of the comparison table and manifests is what `knowwhen score` gives on the dataset."""
    with open(imported / "tables" / "comparison.csv") as fh:
        table = {r["model"]: r for r in csv.DictReader(fh)}
    for scenario, folder, variant in [
        ("common", "common_states", "main"),
        *((sc, "shift", v) for sc, v in VARIANTS.items()),
    ]:
        scored = _score(dataset / folder, variant)
        assert set(scored) == {"e12", "jev", "sl4b", "gemini"}
        for model, result in scored.items():
            cell = next(
                c
                for c in load_manifest(imported / "manifests" / f"{model}.cxs.json").open_loop
                if c.scenario == scenario
            )
            assert cell.accuracy_pct == pytest.approx(result["accuracy"], abs=1e-9)
            assert cell.must_ask_pct == (
                None if result["must_ask"] is None else pytest.approx(result["must_ask"])
            )
            assert float(table[model][f"L2 all states ({scenario})"]) == pytest.approx(
                result["accuracy"], abs=1e-6
            )


def test_l1_equals_scoring_the_published_file(imported: Path, dataset: Path) -> None:
    """Pooled and BFCL tool-choice L1 of each manifest equal score_l1 on isolated/answers.jsonl.gz."""
    published = score_isolated(dataset / "isolated" / "answers.jsonl.gz")
    assert len({round(s.pooled, 6) for s in published.values()}) > 1  # the models really differ
    written = score_isolated(imported / "l1" / "answers.jsonl.gz")
    for model, score in published.items():
        cell = load_manifest(imported / "manifests" / f"{model}.cxs.json").isolated[0]
        assert cell.pooled_pct == pytest.approx(score.pooled)
        assert cell.bfcl_tool_choice_pct == pytest.approx(score.bfcl_tool_choice)
        assert written[model] == score


def test_job_ids_are_the_planners(imported: Path) -> None:
    """The imported jobs of the config's own model are exactly the ones its planner produces."""
    config = load_config(imported.parent / "c.yaml")
    _scenarios, the_plan = load_and_plan(config)
    planned = {j.id for j in the_plan.jobs if j.model_id == "e12" and j.scenario_id != "l1"}

    async def done() -> set[str]:
        queue = open_queue(config.db_url, config.name)
        try:
            return {j.id for j, status, _r, _e in await queue.results() if status == "done"}
        finally:
            await queue.close()

    assert planned and planned <= anyio.run(done)


def test_import_again_records_nothing_new(imported: Path, dataset: Path) -> None:
    """A second import of the same files finds every result already recorded."""
    done = knowwhen("import", str(dataset), "--into", str(imported))
    assert done.returncode == 0, done.stderr
    assert "(0 new)" in done.stdout and "joined" not in done.stdout


def test_new_model_beside_published_ones(
    server: ServerProcess, dataset: Path, imported: Path, tmp_path: Path
) -> None:
    """After an import, `run` calls only the new model; its table holds both; compare sets it beside the published run."""
    lexical = {
        "id": "lexical",
        "model": "hosted_vllm/lexical",
        "kind": "decision",
        "api_base": server.base_url,
    }
    config = _config(tmp_path / "c.yaml", dataset, [E12, lexical], "mine")
    settings = yaml.safe_load(config.read_text())
    settings["workers"]["max_outage_s"] = 3  # e12's address has nothing behind it
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    done = knowwhen("import", str(dataset), "--config", str(config), "--models", "e12")
    assert done.returncode == 0, done.stderr
    ran = knowwhen("run", str(config), "-q")
    # The L1 items the dataset has no e12 answer for would need e12 itself, which is not reachable: they
    # wait (an outage is never scored), then stay pending, and the run says so with exit 3.
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert "stopped waiting for e12" in " ".join(ran.stdout.split())
    assert server.count() == 18 + 150 + 3 * 90  # lexical's questions only; e12's were all imported
    assert knowwhen("finalize", str(tmp_path / "mine")).returncode == 0
    with open(tmp_path / "mine" / "tables" / "comparison.csv") as fh:
        assert {r["model"] for r in csv.DictReader(fh)} == {"e12", "lexical"}
    compared = knowwhen("compare", str(imported), str(tmp_path / "mine"), "--json")
    assert compared.returncode == 0, compared.stderr
    models = json.loads(compared.stdout)["models"]
    assert models["lexical"]["in"] == "b" and models["jev"]["in"] == "a"
    assert not any(cell["accuracy_pct"]["changed"] for cell in models["e12"]["open_loop"])


def test_import_needs_a_dataset_folder(tmp_path: Path) -> None:
    """A folder without the dataset is refused with the command that fetches it."""
    done = knowwhen("import", str(tmp_path), "--config", str(tmp_path / "c.yaml"))
    assert done.returncode == 2
    assert "knowwhen fetch-dataset --out" in done.stderr


def test_fetch_dataset_reuses_a_local_copy(dataset: Path) -> None:
    """`knowwhen fetch-dataset --out` on a folder holding the dataset downloads nothing and splits the task list."""
    done = knowwhen("fetch-dataset", "--out", str(dataset), env={"HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert (dataset / "tasks" / "by_set" / "shift_l3.jsonl.gz").is_file()
