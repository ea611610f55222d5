"""Getting the dataset: a local folder is used as is, a download goes through huggingface_hub (faked here)."""

from __future__ import annotations

import gzip
import json
import sys
import types
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("hub") / "ds", n_common=12, n_shift=9)


def _fake_hub(monkeypatch: pytest.MonkeyPatch, snapshot_download: Any) -> None:
    module = types.ModuleType("huggingface_hub")
    module.snapshot_download = snapshot_download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)


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


def test_offline_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing download (no network) says so and how to work from a local folder."""

    def offline(**_kw: Any) -> str:
        raise OSError("Network is unreachable")

    _fake_hub(monkeypatch, offline)
    with pytest.raises(KnowwhenError, match="no network, download the dataset elsewhere"):
        fetch_dataset(tmp_path / "ds")


def test_download_asks_for_the_dataset_repo(
    dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The download names the dataset repository and type; the result gets its per-set task lists."""
    calls: list[dict[str, Any]] = []

    def snapshot_download(**kw: Any) -> str:
        calls.append(kw)
        target = Path(kw["local_dir"])
        for path in dataset.rglob("*"):
            if path.is_file() and TASK_SETS_DIR.parts[-1] not in path.parts:
                dest = target / path.relative_to(dataset)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(path.read_bytes())
        return str(target)

    _fake_hub(monkeypatch, snapshot_download)
    root = fetch_dataset(tmp_path / "ds", revision="v1")
    assert calls == [
        {"repo_id": REPO_ID, "repo_type": "dataset", "local_dir": str(tmp_path / "ds"), "revision": "v1"}
    ]
    assert (root / TASK_SETS_DIR / "shift_l3.jsonl.gz").is_file()


def test_not_a_dataset_without_fetch(tmp_path: Path) -> None:
    """An empty folder is refused with the command that fetches the dataset."""
    with pytest.raises(ScenarioError, match="knowwhen fetch-dataset --out"):
        resolve_dataset(tmp_path)
