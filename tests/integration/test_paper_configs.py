"""The paper's configs: `knowwhen plan` runs offline, without keys, and counts what the dataset card counts."""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.config import load_config
from knowwhen_runner.dataset.hub import write_task_sets
from tests.benchdata import CARD, make_dataset
from tests.helpers import knowwhen

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent.parent
PAPER = ROOT / "configs" / "paper"
L1 = ROOT / "tests" / "fixtures" / "isolated"
L1_ITEMS = 18 + 19  # the fixture's BFCL and When2Call items and the argument questions of its BFCL gold calls


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset folder with the card's counts, its task lists split by set (as fetch-dataset leaves it)."""
    root = make_dataset(tmp_path_factory.mktemp("paper") / "AgentDecisionBench")
    write_task_sets(root)
    return root


@pytest.fixture
def offline(dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine as a user without keys or network would have it; returns a copy of configs/paper."""
    for key in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AGENTDECISIONBENCH", str(dataset))
    monkeypatch.setenv("KNOWWHEN_L1_DATA", str(L1))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    copy = tmp_path / "configs" / "paper"  # its ../../results is inside tmp_path
    shutil.copytree(PAPER, copy)
    return copy


def _plan(config: Path) -> dict[str, Any]:
    done = knowwhen("plan", str(config), "--json")
    assert done.returncode == 0, done.stderr
    assert not (config.parent.parent.parent / "results").exists()  # a dry run writes nothing
    return json.loads(done.stdout)


def _cells(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, int]]:
    out: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for cell in report["cells"]:
        out[(cell["scenario"], cell["mode"])][cell["model"]] = cell["jobs"]
    return out


EXPECTED = {
    "l1": L1_ITEMS,
    "common": CARD["common_states"],
    **dict.fromkeys(("shift", "shift-nosurf", "shift-nodist"), CARD["shift"]),
    "shift-l3": CARD["shift_l3"],
    "common-l3": CARD["common_tasks"],
}


@pytest.mark.parametrize("name", ["shifted-tasks.yaml", "three-levels.yaml", "common-states.yaml"])
def test_paper_config_plans_offline_with_card_counts(name: str, offline: Path) -> None:
    """Each decision model gets one job per question of each scenario and one episode per task; cost is estimated."""
    models = [m.id for m in load_config(offline / name).models if m.kind == "decision"]
    report = _plan(offline / name)
    cells = _cells(report)
    assert "l1" in {sc for sc, _m in cells}
    for (scenario, mode), per_model in cells.items():
        if mode == "llm":  # the agent alone, closed loop
            assert per_model == {"gemini": EXPECTED[scenario]}
        else:
            assert per_model == dict.fromkeys(models, EXPECTED[scenario]), (scenario, mode)
    questions = sum(n for (sc, _m), c in cells.items() if not sc.endswith("-l3") for n in c.values())
    assert report["calls_to_make"] == questions  # every question is one call; episodes are counted apart
    assert report["est_cost_usd"] is not None and report["est_cost_usd"] > 0


def test_shifted_tasks_has_three_levels_and_all_variants(offline: Path) -> None:
    """Table 3's config asks L1, the shift states in all three renderings (must-ask included), and L3."""
    cells = _cells(_plan(offline / "shifted-tasks.yaml"))
    assert {sc for sc, _m in cells} == {"l1", "shift", "shift-nosurf", "shift-nodist", "shift-l3"}
    assert sum(cells[("shift-l3", "model")].values()) == 10 * 200


def test_paper_configs_give_a_model_one_identity_and_address(offline: Path) -> None:
    """A model id in several paper configs is the same model (string, params, revision) on the same port."""
    seen: dict[str, tuple[Any, ...]] = {}
    ports: dict[str, str] = {}
    for name in ("shifted-tasks.yaml", "three-levels.yaml", "common-states.yaml"):
        for m in load_config(offline / name).models:
            ident = (m.model, m.params, m.revision, m.identity, m.api_base)
            assert seen.setdefault(m.id, ident) == ident, (name, m.id)
            if m.api_base:
                assert ports.setdefault(m.api_base, m.id) == m.id, (name, m.api_base)


def test_table3_and_figure4b_share_their_l3_episodes(offline: Path) -> None:
    """The shifted L3 episodes of the models both configs run are the same jobs (ids), so one run pays."""
    from knowwhen_runner.sweep.sweep import load_and_plan

    def l3_jobs(name: str) -> dict[tuple[str, str, str], str]:
        _scenarios, plan = load_and_plan(load_config(offline / name))
        return {(j.model_id, j.mode, j.item): j.id for j in plan.jobs if j.scenario_id == "shift-l3"}

    table3, figure4b = l3_jobs("shifted-tasks.yaml"), l3_jobs("three-levels.yaml")
    shared = table3.keys() & figure4b.keys()
    assert {m for m, _mode, _i in shared} == {"e12", "e28", "jev", "intern", "sl4b", "gemini"}
    assert len(shared) == 6 * CARD["shift_l3"]
    assert all(table3[k] == figure4b[k] for k in shared)


def test_paper_config_without_dataset_names_the_path(tmp_path: Path) -> None:
    """Without the dataset, plan fails in one line naming the missing folder and the config line."""
    env = {"AGENTDECISIONBENCH": str(tmp_path / "missing"), "KNOWWHEN_L1_DATA": str(L1)}
    done = knowwhen("plan", str(PAPER / "three-levels.yaml"), env=env)
    assert done.returncode == 2
    assert "three-levels.yaml:" in done.stderr and "does not exist" in done.stderr


def test_table3_round_trip_of_published_answers(offline: Path, dataset: Path) -> None:
    """Import the published answers into Table 3's config and finalise: the L2 cells equal `knowwhen score`."""
    config = offline / "shifted-tasks.yaml"
    done = knowwhen("import", str(dataset), "--config", str(config), "--models", "e12,jev,sl4b")
    assert done.returncode == 0, done.stderr
    run = offline.parent.parent / "results" / "paper-shifted-tasks"
    final = knowwhen("finalize", str(run))
    assert final.returncode == 0, final.stderr
    for scenario, variant in (("shift", "main"), ("shift-nosurf", "nosurf"), ("shift-nodist", "nodist")):
        scored = knowwhen("score", str(dataset / "shift"), "--all", "--json", "--variant", variant)
        assert scored.returncode == 0, scored.stderr
        for model in ("e12", "jev", "sl4b"):
            expected = json.loads(scored.stdout)["models"][model]
            manifest = json.loads((run / "manifests" / f"{model}.cxs.json").read_text())
            cell = next(c for c in manifest["open_loop"] if c["scenario"] == scenario)
            assert cell["accuracy_pct"] == pytest.approx(expected["accuracy"], abs=1e-9)
            assert cell["must_ask_pct"] == pytest.approx(expected["must_ask"], abs=1e-9)
            assert cell["occurrences"] == expected["n_occurrences"]


def test_paper_config_with_when2call_missing_plans_the_rest_and_names_the_fetch_command(
    offline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Table 3's config over an L1 folder without When2Call plans every other job (the BFCL items and
    their argument questions, the states, the episodes) and says in one sentence what is left out and the
    command that fetches it."""
    data = tmp_path / "l1"
    shutil.copytree(L1, data)
    shutil.rmtree(data / "when2call")
    monkeypatch.setenv("KNOWWHEN_L1_DATA", str(data))
    report = _plan(offline / "shifted-tasks.yaml")
    models = [m.id for m in load_config(offline / "shifted-tasks.yaml").models if m.kind == "decision"]
    cells = _cells(report)
    assert cells[("l1", "model")] == dict.fromkeys(models, L1_ITEMS - 5)  # the fixture's 5 When2Call items
    assert {sc for sc, _m in cells} == {"l1", "shift", "shift-nosurf", "shift-nodist", "shift-l3"}
    said = [s for s in report["skipped"] if s.startswith("l1: when2call is missing")]
    assert len(said) == 1 and f"fetch it with `knowwhen fetch-l1 --out {data} --source when2call`" in said[0]
