"""A response store in SQLite (the user-level file, or any named file) or PostgreSQL (a fleet's database).

One table, ``kw_cache`` (key, model, response JSON, created_at): the table runs of earlier releases kept
in their run database, so a PostgreSQL fleet that used it reads its entries as they are, and the entries
of an older SQLite run can be copied over unchanged (``copy_from``). Writes insert with ``ON CONFLICT DO
NOTHING`` (the first answer for a key wins, however many processes write it at once) except on
``overwrite`` (the ``refresh`` policy). The work runs on one background thread (``queue.engine``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import anyio.to_thread
import orjson
from sqlalchemy import Column, Float, MetaData, String, Table, Text, func, inspect, select, text

from ..exceptions import QueueError
from ..queue.engine import OnOneThread, make_engine, on_db_thread, safe_url
from ..queue.outage import wait_for_lock
from .store import CacheEntry, StoredEntry, describe_url

__all__ = ["CACHE_SCHEMA_VERSION", "SqlCacheStore"]

CACHE_SCHEMA_VERSION = 1
_CHUNK = 500  # keys per IN (...) lookup

_metadata = MetaData()
_entries = Table(
    "kw_cache",
    _metadata,
    Column("key", String(64), primary_key=True),
    Column("model", String(256), nullable=False),
    Column("response", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
_info = Table(
    "kw_cache_info",
    _metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
_LOCK = 0x6B77_6361  # pg_advisory_xact_lock key: one process creates the tables at a time


class SqlCacheStore(OnOneThread):
    """A ``CacheStore`` in a SQLite file or a PostgreSQL database."""

    _what = "response cache: "

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine = make_engine(url)
        self.dialect = self._engine.dialect.name
        self._ph = "%s" if self.dialect == "postgresql" else "?"
        self.location = describe_url(url)

    def _ensure_schema(self) -> None:
        with self._engine.begin() as conn:
            if self.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK})
            _metadata.create_all(conn)
            found = conn.execute(select(_info.c.value).where(_info.c.key == "schema_version")).scalar()
            if found is None:
                conn.execute(_info.insert().values(key="schema_version", value=str(CACHE_SCHEMA_VERSION)))
            elif found != str(CACHE_SCHEMA_VERSION):
                raise QueueError(
                    f"{self.location}: response cache of another knowwhen_runner (cache schema {found}, "
                    f"this one reads {CACHE_SCHEMA_VERSION}); name another with cache: {{path: ...}}"
                )

    # -- lookups and writes ----------------------------------------------------------------------------

    async def get(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        return await self._call(self._get, list(keys)) if keys else {}

    def _get(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        with self._reading() as conn:
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ", ".join([self._ph] * len(chunk))
                rows = conn.exec_driver_sql(
                    f"SELECT key, response FROM kw_cache WHERE key IN ({marks})", tuple(chunk)
                )
                out.update({k: orjson.loads(v) for k, v in rows})
        return out

    async def put(self, entries: Sequence[CacheEntry], *, overwrite: bool = False) -> int:
        if not entries:
            return 0
        now = time.time()  # informational (and for prune): nothing compares it across machines
        rows = [(e.key, e.model, orjson.dumps(e.response).decode(), now) for e in entries]
        return await self._call(self._write, rows, overwrite)

    async def put_stored(self, rows: Sequence[StoredEntry]) -> int:
        return await self._call(self._write, [tuple(r) for r in rows], False) if rows else 0

    def _write(self, rows: list[tuple[str, str, str, float]], overwrite: bool) -> int:
        ph = self._ph
        conflict = (
            "DO UPDATE SET response = excluded.response, model = excluded.model, "
            "created_at = excluded.created_at"
            if overwrite
            else "DO NOTHING"
        )
        sql = (
            f"INSERT INTO kw_cache (key, model, response, created_at) VALUES ({ph}, {ph}, {ph}, {ph}) "
            f"ON CONFLICT (key) {conflict}"
        )
        with self._engine.begin() as conn:
            # The driver's executemany: its rowcount is the total of rows written (sqlite3, psycopg 3).
            return int(conn.exec_driver_sql(sql, rows).rowcount or 0)

    # -- housekeeping ----------------------------------------------------------------------------------

    async def scan(self, after: str, limit: int, models: Sequence[str] | None = None) -> list[StoredEntry]:
        return await self._call(self._scan, after, limit, None if models is None else list(models))

    def _scan(self, after: str, limit: int, models: list[str] | None) -> list[StoredEntry]:
        q = select(_entries.c.key, _entries.c.model, _entries.c.response, _entries.c.created_at).where(
            _entries.c.key > after
        )
        if models is not None:
            q = q.where(_entries.c.model.in_(models))
        with self._reading() as conn:
            return [StoredEntry(*r) for r in conn.execute(q.order_by(_entries.c.key).limit(limit))]

    @on_db_thread
    def stats(self) -> dict[str, int]:
        q = select(_entries.c.model, func.count()).group_by(_entries.c.model)
        with self._reading() as conn:
            return {m: int(n) for m, n in conn.execute(q)}

    @on_db_thread
    def prune(self, *, model: str | None = None, older_than_s: float | None = None) -> int:
        stmt = _entries.delete()
        if model is not None:
            stmt = stmt.where(_entries.c.model == model)
        if older_than_s is not None:
            stmt = stmt.where(_entries.c.created_at < time.time() - older_than_s)
        with self._engine.begin() as conn:
            return int(conn.execute(stmt).rowcount or 0)

    # -- the cache of an earlier release -------------------------------------------------------------

    async def has_entries_table(self) -> bool:
        """Whether the database holds a ``kw_cache`` table already (without creating one)."""

        def probe() -> bool:
            with self._engine.connect() as conn:
                return inspect(conn).has_table("kw_cache")

        # Not ``_call``, which would create the table first; a lock held elsewhere is waited for all the same.
        return await anyio.to_thread.run_sync(wait_for_lock, probe, safe_url(self.url))
