"""The run's own rows of ``SqlQueue``: the run and its meta, enqueueing jobs and items, who finalises.

A mixin, like ``side_tables``: it uses the queue's ``_call``, ``_engine``, ``_clock``, ``_insert`` and
``_params``. Enqueueing goes through the driver's executemany (a resume reads what exists and inserts
only the rest); a plan that no longer holds a job sets it aside rather than deleting it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Set as AbstractSet
from typing import Any

import orjson
from sqlalchemy import select, text, update

from ..exceptions import QueueError
from ..jobs import Items, Job
from . import schema as s
from .engine import RunStatements, safe_url
from .roles import ASIDE
from .tallies import kept_key

__all__ = ["RunTables"]

_OPEN = "('pending', 'running')"
# A screen's dropped models: their pending jobs wait for a run without the screen, the run is finished.
_SCREENED_OUT = "(SELECT model_id FROM kw_model_controls WHERE run = :run AND state = 'screened')"
_UNFINISHED = "('pending', 'running', 'failed')"  # a failed job may be requeued by any process


class RunTables(RunStatements):
    """The run, its items and jobs as enqueued, and the stage and finalise claims of ``SqlQueue``."""

    def single_run_name(self) -> str:
        """The name of the only run in this database (for commands given just a run folder)."""
        names = self._call_blocking(self._run_names)  # waits out a database away for now
        if not names:
            raise QueueError(f"{safe_url(self.url)}: the database has no run; run it first")
        if len(names) != 1:
            raise QueueError(
                f"{safe_url(self.url)}: expected one run, found {', '.join(names)}; name one with --run"
            )
        return names[0]

    def _run_names(self) -> list[str]:
        with self._reading() as conn:
            return [r[0] for r in conn.execute(select(s.runs.c.name).order_by(s.runs.c.name))]

    # -- runs and items -------------------------------------------------------------------------------

    async def init_run(self, config_text: str, meta: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self._init_run, config_text, meta)

    def _init_run(self, config_text: str, meta: dict[str, Any]) -> dict[str, Any]:
        with self._engine.begin() as conn:
            stmt = self._insert(s.runs).values(
                name=self.run,
                config_text=config_text,
                meta=orjson.dumps(meta).decode(),
                created_at=self._clock.expr(),
            )
            # A rerun records its config (workers that join later read it); the first meta stays.
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["name"], set_={"config_text": stmt.excluded.config_text}
                )
            )
        info = self._run_info()
        assert info is not None
        return info

    async def run_info(self) -> dict[str, Any] | None:
        return await self._call(self._run_info)

    def _run_info(self) -> dict[str, Any] | None:
        with self._reading() as conn:
            row = conn.execute(select(s.runs).where(s.runs.c.name == self.run)).first()
        if row is None:
            return None
        return {
            "name": row.name,
            "config_text": row.config_text,
            "meta": orjson.loads(row.meta),
            "created_at": row.created_at,
            "finalized_at": row.finalized_at,
            "finalized_by": row.finalized_by,
        }

    async def update_meta(self, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the run's meta (top-level keys replaced); returns the new meta."""
        return await self._call(self._update_meta, patch)

    def _update_meta(self, patch: dict[str, Any]) -> dict[str, Any]:
        with self._engine.begin() as conn:
            raw = conn.execute(select(s.runs.c.meta).where(s.runs.c.name == self.run)).scalar()
            if raw is None:
                raise QueueError(f"{safe_url(self.url)}: run {self.run!r} is not in this database")
            meta = {**orjson.loads(raw), **patch}
            conn.execute(
                update(s.runs).where(s.runs.c.name == self.run).values(meta=orjson.dumps(meta).decode())
            )
        return meta

    async def enqueue(
        self,
        jobs: list[Job],
        items: Items,
        *,
        whole_plan: AbstractSet[str] | None = None,
    ) -> int:
        return await self._call(self._enqueue, jobs, items, whole_plan)

    def _enqueue(
        self,
        jobs: list[Job],
        items: Items,
        whole_plan: AbstractSet[str] | None,
    ) -> int:
        # Resume is the common case (most jobs already there): read what exists, insert only the rest,
        # through the driver's executemany (SQLAlchemy's per-row parameter handling costs seconds at 150k).
        ph = self._placeholder
        with self._engine.begin() as conn:
            have_items = {
                (r[0], r[1])
                for r in conn.exec_driver_sql(
                    f"SELECT scenario, item FROM kw_items WHERE run = {ph}", (self.run,)
                )
            }
            new_items = [
                (self.run, sc, it, orjson.dumps(p).decode())
                for (sc, it), p in items.items()
                if (sc, it) not in have_items
            ]
            statuses: dict[str, str] = {
                r[0]: r[1]
                for r in conn.exec_driver_sql(f"SELECT id, status FROM kw_jobs WHERE run = {ph}", (self.run,))
            }
            changed = self._set_plan(conn, statuses, whole_plan) if whole_plan is not None else 0
            conflict = " ON CONFLICT DO NOTHING"
            for chunk in range(0, len(new_items), 5000):
                conn.exec_driver_sql(
                    f"INSERT INTO kw_items (run, scenario, item, payload) VALUES ({ph}, {ph}, {ph}, {ph}){conflict}",
                    new_items[chunk : chunk + 5000],
                )
            added = self._insert_jobs(conn, jobs, set(statuses))
            if added or changed:
                self._unmark_finalized(conn)
        return added

    def _insert_jobs(self, conn: Any, jobs: list[Job], have_jobs: set[str]) -> int:
        """Insert the jobs not in ``have_jobs``, 5,000 rows at a time (memory follows the batch, not the
        plan); how many were new."""
        ph = self._placeholder
        insert = (
            "INSERT INTO kw_jobs (run, id, model_id, mode, scenario, item, payload, draw, status, attempts) "
            f"VALUES ({ph}, {ph}, {ph}, {ph}, {ph}, {ph}, {ph}, {ph}, 'pending', 0) ON CONFLICT DO NOTHING"
        )
        added = 0
        rows: list[tuple[str | int, ...]] = []
        for j in jobs:
            if j.id not in have_jobs:
                have_jobs.add(j.id)
                rows.append(
                    (
                        self.run,
                        j.id,
                        j.model_id,
                        j.mode,
                        j.scenario_id,
                        j.item,
                        orjson.dumps(j.payload).decode(),
                        j.draw,
                    )
                )
            if len(rows) == 5000:
                conn.exec_driver_sql(insert, rows)
                added, rows = added + len(rows), []
        if rows:
            conn.exec_driver_sql(insert, rows)
        return added + len(rows)

    def _set_plan(self, conn: Any, statuses: dict[str, str], plan: AbstractSet[str]) -> int:
        """Set aside the jobs ``plan`` does not hold, and bring back the set-aside ones it holds again."""
        ph = self._placeholder
        leave = [(self.run, i) for i, st in statuses.items() if i not in plan and not st.startswith(ASIDE)]
        back = [(self.run, i) for i, st in statuses.items() if i in plan and st.startswith(ASIDE)]
        aside = (
            f"UPDATE kw_jobs SET status = CASE status WHEN 'running' THEN '{ASIDE}pending' "
            f"ELSE '{ASIDE}' || status END, lease_owner = NULL WHERE run = {ph} AND id = {ph}"
        )
        live = f"UPDATE kw_jobs SET status = SUBSTR(status, {len(ASIDE) + 1}) WHERE run = {ph} AND id = {ph}"
        for sql, rows in ((aside, leave), (live, back)):
            for chunk in range(0, len(rows), 5000):
                conn.exec_driver_sql(sql, rows[chunk : chunk + 5000])
        if leave or back:  # each model's kept sums of done jobs no longer hold (``tallies``)
            conn.exec_driver_sql(f"DELETE FROM kw_meta WHERE key = {ph}", (kept_key(self.run),))
        return len(leave) + len(back)

    def _unmark_finalized(self, conn: Any) -> None:
        conn.execute(
            update(s.runs).where(s.runs.c.name == self.run).values(finalized_at=None, finalized_by=None)
        )

    async def items(self, scenario_id: str | None = None, *, of_open_jobs: bool = False) -> Items:
        return await self._call(self._items, scenario_id, of_open_jobs)

    def _items(self, scenario_id: str | None, of_open_jobs: bool) -> Items:
        if of_open_jobs:  # the open jobs by the status index, then their items by key: O(work left)
            sql = (
                "SELECT i.scenario, i.item, i.payload FROM (SELECT DISTINCT scenario, item FROM kw_jobs "
                f"WHERE run = :run AND status IN {_UNFINISHED}) AS o JOIN kw_items i ON i.run = :run "
                "AND i.scenario = o.scenario AND i.item = o.item"
                + (" WHERE i.scenario = :scenario" if scenario_id is not None else "")
            )
            with self._reading() as conn:
                rows = conn.execute(text(sql), {"run": self.run, "scenario": scenario_id})
                return {(r[0], r[1]): orjson.loads(r[2]) for r in rows}
        q = select(s.items.c.scenario, s.items.c.item, s.items.c.payload).where(s.items.c.run == self.run)
        if scenario_id is not None:
            q = q.where(s.items.c.scenario == scenario_id)
        with self._reading() as conn:
            return {(r[0], r[1]): orjson.loads(r[2]) for r in conn.execute(q)}

    async def take_stage(self, stage: str, worker: str) -> str:
        return await self._call(self._take_stage, stage, worker)

    def _take_stage(self, stage: str, worker: str) -> str:
        key = "stage:" + hashlib.sha256(f"{self.run}\0{stage}".encode()).hexdigest()[:40]
        with self._engine.begin() as conn:
            conn.execute(self._insert(s.meta).values(key=key, value=worker).on_conflict_do_nothing())
            return str(conn.execute(select(s.meta.c.value).where(s.meta.c.key == key)).scalar_one())

    async def take_finalize(self, worker: str) -> bool:
        return await self._call(self._take_finalize, worker)

    def _take_finalize(self, worker: str) -> bool:
        stmt = text(
            f"UPDATE kw_runs SET finalized_at = {self._clock.sql}, finalized_by = :w WHERE name = :run "
            "AND finalized_at IS NULL AND NOT EXISTS (SELECT 1 FROM kw_jobs WHERE run = :run "
            f"AND status IN {_OPEN} AND NOT (status = 'pending' AND model_id IN {_SCREENED_OUT}))"
        )
        with self._engine.begin() as conn:
            return bool(conn.execute(stmt, self._params(w=worker)).rowcount)

    async def release_finalize(self, worker: str) -> None:
        await self._call(self._release_finalize, worker)

    def _release_finalize(self, worker: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                update(s.runs)
                .where(s.runs.c.name == self.run, s.runs.c.finalized_by == worker)
                .values(finalized_at=None, finalized_by=None)
            )
