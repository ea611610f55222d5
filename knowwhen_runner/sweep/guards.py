"""What a run checks before it writes anything: its output folder is its own, its config is its own.

A run folder is marked (``.knowwhen-run``) when a run first writes there; ``output:`` at a folder that
holds other files and is not a run is refused, so nothing of the user's is written over. Run folders
from before the mark are recognised by what every run leaves: ``knowwhen.db`` (SQLite, the default) or
``manifests/`` with a ``.cxs.json`` (any finalised run); they are marked on their next run.

On PostgreSQL many users and machines share one database, and a run is found by its name alone; a
second sweep that happens to reuse a name would otherwise replace the stored config (which workers
joining later read) without a word. A private SQLite run folder keeps the edit-and-rerun habit.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anyio

from ..config import SweepConfig
from ..exceptions import ConfigError
from ..queue import is_shared_url, open_queue
from ..stored.reader import RUN_MARK

__all__ = [
    "RUN_MARK",
    "check_before_run",
    "claim_output_folder",
    "refuse_config_swap",
    "refuse_foreign_folder",
]


def _is_run_folder(folder: Path) -> bool:
    if (folder / RUN_MARK).is_file() or (folder / "knowwhen.db").is_file():
        return True
    manifests = folder / "manifests"
    return manifests.is_dir() and any(manifests.glob("*.cxs.json"))


def refuse_foreign_folder(config_path: Path, output: Path) -> None:
    """Raise ``ConfigError`` if ``output`` is a file, or a folder that holds files and is not a run folder.

    The one rule of every command that creates or writes a run folder (``run``, ``import``, ``finalize``,
    ``worker``); it writes nothing (``claim_output_folder`` checks, then marks)."""
    if output.exists() and not output.is_dir():
        raise ConfigError(f"{config_path}: output: {output} is a file, not a folder")
    if output.is_dir() and not _is_run_folder(output) and any(output.iterdir()):
        raise ConfigError(
            f"{config_path}: output: {output} holds files and is not a knowwhen run folder (it has no "
            f"{RUN_MARK}, knowwhen.db or manifests/), so nothing is written there; choose a new or empty folder"
        )


def claim_output_folder(config_path: Path, output: Path) -> None:
    """Mark ``output`` as a run folder; raise ``ConfigError`` if it holds files and is not one."""
    refuse_foreign_folder(config_path, output)
    output.mkdir(parents=True, exist_ok=True)
    mark = output / RUN_MARK
    if not mark.exists():
        mark.write_text("a knowwhen run folder: knowwhen writes its results here\n", encoding="utf-8")


def check_before_run(config_path: Path, config: SweepConfig, url: str, *, replace_config: bool) -> None:
    """Both checks, before a run writes anything: its config is its own, and so is its output folder."""
    refuse_config_swap(config_path, config, url, replace=replace_config)
    claim_output_folder(config_path, config.output)


def _stored_stamp(info: dict[str, Any]) -> tuple[str, str]:
    """The stored config's sha256 and file name (the meta's, else the stored text's)."""
    meta = info.get("meta") or {}
    stamp = meta.get("config_sha256") or hashlib.sha256((info.get("config_text") or "").encode()).hexdigest()
    return str(stamp), str(meta.get("config_file") or "its config")


def refuse_config_swap(config_path: Path, config: SweepConfig, url: str, *, replace: bool) -> None:
    """Raise ``ConfigError`` if run ``config.name`` in shared database ``url`` was started with another
    config and ``replace`` is not set; naming both configs' stamps (sha256 of the file)."""
    if replace or not is_shared_url(url):
        return

    async def stored() -> dict[str, Any] | None:
        async with open_queue(url, config.name) as queue:
            return await queue.run_info()

    info = anyio.run(stored)
    if info is None:
        return
    new = hashlib.sha256(Path(config_path).read_bytes()).hexdigest()
    old, old_file = _stored_stamp(info)
    if old == new:
        return
    raise ConfigError(
        f"{config_path}: run {config.name!r} in the shared database was started with another config "
        f"({old_file}, sha256 {old[:12]}; this one is sha256 {new[:12]}): give this run another name, "
        "or pass --replace-config to replace its config"
    )
