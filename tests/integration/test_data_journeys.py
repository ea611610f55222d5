"""Journeys through the sentences that name a fetch command for data not on the machine: `plan` of an L1
scenario whose folder is absent or empty, and `knowwhen scenarios` without the dataset or the L1 data.
Each printed command is run as printed against a local Hub (``tests/hub_server.py``); the BFCL release
``fetch-l1`` would download with pip is handed over as a wheel (``--wheel``), the one step that needs the
network."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.dataset.hub import REPO_ID, TASK_SETS_DIR
from tests.benchdata import make_dataset
from tests.helpers import knowwhen
from tests.hub_server import HubRepo, local_hub
from tests.l1data import make_wheel, when2call_repo

pytestmark = pytest.mark.slow


def _said(done: Any) -> str:
    return " ".join((done.stdout + done.stderr).split())


def _dataset_repo(folder: Path) -> HubRepo:
    """AgentDecisionBench as the Hub serves it: a small made-up dataset at one commit."""
    root = make_dataset(folder, n_common=12, n_shift=9)
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return HubRepo(REPO_ID, "c" * 40, {k: v for k, v in files.items() if TASK_SETS_DIR.parts[-1] not in k})


@pytest.mark.journey("l1.folder_missing", "l1.no_items", "scenarios.fetch_l1", "scenarios.fetch_dataset")
def test_the_fetch_commands_printed_for_missing_data_fill_it(tmp_path: Path) -> None:
    """`plan` of an L1 scenario names `knowwhen fetch-l1 --out DIR`, whether the folder is absent or empty,
    and `knowwhen scenarios` names that and `knowwhen fetch-dataset --out DIR`; run as printed, they fill
    the folders: the scenario plans its items and `scenarios` lists the dataset's sets and counts the L1
    items."""
    l1, dataset = tmp_path / "data" / "l1", tmp_path / "data" / "ds"
    config = tmp_path / "c.yaml"
    config.write_text(
        f"schema_version: 1\nname: l1\noutput: {tmp_path / 'out'}\nmodes: [model]\n"
        "models:\n  - {id: a, model: hosted_vllm/a, kind: decision, api_base: 'http://127.0.0.1:9'}\n"
        f"scenarios:\n  - {{id: l1, kind: isolated, path: {l1}}}\n"
    )
    absent = knowwhen("plan", str(config))
    assert absent.returncode == 2, _said(absent)
    assert f"scenarios.0.path: {l1} does not exist; fetch it with `knowwhen fetch-l1 --out {l1}`" in _said(
        absent
    )
    l1.mkdir(parents=True)
    empty = knowwhen("plan", str(config))
    assert empty.returncode == 2, _said(empty)
    assert (
        f"scenario 'l1': no isolated items left (check caps and exclude); fetch the data with "
        f"`knowwhen fetch-l1 --out {l1}`"
    ) in _said(empty)
    listed = _said(knowwhen("scenarios", "--dataset", str(dataset), "--l1", str(l1)))
    assert f"AgentDecisionBench: not in {dataset} (knowwhen fetch-dataset --out {dataset})" in listed, listed
    assert f"L1 data: not in {l1} (knowwhen fetch-l1 --out {l1})" in listed, listed

    printed = {
        *re.findall(r"`(knowwhen fetch-l1 [^`]+)`", _said(absent) + _said(empty)),
        *re.findall(r"\((knowwhen fetch-[\w-]+ --out \S+)\)", listed),
    }
    assert printed == {f"knowwhen fetch-l1 --out {l1}", f"knowwhen fetch-dataset --out {dataset}"}, printed
    wheel = ["--wheel", str(make_wheel(tmp_path / "wheel"))]
    with local_hub(when2call_repo(), _dataset_repo(tmp_path / "published")) as endpoint:
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
        for command in sorted(printed):
            args = shlex.split(command)[1:] + (wheel if "fetch-l1" in command else [])
            fetched = knowwhen(*args, env=env)
            assert fetched.returncode == 0, _said(fetched)

    planned = knowwhen("plan", str(config), "--json")
    assert planned.returncode == 0, _said(planned)
    assert [c["jobs"] for c in json.loads(planned.stdout)["cells"]] == [18]  # the fixture's 18 items
    found = json.loads(knowwhen("scenarios", "--dataset", str(dataset), "--l1", str(l1), "--json").stdout)
    assert sum(found["l1"]["items"].values()) == 18
    assert {s["name"] for s in found["dataset"]} >= {"common_states", "shift"}
