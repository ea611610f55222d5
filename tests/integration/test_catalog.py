"""``knowwhen models`` and ``knowwhen scenarios`` say what is really there: the models listed are the ones the
real local server lists and answers as (each asked once on its own endpoint), and the sizes listed are
what the files hold, counted here from the files themselves as the benchmark's card counts them.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from knowwhen_runner.serve import ServerProcess
from tests.benchdata import make_dataset
from tests.helpers import knowwhen, make_question_set, write_config

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "scenarios" / "decisiongym"
L1 = ROOT / "tests" / "fixtures" / "isolated"
STATE = "TASK: cancel my order 4411\nHISTORY:\n(none)\nCURRENT OBSERVATION: order 4411 is pending"
TOOLS = {"find_customer": "Look up a customer by e-mail.", "cancel_order": "Cancel a pending order."}


def _json(*args: str) -> Any:
    done = knowwhen(*args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _rows(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _ask(server: ServerProcess, name: str, kind: str) -> httpx.Response:
    """One question to a model on its own endpoint: System One for a decision model (a state of the bundled
    set: the answer-key oracle searches DecisionGym's tasks for the state's own), chat for an LLM."""
    if kind == "decision":
        question = _rows(BUNDLED / "common" / "questions.jsonl.gz")[0]
        options = dict(zip(question["options"], question["descriptions"], strict=True))
        criteria = {"type": "choice", "instructions": "Which tool next?", "criteria": options}
        body: dict[str, Any] = {
            "model": name,
            "state": question["state"],
            "questions": {"next_tool": criteria},
        }
        return httpx.post(f"{server.base_url}/v1/systemone", json=body, timeout=60)
    tools = [
        {"type": "function", "function": {"name": n, "description": d, "parameters": {"type": "object"}}}
        for n, d in TOOLS.items()
    ]
    body = {"model": name, "messages": [{"role": "user", "content": STATE}], "tools": tools}
    return httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=60)


@pytest.mark.slow  # prior learns on its first question, the oracle searches for the state's task
def test_models_lists_what_the_local_server_lists_and_answers_as(server: ServerProcess) -> None:
    """Every listed name is one the server's model list has (and no other), each answers a question on its
    endpoint as itself (an alias as the model it names), and a name off the list is refused."""
    listed = _json("models")["served"]
    names = [m["name"] for m in listed]
    served = httpx.get(f"{server.base_url}/v1/models", timeout=10).json()
    assert names == sorted(m["id"] for m in served["data"])
    described = {m["name"]: m["description"] for m in served["models"]}
    for model in listed:
        assert model["description"] == described[model["name"]] and model["description"]
        reply = _ask(server, model["name"], model["kind"])
        assert reply.status_code == 200, (model, reply.text)
        assert reply.json()["model"] == (model["alias_of"] or model["name"])
    assert _ask(server, "lexical-x", "decision").status_code == 404


def test_models_of_a_config_are_its_models_with_what_the_server_says_of_them(tmp_path: Path) -> None:
    """--config lists the config's ids, kinds and model strings; a local server's model gets its line."""
    config = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", make_question_set(tmp_path / "qs", 1))
    shown = _json("models", "--config", str(config))["models"]
    assert [(m["id"], m["kind"], m["model"]) for m in shown] == [
        ("lexical", "decision", "hosted_vllm/lexical"),
        ("lexical-llm", "llm", "openai/lexical-llm"),
    ]
    served = {m["name"]: m["description"] for m in _json("models")["served"]}
    assert [m["served"] for m in shown] == [served["lexical"], served["lexical-llm"]]


def _expected_set(folder: Path) -> dict[str, Any]:
    """A question set's size as the card counts it, read straight from its files."""
    questions = _rows(folder / "questions.jsonl.gz")
    return {
        "name": folder.name,
        "questions": len(questions),
        "answer_key_rows": len(_rows(folder / "occurrences.jsonl.gz")),
        "tasks": len(json.loads((folder / "corpus.json").read_text())["eligible_tasks"]),
        "options": len(questions[0]["options"]),
        "variants": [v for v in ("nosurf", "nodist") if (folder / f"questions_{v}.jsonl.gz").is_file()],
    }


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What `knowwhen scenarios` lists with a fetched dataset (the card's layout) and the L1 fixture."""
    dataset = make_dataset(tmp_path_factory.mktemp("dataset"), n_common=12, n_shift=8)
    return {"root": dataset, **_json("scenarios", "--dataset", str(dataset), "--l1", str(L1))}


def _sizes(sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k != "path"} for s in sets]


def test_scenarios_lists_the_bundled_sets_with_the_sizes_their_files_hold(listed: dict[str, Any]) -> None:
    """Every folder of scenarios/decisiongym with questions is listed, with its counts, and nothing else."""
    folders = sorted(d for d in BUNDLED.iterdir() if (d / "questions.jsonl.gz").is_file())
    assert _sizes(listed["bundled"]) == [_expected_set(d) for d in folders]


def test_scenarios_lists_the_fetched_dataset_and_l1_data_with_their_sizes(listed: dict[str, Any]) -> None:
    """The dataset's question sets and task sets (the `tasks` config per `set`), and the L1 items (lines of
    the BFCL question files and of When2Call, each one item at the fixture's size)."""
    dataset: Path = listed["root"]
    folders = sorted(d for d in dataset.iterdir() if (d / "questions.jsonl.gz").is_file())
    assert _sizes(listed["dataset"]) == [_expected_set(d) for d in folders]
    sets = Counter(row["set"] for row in _rows(dataset / "tasks" / "decisiongym_tasks.jsonl.gz"))
    assert {t["name"]: t["tasks"] for t in listed["task_lists"]} == dict(sets)
    bfcl = sum(len(_rows(p)) for p in (L1 / "bfcl").glob("BFCL_v4_*.json"))
    when2call = len(_rows(L1 / "when2call" / "when2call_test_mcq.jsonl"))
    assert listed["l1"]["items"] == {"bfcl": bfcl, "when2call": when2call}


def test_scenarios_names_the_fetch_command_for_what_is_not_there(tmp_path: Path) -> None:
    """With no dataset and no L1 data where it looks, it says where it looked and the command that fetches."""
    done = knowwhen("scenarios", "--dataset", str(tmp_path / "ds"), "--l1", str(tmp_path / "l1"))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert f"knowwhen fetch-dataset --out {tmp_path / 'ds'}" in said
    assert f"knowwhen fetch-l1 --out {tmp_path / 'l1'}" in said
