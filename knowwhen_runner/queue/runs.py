"""The run's own rows of ``SqlQueue``: the run and its meta, enqueueing jobs and items, who finalises.

A mixin, like ``side_tables``: it uses the queue's ``_call``, ``_engine``, ``_clock``, ``_insert`` and
``_params``. Enqueueing goes through the driver's executemany (a resume reads what exists and inserts
only the rest); a plan that no longer holds a job sets it aside rather than deleting it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import closing
from itertools import islice
from typing import Any, TypeVar

import orjson
from sqlalchemy import case, select, text, update

from ..exceptions import QueueError
from ..jobs import WHOLE_RUN, Cell, CellRows, Items, Job, JobRow, JobRows, job_rows
from ..messages import say
from . import schema as s
from .engine import RunStatements, on_db_thread, safe_url
from .first_plan import copy_jobs, defer_indexes, insert_cell, plan_cache
from .roles import ASIDE
from .tallies import kept_key

__all__ = ["RunTables"]

_OPEN = "('pending', 'running')"
# A screen's dropped models: their pending jobs wait for a run without the screen, the run is finished.
_SCREENED_OUT = "(SELECT model_id FROM kw_model_controls WHERE run = :run AND state = 'screened')"
_UNFINISHED = "('pending', 'running', 'failed')"  # a failed job may be requeued by any process
_DRAW_CHUNK = 500  # items given their drawn places per statement
_BATCH = 50_000  # job rows inserted per statement
_AFTER_ASIDE = ASIDE[:-1] + chr(ord(ASIDE[-1]) + 1)  # the first status after every ``aside:...``

T = TypeVar("T")


def _batches(values: Iterable[T], size: int) -> Iterator[list[T]]:
    it = iter(values)
    while batch := list(islice(it, size)):
        yield batch


def _row_batches(run: str, jobs: Iterable[Job] | JobRows) -> Generator[list[JobRow] | CellRows, None, None]:
    """The jobs as rows of ``run``, 50,000 at most a batch, each batch in id order: each index's pages are
    then visited in order, not at random (SQLite spends half the CPU of a large plan on index pages its
    cache keeps losing otherwise). A plan's grid gives its rows itself (no ``Job`` made for each)."""
    yield from jobs.row_batches(run, _BATCH) if isinstance(jobs, JobRows) else job_rows(run, jobs, _BATCH)


def _scope(cell: Cell, ph: str) -> tuple[str, tuple[str, ...]]:
    """The SQL condition (after ``run = ...``) that picks a cell's jobs, and its parameters."""
    if cell == WHOLE_RUN:
        return "", ()
    if cell.model_id is None or cell.mode is None:
        return f" AND scenario = {ph}", (cell.scenario,)
    return f" AND scenario = {ph} AND model_id = {ph} AND mode = {ph}", (
        cell.scenario,
        cell.model_id,
        cell.mode,
    )


class RunTables(RunStatements):
    """The run, its items and jobs as enqueued, and the stage and finalise claims of ``SqlQueue``."""

    def single_run_name(self) -> str:
        """The name of the only run in this database (for commands given just a run folder)."""
        names = self._call_blocking(self._run_names)  # waits out a database away for now
        if not names:
            raise QueueError(say("db.no_run", url=safe_url(self.url)))
        if len(names) != 1:
            raise QueueError(
                f"{safe_url(self.url)}: expected one run, found {', '.join(names)}; name one with --run"
            )
        return names[0]

    def _run_names(self) -> list[str]:
        with self._reading() as conn:
            return [r[0] for r in conn.execute(select(s.runs.c.name).order_by(s.runs.c.name))]

    # -- runs and items -------------------------------------------------------------------------------

    @on_db_thread
    def init_run(self, config_text: str, meta: dict[str, Any]) -> dict[str, Any]:
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

    run_info = on_db_thread(_run_info)  # ``init_run`` reads it inside its own statement

    @on_db_thread
    def update_meta(self, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the run's meta (top-level keys replaced); returns the new meta."""
        with self._engine.begin() as conn:
            raw = conn.execute(select(s.runs.c.meta).where(s.runs.c.name == self.run)).scalar()
            if raw is None:
                raise QueueError(f"{safe_url(self.url)}: run {self.run!r} is not in this database")
            meta = {**orjson.loads(raw), **patch}
            conn.execute(
                update(s.runs).where(s.runs.c.name == self.run).values(meta=orjson.dumps(meta).decode())
            )
        return meta

    @on_db_thread
    def merge_meta(self, key: str, merge: Callable[[Any], Any]) -> Any:
        """Set the meta's ``key`` to ``merge(its value)`` with the run's row locked: two processes merging at
        once take turns, each merging into what the other wrote. Returns the value written."""
        with self._engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE serialises; PostgreSQL: FOR UPDATE
            found = select(s.runs.c.meta).where(s.runs.c.name == self.run).with_for_update()
            raw = conn.execute(found).scalar()
            if raw is None:
                raise QueueError(f"{safe_url(self.url)}: run {self.run!r} is not in this database")
            meta = orjson.loads(raw)
            meta[key] = merge(meta.get(key))
            conn.execute(
                update(s.runs).where(s.runs.c.name == self.run).values(meta=orjson.dumps(meta).decode())
            )
        return meta[key]

    @on_db_thread
    def set_draws(self, scenario_id: str, draws: dict[str, int]) -> int:
        """Give the jobs of ``scenario_id`` the claim order ``draws`` (by item), whatever their status; jobs
        of other items keep theirs. How many jobs changed."""
        t, changed, items = s.jobs, 0, sorted(draws)
        with self._engine.begin() as conn:
            for chunk in (items[i : i + _DRAW_CHUNK] for i in range(0, len(items), _DRAW_CHUNK)):
                place = case({item: draws[item] for item in chunk}, value=t.c.item)
                stmt = (
                    update(t)
                    .where(t.c.run == self.run, t.c.scenario == scenario_id, t.c.item.in_(chunk))
                    .where(t.c.draw != place)
                    .values(draw=place)
                )
                changed += int(conn.execute(stmt).rowcount or 0)
        return changed

    async def enqueue(
        self,
        jobs: Iterable[Job],
        items: Items,
        *,
        whole_plan: AbstractSet[str] | None = None,
        cells: Sequence[Cell] | None = None,
        keep: AbstractSet[str] = frozenset(),
    ) -> int:
        if whole_plan is not None:  # the plan's ids are known: they are its jobs and the ones kept
            jobs, cells, keep = list(jobs), [WHOLE_RUN], whole_plan
        return await self._call(self._enqueue, jobs, items, cells, keep)

    def _enqueue(
        self, jobs: Iterable[Job], items: Items, cells: Sequence[Cell] | None, keep: AbstractSet[str]
    ) -> int:
        # One transaction, whatever the plan's size; jobs are read in batches (``jobs`` may make them as
        # they are asked for), so memory follows the batch. With ``cells``, the ids given are noted in a
        # temporary table, and what those cells held besides them is set aside in SQL: no id of the run's
        # other jobs is ever read back. (A busy SQLite retries the whole transaction: ``jobs`` is read again.)
        with self._engine.begin() as conn, plan_cache(conn, self.dialect):
            self._insert_items(conn, items)
            if cells is not None:
                self._plan_ids(conn, "CREATE")
            deferred = defer_indexes(conn, self.dialect)
            added = 0
            with closing(_row_batches(self.run, jobs)) as batches:  # a child making rows ends with it
                for batch in batches:
                    added += self._insert_jobs(conn, batch)
                    if cells is not None:
                        self._note_ids(
                            conn, batch.ids if isinstance(batch, CellRows) else [r[1] for r in batch]
                        )
            for create in deferred:
                conn.exec_driver_sql(create)
            changed = 0
            if cells is not None:
                for chunk in _batches(sorted(keep), 5000):
                    self._note_ids(conn, chunk)
                changed = self._set_plan(conn, cells)
                self._plan_ids(conn, "DROP")
            if added or changed:
                self._unmark_finalized(conn)
        return added

    def _insert_items(self, conn: Any, items: Items) -> None:
        """Insert the items not in the run yet, 5,000 at a time (their JSON made batch by batch)."""
        ph = self._placeholder
        have = {
            (r[0], r[1])
            for r in conn.exec_driver_sql(
                f"SELECT scenario, item FROM kw_items WHERE run = {ph}", (self.run,)
            )
        }
        insert = f"INSERT INTO kw_items (run, scenario, item, payload) VALUES ({ph}, {ph}, {ph}, {ph}) ON CONFLICT DO NOTHING"
        for batch in _batches((key for key in items if key not in have), 5000):
            conn.exec_driver_sql(
                insert, [(self.run, sc, it, orjson.dumps(items[sc, it]).decode()) for sc, it in batch]
            )

    def _insert_jobs(self, conn: Any, rows: list[JobRow] | CellRows) -> int:
        """Insert one batch of job rows (those already in the run stay as they are); how many were new."""
        if isinstance(rows, CellRows):
            added = insert_cell(conn, rows) if self.dialect == "sqlite" else None
            if added is not None:
                return added
            rows = rows.rows()
        if self.dialect == "postgresql":
            return copy_jobs(conn, rows)
        ph = self._placeholder
        insert = (
            "INSERT INTO kw_jobs (run, id, model_id, mode, scenario, item, payload, draw, status, attempts) "
            f"VALUES ({ph}, {ph}, {ph}, {ph}, {ph}, {ph}, {ph}, {ph}, 'pending', 0) ON CONFLICT DO NOTHING"
        )
        return int(conn.exec_driver_sql(insert, rows).rowcount or 0)

    def _plan_ids(self, conn: Any, what: str) -> None:
        if what == "DROP":
            conn.exec_driver_sql("DROP TABLE kw_plan_ids")
        elif self.dialect == "postgresql":
            conn.exec_driver_sql(
                "CREATE TEMPORARY TABLE kw_plan_ids (id VARCHAR(64) PRIMARY KEY) ON COMMIT DROP"
            )
        else:
            conn.exec_driver_sql(
                "CREATE TEMPORARY TABLE IF NOT EXISTS kw_plan_ids (id VARCHAR(64) PRIMARY KEY)"
            )
            conn.exec_driver_sql("DELETE FROM kw_plan_ids")

    def _note_ids(self, conn: Any, ids: list[str]) -> None:
        ph = self._placeholder
        conn.exec_driver_sql(
            f"INSERT INTO kw_plan_ids (id) VALUES ({ph}) ON CONFLICT DO NOTHING", [(i,) for i in ids]
        )

    def _set_plan(self, conn: Any, cells: Sequence[Cell]) -> int:
        """Set aside the jobs of ``cells`` not noted in ``kw_plan_ids``, and bring back the set-aside
        jobs noted there (a set-aside job's status sorts from ``aside:`` to before ``aside;``)."""
        ph = self._placeholder
        live = f"(status < '{ASIDE}' OR status >= '{_AFTER_ASIDE}')"
        changed = 0
        for cell in cells:
            scope, params = _scope(cell, ph)
            changed += conn.exec_driver_sql(
                f"UPDATE kw_jobs SET status = CASE status WHEN 'running' THEN '{ASIDE}pending' "
                f"ELSE '{ASIDE}' || status END, lease_owner = NULL WHERE run = {ph}{scope} AND {live} "
                "AND id NOT IN (SELECT id FROM kw_plan_ids)",
                (self.run, *params),
            ).rowcount
        changed += conn.exec_driver_sql(
            f"UPDATE kw_jobs SET status = SUBSTR(status, {len(ASIDE) + 1}) WHERE run = {ph} "
            f"AND status >= '{ASIDE}' AND status < '{_AFTER_ASIDE}' AND id IN (SELECT id FROM kw_plan_ids)",
            (self.run,),
        ).rowcount
        if changed:  # each model's kept sums of done jobs no longer hold (``tallies``)
            conn.exec_driver_sql(f"DELETE FROM kw_meta WHERE key = {ph}", (kept_key(self.run),))
        return int(changed)

    def _unmark_finalized(self, conn: Any) -> None:
        conn.execute(
            update(s.runs).where(s.runs.c.name == self.run).values(finalized_at=None, finalized_by=None)
        )

    @on_db_thread
    def items(self, scenario_id: str | None = None, *, of_open_jobs: bool = False) -> Items:
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

    @on_db_thread
    def take_stage(self, stage: str, worker: str) -> str:
        key = "stage:" + hashlib.sha256(f"{self.run}\0{stage}".encode()).hexdigest()[:40]
        with self._engine.begin() as conn:
            conn.execute(self._insert(s.meta).values(key=key, value=worker).on_conflict_do_nothing())
            return str(conn.execute(select(s.meta.c.value).where(s.meta.c.key == key)).scalar_one())

    @on_db_thread
    def take_finalize(self, worker: str) -> bool:
        stmt = text(
            f"UPDATE kw_runs SET finalized_at = {self._clock.sql}, finalized_by = :w WHERE name = :run "
            "AND finalized_at IS NULL AND NOT EXISTS (SELECT 1 FROM kw_jobs WHERE run = :run "
            f"AND status IN {_OPEN} AND NOT (status = 'pending' AND model_id IN {_SCREENED_OUT}))"
        )
        with self._engine.begin() as conn:
            return bool(conn.execute(stmt, self._params(w=worker)).rowcount)

    @on_db_thread
    def release_finalize(self, worker: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                update(s.runs)
                .where(s.runs.c.name == self.run, s.runs.c.finalized_by == worker)
                .values(finalized_at=None, finalized_by=None)
            )
