"""A run in a shared database keeps its config: another config under the same run name is refused.

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

__all__ = ["refuse_config_swap"]


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
