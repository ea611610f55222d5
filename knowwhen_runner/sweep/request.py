"""What ``knowwhen run`` is asked to do with one config file: the CLI builds it from its options."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from .preflight import Preflight

__all__ = ["RunRequest"]


@dataclass(frozen=True)
class RunRequest:
    """One ``knowwhen run``: the config file, where its queue is, who works it, and what happens before
    and after the work."""

    config_path: Path
    _: KW_ONLY
    db: str | None = None  # a database URL in place of the config's (``--db``)
    processes: int = 1  # processes on this machine working the run, this one included
    retry_failed: bool = False  # re-queue the jobs that failed for good first
    finalize: bool = True  # write answers and tables once nothing is open
    progress: bool = True  # show the progress bar
    plan_only: bool = False  # put the first stage's plan in the queue and stop (workers join later)
    preflight: Preflight | None = None  # check the models before working (None: no check)
    replace_config: bool = False  # on a shared database, replace the run's stored config
