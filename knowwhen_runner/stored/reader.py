"""A run kept in its database, reopened: its queue by its folder or a URL, and the config stored with it.

Below both the sweep (``sweep/``) and the viewer (``view/``), which read runs the same way; ``stored.run_meta``
adds what a run records when it starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import SweepConfig, parse_config
from ..exceptions import ConfigError
from ..messages import say
from ..queue import Queue, find_run_name, open_queue

__all__ = ["RUN_MARK", "open_existing", "stored_config", "with_db"]

#: The file that marks a folder as a knowwhen run folder.
RUN_MARK = ".knowwhen-run"


def with_db(config: SweepConfig, db: str | None) -> SweepConfig:
    """The config with its database replaced by ``db`` (``--db``), when given."""
    return config.model_copy(update={"db": db}) if db else config


def stored_config(info: dict[str, Any], db: str | None = None, *, require_files: bool = True) -> SweepConfig:
    """The config stored with a run (``Queue.run_info()``), validated like a config file.

    ``require_files=False`` is for a machine that may have none of the scenario files (a worker reads
    its items from the database). ``${VAR}`` references are expanded from this machine's environment.
    Given the run's own SQLite file as ``db``, in a run folder, its output folder is that folder.
    """
    config = parse_config(
        info["config_text"],
        base=Path((info.get("meta") or {}).get("base_dir", ".")),
        source=f"run {info['name']!r} (stored config)",
        check_files=require_files,
        stored=True,
    )
    if config.db is None and db is not None and db.startswith("sqlite:///"):
        # The run's SQLite file in a run folder (the config names no other database): the folder is
        # where that file is now, wherever the config said it was when the run started.
        folder = Path(db.removeprefix("sqlite:///")).absolute().parent
        if (folder / RUN_MARK).is_file():
            config = config.model_copy(update={"output": folder})
    return with_db(config, db)


def open_existing(run_dir: Path, db: str | None, run: str | None) -> tuple[Queue, str]:
    """The queue of an existing run: by its folder (its SQLite file) or by ``db`` and ``run``."""
    if db is None:
        db_file = run_dir / "knowwhen.db"
        if not db_file.is_file():
            raise ConfigError(
                f"{run_dir}: no run here (no knowwhen.db); give the run folder of a config's output"
            )
        if db_file.stat().st_size == 0:  # what a run killed as it created its file leaves: left as it is
            raise ConfigError(say("db.empty_file", db=db_file))
        db = f"sqlite:///{db_file}"
    if run is None:
        run = find_run_name(db)
    return open_queue(db, run), run
