"""The response cache: one store of model responses shared by every run that reaches it.

A store maps a content-addressed key (``provider.cache_keys``) to the response a model gave, with the
litellm model string that gave it. It lives apart from the run's queue: by default a SQLite file in the
user's cache folder (``$KNOWWHEN_CACHE_DIR``), so runs of different configs, months apart, share their
answers; for a run on PostgreSQL the run's database, so a fleet of machines shares it; or wherever the
config's ``cache: {path | url}`` says. The first response stored for a key is the one everybody reads
(``put`` keeps it; only the ``refresh`` policy overwrites). Errors are never cached.

Read in this order: ``store`` (the protocol and its entries), ``cache_url`` here (where a config's store
is), ``sql`` (SQLite and
PostgreSQL, or a SQLite database in memory; the only module here touching SQL), ``bundle`` (replay
bundles: export and import).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .store import CacheEntry, CacheStore, StoredEntry, describe_url

if TYPE_CHECKING:
    from ..config import SweepConfig

__all__ = [
    "CACHE_DIR_ENV",
    "CacheEntry",
    "CacheStore",
    "StoredEntry",
    "cache_url",
    "describe_url",
    "open_cache",
    "user_cache_dir",
]

CACHE_DIR_ENV = "KNOWWHEN_CACHE_DIR"
"""Environment variable naming the folder of the user-level cache file (default: the platform's)."""
_USER_FILE = "responses.db"


def user_cache_dir() -> Path:
    """The folder of the user-level cache: ``$KNOWWHEN_CACHE_DIR``, else the platform's user cache folder."""
    given = os.environ.get(CACHE_DIR_ENV)
    if given:
        return Path(given).expanduser()
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "knowwhen"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "knowwhen" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache") / "knowwhen"


def cache_url(config: SweepConfig) -> str:
    """The URL of the store a config's run uses (see ``CacheSettings``)."""
    settings = config.cache
    if settings.url:
        return settings.url
    if settings.path is not None:
        return f"sqlite:///{settings.path}"
    store = settings.store or ("run" if config.db_url.startswith("postgresql") else "user")
    if store == "run":
        return config.db_url
    return f"sqlite:///{user_cache_dir() / _USER_FILE}"


def open_cache(url: str) -> CacheStore:
    """Open the store at ``url`` (``sqlite:///path``, ``postgresql://...``, or ``memory://``: a SQLite
    database in memory, its own, gone once closed)."""
    from .sql import SqlCacheStore  # start-up: SQLAlchemy, only when a SQL store is opened

    return SqlCacheStore(url)
