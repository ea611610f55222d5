"""Getting the AgentDecisionBench dataset: from the Hugging Face hub when there is a network, else a local folder.

``fetch_dataset`` downloads the dataset repository once (``huggingface_hub``, the optional ``hub`` extra,
imported only when a download is needed) and reuses a folder that already holds it. Either way it then
writes one task list per task set (``tasks/by_set/<set>.jsonl.gz``, the rows unchanged), so an episodes
scenario can name the 200 shifted tasks (``shift_l3``) or the 200 common-state tasks as a file.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from ..exceptions import KnowwhenError, ScenarioError
from ..jsonio import find_jsonl, iter_jsonl, write_jsonl
from .rows import TaskRow, check_row

__all__ = ["REPO_ID", "TASK_SETS_DIR", "fetch_dataset", "is_dataset", "resolve_dataset", "write_task_sets"]

REPO_ID = "JevAgentHarness/AgentDecisionBench"
TASK_SETS_DIR = Path("tasks") / "by_set"
"""Where ``write_task_sets`` puts one task list per set, relative to the dataset root."""


def is_dataset(root: Path) -> bool:
    """Whether ``root`` holds the dataset (its ``models`` table is the one file every copy has)."""
    return Path(root).is_dir() and find_jsonl(Path(root), "models") is not None


def _download(out: Path, revision: str | None) -> None:
    try:
        # optional: huggingface_hub is the [hub] extra
        from huggingface_hub import snapshot_download
    except ImportError:
        raise KnowwhenError(
            "downloading the dataset needs huggingface_hub: pip install 'knowwhen-runner[hub]' "
            f"(or download {REPO_ID} elsewhere and pass its folder)"
        ) from None
    try:
        snapshot_download(repo_id=REPO_ID, repo_type="dataset", local_dir=str(out), revision=revision)
    except Exception as exc:  # offline, HTTP, disk: the hub raises many kinds; the user needs one sentence
        raise KnowwhenError(
            f"could not download {REPO_ID} ({type(exc).__name__}: {exc}); if this machine has no network, "
            "download the dataset elsewhere and pass its folder"
        ) from None


def write_task_sets(root: Path) -> list[Path]:
    """Split ``tasks/decisiongym_tasks.jsonl[.gz]`` by its ``set`` column into ``tasks/by_set/<set>.jsonl.gz``."""
    source = find_jsonl(Path(root) / "tasks", "decisiongym_tasks")
    if source is None:
        return []
    by_set: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line, row in iter_jsonl(source):
        check_row(TaskRow, source, line, row)
        name = row.get("set")
        if not isinstance(name, str) or not name or "/" in name:
            raise ScenarioError(f"{source}:{line}: a task row needs its 'set' name")
        by_set[name].append(row)
    written = []
    for name, rows in sorted(by_set.items()):
        path = Path(root) / TASK_SETS_DIR / f"{name}.jsonl.gz"
        write_jsonl(path, rows)
        written.append(path)
    return written


def fetch_dataset(out: str | Path, *, revision: str | None = None) -> Path:
    """The dataset in ``out``: reused if already there, else downloaded; then its per-set task lists."""
    out = Path(out)
    if not is_dataset(out):
        _download(out, revision)
        if not is_dataset(out):
            raise ScenarioError(f"{out}: the download holds no models.jsonl.gz; is {REPO_ID} complete?")
    write_task_sets(out)
    return out


def resolve_dataset(root: str | Path, *, fetch: bool = False, revision: str | None = None) -> Path:
    """A dataset folder to read: ``root`` if it holds the dataset, else (``fetch``) downloaded into it."""
    root = Path(root)
    if is_dataset(root):
        return root
    if fetch:
        return fetch_dataset(root, revision=revision)
    raise ScenarioError(
        f"{root}: not an AgentDecisionBench folder (no models.jsonl.gz); "
        f"get it with: knowwhen fetch-dataset --out {root}"
    )
