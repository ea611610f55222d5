"""Getting the AgentDecisionBench dataset: from the Hugging Face hub when there is a network, else a local folder.

``fetch_dataset`` downloads the dataset repository once (``huggingface_hub``, the optional ``hub`` extra,
imported only when a download is needed, lists it and states each file's size and digest) and reuses a
folder that already holds it. Either way it then
writes one task list per task set (``tasks/by_set/<set>.jsonl.gz``, the rows unchanged), so an episodes
scenario can name the 200 shifted tasks (``shift_l3``) or the 200 common-state tasks as a file.

A file taken from the Hub is checked against what the Hub states of it before it is kept
(``fetch_verified``): its size (``X-Linked-Size``, else ``Content-Length``) and its digest (the sha256 in
``X-Linked-Etag`` for a file stored in LFS, else the git blob id in ``ETag``). It is downloaded into a
temporary folder inside the folder it is meant for and moved into place only once both match, so a
mismatch, a cut or stalled download or a size past ``MAX_DOWNLOAD_BYTES`` leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..exceptions import KnowwhenError, ScenarioError
from ..jsonio import find_jsonl, iter_jsonl, write_jsonl
from .rows import TaskRow, check_row

__all__ = [
    "MAX_DOWNLOAD_BYTES",
    "REPO_ID",
    "TASK_SETS_DIR",
    "fetch_dataset",
    "fetch_verified",
    "is_dataset",
    "resolve_dataset",
    "write_task_sets",
]

REPO_ID = "JevAgentHarness/AgentDecisionBench"
TASK_SETS_DIR = Path("tasks") / "by_set"
"""Where ``write_task_sets`` puts one task list per set, relative to the dataset root."""
MAX_DOWNLOAD_BYTES = 4 * 2**30
"""The largest file taken from the Hub; a file the Hub states larger is refused before it is downloaded."""
MIN_RATE = 16 * 2**10
"""Bytes per second a download must average once ``SLOW_GRACE_S`` have passed (a trickle is cut off)."""
SLOW_GRACE_S = 60.0
_SHA256 = re.compile(r"[0-9a-f]{64}")
_GIT_SHA1 = re.compile(r"[0-9a-f]{40}")


def _digest(path: Path, kind: str) -> str:
    """The file's sha256, or its git blob id (sha1 over ``blob SIZE\\0`` and the bytes)."""
    digest = hashlib.sha256() if kind == "sha256" else hashlib.sha1()
    if kind == "git":
        digest.update(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _mismatch(path: Path, size: int | None, etag: str | None) -> str | None:
    """How the downloaded file differs from what the Hub states of it (None: it matches)."""
    got = path.stat().st_size
    if size is not None and got != size:
        return f"the Hub states {size:,} bytes and {got:,} arrived"
    if etag is None or not (_SHA256.fullmatch(etag) or _GIT_SHA1.fullmatch(etag)):
        return f"the Hub states no sha256 or git id for it ({etag!r})"
    kind = "sha256" if _SHA256.fullmatch(etag) else "git"
    actual = _digest(path, kind)
    if actual != etag:
        named = "sha256" if kind == "sha256" else "git blob id"
        return f"the Hub states {named} {etag} and the download has {actual}"
    return None


def _stream_to(url: str, headers: dict[str, str], path: Path, limit: int, shown: str) -> None:
    """GET ``url`` into ``path``, refusing past ``limit`` bytes, a pause longer than the Hub's download
    timeout, and an average slower than ``MIN_RATE`` once ``SLOW_GRACE_S`` have passed."""
    # start-up: httpx only when a file is downloaded
    import httpx

    # optional: huggingface_hub is the [hub] extra
    from huggingface_hub import constants

    started, written = time.monotonic(), 0
    timeout = httpx.Timeout(float(constants.HF_HUB_DOWNLOAD_TIMEOUT))
    with httpx.stream("GET", url, headers=headers, follow_redirects=True, timeout=timeout) as reply:
        reply.raise_for_status()
        with open(path, "wb") as fh:
            for chunk in reply.iter_bytes(1 << 20):
                written += len(chunk)
                if written > limit:
                    raise KnowwhenError(
                        f"{shown}: more than the {limit:,} bytes the Hub states arrived; the download was not kept"
                    )
                elapsed = time.monotonic() - started
                if elapsed > SLOW_GRACE_S and written < MIN_RATE * elapsed:
                    raise KnowwhenError(
                        f"{shown}: the download came slower than {MIN_RATE // 1024} KiB/s "
                        f"({written:,} bytes in {elapsed:.0f} s); the download was not kept"
                    )
                fh.write(chunk)


def fetch_verified(repo_id: str, filename: str, revision: str, dest: Path, *, shown: str) -> None:
    """Download ``filename`` of the dataset ``repo_id`` at ``revision`` to ``dest``, checked against the
    size and digest the Hub states; on any failure ``dest`` is as it was and nothing else is left.

    Raises ``KnowwhenError`` in one sentence naming ``shown``; HTTP errors (a cut body, a stall, a
    missing file) pass through for the caller to word. The body is read here, not by the Hub library,
    whose resuming download retries without end against a server that always cuts its body short.
    """
    # optional: huggingface_hub is the [hub] extra
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers

    url = hf_hub_url(repo_id, filename, repo_type="dataset", revision=revision)
    meta = get_hf_file_metadata(url)
    if meta.size is not None and meta.size > MAX_DOWNLOAD_BYTES:
        raise KnowwhenError(
            f"{shown}: the Hub states {meta.size:,} bytes, more than a download may be "
            f"({MAX_DOWNLOAD_BYTES:,}); nothing was downloaded"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".knowwhen-download-", dir=dest.parent) as tmp:
        got = Path(tmp) / dest.name
        headers = {**build_hf_headers(), "Accept-Encoding": "identity"}
        _stream_to(url, headers, got, meta.size if meta.size is not None else MAX_DOWNLOAD_BYTES, shown)
        wrong = _mismatch(got, meta.size, meta.etag)
        if wrong:
            raise KnowwhenError(f"{shown}: {wrong}; the download was not kept")
        os.replace(got, dest)


def is_dataset(root: Path) -> bool:
    """Whether ``root`` holds the dataset (its ``models`` table is the one file every copy has)."""
    return Path(root).is_dir() and find_jsonl(Path(root), "models") is not None


def _listed(name: str) -> bool:
    """A path a listing may name: relative, with no ``..``, so every file lands inside the folder."""
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts


def _download(out: Path, revision: str | None) -> None:
    """Every file of the dataset at ``revision`` into ``out``, each checked (``fetch_verified``) into a
    temporary folder inside ``out`` and moved into place only once all are: a refusal keeps nothing."""
    try:
        # optional: huggingface_hub is the [hub] extra
        from huggingface_hub import HfApi
        from huggingface_hub.hf_api import RepoFile
    except ImportError:
        raise KnowwhenError(
            "downloading the dataset needs huggingface_hub: pip install 'knowwhen-runner[hub]' "
            f"(or download {REPO_ID} elsewhere and pass its folder)"
        ) from None
    fresh = not out.exists()
    try:
        api = HfApi()
        commit = api.dataset_info(REPO_ID, revision=revision or "main").sha or revision or "main"
        tree = api.list_repo_tree(REPO_ID, repo_type="dataset", revision=commit, recursive=True)
        names = [entry.path for entry in tree if isinstance(entry, RepoFile)]
        outside = next((name for name in names if not _listed(name)), None)
        if outside is not None:
            raise KnowwhenError(
                f"{REPO_ID}@{commit}: the Hub lists {outside!r}, a path outside the dataset folder"
            )
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".knowwhen-download-", dir=out) as tmp:
            for name in names:
                fetch_verified(REPO_ID, name, commit, Path(tmp) / name, shown=f"{REPO_ID}@{commit}/{name}")
            for name in names:
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                os.replace(Path(tmp) / name, out / name)
    except KnowwhenError:
        raise
    except Exception as exc:  # offline, HTTP, disk: the hub raises many kinds; the user needs one sentence
        raise KnowwhenError(
            f"could not download {REPO_ID} ({type(exc).__name__}: {_first_line(exc)}); nothing was kept; if this "
            "machine has no network, download the dataset elsewhere and pass its folder"
        ) from None
    finally:
        if fresh and out.is_dir() and not any(out.iterdir()):
            out.rmdir()


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else ""


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
