"""A run kept in its database: reopen it from its folder or a URL, and read the config stored with it.

``run`` records the config text and a little metadata with the run, so ``finalize``, ``status``,
``worker`` (on a machine with none of the files) and ``import`` all read the same config back, with the
same one-line errors.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import SweepConfig, parse_config
from ..exceptions import ConfigError
from ..jobs import JOB_ID_VERSION
from ..queue import Queue, find_run_name, open_queue

__all__ = ["config_from_run", "open_existing", "run_meta", "stored_config", "with_db"]


def with_db(config: SweepConfig, db: str | None) -> SweepConfig:
    """The config with its database replaced by ``db`` (``--db``), when given."""
    return config.model_copy(update={"db": db}) if db else config


def run_meta(config_path: Path, config_text: str, **extra: Any) -> dict[str, Any]:
    """What a run records about its config: where it was, its hash, the id scheme and the release."""
    return {
        "config_file": config_path.name,
        "base_dir": str(config_path.resolve().parent),
        "config_sha256": hashlib.sha256(config_text.encode()).hexdigest(),
        "job_id_version": JOB_ID_VERSION,
        "knowwhen_runner": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **extra,
    }


def stored_config(info: dict[str, Any], db: str | None = None, *, require_files: bool = True) -> SweepConfig:
    """The config stored with a run (``Queue.run_info()``), validated like a config file.

    ``require_files=False`` is for a machine that may have none of the scenario files (a worker reads
    its items from the database). ``${VAR}`` references are expanded from this machine's environment.
    """
    config = parse_config(
        info["config_text"],
        base=Path((info.get("meta") or {}).get("base_dir", ".")),
        source=f"run {info['name']!r} (stored config)",
        check_files=require_files,
    )
    return with_db(config, db)


def open_existing(run_dir: Path, db: str | None, run: str | None) -> tuple[Queue, str]:
    """The queue of an existing run: by its folder (its SQLite file) or by ``db`` and ``run``."""
    if db is None:
        db_file = run_dir / "knowwhen.db"
        if not db_file.is_file():
            raise ConfigError(
                f"{run_dir}: no run here (no knowwhen.db); give the run folder of a config's output"
            )
        db = f"sqlite:///{db_file}"
    if run is None:
        run = find_run_name(db)
    return open_queue(db, run), run


async def config_from_run(run_dir: Path, *, db: str | None = None, run: str | None = None) -> SweepConfig:
    """The config stored with a run (``finalize RUN`` and ``status`` need no copy of the file)."""
    queue, name = open_existing(run_dir, db, run)
    async with queue:
        found = await queue.run_info()
    if found is None:
        raise ConfigError(f"{run_dir}: the database has no run {name!r}")
    return stored_config(found, db)
