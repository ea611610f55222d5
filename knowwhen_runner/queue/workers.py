"""The fleet's workers: the registry the SQL backends keep, and whether each is working, silent or stopped.

``WorkerTables`` is a part of ``SqlQueue`` (the registry is in the worker's seam, ``WorkerQueue``).
``describe_workers`` is one rule, read from the rows ``Queue.workers()`` keeps by the run's start (are
others working?), ``status`` and the viewer's live page; it lives below all of them so none reaches up
into another for it.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from sqlalchemy import select, update

from . import schema as s
from .engine import RunStatements, on_db_thread

__all__ = ["SILENT_AFTER_S", "WorkerTables", "describe_workers"]

#: A running worker not heard from for this long is taken to be gone (status shows it as silent).
SILENT_AFTER_S = 30.0


def describe_workers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Workers as status shows them: state, seconds since their last heartbeat, jobs and jobs/s."""
    described = []
    for row in rows:
        age = float(row.get("heartbeat_age_s") or 0.0)
        if row.get("stopped_at"):
            state, until = "stopped", float(row["stopped_at"])
        else:
            state, until = ("silent" if age > SILENT_AFTER_S else "working"), float(row["heartbeat_at"])
        span = max(1e-9, until - float(row["started_at"]))
        described.append(
            {
                "id": row["id"],
                "host": row["host"],
                "pid": row["pid"],
                "state": state,
                "heartbeat_age_s": age,
                "jobs_done": int(row["jobs_done"]),
                "jobs_per_s": int(row["jobs_done"]) / span if row["jobs_done"] else 0.0,
            }
        )
    return described


class WorkerTables(RunStatements):
    """Worker operations of ``SqlQueue``."""

    # -- workers --------------------------------------------------------------------------------------

    @on_db_thread
    def register_worker(self, worker: str) -> None:
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

    @on_db_thread
    def stop_worker(self, worker: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                update(s.workers).where(s.workers.c.id == worker).values(stopped_at=self._clock.expr())
            )

    @on_db_thread
    def workers(self) -> list[dict[str, Any]]:
        """Worker rows, with ``now`` read from the same clock as their heartbeats (for their age)."""
        q = select(s.workers, self._clock.expr().label("now")).where(s.workers.c.run == self.run)
        with self._reading() as conn:
            rows = [dict(r._mapping) for r in conn.execute(q.order_by(s.workers.c.started_at))]
        for row in rows:
            row["heartbeat_age_s"] = max(0.0, row.pop("now") - row["heartbeat_at"])
        return rows
