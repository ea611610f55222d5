"""Entries of runs made before the shared store: moved from a run's database into the store it uses now.

Runs of earlier releases kept their responses in their own database's ``kw_cache`` table, under keys of
cache key version 1 (which held ``api_base``). When such a run is resumed with another store, its entries
are copied into that store under their old keys (the first answer stored for a key still wins), then
deleted from the run's (SQLite) database; a lookup that misses the current key tries the version-1 key
(``provider.cache_keys.legacy_cache_key``). A kill between copy and delete only repeats the copy.
"""

from __future__ import annotations

import anyio

from .store import CacheStore

__all__ = ["move_run_entries"]

_PAGE = 5000


async def move_run_entries(run_db_url: str, store: CacheStore, store_url: str) -> int:
    """Move the run database's own cache entries into ``store``; returns how many were moved."""
    if run_db_url == store_url or not run_db_url.startswith("sqlite:///"):
        return 0  # a PostgreSQL run database is shared: its entries stay for its other runs (store: run)
    if not await anyio.Path(run_db_url.removeprefix("sqlite:///")).is_file():
        return 0
    # start-up: SQLAlchemy, only when a SQLite run database has entries to move
    from .sql import SqlCacheStore

    old = SqlCacheStore(run_db_url)
    async with old:
        if not await old.has_entries_table():
            return 0
        moved, after = 0, ""
        while page := await old.scan(after, _PAGE):
            moved += len(page)
            await store.put_stored(page)
            after = page[-1].key
        if moved:
            await old.prune()
    return moved
