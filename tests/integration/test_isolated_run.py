"""L1 end to end: isolated questions answered by the local server, scored into the benchmark's answers file."""

from __future__ import annotations

import gzip
import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.results.isolated import ISOLATED_FIELDS, score_isolated
from knowwhen_runner.results.manifest import load_manifest
from knowwhen_runner.scenarios.isolated import ASK_OPTION
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config
from tests.hub_server import local_hub
from tests.l1data import when2call_repo

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "isolated"


def _rows(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def run(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run with one isolated and one states scenario, both models answering both."""
    serve.reset()
    tmp_path = tmp_path_factory.mktemp("isolated-run")
    states = make_question_set(tmp_path / "qs", n_tasks=2)
    config = write_config(
        tmp_path / "c.yaml",
        serve.base_url,
        states,
        scenarios=[
            {"id": "l1", "kind": "isolated", "path": str(FIXTURE), "exclude": str(FIXTURE / "dev_items.txt")},
            {"id": "qs", "path": str(states)},
        ],
    )
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stderr
    return tmp_path / "out"


def test_answers_file_has_the_card_schema(run: Path) -> None:
    """Every model's answer to every kept item is one row with exactly the card's isolated fields."""
    rows = _rows(run / "l1" / "answers.jsonl.gz")
    assert len(rows) == 2 * 16
    assert all(tuple(r) == ISOLATED_FIELDS for r in rows)
    assert {r["model"] for r in rows} == {"lexical", "lexical-llm"}
    assert "simple_python_2" not in {r["id"] for r in rows}  # on the exclusion list
    assert {r["model_id"] for r in rows} == {"hosted_vllm/lexical", "openai/lexical-llm"}


def test_correct_means_the_answer_is_an_accepted_option(run: Path) -> None:
    """correct is exactly: the prediction, normalised, is in the item's gold."""
    rows = _rows(run / "l1" / "answers.jsonl.gz")
    for r in rows:
        assert r["correct"] == (r["pred"] is not None and r["pred"].strip().lower() in r["gold"])
        assert r["dp"] == "tool_select" and r["request_questions"] == 1
    asks = [r for r in rows if r["id"] == "0b1f5c2e-0000-4000-8000-000000000002"]
    assert all(r["gold"] == [ASK_OPTION] and r["source"] == "when2call:mcq" for r in asks)


def test_manifest_l1_cell_equals_scoring_the_file(run: Path) -> None:
    """Each manifest's L1 cell holds the numbers score_l1 gives on the written answers file."""
    scores = score_isolated(run / "l1" / "answers.jsonl.gz")
    for model, mode in (("lexical", "model"), ("lexical-llm", "llm")):
        cell = load_manifest(run / "manifests" / f"{model}.cxs.json").isolated[0]
        assert (cell.scenario, cell.mode, cell.items) == ("l1", mode, 16)
        assert cell.pooled_pct == pytest.approx(scores[model].pooled)
        assert cell.bfcl_tool_choice_pct == pytest.approx(scores[model].bfcl_tool_choice)
        assert cell.n_bfcl_tool_choice == 12


def test_comparison_table_shows_l1(run: Path) -> None:
    """The comparison table carries the L1 column next to the L2 one."""
    table = (run / "tables" / "comparison.md").read_text()
    assert "L1 isolated" in table and "L2 all states" in table


@pytest.mark.journey("l1.source_missing")
def test_run_without_when2call_answers_the_rest_and_says_what_is_left_out(
    serve: ServerProcess, tmp_path: Path
) -> None:
    """With When2Call's files absent, `run` answers the BFCL items and names the missing source, the jobs
    it leaves out and the command that fetches it; that command, run as printed (against a local Hub),
    fetches them, and the next run adds its items."""
    serve.reset()
    data = tmp_path / "l1"
    shutil.copytree(FIXTURE, data)
    shutil.rmtree(data / "when2call")
    states = make_question_set(tmp_path / "qs", n_tasks=1)
    config = write_config(
        tmp_path / "c.yaml",
        serve.base_url,
        states,
        scenarios=[{"id": "l1", "kind": "isolated", "path": str(data)}],
    )
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stderr
    assert (
        f"left out: l1: when2call is missing ({data / 'when2call'}), which leaves out up to 2,000 jobs "
        f"(1,000 items x 2 models); fetch it with `knowwhen fetch-l1 --out {data} --source when2call`"
    ) in done.stdout
    rows = _rows(tmp_path / "out" / "l1" / "answers.jsonl.gz")
    assert len(rows) == 2 * 13 and all(r["source"].startswith("bfcl:") for r in rows)
    fetch = " ".join(done.stdout.split()).split("fetch it with `", 1)[1].split("`", 1)[0]
    with local_hub(when2call_repo()) as endpoint:
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
        fetched = knowwhen(*shlex.split(fetch)[1:], env=env)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    again = knowwhen("run", str(config), "-q")
    assert again.returncode == 0, again.stderr
    assert "left out" not in again.stdout
    rows = _rows(tmp_path / "out" / "l1" / "answers.jsonl.gz")
    assert len(rows) == 2 * 18 and sum(r["source"] == "when2call:mcq" for r in rows) == 2 * 5


@pytest.mark.journey("subset.sample")
def test_a_limited_run_asks_every_category_and_its_tables_say_subset(
    serve: ServerProcess, tmp_path: Path
) -> None:
    """`limit: 9` on the BFCL-shaped fixture asks every BFCL category and every When2Call answer kind (not
    the first ids in string order), plan prints the sample, and the manifest and comparison table name it."""
    serve.reset()
    states = make_question_set(tmp_path / "qs", n_tasks=1)
    config = write_config(
        tmp_path / "c.yaml",
        serve.base_url,
        states,
        scenarios=[{"id": "l1", "kind": "isolated", "path": str(FIXTURE), "limit": 9}],
    )
    plan = knowwhen("plan", str(config))
    assert plan.returncode == 0, plan.stderr
    assert "sample: l1: a seeded sample of 9 of 18 items (seed 0)" in " ".join(plan.stdout.split())
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stderr
    rows = _rows(tmp_path / "out" / "l1" / "answers.jsonl.gz")
    assert len(rows) == 2 * 9
    bfcl = {r["source"] for r in rows if r["source"].startswith("bfcl:")}
    kinds = {
        r["gold"][0] if r["gold"][0] in ("ask_user", "none") else "tool"
        for r in rows
        if "when2call" in r["source"]
    }
    assert len(bfcl) == 6 and kinds == {"ask_user", "none", "tool"}
    manifest = load_manifest(tmp_path / "out" / "manifests" / "lexical.cxs.json")
    (subset,) = [s.subset for s in manifest.scenarios if s.id == "l1"]
    assert subset is not None and (subset.asked, subset.of, subset.unit) == (9, 18, "items")
    assert manifest.isolated[0].items == 9
    table = (tmp_path / "out" / "tables" / "comparison.md").read_text()
    assert "l1: a subset was scored, a seeded sample of 9 of 18 items (seed 0)" in table
