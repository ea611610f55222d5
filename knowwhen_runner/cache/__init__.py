"""The response cache: one store of model responses shared by every run that reaches it.

A store maps a content-addressed key (``provider.cache_keys``) to the response a model gave, with the
litellm model string that gave it. It lives apart from the run's queue: by default a SQLite file in the
user's cache folder (``$KNOWWHEN_CACHE_DIR``), so runs of different configs, months apart, share their
answers; for a run on PostgreSQL the run's database, so a fleet of machines shares it; or wherever the
config's ``cache: {path | url}`` says. The first response stored for a key is the one everybody reads
(``put`` keeps it; only the ``refresh`` policy overwrites). Errors are never cached.

Read in this order: this protocol and ``cache_url`` (where a config's store is), ``sql`` (SQLite and
PostgreSQL; the only module here touching SQL), ``memory`` (for in-process tests), ``bundle`` (replay
bundles: export and import).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

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


class CacheEntry(NamedTuple):
    """One response to store: its key, the litellm model string that answered, the normalised response."""

    key: str
    model: str
    response: dict[str, Any]


class StoredEntry(NamedTuple):
    """One stored entry as it sits in a store (the response as its JSON text), for export and import."""

    key: str
    model: str
    response_json: str
    created_at: float


class CacheStore(Protocol):
    """What runs, reports and ``knowwhen cache`` may ask of a response store."""

    location: str
    """Where the store is, for people (a file path, or a database URL with its password hidden)."""

    async def get(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored responses of those keys that are in the store (one query per 500 keys)."""
        ...

    async def put(self, entries: Sequence[CacheEntry], *, overwrite: bool = False) -> int:
        """Store entries; a key already stored keeps its response unless ``overwrite``. Returns rows written."""
        ...

    async def put_stored(self, rows: Sequence[StoredEntry]) -> int:
        """Store entries as exported (first stored wins); returns how many were new."""
        ...

    async def scan(self, after: str, limit: int, models: Sequence[str] | None = None) -> list[StoredEntry]:
        """Up to ``limit`` entries with keys after ``after``, in key order (of ``models`` only, if given)."""
        ...

    async def stats(self) -> dict[str, int]:
        """Entries per litellm model string."""
        ...

    async def prune(self, *, model: str | None = None, older_than_s: float | None = None) -> int:
        """Delete the entries of ``model`` and/or stored more than ``older_than_s`` ago; returns how many."""
        ...

    async def close(self) -> None: ...
    async def __aenter__(self) -> CacheStore: ...
    async def __aexit__(self, *exc: object) -> None: ...


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


def describe_url(url: str) -> str:
    """A store's URL for people: a SQLite file's path, or the URL with any password hidden."""
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    # start-up: SQLAlchemy, only to show a database URL
    from ..queue.engine import safe_url

    return safe_url(url)


def open_cache(url: str) -> CacheStore:
    """Open the store at ``url`` (``memory://``, ``sqlite:///path``, ``postgresql://...``)."""
    if url.startswith("memory://"):
        from .memory import MemoryCacheStore  # start-up: each backend is loaded when a store is opened

        return MemoryCacheStore()
    from .sql import SqlCacheStore  # start-up: SQLAlchemy, only when a SQL store is opened

    return SqlCacheStore(url)
