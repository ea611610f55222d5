"""Tables beside the job queue: the worker registry and the response cache (SQL backends).

A mixin of ``SqlQueue``: it uses the queue's ``_call`` (the database thread), ``_engine``, ``_insert``
and ``_clock``, and exists only to keep the queue's module readable in one sitting.
"""

from __future__ import annotations

import os
import socket
from typing import Any, TypeVar

import orjson
from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine

from . import schema as s
from .engine import DbClock, OnOneThread

__all__ = ["SideTables"]

T = TypeVar("T")


class SideTables(OnOneThread):
    """Worker and cache operations of ``SqlQueue``."""

    run: str
    _engine: Engine
    _clock: DbClock

    def _insert(self, table: Any) -> Any:
        raise NotImplementedError

    @property
    def _bulk(self) -> bool:
        raise NotImplementedError

    # -- workers --------------------------------------------------------------------------------------

    async def register_worker(self, worker: str) -> None:
        await self._call(self._register_worker, worker)

    def _register_worker(self, worker: str) -> None:
        now = self._clock.expr()
        with self._engine.begin() as conn:
            conn.execute(
                self._insert(s.workers)
                .values(
                    id=worker,
                    run=self.run,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    started_at=now,
                    heartbeat_at=now,
                    jobs_done=0,
                )
                .on_conflict_do_nothing()
            )

    async def stop_worker(self, worker: str) -> None:
        await self._call(self._stop_worker, worker)

    def _stop_worker(self, worker: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                update(s.workers).where(s.workers.c.id == worker).values(stopped_at=self._clock.expr())
            )

    async def workers(self) -> list[dict[str, Any]]:
        return await self._call(self._workers)

    def _workers(self) -> list[dict[str, Any]]:
        """Worker rows, with ``now`` read from the same clock as their heartbeats (for their age)."""
        q = select(s.workers, self._clock.expr().label("now")).where(s.workers.c.run == self.run)
        with self._reading() as conn:
            rows = [dict(r._mapping) for r in conn.execute(q.order_by(s.workers.c.started_at))]
        for row in rows:
            row["heartbeat_age_s"] = max(0.0, row.pop("now") - row["heartbeat_at"])
        return rows

    # -- cache ----------------------------------------------------------------------------------------

    async def cache_get(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        return await self._call(self._cache_get, keys) if keys else {}

    def _cache_get(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        with self._reading() as conn:
            for chunk in range(0, len(keys), 500):
                q = select(s.cache.c.key, s.cache.c.response).where(
                    s.cache.c.key.in_(keys[chunk : chunk + 500])
                )
                out.update({k: orjson.loads(v) for k, v in conn.execute(q)})
        return out

    async def cache_put(self, entries: list[tuple[str, str, dict[str, Any]]]) -> None:
        if entries:
            await self._call(self._cache_put, entries)

    def _cache_put(self, entries: list[tuple[str, str, dict[str, Any]]]) -> None:
        rows = [(k, m, orjson.dumps(r).decode()) for k, m, r in entries]
        stamp = self._clock.params()["now"]  # informational only: nothing compares it across machines
        with self._engine.begin() as conn:
            self._write_cache_rows(conn, rows, stamp)

    def _write_cache_rows(self, conn: Any, rows: list[tuple[str, str, str]], stamp: float) -> None:
        """Upsert (key, model, response JSON) rows; on SQLite as one statement over a JSON array."""
        if self._bulk:
            conn.exec_driver_sql(
                "INSERT INTO kw_cache (key, model, response, created_at) SELECT json_extract(value, '$[0]'), "
                "json_extract(value, '$[1]'), json_extract(value, '$[2]'), ? FROM json_each(?) WHERE true "
                "ON CONFLICT (key) DO UPDATE SET response = excluded.response, created_at = excluded.created_at",
                (stamp, orjson.dumps(rows).decode()),
            )
            return
        values = [{"key": k, "model": m, "response": r, "created_at": stamp} for k, m, r in rows]
        stmt = self._insert(s.cache)
        stmt = stmt.on_conflict_do_update(
            index_elements=["key"],
            set_={"response": stmt.excluded.response, "created_at": stmt.excluded.created_at},
        )
        conn.execute(stmt, values)

    async def cache_stats(self) -> dict[str, int]:
        return await self._call(self._cache_stats)

    def _cache_stats(self) -> dict[str, int]:
        q = select(s.cache.c.model, func.count()).group_by(s.cache.c.model)
        with self._reading() as conn:
            return {m: int(n) for m, n in conn.execute(q)}

    async def cache_clear(self, model: str | None = None) -> int:
        return await self._call(self._cache_clear, model)

    def _cache_clear(self, model: str | None) -> int:
        stmt = s.cache.delete()
        if model is not None:
            stmt = stmt.where(s.cache.c.model == model)
        with self._engine.begin() as conn:
            return int(conn.execute(stmt).rowcount or 0)
