"""Tables beside the job queue: the worker registry (SQL backends).

A mixin of ``SqlQueue``: it uses the queue's ``_call`` (the database thread), ``_engine``, ``_insert``
and ``_clock``, and exists only to keep the queue's module readable in one sitting.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from sqlalchemy import select, update

from . import schema as s
from .engine import RunStatements

__all__ = ["SideTables"]


class SideTables(RunStatements):
    """Worker operations of ``SqlQueue``."""

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
