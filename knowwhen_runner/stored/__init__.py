"""A run kept in its database: reopened by its folder or a URL, and the commands over it.

Read in this order: ``reader`` (its queue and its stored config, as the sweep and the viewer read
them), ``run_meta`` (what ``run`` records with it), ``status`` (jobs, cost, pace and ETA per model),
``pause`` (pause and resume a model), ``cache_commands`` (``knowwhen cache``), ``export`` (a stored run
as a dataset folder).
"""

from __future__ import annotations

from .cache_commands import cache_export, cache_import, cache_report, store_url
from .pause import pause_model, resume_model
from .reader import open_existing, stored_config, with_db
from .run_meta import config_from_run, run_meta
from .status import status_report

__all__ = [
    "cache_export",
    "cache_import",
    "cache_report",
    "config_from_run",
    "open_existing",
    "pause_model",
    "resume_model",
    "run_meta",
    "status_report",
    "store_url",
    "stored_config",
    "with_db",
]
