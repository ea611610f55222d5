"""How a plan's jobs go into the queue in bulk, inside the plan's one transaction (``RunTables._enqueue``).

- ``defer_indexes``: on a jobs table that holds no job of any run (a first plan), the secondary indexes
  are dropped and built again from the inserted rows at the end, which costs a fraction of keeping them
  up to date row by row (those of done and of leased jobs, which a plan's rows never enter, stay). Dropped and made again inside the plan's transaction: a plan that fails or is
  killed half-way leaves the indexes as they were.
- ``plan_cache``: SQLite keeps a page cache of ``BULK_CACHE_KIB`` for the plan's transaction (a large
  plan's index pages stay in memory instead of being written out and read back), then its own again.
- ``insert_cell``: SQLite takes a batch of one cell's jobs (``jobs.CellRows``) by a statement that holds
  the columns they share, so each job binds its id, item and draw alone (8 values a row cost a fifth
  more of the insert's CPU).
- ``copy_jobs``: PostgreSQL takes a batch by COPY into a table of the transaction's own, then one
  ``INSERT ... SELECT`` (several times less work than a statement per row).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...jobs import CellRows

__all__ = ["BULK_CACHE_KIB", "copy_jobs", "defer_indexes", "insert_cell", "plan_cache"]

BULK_CACHE_KIB = 64 * 1024  # SQLite's page cache while a plan is inserted (its default is 2 MiB)
_JOB_COLUMNS = "run, id, model_id, mode, scenario, item, payload, draw"
# Partial indexes of done jobs (by time, and the tallies') and of leased jobs: a plan inserts pending jobs
# with no lease, so it gives them no entry; kept in place they cost nothing, while building each again
# would read every row.
_NO_PLANNED_JOB = frozenset({"kw_jobs_done_at", "kw_jobs_owner", "kw_jobs_tally"})


@contextmanager
def plan_cache(conn: Any, dialect: str) -> Iterator[None]:
    """SQLite: the plan's transaction runs with a page cache of ``BULK_CACHE_KIB``."""
    if dialect != "sqlite":
        yield
        return
    (before,) = conn.exec_driver_sql("PRAGMA cache_size").one()
    conn.exec_driver_sql(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
    try:
        yield
    finally:
        conn.exec_driver_sql(f"PRAGMA cache_size = {int(before)}")


def defer_indexes(conn: Any, dialect: str) -> list[str]:
    """On a jobs table with no job of any run, drop its secondary indexes; the statements that make them
    again (run them after the rows are in, in the same transaction). Otherwise nothing is dropped."""
    if conn.exec_driver_sql("SELECT 1 FROM kw_jobs LIMIT 1").first() is not None:
        return []
    if dialect == "sqlite":
        found = conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'kw_jobs' "
            "AND sql IS NOT NULL"
        ).all()
    else:
        found = conn.exec_driver_sql(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = 'kw_jobs' AND indexname <> 'kw_jobs_pkey'"
        ).all()
    found = [(name, create) for name, create in found if name not in _NO_PLANNED_JOB]
    for name, _create in found:
        conn.exec_driver_sql(f'DROP INDEX "{name}"')
    return [create for _name, create in found]


def insert_cell(conn: Any, batch: CellRows) -> int | None:
    """SQLite: insert a batch of one cell's jobs, the columns they share written into the statement as
    literals; how many were new. None (nothing inserted) when a shared value cannot be a literal (a NUL
    character): its rows are then inserted with every value bound."""
    if any("\x00" in value for value in batch.shared):
        return None
    raw = conn.connection.driver_connection
    run, model_id, mode, scenario, payload = ("'" + v.replace("'", "''") + "'" for v in batch.shared)
    ids, items, draws = batch.ids, batch.items, batch.draws
    insert = (
        f"INSERT INTO kw_jobs ({_JOB_COLUMNS}, status, attempts) VALUES ({run}, ?, {model_id}, {mode}, "
        f"{scenario}, ?, {payload}, {'0' if draws is None else '?'}, 'pending', 0) ON CONFLICT DO NOTHING"
    )
    values = zip(ids, items, strict=True) if draws is None else zip(ids, items, draws, strict=True)
    return int(raw.executemany(insert, values).rowcount or 0)


def copy_jobs(conn: Any, rows: list[tuple[Any, ...]]) -> int:
    """PostgreSQL: insert a batch of job rows (``_JOB_COLUMNS``) by COPY; how many were new."""
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        cur.execute(
            "CREATE TEMPORARY TABLE IF NOT EXISTS kw_new_jobs (run VARCHAR(64), id VARCHAR(64), "
            "model_id VARCHAR(64), mode VARCHAR(16), scenario VARCHAR(64), item VARCHAR(128), "
            "payload TEXT, draw INTEGER) ON COMMIT DROP"
        )
        with cur.copy(f"COPY kw_new_jobs ({_JOB_COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(
            f"INSERT INTO kw_jobs ({_JOB_COLUMNS}, status, attempts) SELECT {_JOB_COLUMNS}, 'pending', 0 "
            "FROM kw_new_jobs ORDER BY id ON CONFLICT DO NOTHING"
        )
        added = cur.rowcount
        cur.execute("TRUNCATE kw_new_jobs")
    return int(added or 0)
