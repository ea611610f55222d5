"""A run kept in its database: reopened by its folder or a URL, and the commands over it.

Read in this order: ``reader`` (its queue and its stored config, as the sweep and the viewer read them),
``run_meta`` (what ``run`` records with it), ``pause`` (pause and resume a model), ``cache_commands``
(``knowwhen cache``), ``export`` (a stored run as a dataset folder).
"""

from __future__ import annotations

from .cache_commands import cache_export, cache_import, cache_report, store_url
from .pause import pause_model, resume_model
from .reader import open_existing, stored_config
from .run_meta import config_from_run

__all__ = [
    "cache_export",
    "cache_import",
    "cache_report",
    "config_from_run",
    "open_existing",
    "pause_model",
    "resume_model",
    "store_url",
    "stored_config",
]
