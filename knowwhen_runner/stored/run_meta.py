"""A run kept in its database: what ``run`` records with it, and its config read back from its folder.

``run`` records the config text and a little metadata with the run, so ``finalize``, ``status``,
``worker`` (on a machine with none of the files) and ``import`` all read the same config back, with the
same one-line errors. Reopening a run and parsing its stored config live in ``reader`` (the viewer
reads runs the same way).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import SweepConfig
from ..exceptions import ConfigError
from ..jobs import JOB_ID_VERSION
from .reader import open_existing, stored_config

__all__ = ["config_from_run", "run_meta"]


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


async def config_from_run(run_dir: Path, *, db: str | None = None, run: str | None = None) -> SweepConfig:
    """The config stored with a run (``finalize RUN`` and ``status`` need no copy of the file).

    The run is the one in ``run_dir`` (its SQLite file, or ``db``) and its outputs go to ``run_dir``: a run
    folder moved or copied since it ran is finalised where it is now, from its own database, never
    from (or into) the folder its config named."""
    queue, name = open_existing(run_dir, db, run)
    async with queue:
        found = await queue.run_info()
    if found is None:
        raise ConfigError(f"{run_dir}: the database has no run {name!r}")
    return _where_it_is(stored_config(found, db), run_dir, db)


def _where_it_is(config: SweepConfig, run_dir: Path, db: str | None) -> SweepConfig:
    """``config`` with ``run_dir`` as its output folder, and its SQLite file unless ``db`` is given."""
    here = run_dir.absolute()
    return config.model_copy(update={"output": here, "db": db or f"sqlite:///{here / 'knowwhen.db'}"})
