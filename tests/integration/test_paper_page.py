"""docs/paper.md is a path that works: its commands, run verbatim in its order from a repository-like
folder, on test fixtures: both downloads come from a local server answering the Hub's API (the real
huggingface_hub, through HF_ENDPOINT) and pip's own download of a fixture wheel (PIP_FIND_LINKS), then
plan, import, run and score. The config is configs/paper/shifted-tasks.yaml in small
(tests/fixtures/paper/), its models on the local server."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from knowwhen_runner.dataset.hub import REPO_ID
from knowwhen_runner.jsonio import write_jsonl
from knowwhen_runner.serve import ServerProcess
from tests.benchdata import make_dataset
from tests.helpers import knowwhen
from tests.hub_server import HubRepo, local_hub
from tests.l1data import COMMIT, make_wheel, when2call_repo

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "paper.md"


def _published_shift_accuracy(dataset: Path) -> float:
    scored = knowwhen("score", str(dataset / "shift"), "--model", "e12", "--json")
    assert scored.returncode == 0, scored.stderr
    return float(json.loads(scored.stdout)["accuracy"])


def _leaderboard_row(value: float) -> dict[str, object]:
    """The Table 3 row of e12's L2 accuracy, as the paper prints it (one decimal)."""
    return {
        "model": "e12", "model_name": "AgentDecision-4B", "level": "L2", "task_set": "shift",
        "metric": "accuracy", "value": f"{value:.1f}", "value_num": round(value, 1),
        "paper_display": "Table 3", "tex_key": "x", "tex_file": "t.tex",
    }  # fmt: skip


def page_commands() -> list[list[str]]:
    """The `knowwhen` lines of the page's first bash block, split into arguments (comments dropped)."""
    block = re.search(r"```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert block is not None
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line.split()[1:] for line in lines if line.startswith("knowwhen ")]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as the repository: configs/paper/ with the small Table 3 config."""
    root = tmp_path_factory.mktemp("checkout")
    paper = root / "configs" / "paper"
    paper.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "fixtures" / "paper" / "shifted-tasks.yaml", paper)
    shutil.copy(ROOT / "configs" / "paper" / "l1-development-items.txt", paper)
    return root


def test_the_paper_page_runs_from_fetch_to_score(
    checkout: Path, serve: ServerProcess, tmp_path: Path
) -> None:
    """Each command of the page exits 0 and prints the figure the page says it prints."""
    serve.reset()
    published = make_dataset(tmp_path / "published", n_common=12, n_shift=9)
    shift = _published_shift_accuracy(published)
    write_jsonl(published / "leaderboard" / "headline_numbers.jsonl.gz", [_leaderboard_row(shift)])
    wheels = tmp_path / "wheels"
    make_wheel(wheels)
    dataset_repo = HubRepo.from_folder(REPO_ID, "f" * 40, published)
    commands = page_commands()
    assert [c[0] for c in commands] == [
        "fetch-dataset",
        "fetch-l1",
        "plan",
        "import",
        "run",
        "score",
        "score",
    ]
    with local_hub(dataset_repo, when2call_repo()) as endpoint:
        env = {
            "HF_ENDPOINT": endpoint,
            "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_OFFLINE": "0",
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(wheels),
            "KNOWWHEN_SERVE_BASE": serve.base_url,
        }
        done = {}
        for args in commands:
            result = knowwhen(*args, env=env, cwd=checkout)
            assert result.returncode == 0, (args, result.stdout, result.stderr)
            done.setdefault(args[0], []).append(result.stdout)
    assert "dataset: data/AgentDecisionBench" in done["fetch-dataset"][0]
    assert "bfcl: 10 files from bfcl-eval 2026.3.23" in done["fetch-l1"][0]
    assert f"when2call: 1 file from nvidia/When2Call@{COMMIT}" in done["fetch-l1"][0]
    manifest = json.loads((checkout / "data" / "l1" / "l1-manifest.json").read_text())
    assert set(manifest["sources"]) == {"bfcl", "when2call"}
    # plan: 18 L1 items and 19 argument questions, 9 shift states and 2 tasks for e12; the agent alone on 2
    assert re.search(r"50 jobs, 50 still to do", done["plan"][0]), done["plan"][0]
    # import: the fixture dataset's 4 models, 12 of the L1 items and the 9 shift states each
    assert "l1: 48 published answers of 4 models (48 new)" in done["import"][0]
    assert "shift: 36 published answers of 4 models (36 new)" in done["import"][0]
    assert "results: " in done["run"][0] and "table.md" in done["run"][0]
    score = json.loads(done["score"][0])
    assert score["model"] == "e12" and score["accuracy"] == pytest.approx(shift, abs=1e-9)
    assert f"{shift:.1f}" in done["score"][1] and "differs" not in done["score"][1]
    run = checkout / "results" / "paper-shifted-tasks"
    l1 = (run / "tables" / "l1.csv").read_text().splitlines()
    assert l1[0].startswith(
        "rank,model,scenario,questions,L1 pooled (%),tool choice (%),BFCL tool choice (%),arguments"
    )
    ranked = [row.split(",") for row in l1[1:]]  # in the run's ranking, as every table
    assert [int(r[0]) for r in ranked] == sorted(int(r[0]) for r in ranked)
    e12 = next(",".join(r) for r in ranked if r[1:3] == ["e12", "l1"])
    assert e12.endswith(",19")  # its 19 argument questions, answered by run
    manifest_e12 = json.loads((run / "manifests" / "e12.cxs.json").read_text())
    l1_provenance = next(s for s in manifest_e12["scenarios"] if s["id"] == "l1")
    fetched = checkout / "data" / "l1" / "l1-manifest.json"
    assert l1_provenance["files"]["l1-manifest.json"] == hashlib.sha256(fetched.read_bytes()).hexdigest()
    assert l1_provenance["settings"]["params"] == "required"
    shift_cell = next(c for c in manifest_e12["open_loop"] if c["scenario"] == "shift")
    assert shift_cell["accuracy_pct"] == pytest.approx(score["accuracy"], abs=1e-9)
