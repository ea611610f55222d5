"""Getting the dataset: a local folder is used as is, a download goes through the real huggingface_hub
from a local server answering the Hub's API (``HF_ENDPOINT``), honest or hostile."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from knowwhen_runner.config import ScenarioSpec
from knowwhen_runner.dataset.hub import (
    REPO_ID,
    TASK_SETS_DIR,
    fetch_dataset,
    resolve_dataset,
    write_task_sets,
)
from knowwhen_runner.exceptions import KnowwhenError, ScenarioError
from knowwhen_runner.scenarios.episodes import load_episodes
from tests.benchdata import make_dataset
from tests.helpers import knowwhen
from tests.hub_server import HubRepo, local_hub


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("hub") / "ds", n_common=12, n_shift=9)


def test_local_dataset_is_used_without_the_hub(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder that holds the dataset is reused: huggingface_hub is never imported."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # importing it would fail
    assert fetch_dataset(dataset) == dataset
    assert resolve_dataset(dataset) == dataset


def test_task_lists_are_split_by_set(dataset: Path) -> None:
    """Every set of the task list gets its own file, rows unchanged; shift_l3 loads as 200 episodes."""
    written = {p.name: p for p in write_task_sets(dataset)}
    assert "shift_l3.jsonl.gz" in written and "stage2_eval.jsonl.gz" in written
    with gzip.open(written["shift_l3.jsonl.gz"], "rt") as fh:
        rows = [json.loads(line) for line in fh]
    assert len(rows) == 200 and {r["set"] for r in rows} == {"shift_l3"}
    spec = ScenarioSpec(
        id="l3", kind="episodes", path=dataset / TASK_SETS_DIR / "shift_l3.jsonl.gz", allow_eval=True
    )
    assert len(load_episodes(spec).items) == 200


def test_missing_package_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without huggingface_hub a download names the extra to install."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(KnowwhenError, match=r"pip install 'knowwhen-runner\[hub\]'"):
        fetch_dataset(tmp_path / "ds")


def test_offline_is_one_clear_error(tmp_path: Path) -> None:
    """A download with no Hub to reach says so and how to work from a local folder, leaving no folder."""
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
    done = knowwhen("fetch-dataset", "--out", str(tmp_path / "ds"), env=env)
    assert done.returncode == 2
    assert "no network, download the dataset elsewhere" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "ds").exists()


def _hub_env(endpoint: str, tmp_path: Path) -> dict[str, str]:
    return {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DOWNLOAD_TIMEOUT": "2",
    }


def test_download_takes_every_file_of_the_dataset_repo_at_its_commit(dataset: Path, tmp_path: Path) -> None:
    """The real huggingface_hub lists the repository at the revision's commit, every file lands byte for
    byte, and the result gets its per-set task lists."""
    published = {p.relative_to(dataset).as_posix(): p.read_bytes() for p in dataset.rglob("*") if p.is_file()}
    published = {k: v for k, v in published.items() if TASK_SETS_DIR.parts[-1] not in k}
    repo = HubRepo(REPO_ID, "c" * 40, published, revisions=("main", "v1"))
    with local_hub(repo) as endpoint:
        done = knowwhen(
            "fetch-dataset",
            "--out",
            str(tmp_path / "ds"),
            "--revision",
            "v1",
            env=_hub_env(endpoint, tmp_path),
        )
    assert done.returncode == 0, done.stderr
    assert f"GET /api/datasets/{REPO_ID}/revision/v1" in repo.requests
    for name, data in published.items():
        assert (tmp_path / "ds" / name).read_bytes() == data
    assert (tmp_path / "ds" / TASK_SETS_DIR / "shift_l3.jsonl.gz").is_file()
    assert not list((tmp_path / "ds").glob(".knowwhen-download-*"))


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("wrong-sha", "the Hub states sha256 "),
        ("wrong-size", "bytes and "),
        ("truncated", "RemoteProtocolError"),
        ("stall", "ReadTimeout"),
        ("huge", "more than a download may be (4,294,967,296)"),
        ("outside", "a path outside the dataset folder"),
    ],
)
def test_a_hostile_hub_leaves_nothing_behind(
    dataset: Path, tmp_path: Path, fault: str, expected: str
) -> None:
    """One file of the dataset unlike what the Hub states of it (or listed outside the folder) gives
    exit 2 and one sentence, and no file at all is kept, those that matched included."""
    published = {p.relative_to(dataset).as_posix(): p.read_bytes() for p in dataset.rglob("*") if p.is_file()}
    published = {k: v for k, v in published.items() if TASK_SETS_DIR.parts[-1] not in k}
    last = sorted(published)[-1]  # the others arrive whole first
    if fault == "outside":
        published["../escaped.txt"] = b"x"
    repo = HubRepo(REPO_ID, "c" * 40, published, faults={last: fault})
    with local_hub(repo) as endpoint:
        done = knowwhen("fetch-dataset", "--out", str(tmp_path / "ds"), env=_hub_env(endpoint, tmp_path))
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert not (tmp_path / "ds").exists() and not (tmp_path / "escaped.txt").exists()


def test_not_a_dataset_without_fetch(tmp_path: Path) -> None:
    """An empty folder is refused with the command that fetches the dataset."""
    with pytest.raises(ScenarioError, match="knowwhen fetch-dataset --out"):
        resolve_dataset(tmp_path)
